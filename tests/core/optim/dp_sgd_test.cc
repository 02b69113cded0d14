#include "core/optim/dp_sgd.h"

#include <cmath>
#include <memory>
#include <random>
#include <vector>

#include "core/noise/testing/seeded_random.h"
#include "core/optim/non_private_gd.h"
#include "core/optim/objective.h"
#include "core/optim/private_oracle.h"
#include "core/optim/release_budget.h"
#include "core/optim/solve_loop.h"
#include "core/optim/testing/noise_off.h"
#include "core/optim/update_rules.h"
#include "core/privacy/accountant.h"
#include "core/privacy/dp_sgd_accounting.h"
#include "core/privacy/privacy_filter.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/common/status_matchers.h"

namespace dpopt::optim {
namespace {

using ::dpopt::noise::testing::FailingRandomForTesting;
using ::dpopt::noise::testing::SeededRandomForTesting;
using ::dpopt::optim::testing::SolveContextTestPeer;
using ::dpopt::testing::StatusIs;
using ::testing::HasSubstr;

PublicDatasetInfo InfoFor(const Dataset& data) {
  PublicDatasetInfo info;
  info.rows = data.rows();
  info.dimension = data.dimension();
  info.label_kind = data.label_kind();
  info.num_classes = data.num_classes();
  return info;
}

PrivacyTarget Target(double epsilon = 1.0, double delta = 1e-6) {
  PrivacyTarget t;
  t.epsilon = epsilon;
  t.delta = delta;
  return t;
}

// Least squares with orthogonal columns: X^T X / n = diag(h), so gradient
// descent contracts coordinate j of the error by exactly (1 - lr (h_j + l2)).
// Rows: (a, 0), (-a, 0), (0, b), (0, -b) with labels y.
struct OrthogonalProblem {
  Dataset data;
  Eigen::VectorXd h;       // diagonal of X^T X / n
  Eigen::VectorXd w_star;  // closed-form minimiser with L2 strength l2
};

OrthogonalProblem MakeOrthogonal(double l2) {
  const double a = 2, b = 1;
  Eigen::MatrixXd x(4, 2);
  x << a, 0, -a, 0, 0, b, 0, -b;
  Eigen::VectorXd y(4);
  y << 3, -1, 2, 0.5;
  OrthogonalProblem p;
  p.h = Eigen::Vector2d(2 * a * a / 4, 2 * b * b / 4);
  // w* = (X^T X / n + l2 I)^{-1} X^T y / n.
  const Eigen::VectorXd xty = x.transpose() * y / 4.0;
  p.w_star = Eigen::Vector2d(xty[0] / (p.h[0] + l2), xty[1] / (p.h[1] + l2));
  p.data = Dataset::Dense(x, y, LabelKind::kReal);
  return p;
}

DpSgdOptions LeastSquaresOptions(double l2, int64_t steps, double lr) {
  DpSgdOptions o;
  o.sampling_rate = 1.0;
  o.steps = steps;
  o.clip_norm = 1e6;  // never binds here
  o.learning_rate = lr;
  o.model.loss = LossKind::kLeastSquares;
  o.model.l2 = l2;
  o.model.label_bound = 100;
  return o;
}

// Records every privatized iterate; stops after `stop_after` steps.
class RecordingCallback : public IterationCallback {
 public:
  explicit RecordingCallback(int64_t stop_after = -1)
      : stop_after_(stop_after) {}
  bool OnIteration(const IterationSummary& s) override {
    steps.push_back(s.step);
    totals.push_back(s.total_steps);
    iterates.push_back(s.iterate);
    norms.push_back(s.noisy_gradient_norm);
    return stop_after_ < 0 || s.step < stop_after_;
  }
  std::vector<int64_t> steps, totals;
  std::vector<Eigen::VectorXd> iterates;
  std::vector<double> norms;

