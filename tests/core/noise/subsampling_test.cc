// Tests of exact Poisson subsampling. Fixed seeds of the NOT DIFFERENTIALLY
// PRIVATE test generator; |z| < 5 / chi-square p > 1e-6 (false-alarm rate
// ~1e-6 per check for a correct implementation).
#include "core/noise/subsampling.h"

#include <cmath>
#include <cstdint>
#include <vector>

#include "core/audit/statistics.h"
#include "core/noise/testing/seeded_random.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/common/status_matchers.h"

namespace dpopt::noise {
namespace {

using ::dpopt::noise::testing::FailingRandomForTesting;
using ::dpopt::noise::testing::SeededRandomForTesting;
using ::dpopt::testing::StatusIs;

class BernoulliDoubleTest : public ::testing::TestWithParam<double> {};

TEST_P(BernoulliDoubleTest, MatchesProbability) {
  const double p = GetParam();
  SeededRandomForTesting rng(12);
  RandomBits bits(rng);
  constexpr int64_t kN = 1000000;
  int64_t k = 0;
  for (int64_t i = 0; i < kN; ++i) k += BernoulliDouble(bits, p);
  EXPECT_LT(std::abs((k - kN * p) / std::sqrt(kN * p * (1 - p))), 5)
      << "k=" << k;
}

INSTANTIATE_TEST_SUITE_P(Probabilities, BernoulliDoubleTest,
                         ::testing::Values(0.01, 0.5, 1.0 / 3, 0.999, 3e-5));

TEST(BernoulliDoubleTest, EdgeCases) {
  SeededRandomForTesting rng(13);
  RandomBits bits(rng);
  for (int i = 0; i < 1000; ++i) {
    EXPECT_FALSE(BernoulliDouble(bits, 0));
    EXPECT_FALSE(BernoulliDouble(bits, std::nan("")));
    EXPECT_TRUE(BernoulliDouble(bits, 1));
    EXPECT_FALSE(BernoulliDouble(bits, 1e-100));  // Tiny-p path.
  }
}

TEST(PoissonSubsampleTest, InclusionIsIndependentWithProbabilityQ) {
  SeededRandomForTesting rng(14);
  constexpr int64_t kN = 100, kRounds = 20000;
  constexpr double kQ = 0.1;
  std::vector<int64_t> counts(kN, 0);
  int64_t total = 0;
  for (int r = 0; r < kRounds; ++r) {
    ASSERT_OK_AND_ASSIGN(std::vector<int64_t> batch,
                         PoissonSubsample(kN, kQ, rng));
    for (size_t i = 0; i < batch.size(); ++i) {
      ASSERT_GE(batch[i], 0);
      ASSERT_LT(batch[i], kN);
      if (i > 0) {
        ASSERT_LT(batch[i - 1], batch[i]);
      }
      ++counts[batch[i]];
    }
    total += batch.size();
  }
  // Total size: Binomial(kN * kRounds, q).
  const double n = static_cast<double>(kN) * kRounds;
  EXPECT_LT(std::abs(total - n * kQ) / std::sqrt(n * kQ * (1 - kQ)), 5);
  // Per index: chi-square of the inclusion counts (each Binomial(kRounds,
  // q)) against kRounds * q, with variance kRounds q (1 - q).
  double stat = 0;
  for (int64_t c : counts) {
    stat += (c - kRounds * kQ) * (c - kRounds * kQ) / (kRounds * kQ * (1 - kQ));
  }
  EXPECT_GT(audit::ChiSquareSurvival(stat, kN), 1e-6);
}

TEST(PoissonSubsampleTest, ErrorsAndFailClosed) {
  SeededRandomForTesting rng(15);
  EXPECT_THAT(PoissonSubsample(-1, 0.1, rng),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(PoissonSubsample(10, 1.5, rng),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(PoissonSubsample(10, std::nan(""), rng),
              StatusIs(absl::StatusCode::kInvalidArgument));
  ASSERT_OK_AND_ASSIGN(auto all, PoissonSubsample(10, 1.0, rng));
  EXPECT_EQ(all.size(), 10u);
  ASSERT_OK_AND_ASSIGN(auto none, PoissonSubsample(10, 0.0, rng));
  EXPECT_TRUE(none.empty());
  FailingRandomForTesting failing(16, 3);
  EXPECT_THAT(PoissonSubsample(100000, 0.01, failing),
              StatusIs(absl::StatusCode::kUnavailable));
}

}  // namespace
}  // namespace dpopt::noise
