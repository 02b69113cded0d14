// Regression test R-LEAK (Kornowski 2024, Sec. 3: privacy can leak from the
// lower to the upper level): on Example 3.1 the naive penalty method
// reconstructs a record exactly, while Algorithm 1 passes the empirical auditor
// (core/audit) and the analytic Gaussian audit, also with no outer noise
// (w_out = 0), which shows that the privacy comes from the noised inner solves.
#include <cmath>
#include <cstdio>

#include "core/audit/auditor.h"
#include "core/common/status_macros.h"
#include "core/noise/testing/seeded_random.h"
#include "core/optim/bilevel/accounting.h"
#include "core/optim/bilevel/dp_bilevel.h"
#include "core/optim/testing/noise_off.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/common/status_matchers.h"
#include "tests/core/optim/bilevel/test_problems.h"

namespace dpopt::optim::bilevel {
namespace {

using ::dpopt::noise::testing::SeededRandomForTesting;
using ::dpopt::optim::testing::SolveContextTestPeer;
using ::dpopt::testing::StatusIs;

constexpr int64_t kRows = 1000;
constexpr double kLambda = 9;
constexpr double kEta = 0.5;

Dataset S() { return testing::LeakData(kRows, Eigen::Vector2d(1, 0), 17); }
Dataset SPrime() {
  return testing::LeakData(kRows, Eigen::Vector2d(-1, 0), 17);
}

DpBilevelOptions LeakOptions() {
  DpBilevelOptions o;
  o.problem.kind = ProblemKind::kLeakExample;
  o.penalty = kLambda;
  o.outer_step = kEta;
  o.outer_iterations = 1;
  return o;
}

PublicDatasetInfo Info(privacy::Relation relation) {
  PublicDatasetInfo info;
  info.rows = kRows;
  info.dimension = 2;
  info.label_kind = LabelKind::kReal;
  info.relation = relation;
  return info;
}

absl::StatusOr<Eigen::VectorXd> X1(const DpBilevelOptions& o,
                                   const Calibration& c, const Dataset& data,
                                   noise::RandomSource& rng,
                                   bool noise_off = false) {
  SolveContext context(&rng);
  if (noise_off) SolveContextTestPeer::DisableNoise(context);
  BilevelTrace trace;
  ASSIGN_OR_RETURN(SolveResult r, RunDpBilevel(o, data, c, context, &trace));
  return trace.x[1];
}

TEST(RLeakTest, NaiveModeReconstructsTheLastRecordExactly) {
  DpBilevelOptions o = LeakOptions();
  o.naive = true;
  ASSERT_OK_AND_ASSIGN(auto algorithm, NewDpBilevel(o));
  PrivacyTarget non_private;
  non_private.non_private = true;
  ASSERT_OK_AND_ASSIGN(
      Calibration c,
      algorithm->Calibrate(Info(privacy::Relation::kReplaceOne), non_private));
  const Dataset s = S();
  const Dataset s2 = SPrime();
  SeededRandomForTesting rng(1);
  ASSERT_OK_AND_ASSIGN(Eigen::VectorXd x1, X1(o, c, s, rng));
  ASSERT_OK_AND_ASSIGN(Eigen::VectorXd x1p, X1(o, c, s2, rng));
  const Eigen::VectorXd xi_bar = testing::ColumnMean(s, 0, 2);
  const double a = kEta * kLambda / (1 + kLambda);
  EXPECT_NEAR((x1 + a * xi_bar).norm(), 0, 1e-12);
  // Deterministically different outputs: infinite privacy loss.
  const Eigen::VectorXd expected_gap =
      -a * (Eigen::Vector2d(1, 0) - Eigen::Vector2d(-1, 0)) / kRows;
  EXPECT_NEAR((x1 - x1p - expected_gap).norm(), 0, 1e-12);
  EXPECT_GT((x1 - x1p).norm(), 1e-4);
  // Reconstruction from x_1 and the other n - 1 records.
  const Eigen::VectorXd others =
      s.dense().topRows(kRows - 1).colwise().sum().transpose();
  const Eigen::VectorXd xi_hat =
      kRows * (-(1 + kLambda) / (kEta * kLambda)) * x1 - others;
  EXPECT_LT((xi_hat - Eigen::Vector2d(1, 0)).norm(), 1e-9);
  // The naive mode cannot be calibrated for a private target.
  PrivacyTarget target;
  target.epsilon = 1;
  target.delta = 1e-5;
  EXPECT_THAT(
      algorithm->Calibrate(Info(privacy::Relation::kReplaceOne), target),
      StatusIs(absl::StatusCode::kInvalidArgument));
}

class RLeakDpTest : public ::testing::TestWithParam<bool> {};

// The DP job at (1, 1e-5), replace-one, with (false) and without (true)
// outer noise.
TEST_P(RLeakDpTest, EmpiricalAndAnalyticAuditsPass) {
  const bool no_outer_noise = GetParam();
  DpBilevelOptions o = LeakOptions();
  // Large radii (no projection binds) and clip norms C = 3 (nothing clips
  // on these data): the map from the noise to x_1 is affine.
  o.inner_radius = 1e3;
  o.clip_gy = 3;
  if (no_outer_noise) o.split = {0, 0.5, 0.5};
  PrivacyTarget target;
  target.epsilon = 1;
  target.delta = 1e-5;
  ASSERT_OK_AND_ASSIGN(auto algorithm, NewDpBilevel(o));
  ASSERT_OK_AND_ASSIGN(
      Calibration c,
      algorithm->Calibrate(Info(privacy::Relation::kReplaceOne), target));
  EXPECT_EQ(c.event.events().size(), no_outer_noise ? 2u : 3u);
  const Dataset s = S();
  const Dataset s2 = SPrime();

  // Empirical audit of s = <x_1, e1>.
  audit::AuditOptions ao;
  ao.selection_trials = 500;
  ao.evaluation_trials = 2500;
  ao.confidence = 0.95;
  ao.delta = 1e-5;
  SeededRandomForTesting audit_rng(5);
  ASSERT_OK_AND_ASSIGN(
      audit::AuditResult ar,
      audit::AuditScalarMechanism(
          [&](bool neighbour,
              noise::RandomSource& rng) -> absl::StatusOr<double> {
            ASSIGN_OR_RETURN(Eigen::VectorXd x1,
                             X1(o, c, neighbour ? s2 : s, rng));
            return x1[0];
          },
          ao, audit_rng));
  EXPECT_LE(ar.epsilon_lower_bound, 1.0);
  std::printf(
      "R-LEAK DP (outer noise %s): empirical epsilon lower bound "
      "%.4f (estimate %.4f) for a claim of 1\n",
      no_outer_noise ? "off" : "on", ar.epsilon_lower_bound,
      ar.epsilon_estimate);

  // Analytic audit: x_1 ~ N(m_S, s^2 I). The means are the noise-free
  // outputs (the map is affine in zero-mean noise); the variance is
  // estimated from noisy runs on S.
  SeededRandomForTesting rng(9);
  ASSERT_OK_AND_ASSIGN(Eigen::VectorXd m, X1(o, c, s, rng, true));
  ASSERT_OK_AND_ASSIGN(Eigen::VectorXd mp, X1(o, c, s2, rng, true));
  const int kRuns = 1000;
  double sum_sq = 0;
  for (int k = 0; k < kRuns; ++k) {
    ASSERT_OK_AND_ASSIGN(Eigen::VectorXd x1, X1(o, c, s, rng));
    sum_sq += (x1 - m).squaredNorm();
  }
  const double sd = std::sqrt(sum_sq / (2.0 * kRuns));
  const double mu = (m - mp).norm() / sd;
  const double rho = ZcdpFromEpsilonDelta(1, 1e-5);
  // The variance estimate has relative sd ~ 1/sqrt(2 * 2 kRuns); allow
  // three of them.
  const double slack = 1 + 3 / std::sqrt(4.0 * kRuns);
  EXPECT_LE(mu, std::sqrt(2 * rho) * slack)
      << "mu " << mu << " sd " << sd << " gap " << (m - mp).norm();
  EXPECT_GT(mu, 0.0);
  std::printf("R-LEAK DP: Gaussian-DP mu of x_1 %.4f <= sqrt(2 rho) = %.4f\n",
              mu, std::sqrt(2 * rho));
}

INSTANTIATE_TEST_SUITE_P(OuterNoise, RLeakDpTest, ::testing::Bool());

}  // namespace
}  // namespace dpopt::optim::bilevel