 private:
  int64_t stop_after_;
};

TEST(DpSgdOptionsTest, RejectsAbsurdValues) {
  DpSgdOptions ok = LeastSquaresOptions(0, 10, 0.1);
  EXPECT_OK(ok.Validate());
  auto bad = [&](auto mutate) {
    DpSgdOptions o = ok;
    mutate(o);
    return o.Validate();
  };
  const auto kInvalid = absl::StatusCode::kInvalidArgument;
  EXPECT_THAT(bad([](DpSgdOptions& o) { o.steps = 0; }), StatusIs(kInvalid));
  EXPECT_THAT(bad([](DpSgdOptions& o) { o.steps = 1'000'001; }),
              StatusIs(kInvalid, HasSubstr("steps")));
  EXPECT_THAT(bad([](DpSgdOptions& o) { o.sampling_rate = 0; }),
              StatusIs(kInvalid));
  EXPECT_THAT(bad([](DpSgdOptions& o) { o.sampling_rate = 1.5; }),
              StatusIs(kInvalid));
  EXPECT_THAT(bad([](DpSgdOptions& o) { o.sampling_rate = NAN; }),
              StatusIs(kInvalid));
  EXPECT_THAT(bad([](DpSgdOptions& o) { o.clip_norm = INFINITY; }),
              StatusIs(kInvalid));
  EXPECT_THAT(bad([](DpSgdOptions& o) { o.clip_norm = -1; }),
              StatusIs(kInvalid));
  EXPECT_THAT(bad([](DpSgdOptions& o) { o.learning_rate = 0; }),
              StatusIs(kInvalid));
  EXPECT_THAT(bad([](DpSgdOptions& o) { o.learning_rate = NAN; }),
              StatusIs(kInvalid));
  EXPECT_THAT(bad([](DpSgdOptions& o) { o.momentum = 1; }), StatusIs(kInvalid));
  EXPECT_THAT(bad([](DpSgdOptions& o) { o.model.l2 = -1; }),
              StatusIs(kInvalid));
  EXPECT_THAT(NewDpSgd(DpSgdOptions{}), StatusIs(kInvalid));
}

TEST(DpSgdCalibrateTest, RejectsBadTargetsAndInfo) {
  const OrthogonalProblem p = MakeOrthogonal(0);
  ASSERT_OK_AND_ASSIGN(auto alg, NewDpSgd(LeastSquaresOptions(0, 10, 0.1)));
  const PublicDatasetInfo info = InfoFor(p.data);
  const auto kInvalid = absl::StatusCode::kInvalidArgument;
  EXPECT_THAT(alg->Calibrate(info, Target(-1)), StatusIs(kInvalid));
  EXPECT_THAT(alg->Calibrate(info, Target(1, 0)), StatusIs(kInvalid));
  PrivacyTarget np = Target();
  np.non_private = true;
  EXPECT_THAT(alg->Calibrate(info, np), StatusIs(kInvalid));
  PublicDatasetInfo binary = info;
  binary.label_kind = LabelKind::kBinary;
  EXPECT_THAT(alg->Calibrate(binary, Target()), StatusIs(kInvalid));
  PublicDatasetInfo empty = info;
  empty.rows = 0;
  EXPECT_THAT(alg->Calibrate(empty, Target()), StatusIs(kInvalid));
  // Private least squares needs a label bound.
  DpSgdOptions unbounded = LeastSquaresOptions(0, 10, 0.1);
  unbounded.model.label_bound = 0;
  ASSERT_OK_AND_ASSIGN(auto alg2, NewDpSgd(unbounded));
  EXPECT_THAT(alg2->Calibrate(info, Target()),
              StatusIs(kInvalid, HasSubstr("label_bound")));
}

// Noise off (test-only switch), q = 1, a clip norm that never binds: DP-GD is
// gradient descent. Compared with an independent implementation, and with
// the closed-form error recursion e_t = (1 - lr (h + l2))^t e_0.
TEST(DpSgdTest, NoiseOffFullBatchIsGradientDescent) {
  const double l2 = 0.1, lr = 0.3;
  const int64_t steps = 40;
  const OrthogonalProblem p = MakeOrthogonal(l2);
  ASSERT_OK_AND_ASSIGN(auto alg, NewDpSgd(LeastSquaresOptions(l2, steps, lr)));
  ASSERT_OK_AND_ASSIGN(Calibration cal,
                       alg->Calibrate(InfoFor(p.data), Target()));
  EXPECT_EQ(cal.event.kind(), privacy::DpEvent::Kind::kSelfComposed);
  EXPECT_EQ(cal.event.inner().kind(),
            privacy::DpEvent::Kind::kGaussian);  // q = 1: no sampling
  SeededRandomForTesting rng(1);
  RecordingCallback cb;
  SolveContext ctx(&rng, &cb);
  SolveContextTestPeer::DisableNoise(ctx);
  ASSERT_OK_AND_ASSIGN(SolveResult r, alg->Run(p.data, cal, ctx));
  EXPECT_EQ(r.steps_done, steps);
  EXPECT_FALSE(r.cancelled);
  EXPECT_FALSE(r.budget_exhausted);
  EXPECT_EQ(r.model.loss, LossKind::kLeastSquares);
  EXPECT_EQ(r.model.dimension, 2);
  ASSERT_EQ(cb.iterates.size(), steps);

  // Independent GD: w <- w - lr (X^T (X w - y) / n + l2 w).
  const Eigen::MatrixXd& x = p.data.dense();
  const Eigen::VectorXd& y = p.data.labels();
  Eigen::VectorXd w = Eigen::VectorXd::Zero(2);
  const Eigen::VectorXd e0 = -p.w_star;
  for (int64_t t = 0; t < steps; ++t) {
    const Eigen::VectorXd g = x.transpose() * (x * w - y) / 4.0 + l2 * w;
    w -= lr * g;
    for (int j = 0; j < 2; ++j) {
      EXPECT_NEAR(cb.iterates[t][j], w[j], 1e-13) << "step " << t;
      // Known linear rate.
      const double rate = 1 - lr * (p.h[j] + l2);
      const double expected = p.w_star[j] + std::pow(rate, t + 1) * e0[j];
      EXPECT_NEAR(cb.iterates[t][j], expected, 1e-12) << "step " << t;
    }
    EXPECT_NEAR(cb.norms[t], g.norm(), 1e-12);
    EXPECT_EQ(cb.steps[t], t + 1);
    EXPECT_EQ(cb.totals[t], steps);
  }
  // Converged to the closed-form solution (rates 0.37 and 0.82 per step).
  EXPECT_NEAR(r.model.weights[0], p.w_star[0], 1e-10);
  EXPECT_NEAR(r.model.weights[1], p.w_star[1], 1e-3);
  EXPECT_EQ(r.spent, cal.event);
}

TEST(DpSgdTest, WithNoiseTheIterateIsPerturbed) {
  const OrthogonalProblem p = MakeOrthogonal(0);
  ASSERT_OK_AND_ASSIGN(auto alg, NewDpSgd(LeastSquaresOptions(0, 5, 0.1)));
  ASSERT_OK_AND_ASSIGN(Calibration cal,
                       alg->Calibrate(InfoFor(p.data), Target()));
  SeededRandomForTesting rng(2), rng2(2);
  SolveContext noisy(&rng), off(&rng2);
  SolveContextTestPeer::DisableNoise(off);
  ASSERT_OK_AND_ASSIGN(SolveResult a, alg->Run(p.data, cal, noisy));
  ASSERT_OK_AND_ASSIGN(SolveResult b, alg->Run(p.data, cal, off));
  // sigma ~ z * 1e6 / 4 per coordinate: far from the noiseless iterate.
  EXPECT_GT((a.model.weights - b.model.weights).norm(), 1.0);
}

// Every per-example gradient contributes at most C: one-row datasets with
// gradients far above and below C, noise off, q = 1 => ||g|| = min(C,
// ||grad||).
TEST(PrivateOracleTest, ClipsEveryExampleToC) {
  std::mt19937 gen(5);
  std::normal_distribution<double> normal;
  const double clip = 0.75;
  for (LossKind loss : {LossKind::kLogistic, LossKind::kSoftmax,
                        LossKind::kHinge, LossKind::kLeastSquares}) {
    ModelConfig model;
    model.loss = loss;
    model.num_classes = loss == LossKind::kSoftmax ? 3 : 2;
    model.label_bound = 10;
    const int64_t d = 4;
    ASSERT_OK_AND_ASSIGN(auto obj, Objective::Create(model, d));
    const GaussianGradientQuery query{1.0, clip, 1.0};
    for (int trial = 0; trial < 30; ++trial) {
      const double scale = std::pow(10.0, trial % 5 - 2);  // 0.01 .. 100
      Eigen::MatrixXd x(1, d);
      for (int j = 0; j < d; ++j) x(0, j) = scale * normal(gen);
      Eigen::VectorXd y(1);
      y << (loss == LossKind::kSoftmax ? 1.0 : (trial % 2 ? 1.0 : -1.0));
      const Dataset data =
          Dataset::Dense(x, y, RequiredLabelKind(loss), model.num_classes);
      Eigen::VectorXd w(obj->parameter_size());
      for (int64_t j = 0; j < w.size(); ++j) w[j] = normal(gen);
      ASSERT_OK_AND_ASSIGN(privacy::DpEvent ev,
                           GaussianGradientEvent(query, obj->parameter_size()));
      PlannedReleases budget;
      budget.Allow(ev, 1);
      SeededRandomForTesting rng(trial);
      testing::NoNoiseForTesting no_noise;
      ASSERT_OK_AND_ASSIGN(
          auto oracle,
          PrivateGradientOracle::Create(data, *obj, 1, rng, no_noise, budget));
      Eigen::VectorXd g;
      ASSERT_OK(oracle->GaussianGradient(query, w, &g));
      const Eigen::VectorXd raw = obj->ExampleGradient(data, 0, w);
      const double expected = std::min(clip, raw.norm());
      EXPECT_NEAR(g.norm(), expected, 1e-12 * (1 + expected))
          << LossName(loss) << " trial " << trial;
      EXPECT_LE(g.norm(), clip * (1 + 1e-12));
      // Same direction as the raw gradient.
      if (raw.norm() > 0) {
        EXPECT_NEAR(g.dot(raw), g.norm() * raw.norm(), 1e-9);
      }
      // The single planned release is spent.
      EXPECT_THAT(oracle->GaussianGradient(query, w, &g),
                  StatusIs(absl::StatusCode::kResourceExhausted));
    }
  }
}

// Sum of clipped gradients on a crafted dataset: rows s e_1 with y = 1,
// least squares at w = 0 => per-row gradient -s e_1, clipped to min(s, C).
TEST(PrivateOracleTest, ClippedSumKnownAnswer) {
  Eigen::MatrixXd x(4, 1);
  x << 0.1, 1, 10, 100;
  const Dataset data =
      Dataset::Dense(x, Eigen::VectorXd::Ones(4), LabelKind::kReal);
  ModelConfig model;
  model.loss = LossKind::kLeastSquares;
  model.label_bound = 5;
  ASSERT_OK_AND_ASSIGN(auto obj, Objective::Create(model, 1));
  const GaussianGradientQuery query{1.0, 1.0, 2.0};
  ASSERT_OK_AND_ASSIGN(privacy::DpEvent ev, GaussianGradientEvent(query, 1));
  PlannedReleases budget;
  budget.Allow(ev, 1);
  SeededRandomForTesting rng(3);
  testing::NoNoiseForTesting no_noise;
  // Public row count 8 (normalisation uses it, not the stored 4 rows).
  ASSERT_OK_AND_ASSIGN(auto oracle, PrivateGradientOracle::Create(
                                        data, *obj, 8, rng, no_noise, budget));
  Eigen::VectorXd g;
  ASSERT_OK(oracle->GaussianGradient(query, Eigen::VectorXd::Zero(1), &g));
  EXPECT_DOUBLE_EQ(g[0], -(0.1 + 1 + 1 + 1) / 8);
  // An unplanned mechanism is refused before touching data.
  EXPECT_THAT(
      oracle->GaussianGradient({1.0, 1.0, 3.0}, Eigen::VectorXd::Zero(1), &g),
      StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_EQ(budget.Spent(), ev);
}

// Poisson sampling: n = 10000 rows in 10 groups (row i has feature e_{i%10},
// label 1, least squares at w = 0, no noise), so -g_j * q * n counts the
// sampled rows of group j. Over K = 50 steps each group's count is
// Binomial(K * 1000, q) with q = 0.1: mean 5000, sd 67.1. We require every
// group within 5 sd and the total within 5 sd (sd 212): with a fresh seed a
// false alarm has probability <= 11 * 5.7e-7 < 1e-5.
TEST(PrivateOracleTest, PoissonSamplingRate) {
  const int64_t n = 10000, d = 10, k_steps = 50;
  const double q = 0.1;
  Eigen::MatrixXd x = Eigen::MatrixXd::Zero(n, d);
  for (int64_t i = 0; i < n; ++i) x(i, i % d) = 1;
  const Dataset data =
      Dataset::Dense(x, Eigen::VectorXd::Ones(n), LabelKind::kReal);
  ModelConfig model;
  model.loss = LossKind::kLeastSquares;
  model.label_bound = 1;
  ASSERT_OK_AND_ASSIGN(auto obj, Objective::Create(model, d));
  const GaussianGradientQuery query{q, 10.0, 1.0};
  ASSERT_OK_AND_ASSIGN(privacy::DpEvent ev, GaussianGradientEvent(query, d));
  EXPECT_EQ(ev.kind(), privacy::DpEvent::Kind::kPoissonSampled);
  EXPECT_EQ(ev.sampling_probability(), q);
  PlannedReleases budget;
  budget.Allow(ev, k_steps);
  SeededRandomForTesting rng(20240601);
  testing::NoNoiseForTesting no_noise;
  ASSERT_OK_AND_ASSIGN(auto oracle, PrivateGradientOracle::Create(
                                        data, *obj, n, rng, no_noise, budget));
  Eigen::VectorXd counts = Eigen::VectorXd::Zero(d);
  Eigen::VectorXd g;
  std::vector<double> step_totals;
  for (int64_t t = 0; t < k_steps; ++t) {
    ASSERT_OK(oracle->GaussianGradient(query, Eigen::VectorXd::Zero(d), &g));
    counts -= g * q * n;
    step_totals.push_back(-g.sum() * q * n);
  }
  const double per_group = k_steps * (n / d) * q;
  const double sd_group = std::sqrt(k_steps * (n / d) * q * (1 - q));
  for (int j = 0; j < d; ++j) {
    EXPECT_NEAR(counts[j], per_group, 5 * sd_group) << "group " << j;
  }
  EXPECT_NEAR(counts.sum(), per_group * d, 5 * std::sqrt(d) * sd_group);
  // Batches vary (not a fixed-size sample).
  EXPECT_NE(*std::min_element(step_totals.begin(), step_totals.end()),
            *std::max_element(step_totals.begin(), step_totals.end()));
  EXPECT_EQ(budget.Spent(), privacy::DpEvent::SelfComposed(k_steps, ev));
}

// A failing generator makes the run fail closed (nothing published).
TEST(DpSgdTest, RngFailureFailsClosed) {
  const OrthogonalProblem p = MakeOrthogonal(0);
  // q = 1: the noise draws fail (the sampler's own failure is tested in
  // poisson_sampler_test).
  DpSgdOptions o = LeastSquaresOptions(0, 10, 0.1);
  ASSERT_OK_AND_ASSIGN(auto alg, NewDpSgd(o));
  ASSERT_OK_AND_ASSIGN(Calibration cal,
                       alg->Calibrate(InfoFor(p.data), Target()));
  FailingRandomForTesting rng(1, 3);
  RecordingCallback cb;
  SolveContext ctx(&rng, &cb);
  EXPECT_FALSE(alg->Run(p.data, cal, ctx).ok());
  EXPECT_LE(cb.iterates.size(), 1u);  // failed step published nothing
}

// The README's DP-SGD setting on a9a (public metadata only).
DpSgdOptions A9aDpSgdOptions() {
  DpSgdOptions o;
  o.sampling_rate = 0.01;
  o.steps = 2000;
  o.clip_norm = 1;
  o.learning_rate = 0.5;
  o.model.loss = LossKind::kLogistic;
  o.model.l2 = 1e-4;
  return o;
}

PublicDatasetInfo A9aInfo() {
  PublicDatasetInfo info;
  info.rows = 32561;
  info.dimension = 123;
  return info;
}

// The gradient noise is a post-processing of the continuous Gaussian
// mechanism, so a DP-SGD job is priced exactly like dp_accounting's DP-SGD
// event (tight sampled Gaussian, MTZ 2019): the job's event is DpSgdEvent(z),
// z is what `dpopt privacy calibrate` prints (2.1919 under RDP at the
// README's setting; 3.23 with the former discrete-Gaussian pricing), and the
// PLD accountant calibrates less noise.
TEST(DpSgdCalibrateTest, PricedAsTheTightSampledGaussian) {
  ASSERT_OK_AND_ASSIGN(auto alg, NewDpSgd(A9aDpSgdOptions()));
  const PublicDatasetInfo info = A9aInfo();
  ASSERT_OK_AND_ASSIGN(Calibration rdp, alg->Calibrate(info, Target(1, 1e-6)));
  EXPECT_EQ(rdp.event, privacy::DpSgdEvent(rdp.noise_multiplier, 0.01, 2000));
  ASSERT_OK_AND_ASSIGN(double z,
                       privacy::CalibrateDpSgd(1, 1e-6, 0.01, 2000,
                                               privacy::AccountantKind::kRdp));
  EXPECT_NEAR(rdp.noise_multiplier, z, 1e-6 * z);
  EXPECT_NEAR(rdp.noise_multiplier, 2.1919, 1e-3);
  PrivacyTarget pld_target = Target(1, 1e-6);
  pld_target.accountant = privacy::AccountantKind::kPld;
  ASSERT_OK_AND_ASSIGN(Calibration pld, alg->Calibrate(info, pld_target));
  EXPECT_EQ(pld.event, privacy::DpSgdEvent(pld.noise_multiplier, 0.01, 2000));
  EXPECT_LT(pld.noise_multiplier, 0.97 * rdp.noise_multiplier);
  ASSERT_OK_AND_ASSIGN(
      privacy::EpsilonResult check,
      privacy::ComputeEpsilon(pld.event, 1e-6, privacy::AccountantKind::kPld));
  EXPECT_LE(check.epsilon, 1.0);
}

// Calibration: the event's epsilon is within the target and slightly less
// noise exceeds it. Also checks the reported quantities.
TEST(DpSgdCalibrateTest, MeetsTargetTightly) {
  ASSERT_OK_AND_ASSIGN(auto alg, NewDpSgd(A9aDpSgdOptions()));
  const PublicDatasetInfo info = A9aInfo();
  const PrivacyTarget target = Target(1.0, 1e-6);
  ASSERT_OK_AND_ASSIGN(Calibration cal, alg->Calibrate(info, target));
  ASSERT_OK_AND_ASSIGN(
      privacy::EpsilonResult eps,
      privacy::ComputeEpsilon(cal.event, 1e-6, privacy::AccountantKind::kRdp));
  EXPECT_LE(eps.epsilon, 1.0);
  ASSERT_OK_AND_ASSIGN(
      privacy::DpEvent smaller,
      GaussianGradientEvent({0.01, 1.0, cal.noise_multiplier * (1 - 1e-4)},
                            123));
  ASSERT_OK_AND_ASSIGN(
      privacy::EpsilonResult eps_smaller,
      privacy::ComputeEpsilon(privacy::DpEvent::SelfComposed(2000, smaller),
                              1e-6, privacy::AccountantKind::kRdp));
  EXPECT_GT(eps_smaller.epsilon, 1.0);
  EXPECT_EQ(cal.steps, 2000);
  EXPECT_EQ(cal.sampling_rate, 0.01);
  EXPECT_DOUBLE_EQ(cal.expected_batch_size, 325.61);
  EXPECT_EQ(cal.clip_norm, 1.0);
  EXPECT_EQ(cal.relation, privacy::Relation::kAddRemove);
  ASSERT_OK_AND_ASSIGN(noise::GaussianPlan plan,
                       noise::PlanGaussian(1.0, cal.noise_multiplier, 123));
  // On each coordinate of the clipped sum, not of the averaged gradient.
  EXPECT_DOUBLE_EQ(cal.noise_stddev, plan.sigma);
  ASSERT_OK_AND_ASSIGN(
      privacy::DpEvent step,
      GaussianGradientEvent({0.01, 1.0, cal.noise_multiplier}, 123));
  EXPECT_EQ(cal.event, privacy::DpEvent::SelfComposed(2000, step));
  EXPECT_GT(cal.noise_multiplier, 0.5);
  EXPECT_LT(cal.noise_multiplier, 5);

  // Replace-one datasets: Poisson-sampled DP-SGD is refused (no proven
  // conversion of a sampled add/remove curve); full-batch DP-GD is priced
  // with sensitivity 2C (the ledger's conversion halves z), so it needs
  // about twice the noise multiplier of the add/remove case.
  PublicDatasetInfo replace = info;
  replace.relation = privacy::Relation::kReplaceOne;
  EXPECT_THAT(alg->Calibrate(replace, target),
              StatusIs(absl::StatusCode::kFailedPrecondition));
  DpSgdOptions gd_options = A9aDpSgdOptions();
  gd_options.sampling_rate = 1.0;
  gd_options.steps = 100;
  ASSERT_OK_AND_ASSIGN(auto gd, NewDpSgd(gd_options));
  ASSERT_OK_AND_ASSIGN(Calibration add_remove, gd->Calibrate(info, target));
  ASSERT_OK_AND_ASSIGN(Calibration cal2, gd->Calibrate(replace, target));
  EXPECT_EQ(cal2.relation, privacy::Relation::kAddRemove);
  ASSERT_OK_AND_ASSIGN(
      privacy::DpEvent converted,
      privacy::ConvertToRelation(cal2.event, privacy::Relation::kAddRemove,
                                 privacy::Relation::kReplaceOne));
  ASSERT_OK_AND_ASSIGN(
      privacy::EpsilonResult eps2,
      privacy::ComputeEpsilon(converted, 1e-6, privacy::AccountantKind::kRdp));
  EXPECT_LE(eps2.epsilon, 1.0);
  EXPECT_NEAR(cal2.noise_multiplier / add_remove.noise_multiplier, 2.0, 0.01);
}

TEST(DpSgdTest, RunRejectsForeignCalibrationAndData) {
  const OrthogonalProblem p = MakeOrthogonal(0);
  ASSERT_OK_AND_ASSIGN(auto alg, NewDpSgd(LeastSquaresOptions(0, 10, 0.1)));
  ASSERT_OK_AND_ASSIGN(Calibration cal,
                       alg->Calibrate(InfoFor(p.data), Target()));
  SeededRandomForTesting rng(1);
  SolveContext ctx(&rng);
  Calibration tampered = cal;
  tampered.noise_multiplier *= 0.5;  // less noise than charged
  EXPECT_THAT(alg->Run(p.data, tampered, ctx),
              StatusIs(absl::StatusCode::kFailedPrecondition));
  tampered = cal;
  tampered.steps = 20;
  EXPECT_THAT(alg->Run(p.data, tampered, ctx),
              StatusIs(absl::StatusCode::kFailedPrecondition));
  SolveContext no_rng;
  EXPECT_THAT(alg->Run(p.data, cal, no_rng),
              StatusIs(absl::StatusCode::kFailedPrecondition));
  // Wrong dimension.
  const Dataset wide = Dataset::Dense(
      Eigen::MatrixXd::Ones(4, 3), Eigen::VectorXd::Ones(4), LabelKind::kReal);
  EXPECT_THAT(
      alg->Run(wide, cal, ctx),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("dimension")));
}

// The callback's `false` stops the loop between steps.
TEST(DpSgdTest, CallbackCancelsBetweenSteps) {
  const OrthogonalProblem p = MakeOrthogonal(0);
  ASSERT_OK_AND_ASSIGN(auto alg, NewDpSgd(LeastSquaresOptions(0, 100, 0.1)));
  ASSERT_OK_AND_ASSIGN(Calibration cal,
                       alg->Calibrate(InfoFor(p.data), Target()));
  SeededRandomForTesting rng(4);
  RecordingCallback cb(/*stop_after=*/3);
  SolveContext ctx(&rng, &cb);
  ASSERT_OK_AND_ASSIGN(SolveResult r, alg->Run(p.data, cal, ctx));
  EXPECT_TRUE(r.cancelled);
  EXPECT_EQ(r.steps_done, 3);
  EXPECT_EQ(cb.iterates.size(), 3u);
  EXPECT_EQ(r.model.weights, cb.iterates.back());
  // Spent reports the 3 releases made; the reservation stays with the ledger.
  EXPECT_EQ(r.spent, privacy::DpEvent::SelfComposed(3, cal.event.inner()));
}

// A method asking for more releases than planned stops cleanly.
class GreedyMethod : public IterativeMethod {
 public:
  explicit GreedyMethod(GaussianGradientQuery q)
      : q_(q), w_(Eigen::VectorXd::Zero(2)) {}
  absl::Status Step(int64_t, PrivateGradientOracle& oracle,
                    StepInfo* info) override {
    Eigen::VectorXd g;
    absl::Status s = oracle.GaussianGradient(q_, w_, &g);
    if (!s.ok()) return s;
    w_ -= 0.1 * g;
    return absl::OkStatus();
  }
  const Eigen::VectorXd& iterate() const override { return w_; }

