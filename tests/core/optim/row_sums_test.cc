#include "core/optim/row_sums.h"

#include <cmath>
#include <memory>
#include <random>
#include <utility>
#include <vector>

#include "core/noise/testing/seeded_random.h"
#include "core/optim/dp_sgd.h"
#include "core/optim/objective.h"
#include "core/optim/private_oracle.h"
#include "core/optim/release_budget.h"
#include "core/optim/testing/noise_off.h"
#include "gtest/gtest.h"
#include "tests/common/status_matchers.h"

namespace dpopt::optim {
namespace {

using ::dpopt::noise::testing::SeededRandomForTesting;
using ::dpopt::optim::testing::SolveContextTestPeer;

// n rows in dimension n, x_i = e_i, y_i = -1: under least squares at w = 0
// the gradient of row i is (x_i . w - y_i) x_i = e_i, so a clipped sum (clip
// 1 or more) is the indicator vector of the sampled rows.
Dataset IndicatorRows(int64_t n) {
  return Dataset::Dense(Eigen::MatrixXd::Identity(n, n),
                        Eigen::VectorXd::Constant(n, -1.0), LabelKind::kReal);
}

Dataset RandomRows(int64_t n, int64_t d, uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::normal_distribution<double> normal;
  Eigen::MatrixXd x(n, d);
  Eigen::VectorXd y(n);
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < d; ++j) x(i, j) = normal(gen);
    y[i] = normal(gen) > 0 ? 1.0 : -1.0;
  }
  return Dataset::Dense(x, y, LabelKind::kBinary);
}

std::vector<Dataset> Shards(const Dataset& data, int k) {
  std::vector<Dataset> shards;
  for (int r = 0; r < k; ++r) {
    std::vector<int64_t> rows;
    for (int64_t i = ShardBegin(data.rows(), k, r);
         i < ShardBegin(data.rows(), k, r + 1); ++i) {
      rows.push_back(i);
    }
    shards.push_back(SelectRows(data, rows));
  }
  return shards;
}

// k shards of `data`, shard r sampling with seed `seed + r`.
struct ShardedRows {
  ShardedRows(const Dataset& data, const Objective& objective, int k,
              uint64_t seed)
      : shards(Shards(data, k)) {
    std::vector<std::unique_ptr<RowSums>> parts;
    for (int r = 0; r < k; ++r) {
      rngs.push_back(std::make_unique<SeededRandomForTesting>(seed + r));
      parts.push_back(
          std::make_unique<LocalRowSums>(shards[r], objective, *rngs[r]));
    }
    sums = std::make_unique<ShardedRowSums>(std::move(parts));
  }
  std::vector<Dataset> shards;
  std::vector<std::unique_ptr<noise::RandomSource>> rngs;
  std::unique_ptr<ShardedRowSums> sums;
};

TEST(ShardBeginTest, ContiguousBlocksCoverEveryRowOnce) {
  EXPECT_EQ(ShardBegin(10, 3, 0), 0);
  EXPECT_EQ(ShardBegin(10, 3, 1), 3);
  EXPECT_EQ(ShardBegin(10, 3, 2), 6);
  EXPECT_EQ(ShardBegin(10, 3, 3), 10);
  EXPECT_EQ(ShardBegin(2, 4, 1), 0);  // fewer rows than shards: some empty
  EXPECT_EQ(ShardBegin(2, 4, 4), 2);
  const int64_t big = int64_t{1} << 61;  // r n / k would overflow
  EXPECT_EQ(ShardBegin(big, 4, 3), 3 * (big / 4));
  for (int k = 1; k <= 7; ++k) {
    for (int64_t n : {0, 1, 5, 64, 1001}) {
      EXPECT_EQ(ShardBegin(n, k, 0), 0);
      EXPECT_EQ(ShardBegin(n, k, k), n);
      for (int r = 0; r < k; ++r) {
        const int64_t size = ShardBegin(n, k, r + 1) - ShardBegin(n, k, r);
        EXPECT_GE(size, n / k);
        EXPECT_LE(size, n / k + 1);
      }
    }
  }
}

