// Tests of permute-and-flip. Selection frequencies are compared with the
// exact selection probabilities, computed independently by enumerating all
// k! visiting orders, with a chi-square test at false-alarm rate kAlpha =
// 1e-4 using fixed seeds of the NOT DIFFERENTIALLY PRIVATE test generator.
#include "core/noise/exponential_mechanism.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <vector>

#include "core/audit/statistics.h"
#include "core/noise/testing/seeded_random.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/common/status_matchers.h"

namespace dpopt::noise {
namespace {

using ::dpopt::audit::ChiSquareSurvival;
using ::dpopt::noise::testing::FailingRandomForTesting;
using ::dpopt::noise::testing::SeededRandomForTesting;
using ::dpopt::testing::StatusIs;

constexpr double kAlpha = 1e-4;

// P[select r] = average over orders of p_r * prod_{earlier l} (1 - p_l).
std::vector<double> ExactPermuteAndFlip(const std::vector<double>& accept) {
  const int k = static_cast<int>(accept.size());
  std::vector<int> order(k);
  std::iota(order.begin(), order.end(), 0);
  std::vector<double> prob(k, 0);
  int perms = 0;
  do {
    double reach = 1;
    for (int r : order) {
      prob[r] += reach * accept[r];
      reach *= 1 - accept[r];
    }
    ++perms;
  } while (std::next_permutation(order.begin(), order.end()));
  for (double& p : prob) p /= perms;
  return prob;
}

double PValue(const std::vector<int64_t>& counts,
              const std::vector<double>& prob) {
  int64_t n = 0;
  for (int64_t c : counts) n += c;
  double stat = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    const double e = n * prob[i];
    stat += (counts[i] - e) * (counts[i] - e) / e;
  }
  return ChiSquareSurvival(stat, static_cast<double>(counts.size() - 1));
}

TEST(PlanPermuteAndFlipTest, HandComputedRate) {
  // Delta = 1: g = 2^-20, Delta_eff = 1 + 2^-20, rate per unit =
  // 2^-20 / (2 (1 + 2^-20)), just below 2^-21, so it gets 24 significant bits
  // at exponent 21 + 24 = 45: 2^-45 * 2^24 / (1 + 2^-20) = 2^-45 *
  // 16777200.0000153..., rounded down to 16777200 * 2^-45.
  ASSERT_OK_AND_ASSIGN(
      auto plan, PlanPermuteAndFlip({.epsilon = 1.0, .sensitivity = 1.0}));
  EXPECT_EQ(plan.grid, 0x1.0p-20);
  EXPECT_EQ(plan.rate.exponent, 45);
  EXPECT_EQ(plan.rate.mantissa, 16777200u);
  ASSERT_OK_AND_ASSIGN(
      auto mono, PlanPermuteAndFlip(
                     {.epsilon = 1.0, .sensitivity = 1.0, .monotonic = true}));
  EXPECT_EQ(mono.rate.ToDouble(), 2 * plan.rate.ToDouble());
}

TEST(PlanPermuteAndFlipTest, RejectsBadOptions) {
  for (double bad : {0.0, -1.0, std::nan(""), HUGE_VAL}) {
    EXPECT_THAT(PlanPermuteAndFlip({.epsilon = bad, .sensitivity = 1}),
                StatusIs(absl::StatusCode::kInvalidArgument));
    EXPECT_THAT(PlanPermuteAndFlip({.epsilon = 1, .sensitivity = bad}),
                StatusIs(absl::StatusCode::kInvalidArgument));
  }
}

struct Case {
  std::vector<double> scores;
  double epsilon;
  double sensitivity;
  bool monotonic;
};

class PermuteAndFlipTest : public ::testing::TestWithParam<Case> {};

TEST_P(PermuteAndFlipTest, MatchesExactSelectionProbabilities) {
  const Case& c = GetParam();
  const ExponentialMechanismOptions options{.epsilon = c.epsilon,
                                            .sensitivity = c.sensitivity,
                                            .monotonic = c.monotonic};
  ASSERT_OK_AND_ASSIGN(auto plan, PlanPermuteAndFlip(options));
  // Acceptance probabilities from the integerized scores and exact rate.
  std::vector<double> units;
  for (double s : c.scores) units.push_back(std::nearbyint(s / plan.grid));
  const double best = *std::max_element(units.begin(), units.end());
  std::vector<double> accept;
  for (double u : units) {
    accept.push_back(std::exp(-(best - u) * plan.rate.ToDouble()));
  }
  const std::vector<double> exact = ExactPermuteAndFlip(accept);

  SeededRandomForTesting rng(77);
  constexpr int kN = 200000;
  std::vector<int64_t> counts(c.scores.size(), 0);
  for (int i = 0; i < kN; ++i) {
    ASSERT_OK_AND_ASSIGN(int64_t r, PermuteAndFlip(c.scores, options, rng));
    ASSERT_GE(r, 0);
    ASSERT_LT(r, static_cast<int64_t>(c.scores.size()));
    ++counts[r];
  }
  EXPECT_GT(PValue(counts, exact), kAlpha);

  // Power: the classic exponential mechanism (softmax of epsilon q/(2 Delta))
  // is a different distribution; the same check must reject it.
  std::vector<double> softmax;
  double z = 0;
  for (double u : units) {
    softmax.push_back(std::exp(-(best - u) * plan.rate.ToDouble()));
    z += softmax.back();
  }
  for (double& p : softmax) p /= z;
  EXPECT_LT(PValue(counts, softmax), kAlpha);
}

INSTANTIATE_TEST_SUITE_P(
    Cases, PermuteAndFlipTest,
    ::testing::Values(Case{{0, 1, 2.5, 2.5, -3}, 1.0, 1.0, false},
                      Case{{10, 12, 11, 9.5}, 2.0, 1.5, false},
                      Case{{0.1, 0.2, 0.3, 0.15, 0.05, 0.0}, 3.0, 0.1, true}));

TEST(PermuteAndFlipTest, RejectsBadScores) {
  SeededRandomForTesting rng(1);
  const ExponentialMechanismOptions options{.epsilon = 1, .sensitivity = 1};
  EXPECT_THAT(PermuteAndFlip({}, options, rng),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(PermuteAndFlip({1.0, std::nan("")}, options, rng),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(PermuteAndFlip({1.0, 1e300}, options, rng),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(PermuteAndFlip({1.0}, {.epsilon = -1, .sensitivity = 1}, rng),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(PermuteAndFlipTest, SingleCandidateAndFailClosed) {
  SeededRandomForTesting rng(2);
  const ExponentialMechanismOptions options{.epsilon = 1, .sensitivity = 1};
  ASSERT_OK_AND_ASSIGN(int64_t r, PermuteAndFlip({3.0}, options, rng));
  EXPECT_EQ(r, 0);
  FailingRandomForTesting failing(3, 0);
  EXPECT_THAT(PermuteAndFlip({1.0, 2.0, 3.0}, options, failing),
              StatusIs(absl::StatusCode::kUnavailable));
}

}  // namespace
}  // namespace dpopt::noise
