// NOISYBTLS (noise off = exact Armijo backtracking, one threshold draw per
// call, the noise scales, the query sensitivity) and the oracle's
// charge-first contract.
#include "core/optim/line_search/svt_line_search.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "core/noise/testing/seeded_random.h"
#include "core/optim/line_search/rdp_curves.h"
#include "core/optim/line_search/testing/no_svt_noise.h"
#include "core/privacy/rdp.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/common/status_matchers.h"

namespace dpopt::optim::line_search {
namespace {

using ::dpopt::noise::testing::SeededRandomForTesting;
using ::dpopt::optim::line_search::testing::ZeroSvtNoiseForTesting;
using ::dpopt::testing::StatusIs;

// F(v) = (m/2) ||v||^2 with g = w: F(w) - F(w - eta g) =
// (m/2) ||w||^2 (2 eta - eta^2) >= c_A eta m ||w||^2 iff eta <= 2 (1 - c_A).
struct Quadratic {
  double m = 10;
  int evaluations = 0;
  double operator()(const Eigen::VectorXd& v) {
    ++evaluations;
    return m / 2 * v.squaredNorm();
  }
};

TEST(NoisyBacktrackingTest, NoiseOffReturnsFirstArmijoStep) {
  SeededRandomForTesting rng(1);
  ZeroSvtNoiseForTesting zero;
  ASSERT_OK_AND_ASSIGN(SvtPlan plan, PlanLaplaceSvt(1.0, 0.1));
  Eigen::VectorXd w(3);
  w << 1, -2, 0.5;
  Quadratic f;
  LineSearchOptions o;  // eta0 2, beta 0.8, c_A 0.5 => eta <= 1
  ASSERT_OK_AND_ASSIGN(
      LineSearchResult r,
      NoisyBacktracking(std::ref(f), w, w, f.m, o, plan, zero, rng));
  // 2, 1.6, 1.28, 1.024, 0.8192: the fifth is the first with eta <= 1.
  EXPECT_TRUE(r.accepted);
  EXPECT_DOUBLE_EQ(r.step, 2 * std::pow(0.8, 4));
  EXPECT_EQ(r.candidates, 5);
  // k + 1 objective evaluations, one threshold draw, k query
  // draws.
  EXPECT_EQ(r.objective_evaluations, 6);
  EXPECT_EQ(f.evaluations, 6);
  EXPECT_EQ(zero.threshold_draws(), 1);
  EXPECT_EQ(zero.query_draws(), 5);
}

TEST(NoisyBacktrackingTest, NoiseOffBoundaryAndFallback) {
  SeededRandomForTesting rng(1);
  ZeroSvtNoiseForTesting zero;
  ASSERT_OK_AND_ASSIGN(SvtPlan plan, PlanLaplaceSvt(1.0, 0.1));
  Eigen::VectorXd w = Eigen::VectorXd::Constant(4, 0.3);
  Quadratic f;
  LineSearchOptions o;
  o.shrink = 0.5;  // 2, 1: the inequality holds with equality at eta = 1
  ASSERT_OK_AND_ASSIGN(
      LineSearchResult r,
      NoisyBacktracking(std::ref(f), w, w, f.m, o, plan, zero, rng));
  EXPECT_TRUE(r.accepted);
  EXPECT_DOUBLE_EQ(r.step, 1.0);

  o.shrink = 0.8;
  o.armijo = 0.99;  // needs eta <= 0.02
  o.max_candidates = 3;
  o.fallback_step = 0;
  ZeroSvtNoiseForTesting zero2;
  ASSERT_OK_AND_ASSIGN(
      r, NoisyBacktracking(std::ref(f), w, w, f.m, o, plan, zero2, rng));
  EXPECT_FALSE(r.accepted);
  EXPECT_EQ(r.step, 0);
  EXPECT_EQ(r.candidates, 3);
  EXPECT_EQ(r.objective_evaluations, 4);
  EXPECT_EQ(zero2.threshold_draws(), 1);
  EXPECT_EQ(zero2.query_draws(), 3);

  o.fallback_step = 2 * std::pow(0.8, 3);  // neural-network variant
  ASSERT_OK_AND_ASSIGN(
      r, NoisyBacktracking(std::ref(f), w, w, f.m, o, plan, zero2, rng));
  EXPECT_FALSE(r.accepted);
  EXPECT_DOUBLE_EQ(r.step, 2 * std::pow(0.8, 3));
}

TEST(SvtPlanTest, LaplaceScalesMatchTheorem1) {
  for (double c_obj : {1.0, 0.37, 25.0}) {
    for (double eps : {1e-4, 2e-3, 0.05, 1.0, 20.0}) {
      ASSERT_OK_AND_ASSIGN(SvtPlan p, PlanLaplaceSvt(c_obj, eps));
      EXPECT_EQ(std::exp2(std::round(std::log2(p.grid))), p.grid);
      EXPECT_EQ(p.sensitivity_in_grid_units,
                static_cast<int64_t>(std::ceil(c_obj / p.grid)) + 2);
      const double dg = static_cast<double>(p.sensitivity_in_grid_units);
      EXPECT_DOUBLE_EQ(p.threshold_scale, 2 * dg / eps);  // b_T = 2 D / eps
      EXPECT_DOUBLE_EQ(p.query_scale, 4 * dg / eps);      // b_Q = 4 D / eps
      // Rounding inflation is folded in and small: C_obj / grid is in
      // (2^23 eps, 2^24 eps] and ceil + 2 adds at most 3 grid units.
      EXPECT_GE(p.effective_sensitivity, c_obj);
      EXPECT_LE(p.effective_sensitivity,
                c_obj * (1 + 3 / (std::exp2(23) * eps)));
      EXPECT_LE(p.query_scale, 268435456.0);
    }
  }
}

TEST(SvtPlanTest, GaussianScalesMatchTheorem3) {
  for (double rho : {1e-6, 1e-3, 0.5}) {
    ASSERT_OK_AND_ASSIGN(SvtPlan p, PlanGaussianSvt(1.0, rho));
    const double dg = static_cast<double>(p.sensitivity_in_grid_units);
    EXPECT_NEAR(p.threshold_scale * p.threshold_scale, 1.5 * dg * dg / rho,
                1e-12 * 1.5 * dg * dg / rho);
    EXPECT_NEAR(p.query_scale * p.query_scale, 3 * dg * dg / rho,
                1e-12 * 3 * dg * dg / rho);
    // Eq. (5) at these scales (as multipliers of Delta_g) is alpha rho.
    EXPECT_NEAR(
        PaperGaussianSvt(10, p.threshold_scale / dg, p.query_scale / dg),
        10 * rho, 1e-12 * 10 * rho);
  }
  EXPECT_THAT(PlanGaussianSvt(1.0, 0).status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(SvtPlanTest, SecureLaplaceNoiseHasTheFormulaVariance) {
  // Empirical variance within 1% of 2 b^2 over 10^6 draws
  // (the standard error is sqrt(5/N) = 0.22%).
  ASSERT_OK_AND_ASSIGN(SvtPlan p, PlanLaplaceSvt(1.0, 0.5));
  SeededRandomForTesting rng(7);
  const int n = 1'000'000;
  double sum_t = 0, sum_q = 0;
  for (int i = 0; i < n; ++i) {
    ASSERT_OK_AND_ASSIGN(int64_t t, SecureSvtNoise().Threshold(p, rng));
    ASSERT_OK_AND_ASSIGN(int64_t q, SecureSvtNoise().Query(p, rng));
    sum_t += static_cast<double>(t) * t;
    sum_q += static_cast<double>(q) * q;
  }
  const double bt = p.threshold_scale, bq = p.query_scale;
  EXPECT_NEAR(sum_t / n, 2 * bt * bt, 0.01 * 2 * bt * bt);
  EXPECT_NEAR(sum_q / n, 2 * bq * bq, 0.01 * 2 * bq * bq);
}

// Sensitivity: |q_i(S) - q_i(S + {d})| <= C_obj for random w, g, eta.
TEST(ClippedBatchObjectiveTest, QuerySensitivityIsClipObjective) {
  std::mt19937_64 gen(3);
  std::normal_distribution<double> normal;
  const int n = 40, d = 4;
  Eigen::MatrixXd x(n, d);
  Eigen::VectorXd y(n);
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < d; ++j) x(i, j) = 3 * normal(gen);
    y[i] = normal(gen) > 0 ? 1 : -1;
  }
  Dataset data = Dataset::Dense(x, y, LabelKind::kBinary, 2);
  for (LossKind loss : {LossKind::kLogistic, LossKind::kHinge}) {
    ModelConfig config;
    config.loss = loss;
    config.l2 = 0.001;
    ASSERT_OK_AND_ASSIGN(auto objective, Objective::Create(config, d));
    std::vector<int64_t> s;
    for (int i = 1; i < n; ++i) s.push_back(i);
    std::vector<int64_t> s_plus = s;
    s_plus.push_back(0);
    const double clip = 0.7, m = 12.5, c_a = 0.5;
    double worst = 0;
    for (int trial = 0; trial < 200; ++trial) {
      Eigen::VectorXd w(d), g(d);
      for (int j = 0; j < d; ++j) {
        w[j] = 2 * normal(gen);
        g[j] = 2 * normal(gen);
      }
      const double eta = std::exp(normal(gen));
      auto query = [&](const std::vector<int64_t>& b) {
        return ClippedBatchObjective(*objective, data, b, clip, m, w) -
               ClippedBatchObjective(*objective, data, b, clip, m,
                                     w - eta * g) -
               c_a * eta * m * g.squaredNorm();
      };
      worst = std::max(worst, std::fabs(query(s) - query(s_plus)));
    }
    EXPECT_LE(worst, clip * (1 + 1e-12));
    EXPECT_GT(worst, 0.1 * clip);  // the bound is not vacuous here
  }
}

// A budget that refuses everything and an rng that counts draws.
class RefuseAll final : public ReleaseBudget {
 public:
  absl::Status Charge(const privacy::DpEvent&) override {
    return absl::ResourceExhaustedError("no budget");
  }
  privacy::DpEvent Spent() const override { return privacy::DpEvent::NoOp(); }
};
class CountingRandom final : public noise::RandomSource {
 public:
  uint64_t Underflow() override {
    ++draws;
    return inner.NextUint64();
  }
  absl::Status status() const override { return absl::OkStatus(); }
  SeededRandomForTesting inner{5};
  int64_t draws = 0;
};

TEST(LineSearchOracleTest, RefusedChargeTouchesNothing) {
  Eigen::MatrixXd x = Eigen::MatrixXd::Ones(10, 2);
  Eigen::VectorXd y = Eigen::VectorXd::Ones(10);
  Dataset data = Dataset::Dense(x, y, LabelKind::kBinary, 2);
  ModelConfig config;
  ASSERT_OK_AND_ASSIGN(auto objective, Objective::Create(config, 2));
  CountingRandom rng;
  RefuseAll budget;
  ZeroSvtNoiseForTesting zero;
  ASSERT_OK_AND_ASSIGN(
      auto oracle,
      LineSearchOracle::Create(data, *objective, 10, rng, zero, budget));
  Eigen::VectorXd w = Eigen::VectorXd::Zero(2), g = Eigen::VectorXd::Ones(2);
  EXPECT_THAT(oracle->Search({0.1, 1.0, 0.5}, w, g, LineSearchOptions()),
              StatusIs(absl::StatusCode::kResourceExhausted));
  EXPECT_EQ(rng.draws, 0);
  EXPECT_EQ(zero.threshold_draws() + zero.query_draws(), 0);
}

TEST(LineSearchOracleTest, EventIsSampledSparseVector) {
  ASSERT_OK_AND_ASSIGN(privacy::DpEvent e, LaplaceSvtEvent(0.01, 0.1));
  EXPECT_EQ(e, privacy::DpEvent::PoissonSampled(
                   0.1, privacy::DpEvent::SparseVector(0.01)));
  ASSERT_OK_AND_ASSIGN(e, LaplaceSvtEvent(0.01, 1.0));
  EXPECT_EQ(e, privacy::DpEvent::SparseVector(0.01));
}

// The Gaussian line search's charge (Zhu & Wang 2020, Thm 8):
// raw(alpha) = (4/3) alpha rho_BT + log(max_it + 1) / (alpha - 1), with the
// multipliers of PlanGaussianSvt (Thm 3 calibration).
TEST(LineSearchOracleTest, GaussianEventIsZhuWangCurve) {
  const double rho = 0.003;
  ASSERT_OK_AND_ASSIGN(privacy::DpEvent e, GaussianSvtEvent(rho, 15, 1.0));
  ASSERT_EQ(e.kind(), privacy::DpEvent::Kind::kGaussianSparseVector);
  ASSERT_OK_AND_ASSIGN(SvtPlan plan, PlanGaussianSvt(1.0, rho));
  const double dg = static_cast<double>(plan.sensitivity_in_grid_units);
  EXPECT_NEAR(e.threshold_noise_multiplier(), plan.threshold_scale / dg,
              1e-12 * e.threshold_noise_multiplier());
  EXPECT_NEAR(e.query_noise_multiplier(), plan.query_scale / dg,
              1e-12 * e.query_noise_multiplier());
  EXPECT_EQ(e.max_queries(), 15);
  const std::vector<double> orders = {2, 3, 10, 100, 3724};
  ASSERT_OK_AND_ASSIGN(std::vector<double> r, privacy::ComputeRdp(e, orders));
  for (size_t i = 0; i < orders.size(); ++i) {
    const double a = orders[i];
    const double spec = 4.0 / 3 * a * rho + std::log(16.0) / (a - 1);
    EXPECT_NEAR(r[i], spec, 1e-12 * spec) << a;
    EXPECT_EQ(r[i], SoundGaussianSvt(a, e.threshold_noise_multiplier(),
                                     e.query_noise_multiplier(), 16));
  }
  ASSERT_OK_AND_ASSIGN(e, GaussianSvtEvent(rho, 15, 0.1));
  ASSERT_EQ(e.kind(), privacy::DpEvent::Kind::kPoissonSampled);
  EXPECT_EQ(e.sampling_probability(), 0.1);
  EXPECT_EQ(e.inner().kind(), privacy::DpEvent::Kind::kGaussianSparseVector);
  EXPECT_THAT(GaussianSvtEvent(0, 15, 0.1).status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(GaussianSvtEvent(rho, 0, 0.1).status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
  // SvtQuery selects the event by its noise kind.
  SvtQuery q;
  q.clip_objective = 1;
  q.sampling_rate = 0.1;
  q.noise = SvtNoiseKind::kGaussian;
  q.rho = rho;
  LineSearchOptions o;
  o.max_candidates = 7;
  ASSERT_OK_AND_ASSIGN(privacy::DpEvent via, SvtQueryEvent(q, o));
  ASSERT_OK_AND_ASSIGN(privacy::DpEvent direct, GaussianSvtEvent(rho, 7, 0.1));
  EXPECT_EQ(via, direct);
  q.rho = 0;
  EXPECT_THAT(SvtQueryEvent(q, o).status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

class RecordingBudget final : public ReleaseBudget {
 public:
  absl::Status Charge(const privacy::DpEvent& e) override {
    charged.push_back(e);
    return absl::OkStatus();
  }
  privacy::DpEvent Spent() const override { return privacy::DpEvent::NoOp(); }
  std::vector<privacy::DpEvent> charged;
};

// Exact Armijo through the oracle with the Gaussian search: noise off, it
// returns the first candidate satisfying the Armijo inequality on the
// clipped batch objective, and charges the Gaussian sparse vector once.
TEST(LineSearchOracleTest, GaussianNoiseOffGivesExactArmijoStep) {
  std::mt19937_64 gen(3);
  std::normal_distribution<double> normal(0, 1);
  Eigen::MatrixXd x(50, 2);
  Eigen::VectorXd y(50);
  for (int i = 0; i < 50; ++i) {
    x(i, 0) = 1;
    x(i, 1) = std::clamp(0.5 + 0.2 * normal(gen), 0.0, 1.0);
    y[i] = 1;  // -g below is then a descent direction
  }
  Dataset data = Dataset::Dense(x, y, LabelKind::kBinary, 2);
  ModelConfig config;
  config.loss = LossKind::kLogistic;
  config.l2 = 0.001;
  ASSERT_OK_AND_ASSIGN(auto objective, Objective::Create(config, 2));
  SeededRandomForTesting rng(9);
  ZeroSvtNoiseForTesting zero;
  RecordingBudget budget;
  ASSERT_OK_AND_ASSIGN(
      auto oracle,
      LineSearchOracle::Create(data, *objective, 50, rng, zero, budget));
  SvtQuery q;
  q.clip_objective = 1;
  q.sampling_rate = 1;
  q.noise = SvtNoiseKind::kGaussian;
  q.rho = 0.01;
  LineSearchOptions o;  // eta0 2, beta 0.8, max_it 15, c_A 0.5
  o.initial_step = 50;  // force some backtracking
  const Eigen::VectorXd w = Eigen::VectorXd::Zero(2);
  Eigen::VectorXd g(2);
  g << -0.3, -0.4;
  ASSERT_OK_AND_ASSIGN(LineSearchResult r, oracle->Search(q, w, g, o));
  ASSERT_EQ(budget.charged.size(), 1u);
  ASSERT_OK_AND_ASSIGN(privacy::DpEvent want, GaussianSvtEvent(0.01, 15, 1));
  EXPECT_EQ(budget.charged[0], want);
  std::vector<int64_t> all(50);
  for (int i = 0; i < 50; ++i) all[i] = i;
  const double m = 50;
  auto f = [&](const Eigen::VectorXd& v) {
    return ClippedBatchObjective(*objective, data, all, 1, m, v);
  };
  // The expected step: the first candidate with F(w) - F(w - eta g) >=
  // c_A eta m ||g||^2 (up to the query grid, far below these margins).
  double eta = o.initial_step, expect = 0;
  for (int i = 0; i < o.max_candidates; ++i, eta *= o.shrink) {
    if (f(w) - f(w - eta * g) >= o.armijo * eta * m * g.squaredNorm()) {
      expect = eta;
      break;
    }
  }
  ASSERT_GT(expect, 0);
  ASSERT_LT(expect, o.initial_step);
  EXPECT_TRUE(r.accepted);
  EXPECT_DOUBLE_EQ(r.step, expect);
  EXPECT_EQ(zero.threshold_draws(), 1);
  EXPECT_EQ(zero.query_draws(), r.candidates);
}

}  // namespace
}  // namespace dpopt::optim::line_search
