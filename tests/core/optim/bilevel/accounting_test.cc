// Bilevel accounting (accounting.h): the noise formulas and known-answer
// numbers, what is charged, and privacy invariance (public utility knobs
// never change the charge).
#include "core/optim/bilevel/accounting.h"

#include <cmath>

#include "core/common/status_macros.h"
#include "core/optim/bilevel/dp_bilevel.h"
#include "core/privacy/accountant.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/common/status_matchers.h"

namespace dpopt::optim::bilevel {
namespace {

using ::dpopt::testing::StatusIs;

PrivacyTarget Target(double epsilon, double delta) {
  PrivacyTarget t;
  t.epsilon = epsilon;
  t.delta = delta;
  return t;
}

PublicDatasetInfo Info(int64_t rows, int64_t dimension,
                       privacy::Relation relation) {
  PublicDatasetInfo info;
  info.rows = rows;
  info.dimension = dimension;
  info.label_kind = LabelKind::kReal;
  info.relation = relation;
  return info;
}

TEST(ZcdpTest, GoldenRho) {
  const double rho = ZcdpFromEpsilonDelta(1.0, 1e-5);
  EXPECT_NEAR(rho, 0.0208199383, 1e-6 * 0.0208199383);
  EXPECT_NEAR(EpsilonFromZcdp(rho, 1e-5), 1.0, 1e-12);
}

// Known-answer numbers: n = 1e4, epsilon 1, delta 1e-5, T = 100,
// C_out = 1, equal split, replace-one (2 C / n): sigma = 0.0169760.
TEST(ZcdpTest, GoldenOuterSigmaFromTheJobCalibration) {
  DpBilevelOptions o;
  o.problem.kind = ProblemKind::kQuadratic;
  o.outer_iterations = 100;
  o.clip_out = 1;
  o.calibration = CalibrationMode::kZcdpClosedForm;
  ASSERT_OK_AND_ASSIGN(auto algorithm, NewDpBilevel(o));
  ASSERT_OK_AND_ASSIGN(
      Calibration c,
      algorithm->Calibrate(Info(10000, 4, privacy::Relation::kReplaceOne),
                           Target(1, 1e-5)));
  ASSERT_OK_AND_ASSIGN(
      BilevelPlan plan,
      MakeBilevelPlan(o, 10000, 4, privacy::Relation::kReplaceOne,
                      Target(1, 1e-5)));
  ASSERT_EQ(plan.mechanisms.size(), 3u);
  const PlannedMechanism& outer = plan.mechanisms[2];
  EXPECT_DOUBLE_EQ(outer.sensitivity, 2.0 / 10000);
  const double sigma = outer.NominalSigma(c.noise_multiplier);
  // The printed golden value (7 digits) and the exact formula.
  EXPECT_NEAR(sigma, 0.0169760, 5e-8);
  const double rho = ZcdpFromEpsilonDelta(1, 1e-5);
  EXPECT_NEAR(sigma, (2.0 / 10000) * std::sqrt(3 * 100 / (2 * rho)),
              1e-12 * sigma);
  // The inner solves: sigma_GD = (2 C / n) sqrt(K / (2 rho_in)), rho_in =
  // rho / (3 T) per call, K releases per call.
  for (int j = 0; j < 2; ++j) {
    const PlannedMechanism& m = plan.mechanisms[j];
    const double k = static_cast<double>(m.releases) / 100;
    EXPECT_NEAR(m.NominalSigma(c.noise_multiplier),
                m.sensitivity * std::sqrt(k / (2 * rho / 300)),
                1e-12 * m.NominalSigma(c.noise_multiplier));
  }
  // The accounted total is within the budget.
  ASSERT_OK_AND_ASSIGN(
      auto eps,
      privacy::ComputeEpsilon(c.event, 1e-5, privacy::AccountantKind::kRdp));
  EXPECT_LE(eps.epsilon, 1.0);
  EXPECT_EQ(c.relation, privacy::Relation::kReplaceOne);
}

// The paper's literal per-call calibration and a corrected
// advanced-composition split (accounting.h).
TEST(ZcdpTest, PaperLiteralAndAdvancedCompositionNumbers) {
  EXPECT_NEAR(PaperLiteralSigma(2.0 / 10000, 1, 1e-5, 100), 0.0501276, 5e-8);
  EXPECT_NEAR(AdvancedCompositionSigma(2.0 / 10000, 1, 1e-5, 100), 0.2131023,
              5e-8);
  // zCDP certifies the paper-literal calibration at (0.334, 1e-5).
  EXPECT_NEAR(EpsilonFromZcdp(PaperLiteralZcdp(1, 1e-5, 100), 1e-5), 0.334,
              5e-4);
}

TEST(CalibrateScaleTest, AccountantMeetsTargetWithLessNoiseThanClosedForm) {
  std::vector<PlannedMechanism> m(3);
  m[0] = {"a", 1000, 0.4, 1, 2e-4, 5};
  m[1] = {"b", 3000, 0.4, 1, 6e-3, 5};
  m[2] = {"c", 100, 0.2, 1, 5e-4, 2};
  for (auto kind :
       {privacy::AccountantKind::kRdp, privacy::AccountantKind::kPld}) {
    PrivacyTarget t = Target(1, 1e-6);
    t.accountant = kind;
    ASSERT_OK_AND_ASSIGN(double s,
                         CalibrateScale(m, t, CalibrationMode::kAccountant));
    ASSERT_OK_AND_ASSIGN(
        double closed, CalibrateScale(m, t, CalibrationMode::kZcdpClosedForm));
    EXPECT_LT(s, closed);
    ASSERT_OK_AND_ASSIGN(privacy::DpEvent e, JobEvent(m, s));
    ASSERT_OK_AND_ASSIGN(auto eps, privacy::ComputeEpsilon(e, 1e-6, kind));
    EXPECT_LE(eps.epsilon, 1.0);
    EXPECT_GT(eps.epsilon, 0.99);  // tight: bisection to 1e-6
  }
  // Closed form: s = 1 / sqrt(2 rho) exactly.
  ASSERT_OK_AND_ASSIGN(
      double closed,
      CalibrateScale(m, Target(2, 1e-6), CalibrationMode::kZcdpClosedForm));
  EXPECT_DOUBLE_EQ(closed, 1 / std::sqrt(2 * ZcdpFromEpsilonDelta(2, 1e-6)));
  // Each mechanism's zCDP is its share of rho.
  const double rho = ZcdpFromEpsilonDelta(2, 1e-6);
  for (const auto& mech : m) {
    const double z = mech.NoiseMultiplier(closed);
    EXPECT_NEAR(mech.releases / (2 * z * z), mech.weight * rho, 1e-12 * rho);
  }
  // Sampling is refused by the closed form.
  m[0].sampling_rate = 0.1;
  EXPECT_THAT(
      CalibrateScale(m, Target(1, 1e-6), CalibrationMode::kZcdpClosedForm),
      StatusIs(absl::StatusCode::kInvalidArgument));
}

// Fixed inner steps: the practical default T_GD = ceil(2 (beta/mu) ln n)
// depends on lambda through beta/mu (a public schedule choice), which would
// change the number of releases.
DpBilevelOptions Base() {
  DpBilevelOptions o;
  o.problem.kind = ProblemKind::kQuadratic;
  o.outer_iterations = 10;
  o.penalty = 10;
  o.inner.steps = 30;
  return o;
}

absl::StatusOr<Calibration> CalibrateWith(const DpBilevelOptions& o,
                                          int64_t rows = 5000) {
  ASSIGN_OR_RETURN(auto algorithm, NewDpBilevel(o));
  return algorithm->Calibrate(Info(rows, 6, privacy::Relation::kAddRemove),
                              Target(1, 1e-6));
}

TEST(InvarianceTest, PublicUtilityKnobsNeverChangeTheCharge) {
  ASSERT_OK_AND_ASSIGN(Calibration base, CalibrateWith(Base()));
  std::vector<DpBilevelOptions> variants(6, Base());
  variants[0].penalty = 40;
  variants[1].outer_step = 0.3;
  variants[2].inner_radius = 17;
  variants[3].initial_inner = {1, 2, 3};
  variants[4].initial_outer = {0.5, 0.5, 0.5};
  variants[5].outer_set.kind = SetKind::kBall;
  variants[5].outer_set.radius = 5;
  for (const auto& v : variants) {
    ASSERT_OK_AND_ASSIGN(Calibration c, CalibrateWith(v));
    EXPECT_EQ(c.event, base.event);
    EXPECT_EQ(c.noise_multiplier, base.noise_multiplier);
  }
  // Only inner solve 2's sigma moves with lambda: its clip bound is
  // C_fy + lambda C_gy.
  auto plan = [](const DpBilevelOptions& o) {
    return MakeBilevelPlan(o, 5000, 6, privacy::Relation::kAddRemove,
                           Target(1, 1e-6));
  };
  ASSERT_OK_AND_ASSIGN(BilevelPlan p10, plan(Base()));
  ASSERT_OK_AND_ASSIGN(BilevelPlan p40, plan(variants[0]));
  // Practical mode: T_GD of solve 2 depends on beta/mu, which is nearly
  // constant in lambda; force equal steps to compare sigmas.
  const double c_fy = p10.clip_fy;
  const double c_gy = p10.clip_gy;
  EXPECT_DOUBLE_EQ(
      p40.mechanisms[1].sensitivity / p10.mechanisms[1].sensitivity,
      (c_fy + 40 * c_gy) / (c_fy + 10 * c_gy));
  EXPECT_EQ(p40.mechanisms[0].sensitivity, p10.mechanisms[0].sensitivity);
  EXPECT_EQ(p40.mechanisms[2].sensitivity, p10.mechanisms[2].sensitivity);
}

TEST(InvarianceTest, ScheduleAndClipChangesMoveSigmaAsPredicted) {
  DpBilevelOptions o = Base();
  o.calibration = CalibrationMode::kZcdpClosedForm;
  auto outer_sigma = [](const DpBilevelOptions& o, int64_t rows) {
    auto p = MakeBilevelPlan(o, rows, 6, privacy::Relation::kAddRemove,
                             Target(1, 1e-6));
    EXPECT_OK(p);
    const double s = 1 / std::sqrt(2 * ZcdpFromEpsilonDelta(1, 1e-6));
    return p->mechanisms[2].NominalSigma(s);
  };
  const double base = outer_sigma(o, 5000);
  EXPECT_NEAR(outer_sigma(o, 10000), base / 2, 1e-12 * base);
  DpBilevelOptions t4 = o;
  t4.outer_iterations = 40;
  EXPECT_NEAR(outer_sigma(t4, 5000), base * 2, 1e-12 * base);
  DpBilevelOptions clip = o;
  clip.clip_out = 3 * MakeBilevelPlan(o, 5000, 6, privacy::Relation::kAddRemove,
                                      Target(1, 1e-6))
                          ->clip_out;
  EXPECT_NEAR(outer_sigma(clip, 5000), 3 * base, 1e-12 * base);
  // Replace-one doubles every sensitivity.
  auto ro = MakeBilevelPlan(o, 5000, 6, privacy::Relation::kReplaceOne,
                            Target(1, 1e-6));
  ASSERT_OK(ro);
  auto ar = MakeBilevelPlan(o, 5000, 6, privacy::Relation::kAddRemove,
                            Target(1, 1e-6));
  for (int j = 0; j < 3; ++j) {
    EXPECT_DOUBLE_EQ(ro->mechanisms[j].sensitivity,
                     2 * ar->mechanisms[j].sensitivity);
  }
}

TEST(PlanTest, PenaltyBelowLambdaMinAndBadSplitsAreRefused) {
  DpBilevelOptions o = Base();
  o.penalty = 1;  // lambda_min = 2 L1^g / mu_g = 4 for B = I
  EXPECT_THAT(CalibrateWith(o), StatusIs(absl::StatusCode::kInvalidArgument,
                                         ::testing::HasSubstr("lambda_min")));
  o = Base();
  o.split = {0.5, 0.5, 0.5};
  EXPECT_THAT(NewDpBilevel(o), StatusIs(absl::StatusCode::kInvalidArgument));
  o = Base();
  o.inner_sampling_rate = 0.1;
  ASSERT_OK_AND_ASSIGN(auto algorithm, NewDpBilevel(o));
  EXPECT_THAT(
      algorithm->Calibrate(Info(5000, 6, privacy::Relation::kReplaceOne),
                           Target(1, 1e-6)),
      StatusIs(absl::StatusCode::kFailedPrecondition));
  o = Base();
  o.naive = true;
  ASSERT_OK_AND_ASSIGN(auto naive, NewDpBilevel(o));
  EXPECT_THAT(naive->Calibrate(Info(5000, 6, privacy::Relation::kAddRemove),
                               Target(1, 1e-6)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       ::testing::HasSubstr("NON-PRIVATE")));
}

}  // namespace
}  // namespace dpopt::optim::bilevel
