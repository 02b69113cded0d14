// The theory calculator of bilevel family (theory.h): lambda >= lambda_min,
// alpha <= alpha_max, T and eta by its formulas, infeasible n rejected.
#include "core/optim/bilevel/theory.h"

#include <cmath>

#include "gtest/gtest.h"
#include "tests/common/status_matchers.h"

namespace dpopt::optim::bilevel {
namespace {

using ::dpopt::testing::StatusIs;

// All constants 1: ell = 1, kappa = 1.
TheoryInputs UnitInputs(int64_t n) {
  TheoryInputs in;
  in.constants.lipschitz_f = 1;
  in.constants.smoothness_f = 1;
  in.constants.lipschitz_g = 1;
  in.constants.smoothness_g = 1;
  in.constants.hessian_lipschitz_g = 1;
  in.constants.strong_convexity_g = 1;
  in.initial_gap = 1;
  in.rows = n;
  in.dx = 2;
  in.dy = 2;
  in.epsilon = 1;
  in.delta = 1e-6;
  in.failure = 0.05;
  return in;
}

TEST(TheoryTest, LambdaMinAndAlphaMaxByHand) {
  ProblemConstants k = UnitInputs(10).constants;
  // max(2 L1^f/mu, 2 L1^g/mu, L0^f/L0^g, L1^f/L1^g) = max(2, 2, 1, 1).
  EXPECT_DOUBLE_EQ(TheoryLambdaMin(k), 2);
  // ell kappa^3 min(1/(2 kappa), 1, 1, Delta_F/(ell kappa)) = 1/2.
  EXPECT_DOUBLE_EQ(TheoryAlphaMax(k, 1), 0.5);
  EXPECT_DOUBLE_EQ(TheoryAlphaMax(k, 0.1), 0.1);
  // mu_g = 0.5: ell = 1, kappa = 2; lambda_min = max(4, 4, 1, 1) = 4;
  // alpha_max = 8 min(1/4, 1, 1, 3/2) = 2.
  k.strong_convexity_g = 0.5;
  EXPECT_DOUBLE_EQ(TheoryLambdaMin(k), 4);
  EXPECT_DOUBLE_EQ(TheoryAlphaMax(k, 3), 2);
  // L0^f = 3, L0^g = 1.5 (ell = 3, kappa = 6): lambda_min = max(4, 4, 2,
  // 1) = 4; alpha_max = 648 min(1/12, 0.5, 1, 1/18) = 36.
  k.lipschitz_f = 3;
  k.lipschitz_g = 1.5;
  EXPECT_DOUBLE_EQ(TheoryLambdaMin(k), 4);
  EXPECT_NEAR(TheoryAlphaMax(k, 1), 36, 1e-12);
}

TEST(TheoryTest, ParametersFollowTheFormulasOfSection27) {
  const TheoryInputs in = UnitInputs(1'000'000);
  ASSERT_OK_AND_ASSIGN(TheoryPoint p, EvaluateTheory(in, 0.4));
  // lambda = max(2, 2 * 1 / 0.4) = 5; L_out = 1 * 2^3 = 8; eta = 1/16.
  EXPECT_DOUBLE_EQ(p.lambda, 5);
  EXPECT_DOUBLE_EQ(p.smoothness_out, 8);
  EXPECT_DOUBLE_EQ(p.eta, 1.0 / 16);
  // T = ceil((256/3) * 8 * (1 + 2/5) / 0.16) = ceil(5973.33) = 5974.
  EXPECT_EQ(p.outer_iterations, 5974);
  // rho(1, 1e-6) = (sqrt(ln 1e6 + 1) - sqrt(ln 1e6))^2; sigma = (2 C_out /
  // n) / sqrt(2 (rho/3) / T) with C_out = 1 + 2 * 1 * 1 / 1 = 3.
  const double l = std::log(1e6);
  const double rho = std::pow(std::sqrt(l + 1) - std::sqrt(l), 2);
  EXPECT_NEAR(p.sigma, (6.0 / 1e6) / std::sqrt(2 * (rho / 3) / 5974),
              1e-12 * p.sigma);
  // a_sigma = sigma (sqrt(2) + sqrt(2 ln(2 T / gamma))).
  EXPECT_NEAR(
      p.noise_bound,
      p.sigma * (std::sqrt(2.0) + std::sqrt(2 * std::log(2 * 5974 / 0.05))),
      1e-12 * p.noise_bound);
  // beta = (L1^f + lambda L1^g) R2 + lambda L1^g R1.
  EXPECT_NEAR(p.bias, 6 * p.radius_inner2 + 5 * p.radius_inner1,
              1e-12 * p.bias);
  // Inner noise: sigma_GD = (2 L / n) sqrt(M n^2 / (2 rho/3/T)), L = 1 for
  // solve 1 and 1 + 5 * 1 = 6 for solve 2.
  EXPECT_NEAR(
      p.sigma_inner1,
      (2.0 / 1e6) * std::sqrt(p.inner_rounds1 * 1e12 / (2 * (rho / 3) / 5974)),
      1e-9 * p.sigma_inner1);
  EXPECT_NEAR(
      p.sigma_inner2,
      (12.0 / 1e6) * std::sqrt(p.inner_rounds2 * 1e12 / (2 * (rho / 3) / 5974)),
      1e-9 * p.sigma_inner2);
  EXPECT_GE(p.inner_rounds1, 1);
  // The radii shrink from R_0 (R_Y = 2 for solve 1) by the recursion.
  EXPECT_LT(p.radius_inner1, 2);
  EXPECT_GT(p.radius_inner1, 0);
}

TEST(TheoryTest, ReturnsTheSmallestFeasibleAlphaWithItsConditions) {
  // With unit constants the theory first becomes feasible near n = 1e9
  // (the 16x conditions and T_GD = n^2 inner steps are conservative).
  const TheoryInputs in = UnitInputs(1'000'000'000);
  ASSERT_OK_AND_ASSIGN(TheoryResult r, TheoryCalculator(in));
  ASSERT_TRUE(r.feasible) << r.message;
  const TheoryPoint& p = r.point;
  EXPECT_GE(p.lambda, r.lambda_min);
  EXPECT_LE(p.alpha, r.alpha_max);
  EXPECT_LE(16 * p.bias, p.alpha);
  EXPECT_LE(16 * p.noise_bound, p.alpha);
  // T and eta by the formulas at the returned alpha.
  EXPECT_EQ(p.outer_iterations,
            static_cast<int64_t>(std::ceil(
                (256.0 / 3) * 8 * (1 + 2 / p.lambda) / (p.alpha * p.alpha))));
  EXPECT_DOUBLE_EQ(p.eta, 1.0 / 16);
  // Smallest: 1% below it the conditions fail.
  ASSERT_OK_AND_ASSIGN(TheoryPoint below, EvaluateTheory(in, p.alpha * 0.99));
  EXPECT_FALSE(below.feasible);
  // More data allows a smaller alpha.
  TheoryInputs more = in;
  more.rows = 3 * in.rows;
  ASSERT_OK_AND_ASSIGN(TheoryResult r2, TheoryCalculator(more));
  ASSERT_TRUE(r2.feasible);
  EXPECT_LT(r2.point.alpha, p.alpha);
}

TEST(TheoryTest, RejectsInfeasibleN) {
  for (int64_t n : {100, 1'000'000, 100'000'000}) {
    ASSERT_OK_AND_ASSIGN(TheoryResult r, TheoryCalculator(UnitInputs(n)));
    EXPECT_FALSE(r.feasible) << n;
    EXPECT_NE(r.message.find("n too small for the theory"), std::string::npos)
        << r.message;
  }
}

TEST(TheoryTest, RejectsBadInputs) {
  TheoryInputs in = UnitInputs(1000);
  in.initial_gap = 0;
  EXPECT_THAT(TheoryCalculator(in),
              StatusIs(absl::StatusCode::kInvalidArgument));
  in = UnitInputs(1000);
  in.split = {0, 0.5, 0.5};
  EXPECT_THAT(TheoryCalculator(in),
              StatusIs(absl::StatusCode::kInvalidArgument));
  in = UnitInputs(4'000'000'000);  // T_GD = n^2 must fit in 64 bits
  EXPECT_THAT(TheoryCalculator(in),
              StatusIs(absl::StatusCode::kInvalidArgument));
  in = UnitInputs(1000);
  EXPECT_THAT(EvaluateTheory(in, -1),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace dpopt::optim::bilevel