TEST(ShardedRowSumsTest, OneShardIsTheLocalSumBitForBit) {
  const Dataset data = RandomRows(300, 7, 1);
  ASSERT_OK_AND_ASSIGN(auto objective, Objective::Create({}, 7));
  SeededRandomForTesting rng(42);
  LocalRowSums local(data, *objective, rng);
  ShardedRows sharded(data, *objective, 1, 42);
  const Eigen::VectorXd w = Eigen::VectorXd::LinSpaced(7, -1, 1);
  for (double q : {0.05, 0.5, 1.0}) {
    for (auto norm : {Objective::ClipNorm::kL2, Objective::ClipNorm::kL1}) {
      Eigen::VectorXd a, b;
      ASSERT_OK(local.ClippedSum({q, norm, 0.7}, w, &a));
      ASSERT_OK(sharded.sums->ClippedSum({q, norm, 0.7}, w, &b));
      EXPECT_EQ(a, b) << "q = " << q;
    }
  }
}

TEST(ShardedRowSumsTest, FullBatchSumsEveryRowOnce) {
  const Dataset data = RandomRows(1001, 5, 2);
  ASSERT_OK_AND_ASSIGN(auto objective, Objective::Create({}, 5));
  SeededRandomForTesting rng(1);
  LocalRowSums local(data, *objective, rng);
  const Eigen::VectorXd w = Eigen::VectorXd::LinSpaced(5, 0.5, -0.5);
  Eigen::VectorXd clipped, exact;
  ASSERT_OK(
      local.ClippedSum({1.0, Objective::ClipNorm::kL2, 0.3}, w, &clipped));
  ASSERT_OK(local.ExactSum(w, &exact));
  for (int k : {2, 3, 4, 7}) {
    ShardedRows sharded(data, *objective, k, 9);
    Eigen::VectorXd a, b;
    ASSERT_OK(
        sharded.sums->ClippedSum({1.0, Objective::ClipNorm::kL2, 0.3}, w, &a));
    ASSERT_OK(sharded.sums->ExactSum(w, &b));
    // Same terms, added in another order.
    EXPECT_LT((a - clipped).norm(), 1e-12 * clipped.norm()) << "k = " << k;
    EXPECT_LT((b - exact).norm(), 1e-12 * exact.norm()) << "k = " << k;
  }
}

// Every shard samples its own rows with its own generator; the union must be
// a Poisson(q) sample of the whole dataset: each row included with
// probability q, independently of every other row, across shard boundaries
// too.
TEST(ShardedRowSumsTest, UnionOfShardSamplesIsPoissonOverAllRows) {
  constexpr int64_t kRows = 30;
  constexpr int kTrials = 6000;
  constexpr double kRate = 0.3;
  const Dataset data = IndicatorRows(kRows);
  ModelConfig config;
  config.loss = LossKind::kLeastSquares;
  ASSERT_OK_AND_ASSIGN(auto objective, Objective::Create(config, kRows));
  ShardedRows sharded(data, *objective, 4, 1234);
  const Eigen::VectorXd w = Eigen::VectorXd::Zero(kRows);
  Eigen::VectorXd included = Eigen::VectorXd::Zero(kRows);
  // Joint inclusion of the last row of shard 0 (row 6) and the first of
  // shard 1 (row 7), and of the first rows of shards 0 and 1 (rows 0 and 7:
  // the same decision if the shards shared a generator's sequence).
  ASSERT_EQ(ShardBegin(kRows, 4, 1), 7);
  int both_6_7 = 0, both_0_7 = 0;
  double size_sum = 0, size_sq = 0;
  Eigen::VectorXd s;
  for (int t = 0; t < kTrials; ++t) {
    ASSERT_OK(sharded.sums->ClippedSum({kRate, Objective::ClipNorm::kL2, 2.0},
                                       w, &s));
    for (int64_t i = 0; i < kRows; ++i) {
      ASSERT_TRUE(s[i] == 0.0 || s[i] == 1.0) << s[i];
    }
    included += s;
    both_6_7 += s[6] == 1.0 && s[7] == 1.0;
    both_0_7 += s[0] == 1.0 && s[7] == 1.0;
    size_sum += s.sum();
    size_sq += s.sum() * s.sum();
  }
  // Each bound is 5 standard errors: a false alarm has probability < 1e-5
  // per check.
  const double se_row = std::sqrt(kRate * (1 - kRate) / kTrials);
  for (int64_t i = 0; i < kRows; ++i) {
    EXPECT_NEAR(included[i] / kTrials, kRate, 5 * se_row) << "row " << i;
  }
  const double pair = kRate * kRate;
  const double se_pair = std::sqrt(pair * (1 - pair) / kTrials);
  EXPECT_NEAR(both_6_7 / double{kTrials}, pair, 5 * se_pair);
  EXPECT_NEAR(both_0_7 / double{kTrials}, pair, 5 * se_pair);
  // Batch size ~ Binomial(n, q): mean n q, variance n q (1 - q).
  const double mean = size_sum / kTrials;
  const double var = size_sq / kTrials - mean * mean;
  const double binom_var = kRows * kRate * (1 - kRate);
  EXPECT_NEAR(mean, kRows * kRate, 5 * std::sqrt(binom_var / kTrials));
  // The sample variance's standard error is about var * sqrt(2 / T).
  EXPECT_NEAR(var, binom_var, 5 * binom_var * std::sqrt(2.0 / kTrials));
}

