// CHEB's decision table (Chen & Lee 2022, Alg. 3), the angle average
// (eq. (7)), the eta0 schedule, clip decay, and budgets that never decrease.
#include "core/optim/line_search/cheb.h"

#include <cmath>

#include "gtest/gtest.h"

namespace dpopt::optim::line_search {
namespace {

Eigen::VectorXd Dir(double degrees) {
  const double r = degrees * M_PI / 180;
  Eigen::VectorXd v(2);
  v << std::cos(r), std::sin(r);
  return v;
}

struct ChebCase {
  double angle;      // between g and g2, degrees
  double theta_bar;  // current moving average
  ChebBranch expected;
};

class ChebTableTest : public ::testing::TestWithParam<ChebCase> {};

TEST_P(ChebTableTest, DecisionAndAveraging) {
  const ChebCase& c = GetParam();
  Eigen::VectorXd g = 2 * Dir(0), g2 = 3 * Dir(c.angle);
  const Eigen::VectorXd expected_g = (g + g2) / 2;
  double rho = 0.01, eps = 0.2;
  ChebOptions o;  // xi 0.3, phi_max 1.1, phi_min 0.5
  const ChebOutcome out = Cheb(g2, c.theta_bar, o, &g, &rho, &eps);
  EXPECT_EQ(out.branch, c.expected);
  EXPECT_NEAR(out.angle, c.angle, 1e-9);
  EXPECT_NEAR(rho, c.expected == ChebBranch::kRaiseGradient ? 0.013 : 0.01,
              1e-15);
  EXPECT_NEAR(eps, c.expected == ChebBranch::kRaiseLineSearch ? 0.26 : 0.2,
              1e-15);
  EXPECT_TRUE(g.isApprox(expected_g, 1e-15));  // always averaged
}

INSTANTIATE_TEST_SUITE_P(
    Table, ChebTableTest,
    ::testing::Values(
        // dot < 0 raises rho even when theta_max >= 180 (theta_bar 170).
        ChebCase{120, 170, ChebBranch::kRaiseGradient},
        ChebCase{80, 60, ChebBranch::kRaiseGradient},    // > 66 = 1.1 * 60
        ChebCase{20, 60, ChebBranch::kRaiseLineSearch},  // < 30 = 0.5 * 60
        ChebCase{45, 60, ChebBranch::kNoChange},
        ChebCase{65, 60, ChebBranch::kNoChange}));

TEST(AngleTest, ZeroVectorIsNinetyDegrees) {
  EXPECT_EQ(AngleDegrees(Eigen::VectorXd::Zero(2), Dir(10)), 90);
  EXPECT_NEAR(AngleDegrees(Dir(0), Dir(180)), 180, 1e-6);
  EXPECT_NEAR(AngleDegrees(Dir(0), Dir(37)), 37, 1e-9);
}

TEST(AngleAverageTest, FollowsEquation7AfterTheFirstSuccess) {
  AngleAverage avg(0.8);
  EXPECT_EQ(avg.value(), 90);
  avg.OnSuccessfulStep(Dir(0));
  EXPECT_EQ(avg.value(), 90);  // untouched on the first success
  avg.OnSuccessfulStep(Dir(30));
  EXPECT_NEAR(avg.value(), 0.8 * 90 + 0.2 * 30, 1e-9);
  avg.OnSuccessfulStep(Dir(40));
  EXPECT_NEAR(avg.value(), 0.8 * (0.8 * 90 + 0.2 * 30) + 0.2 * 10, 1e-9);
}

TEST(InitialStepScheduleTest, EveryTauIterationsCappedAtInitial) {
  InitialStepSchedule s(2.0, 10, 1.2);
  for (int t = 0; t < 9; ++t) {
    s.RecordStep(0.5);
    s.EndIteration(t);
    EXPECT_EQ(s.eta0(), 2.0);
  }
  s.RecordStep(0.4);
  s.EndIteration(9);
  EXPECT_DOUBLE_EQ(s.eta0(), 1.2 * 0.5);
  for (int t = 10; t < 20; ++t) s.EndIteration(t);  // Omega empty
  EXPECT_DOUBLE_EQ(s.eta0(), 0.6);
  for (int t = 20; t < 30; ++t) s.RecordStep(1.9);
  s.EndIteration(29);
  EXPECT_DOUBLE_EQ(s.eta0(), 2.0);  // min(1.2 * 1.9, eta0_initial)
}

TEST(ClipAdaptationTest, AtMostOneDecayPerIterationWithFloor) {
  ClipAdaptation c(3, 1, 0.05, 0.5);
  c.BeginIteration();
  EXPECT_TRUE(c.OnGradientBudgetRaised());
  EXPECT_FALSE(c.OnGradientBudgetRaised());
  EXPECT_DOUBLE_EQ(c.clip_grad(), 2.85);
  EXPECT_DOUBLE_EQ(c.clip_obj(), 0.95);
  c.BeginIteration();
  EXPECT_DOUBLE_EQ(c.clip_grad(), 2.85);  // no raise, no decay
  for (int i = 0; i < 100; ++i) {
    c.BeginIteration();
    c.OnGradientBudgetRaised();
  }
  EXPECT_DOUBLE_EQ(c.clip_grad(), 1.5);
  EXPECT_DOUBLE_EQ(c.clip_obj(), 0.5);
}

TEST(ChebTest, BudgetsNeverDecrease) {
  double rho = 0.01, eps = 0.1;
  ChebOptions o;
  Eigen::VectorXd g = Dir(0);
  for (int i = 0; i < 360; i += 7) {
    const double r0 = rho, e0 = eps;
    Cheb(Dir(i), 50, o, &g, &rho, &eps);
    EXPECT_GE(rho, r0);
    EXPECT_GE(eps, e0);
  }
}

}  // namespace
}  // namespace dpopt::optim::line_search
