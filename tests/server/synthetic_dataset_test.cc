// The dry runs' synthetic data (server/synthetic_dataset.h): drawn from the
// public schema only, with the declared shape, storage, sparsity, bounds and
// label kind; the same seed gives the same rows; max-affine problems keep
// their public slopes and get offsets within the mechanisms' range.
#include "server/synthetic_dataset.h"

#include <cmath>
#include <set>

#include "core/noise/testing/seeded_random.h"
#include "core/optim/piecewise_affine/problem.h"
#include "gtest/gtest.h"

namespace dpopt::server {
namespace {

using noise::testing::SeededRandomForTesting;

SyntheticSchema Schema(int64_t rows, int64_t d, bool sparse, LabelKind kind,
                       int classes = 2) {
  SyntheticSchema s;
  s.rows = rows;
  s.dimension = d;
  s.sparse = sparse;
  s.label_kind = kind;
  s.num_classes = kind == LabelKind::kReal ? 0 : classes;
  return s;
}

TEST(SyntheticDatasetTest, SparseRowsHaveThePublicShapeAndPattern) {
  SeededRandomForTesting rng(1);
  const SyntheticSchema s = Schema(500, 123, true, LabelKind::kBinary);
  absl::StatusOr<Dataset> d = SyntheticDataset::Generate(s, rng);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->rows(), 500);
  EXPECT_EQ(d->dimension(), 123);
  EXPECT_TRUE(d->is_sparse());
  EXPECT_EQ(SyntheticDataset::SparseRowNonzeros(123), 12);
  EXPECT_EQ(d->sparse().nonZeros(), 500 * 12);
  int positive = 0;
  for (int64_t i = 0; i < d->rows(); ++i) {
    EXPECT_TRUE(d->label(i) == 1 || d->label(i) == -1);
    positive += d->label(i) == 1;
    // Distinct, increasing columns.
    std::set<int64_t> cols;
    for (SparseRows::InnerIterator it(d->sparse(), i); it; ++it) {
      cols.insert(it.col());
    }
    EXPECT_EQ(cols.size(), 12u);
  }
  EXPECT_GT(positive, 100);
  EXPECT_LT(positive, 400);
  EXPECT_TRUE(d->Validate().ok());
}

TEST(SyntheticDatasetTest, DeclaredBoundsAndLabelKindsAreKept) {
  SeededRandomForTesting rng(2);
  SyntheticSchema s = Schema(300, 4, false, LabelKind::kMulticlass, 5);
  s.bounds.lower = {0, -1, 2, 0};
  s.bounds.upper = {1, 1, 3, 0.5};
  absl::StatusOr<Dataset> d = SyntheticDataset::Generate(s, rng);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_FALSE(d->is_sparse());
  std::set<double> classes;
  for (int64_t i = 0; i < d->rows(); ++i) {
    for (int j = 0; j < 4; ++j) {
      EXPECT_GE(d->dense()(i, j), s.bounds.lower[j]);
      EXPECT_LE(d->dense()(i, j), s.bounds.upper[j]);
    }
    classes.insert(d->label(i));
  }
  for (double c : classes) {
    EXPECT_EQ(c, std::floor(c));
    EXPECT_GE(c, 0);
    EXPECT_LT(c, 5);
  }

  SyntheticSchema r = Schema(300, 10, false, LabelKind::kReal);
  r.bounds.row_norm_bound = 0.25;
  d = SyntheticDataset::Generate(r, rng);
  ASSERT_TRUE(d.ok()) << d.status();
  for (int64_t i = 0; i < d->rows(); ++i) {
    EXPECT_LE(d->RowNorm(i), 0.25);
    EXPECT_TRUE(std::isfinite(d->label(i)));
  }
}

TEST(SyntheticDatasetTest, TheSameSeedGivesTheSameRows) {
  const SyntheticSchema s = Schema(50, 30, true, LabelKind::kBinary);
  SeededRandomForTesting a(7), b(7), c(8);
  auto x = SyntheticDataset::Generate(s, a);
  auto y = SyntheticDataset::Generate(s, b);
  auto z = SyntheticDataset::Generate(s, c);
  ASSERT_TRUE(x.ok() && y.ok() && z.ok());
  EXPECT_TRUE(x->sparse().isApprox(y->sparse()));
  EXPECT_EQ(x->labels(), y->labels());
  EXPECT_FALSE(x->sparse().isApprox(z->sparse()));
}

TEST(SyntheticDatasetTest, MaxAffineKeepsTheSlopesAndDrawsOffsetsInRange) {
  namespace pa = optim::piecewise_affine;
  Eigen::MatrixXd slopes(6, 2);
  slopes << 1, 0, -1, 0, 0, 1, 0, -1, 0.5, 0.5, -0.5, 0.5;
  pa::ProblemDeclaration decl;
  decl.b_max = 0.1;
  decl.polytope.lower = {-1, -1};
  decl.polytope.upper = {1, 1};
  Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor> rm =
      slopes;
  absl::StatusOr<pa::ProblemInfo> info =
      pa::DescribeProblem(decl, rm.data(), 6, 2);
  ASSERT_TRUE(info.ok()) << info.status();
  SyntheticSchema s = Schema(6, 2, false, LabelKind::kReal);
  s.problem_json = info->ToJson();
  SeededRandomForTesting rng(3);
  // Ordinary generation refuses a max-affine schema (it needs the slopes).
  EXPECT_FALSE(SyntheticDataset::Generate(s, rng).ok());
  absl::StatusOr<Dataset> d =
      SyntheticDataset::GenerateMaxAffine(s, slopes, rng);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->dense(), slopes);
  // s = max(b_max, G X) = max(0.1, 1 * sqrt(2)).
  for (int64_t i = 0; i < 6; ++i) {
    EXPECT_LE(std::abs(d->label(i)), std::sqrt(2.0));
  }
  EXPECT_FALSE(
      SyntheticDataset::GenerateMaxAffine(s, Eigen::MatrixXd::Zero(5, 2), rng)
          .ok());
}

}  // namespace
}  // namespace dpopt::server
