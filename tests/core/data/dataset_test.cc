// Dataset's dense layout (row-major storage, column-major view) and the
// per-row arithmetic the kernels must reproduce bit for bit: RowDot and
// RowNorm add x_i0 .., x_i(d-1) in order, whatever the storage.
#include "core/data/dataset.h"

#include <cmath>
#include <cstring>
#include <random>
#include <utility>

#include "gtest/gtest.h"

namespace dpopt {
namespace {

bool BitwiseEqual(double a, double b) {
  return std::memcmp(&a, &b, sizeof(double)) == 0;
}

// Entries of mixed magnitudes, so that a different order of the additions
// changes the rounded sums.
Eigen::MatrixXd MixedRows(int64_t n, int64_t d, uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<double> normal;
  Eigen::MatrixXd x(n, d);
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < d; ++j) {
      x(i, j) = normal(gen) * std::pow(10.0, static_cast<int>(gen() % 9) - 4);
    }
  }
  return x;
}

TEST(DenseLayoutTest, RowsAreContiguousAndTheViewIsTheMatrix) {
  const Eigen::MatrixXd x = MixedRows(7, 5, 1);
  const Dataset a =
      Dataset::Dense(x, Eigen::VectorXd::Ones(7), LabelKind::kBinary);
  const Dataset b = Dataset::DenseRowMajor(
      DenseRows(x), Eigen::VectorXd::Ones(7), LabelKind::kBinary);
  for (const Dataset* data : {&a, &b}) {
    ASSERT_EQ(data->dense().rows(), 7);
    ASSERT_EQ(data->dense().cols(), 5);
    for (int64_t i = 0; i < 7; ++i) {
      for (int64_t j = 0; j < 5; ++j) {
        EXPECT_EQ(data->dense()(i, j), x(i, j));
        EXPECT_EQ(data->dense_row(i) + j, &data->dense_rows()(i, j));
        EXPECT_EQ(data->dense_row(i)[j], x(i, j));
      }
    }
    EXPECT_TRUE(Eigen::MatrixXd(data->dense()) == x);
  }
}

TEST(DenseLayoutTest, RowArithmeticAddsInColumnOrder) {
  for (int64_t d : {1, 2, 3, 8, 17, 100}) {
    const int64_t n = 40;
    const Eigen::MatrixXd x = MixedRows(n, d, 2 + static_cast<uint32_t>(d));
    const Dataset data =
        Dataset::Dense(x, Eigen::VectorXd::Ones(n), LabelKind::kBinary);
    std::mt19937 gen(5);
    std::normal_distribution<double> normal;
    Eigen::VectorXd w(d);
    for (int64_t j = 0; j < d; ++j) w[j] = normal(gen);
    for (int64_t i = 0; i < n; ++i) {
      double dot = x(i, 0) * w[0];
      double sq = x(i, 0) * x(i, 0);
      double l1 = 0.0;
      for (int64_t j = 0; j < d; ++j) {
        if (j > 0) {
          dot += x(i, j) * w[j];
          sq += x(i, j) * x(i, j);
        }
        l1 += std::abs(x(i, j));
      }
      EXPECT_TRUE(BitwiseEqual(data.RowDot(i, w), dot)) << d << " " << i;
      EXPECT_TRUE(BitwiseEqual(data.RowNorm(i), std::sqrt(sq))) << d;
      EXPECT_TRUE(BitwiseEqual(data.row_norms_l2()[i], std::sqrt(sq))) << d;
      EXPECT_TRUE(BitwiseEqual(data.row_norms_l1()[i], l1)) << d;
      // The column-major matrix's strided row gives the same sums (Eigen
      // cannot vectorize it), as before the storage was row-major.
      EXPECT_TRUE(BitwiseEqual(x.row(i).dot(w), dot)) << d;
      EXPECT_TRUE(BitwiseEqual(x.row(i).norm(), std::sqrt(sq))) << d;
    }
  }
}

}  // namespace
}  // namespace dpopt
