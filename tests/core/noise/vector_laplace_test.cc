// Tests of the exact vector Laplace sampler (core/noise/vector_laplace.h),
// the noise of piecewise-affine family's M_P and M_S (Han, Topcu & Pappas
// 2014, Theorem 9): radius, direction, one-dimensional case and density ratio.
//
// Distribution checks are Kolmogorov-Smirnov tests against closed forms
// (Laplace for n = 1, Gamma(n, rate lambda) for the radius, Exp(1) for the
// exact exponential) at p = 1e-3, plus 5-SE moment checks, on fixed seeds of
// the NOT DIFFERENTIALLY PRIVATE test generator. The grid (2^-20 Delta /
// sqrt(n)) moves any CDF by far less, far below the KS thresholds used here.
#include "core/noise/vector_laplace.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
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

// sqrt(n) D_n above this has probability 1e-3 (Kolmogorov distribution).
constexpr double kKsCritical = 1.9495;

double KsStatistic(std::vector<double> s,
                   const std::function<double(double)>& cdf) {
  std::sort(s.begin(), s.end());
  const double n = static_cast<double>(s.size());
  double d = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    const double c = cdf(s[i]);
    d = std::max({d, std::abs(c - i / n), std::abs((i + 1) / n - c)});
  }
  return std::sqrt(n) * d;
}

TEST(VectorLaplacePlan, RateIsBelowEpsilonOverEffectiveSensitivity) {
  for (int64_t n : {1, 2, 5, 20, 100, 100000}) {
    for (double delta : {1e-3, 1.0, 4.47, 1e6}) {
      for (double eps : {0.01, 0.1, 1.0, 10.0}) {
        ASSERT_OK_AND_ASSIGN(VectorLaplacePlan p,
                             PlanVectorLaplace(delta, eps, n));
        // The grid is a power of two near 2^-20 Delta / sqrt(n).
        int e = 0;
        EXPECT_EQ(std::frexp(p.grid, &e), 0.5);
        const double unit = delta / std::sqrt(static_cast<double>(n));
        EXPECT_LE(p.grid, std::ldexp(unit, -20));
        EXPECT_GT(p.grid, std::ldexp(unit, -22));
        // Theorem 9 with the rounded value's sensitivity.
        EXPECT_GE(p.effective_sensitivity,
                  delta + p.grid * std::sqrt(static_cast<double>(n)));
        EXPECT_LE(p.lambda * p.effective_sensitivity, eps);
        // ... and barely less noise than the paper's lambda = eps / Delta.
        EXPECT_GT(p.lambda,
                  eps / (delta + p.grid * std::sqrt(n + 0.0)) * (1 - 1e-6));
        EXPECT_GT(p.lambda, eps / delta * (1 - 2e-6));
        EXPECT_DOUBLE_EQ(p.expected_norm, n / p.lambda);
      }
    }
  }
}