class FixedRemoteRows final : public RemoteRows {
 public:
  FixedRemoteRows(const Dataset& data, int k) : data_(data), k_(k) {}
  absl::StatusOr<std::unique_ptr<RowSums>> Open(
      const Objective& objective) override {
    ++opened;
    rows_ = std::make_unique<ShardedRows>(data_, objective, k_, 77);
    return std::unique_ptr<RowSums>(std::move(rows_->sums));
  }
  int opened = 0;

 private:
  const Dataset& data_;
  const int k_;
  std::unique_ptr<ShardedRows> rows_;
};

// A job with remote rows reads none of the dataset it is given: DP-SGD on an
// empty dataset of the right dimension, with the rows remote and the noise
// off, is full-batch gradient descent on the remote rows.
TEST(RemoteRowsTest, DpSgdReadsOnlyTheRemoteRows) {
  const Dataset data = RandomRows(500, 4, 3);
  DpSgdOptions options;
  options.steps = 5;
  options.sampling_rate = 1.0;
  options.clip_norm = 100.0;  // nothing clipped
  options.learning_rate = 0.5;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Algorithm> sgd, NewDpSgd(options));
  PublicDatasetInfo info;
  info.rows = data.rows();
  info.dimension = data.dimension();
  PrivacyTarget target;
  target.epsilon = 1;
  target.delta = 1e-6;
  ASSERT_OK_AND_ASSIGN(Calibration calibration, sgd->Calibrate(info, target));

  SeededRandomForTesting rng_local(5), rng_remote(5);
  SolveContext local(&rng_local);
  SolveContextTestPeer::DisableNoise(local);
  ASSERT_OK_AND_ASSIGN(SolveResult expected,
                       sgd->Run(data, calibration, local));

  const Dataset no_rows = Dataset::Dense(
      Eigen::MatrixXd(0, 4), Eigen::VectorXd(0), LabelKind::kBinary);
  FixedRemoteRows remote(data, 3);
  SolveContext context(&rng_remote);
  SolveContextTestPeer::DisableNoise(context);
  context.remote_rows = &remote;
  ASSERT_OK_AND_ASSIGN(SolveResult got,
                       sgd->Run(no_rows, calibration, context));
  EXPECT_EQ(remote.opened, 1);
  ASSERT_EQ(got.model.weights.size(), 4);
  EXPECT_LT((got.model.weights - expected.model.weights).norm(),
            1e-12 * expected.model.weights.norm());
  EXPECT_GT(expected.model.weights.norm(), 0.1);
}

}  // namespace
}  // namespace dpopt::optim