 private:
  GaussianGradientQuery q_;
  Eigen::VectorXd w_;
};

TEST(SolveLoopTest, StopsCleanlyWhenBudgetIsExhausted) {
  const OrthogonalProblem p = MakeOrthogonal(0);
  ModelConfig model;
  model.loss = LossKind::kLeastSquares;
  model.label_bound = 10;
  ASSERT_OK_AND_ASSIGN(auto obj, Objective::Create(model, 2));
  const GaussianGradientQuery query{1.0, 1.0, 1.0};
  ASSERT_OK_AND_ASSIGN(privacy::DpEvent ev, GaussianGradientEvent(query, 2));
  PlannedReleases budget;
  budget.Allow(ev, 2);
  SeededRandomForTesting rng(1);
  ASSERT_OK_AND_ASSIGN(auto oracle,
                       PrivateGradientOracle::Create(p.data, *obj, 4, rng,
                                                     SecureNoise(), budget));
  GreedyMethod method(query);
  RecordingCallback cb;
  ASSERT_OK_AND_ASSIGN(SolveResult r,
                       SolveLoop::Run({5}, method, *oracle, budget, &cb));
  EXPECT_TRUE(r.budget_exhausted);
  EXPECT_FALSE(r.cancelled);
  EXPECT_EQ(r.steps_done, 2);
  EXPECT_EQ(cb.iterates.size(), 2u);
  EXPECT_EQ(r.spent, privacy::DpEvent::SelfComposed(2, ev));
  EXPECT_THAT(SolveLoop::Run({0}, method, *oracle, budget, &cb),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(UpdateRulesTest, SoftThresholdAndMomentum) {
  Eigen::VectorXd w(4);
  w << 3, -0.5, 1, -2;
  SoftThreshold(1, w);
  EXPECT_EQ(w, Eigen::Vector4d(2, 0, 0, -1));

  MomentumProxStep step({0.5, 0.9, 0.0}, 1);
  Eigen::VectorXd x = Eigen::VectorXd::Zero(1);
  const Eigen::VectorXd g = Eigen::VectorXd::Ones(1);
  step.Apply(g, &x);  // v = 1, x = -0.5
  step.Apply(g, &x);  // v = 1.9, x = -1.45
  EXPECT_DOUBLE_EQ(x[0], -1.45);
  EXPECT_THAT(MomentumProxStep::Options({0, 0, 0}).Validate(),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

// Non-private GD: public datasets only; converges to the closed form.
TEST(NonPrivateGdTest, ConvergesOnPublicLeastSquares) {
  const double l2 = 0.1;
  const OrthogonalProblem p = MakeOrthogonal(l2);
  GdOptions o;
  o.steps = 200;
  o.learning_rate = 0.3;
  o.model.loss = LossKind::kLeastSquares;
  o.model.l2 = l2;
  ASSERT_OK_AND_ASSIGN(auto alg, NewNonPrivateGd(o));
  EXPECT_THAT(alg->Calibrate(InfoFor(p.data), Target()),
              StatusIs(absl::StatusCode::kInvalidArgument));
  PrivacyTarget np;
  np.non_private = true;
  ASSERT_OK_AND_ASSIGN(Calibration cal, alg->Calibrate(InfoFor(p.data), np));
  EXPECT_EQ(cal.event.kind(), privacy::DpEvent::Kind::kNoOp);
  SeededRandomForTesting rng(1);
  SolveContext ctx(&rng);
  ASSERT_OK_AND_ASSIGN(SolveResult r, alg->Run(p.data, cal, ctx));
  EXPECT_EQ(r.steps_done, 200);
  EXPECT_NEAR(r.model.weights[0], p.w_star[0], 1e-12);
  EXPECT_NEAR(r.model.weights[1], p.w_star[1], 1e-12);
  // A DP-SGD calibration cannot drive it (and vice versa).
  ASSERT_OK_AND_ASSIGN(auto dp, NewDpSgd(LeastSquaresOptions(l2, 200, 0.3)));
  ASSERT_OK_AND_ASSIGN(Calibration dp_cal,
                       dp->Calibrate(InfoFor(p.data), Target()));
  EXPECT_THAT(alg->Run(p.data, dp_cal, ctx),
              StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_THAT(dp->Run(p.data, cal, ctx),
              StatusIs(absl::StatusCode::kFailedPrecondition));
}

}  // namespace
}  // namespace dpopt::optim