TEST(VectorLaplacePlan, RejectsBadInput) {
  EXPECT_THAT(PlanVectorLaplace(0, 1, 3).status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(PlanVectorLaplace(1, -1, 3).status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(PlanVectorLaplace(1, std::nan(""), 3).status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(PlanVectorLaplace(1, 1, 0).status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(PlanVectorLaplace(1, 1, (int64_t{1} << 20) + 1).status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

// The density ratio of the law the sampler draws from: for any shift of L2
// norm <= Delta + g sqrt(n), log p(w) - log p(w + shift) = lambda (||w +
// shift|| - ||w||) <= epsilon.
TEST(VectorLaplacePlan, DensityRatioWithinEpsilon) {
  SeededRandomForTesting rng(3);
  ASSERT_OK_AND_ASSIGN(VectorLaplacePlan p, PlanVectorLaplace(2.0, 0.5, 7));
  for (int trial = 0; trial < 1000; ++trial) {
    Eigen::VectorXd w(7), shift(7);
    for (int j = 0; j < 7; ++j) {
      w[j] = (rng.UniformDouble() - 0.5) * 100;
      shift[j] = rng.UniformDouble() - 0.5;
    }
    shift *= p.effective_sensitivity / shift.norm();
    const double log_ratio = p.lambda * ((w + shift).norm() - w.norm());
    EXPECT_LE(log_ratio, p.epsilon + 1e-12);
  }
}

TEST(ExactExponential, KolmogorovSmirnovAgainstExp1) {
  SeededRandomForTesting rng(11);
  RandomBits bits(rng);
  ExactExponential e;
  LazyUniform x;
  std::vector<double> s;
  double sum = 0;
  constexpr int kDraws = 100000;
  for (int i = 0; i < kDraws; ++i) {
    const uint32_t k = e.Draw(bits, x);
    const double v = k + std::ldexp(static_cast<double>(x.Prefix64(bits)), -64);
    s.push_back(v);
    sum += v;
  }
  ASSERT_TRUE(bits.ok());
  EXPECT_LT(KsStatistic(s, [](double t) { return -std::expm1(-t); }),
            kKsCritical);
  EXPECT_NEAR(sum / kDraws, 1.0, 5 / std::sqrt(kDraws));
}

// For n = 1 the mechanism is Laplace(0, 1/lambda).
TEST(VectorLaplace, OneDimensionIsLaplace) {
  ASSERT_OK_AND_ASSIGN(VectorLaplacePlan p, PlanVectorLaplace(1.0, 0.8, 1));
  const double b = 1 / p.lambda;
  SeededRandomForTesting rng(5);
  std::vector<double> s;
  constexpr int kDraws = 100000;
  double sq = 0;
  for (int i = 0; i < kDraws; ++i) {
    Eigen::VectorXd v = Eigen::VectorXd::Zero(1);
    ASSERT_OK(AddVectorLaplaceNoise(p, rng, v));
    s.push_back(v[0]);
    sq += v[0] * v[0];
  }
  EXPECT_LT(KsStatistic(s,
                        [b](double x) {
                          return x < 0 ? 0.5 * std::exp(x / b)
                                       : 1 - 0.5 * std::exp(-x / b);
                        }),
            kKsCritical);
  // Var = 2 b^2 = (n + 1) / lambda^2; Var(w^2) = 20 b^4.
  EXPECT_NEAR(sq / kDraws, 2 * b * b, 5 * std::sqrt(20.0 / kDraws) * b * b);
}

// The radius ||w|| is Gamma(n, rate lambda), mean n / lambda; directions
// have mean 0 and second moment I / n, and
// E w_j^2 = (n + 1) / lambda^2.
class VectorLaplaceRadius : public ::testing::TestWithParam<int> {};

TEST_P(VectorLaplaceRadius, GammaRadiusUniformDirection) {
  const int n = GetParam();
  const int draws = n >= 20 ? 20000 : 50000;
  ASSERT_OK_AND_ASSIGN(VectorLaplacePlan p, PlanVectorLaplace(3.0, 1.5, n));
  SeededRandomForTesting rng(100 + n);
  std::vector<double> radii;
  Eigen::VectorXd dir_mean = Eigen::VectorXd::Zero(n);
  Eigen::MatrixXd dir_second = Eigen::MatrixXd::Zero(n, n);
  double coord_sq = 0;
  for (int i = 0; i < draws; ++i) {
    Eigen::VectorXd v = Eigen::VectorXd::Zero(n);
    ASSERT_OK(AddVectorLaplaceNoise(p, rng, v));
    const double r = v.norm();
    radii.push_back(r);
    const Eigen::VectorXd u = v / r;
    dir_mean += u;
    dir_second += u * u.transpose();
    coord_sq += v[0] * v[0];
  }
  const double lambda = p.lambda;
  EXPECT_LT(KsStatistic(radii,
                        [&](double r) {
                          return 1 - audit::RegularizedGammaQ(n, lambda * r);
                        }),
            kKsCritical);
  // Power: the same check rejects a 3% error in the rate.
  EXPECT_GT(KsStatistic(radii,
                        [&](double r) {
                          return 1 -
                                 audit::RegularizedGammaQ(n, 1.03 * lambda * r);
                        }),
            kKsCritical);
  double mean = 0;
  for (double r : radii) mean += r;
  mean /= draws;
  EXPECT_NEAR(mean, n / lambda, 5 * std::sqrt(n) / lambda / std::sqrt(draws));
  dir_mean /= draws;
  dir_second /= draws;
  // Each coordinate of a uniform unit vector has variance 1/n and
  // Var(u_j^2) <= 1/n; 5-SE bounds.
  const double se = 1 / std::sqrt(static_cast<double>(n) * draws);
  for (int j = 0; j < n; ++j) {
    EXPECT_NEAR(dir_mean[j], 0, 5 * se);
    EXPECT_NEAR(dir_second(j, j), 1.0 / n, 5 * se);
  }
  // E w_1^2 = (n + 1)/lambda^2; w_1^2 = r^2 u_1^2 has sd <= sqrt(E r^4 u^4),
  // E r^4 = n(n+1)(n+2)(n+3)/lambda^4, E u^4 = 3/(n(n+2)).
  const double sd = std::sqrt(3.0 * (n + 1) * (n + 3)) / (lambda * lambda);
  EXPECT_NEAR(coord_sq / draws, (n + 1) / (lambda * lambda),
              5 * sd / std::sqrt(draws));
}

INSTANTIATE_TEST_SUITE_P(Dimensions, VectorLaplaceRadius,
                         ::testing::Values(2, 5, 20));

TEST(VectorLaplace, AddsToTheRoundedValue) {
  // Same seed, value 0 and value v on the grid: the outputs differ by v.
  ASSERT_OK_AND_ASSIGN(VectorLaplacePlan p, PlanVectorLaplace(1.0, 1.0, 4));
  Eigen::VectorXd zero = Eigen::VectorXd::Zero(4);
  Eigen::VectorXd v(4);
  v << 3.0, -2.5, 1e3, 0.125;
  Eigen::VectorXd w = v;
  SeededRandomForTesting a(9), b(9);
  ASSERT_OK(AddVectorLaplaceNoise(p, a, zero));
  ASSERT_OK(AddVectorLaplaceNoise(p, b, w));
  for (int j = 0; j < 4; ++j) EXPECT_EQ(w[j] - zero[j], v[j]);
}

TEST(VectorLaplace, RejectsUnclampedInputBeforeDrawing) {
  ASSERT_OK_AND_ASSIGN(VectorLaplacePlan p, PlanVectorLaplace(1.0, 1.0, 2));
  FailingRandomForTesting rng(1, 0);  // any draw would fail
  Eigen::VectorXd v(2);
  v << 1.0, 1e300;
  EXPECT_THAT(AddVectorLaplaceNoise(p, rng, v),
              StatusIs(absl::StatusCode::kInvalidArgument));
  v << 1.0, std::nan("");
  EXPECT_THAT(AddVectorLaplaceNoise(p, rng, v),
              StatusIs(absl::StatusCode::kInvalidArgument));
  Eigen::VectorXd wrong(3);
  EXPECT_THAT(AddVectorLaplaceNoise(p, rng, wrong),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(VectorLaplace, FailsClosedWhenTheSourceFails) {
  ASSERT_OK_AND_ASSIGN(VectorLaplacePlan p, PlanVectorLaplace(1.0, 1.0, 50));
  for (int64_t good : {0, 1, 5, 40}) {
    FailingRandomForTesting rng(2, good);
    Eigen::VectorXd v = Eigen::VectorXd::Zero(50);
    EXPECT_THAT(AddVectorLaplaceNoise(p, rng, v),
                StatusIs(absl::StatusCode::kUnavailable));
    EXPECT_TRUE(std::isnan(v[0]));
  }
}

}  // namespace
}  // namespace dpopt::noise
