// The six accelerated optimizers: noise-free reductions to GD / heavy ball /
// Nesterov with their known rates, exact accounting of the charged event
// (recomputed independently), relation handling, and run-time checks
// (budget conservation, determinism).
#include "core/optim/accelerated/accelerated.h"

#include <cmath>
#include <memory>
#include <random>
#include <vector>

#include "core/noise/testing/seeded_random.h"
#include "core/optim/accelerated/calibration.h"
#include "core/optim/accelerated/schedules.h"
#include "core/optim/testing/noise_off.h"
#include "core/privacy/accountant.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/common/status_matchers.h"

namespace dpopt::optim::accelerated {
namespace {

using ::dpopt::noise::testing::SeededRandomForTesting;
using ::dpopt::optim::testing::SolveContextTestPeer;
using ::dpopt::testing::StatusIs;
using ::testing::HasSubstr;

// F(w) = (1/2) w^T diag(0.5, 1) w: least squares with rows (1, 0), (-1, 0),
// (0, sqrt 2), (0, -sqrt 2) and zero labels, no regulariser. x* = 0, F* = 0,
// mu = 0.5, L = 1.
Dataset Quadratic() {
  Eigen::MatrixXd x(4, 2);
  const double b = std::sqrt(2.0);
  x << 1, 0, -1, 0, 0, b, 0, -b;
  return Dataset::Dense(x, Eigen::VectorXd::Zero(4), LabelKind::kReal);
}
const Eigen::Vector2d kHessian(0.5, 1.0);
double QuadF(const Eigen::VectorXd& w) {
  return 0.5 * (kHessian.array() * w.array().square()).sum();
}
Eigen::VectorXd QuadGrad(const Eigen::VectorXd& w) {
  return (kHessian.array() * w.array()).matrix();
}

AcceleratedOptions QuadOptions(Method method, int64_t steps) {
  AcceleratedOptions o;
  o.method = method;
  o.steps = steps;
  o.clip_norm = 1e6;  // never binds
  o.smoothness = 1;
  o.strong_convexity = 0.5;
  o.model.loss = LossKind::kLeastSquares;
  o.model.label_bound = 10;
  o.initial_point = {3.0, -2.0};
  return o;
}

PublicDatasetInfo InfoFor(
    const Dataset& data,
    privacy::Relation relation = privacy::Relation::kAddRemove) {
  PublicDatasetInfo info;
  info.rows = data.rows();
  info.dimension = data.dimension();
  info.label_kind = data.label_kind();
  info.num_classes = data.num_classes();
  info.relation = relation;
  return info;
}

PrivacyTarget PureTarget(double epsilon = 1.0) {
  PrivacyTarget t;
  t.epsilon = epsilon;
  return t;
}

class Recorder final : public IterationCallback {
 public:
  bool OnIteration(const IterationSummary& s) override {
    iterates.push_back(s.iterate);
    return true;
  }
  std::vector<Eigen::VectorXd> iterates;
};

// Runs with the noise switched off (TEST ONLY, not DP).
std::vector<Eigen::VectorXd> RunNoiseOff(const AcceleratedOptions& o,
                                         const Dataset& data) {
  absl::StatusOr<std::unique_ptr<Algorithm>> alg = NewAcceleratedAlgorithm(o);
  EXPECT_OK(alg);
  absl::StatusOr<Calibration> c =
      (*alg)->Calibrate(InfoFor(data), PureTarget());
  EXPECT_OK(c);
  SeededRandomForTesting rng(1);
  Recorder rec;
  SolveContext context(&rng, &rec);
  SolveContextTestPeer::DisableNoise(context);
  absl::StatusOr<SolveResult> r = (*alg)->Run(data, *c, context);
  EXPECT_OK(r);
  EXPECT_EQ(r->steps_done, c->steps);
  return rec.iterates;
}

// Hand-rolled noise-free recursions (Kuru et al. 2022, (3.1), (4.1), (4.7))
// on the quadratic.
std::vector<Eigen::VectorXd> Reference(const StepSchedule& s, bool nesterov,
                                       Eigen::VectorXd x) {
  std::vector<Eigen::VectorXd> out;
  Eigen::VectorXd prev = x;
  for (int64_t t = 0; t < s.size(); ++t) {
    if (s.restart[t]) prev = x;
    Eigen::VectorXd next;
    if (nesterov) {
      const Eigen::VectorXd z = x + s.beta[t] * (x - prev);
      next = z - s.alpha[t] * QuadGrad(z);
    } else {
      next = x - s.alpha[t] * QuadGrad(x) + s.beta[t] * (x - prev);
    }
    prev = x;
    x = next;
    out.push_back(x);
  }
  return out;
}

void ExpectSameTrajectory(const std::vector<Eigen::VectorXd>& got,
                          const std::vector<Eigen::VectorXd>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t t = 0; t < got.size(); ++t) {
    ASSERT_LE((got[t] - want[t]).norm(), 1e-12 * (1 + want[t].norm()))
        << "step " << t + 1;
  }
}

// (||x_{t2}|| / ||x_{t1}||)^{1/(t2 - t1)}: the asymptotic contraction rate.
double Rate(const std::vector<Eigen::VectorXd>& xs, int t1, int t2) {
  return std::pow(xs[t2 - 1].norm() / xs[t1 - 1].norm(), 1.0 / (t2 - t1));
}

TEST(NoiseOff, DpGdIsGradientDescent) {
  AcceleratedOptions o = QuadOptions(Method::kGd, 50);
  o.step_scale = 0.7;
  const auto xs = RunNoiseOff(o, Quadratic());
  ExpectSameTrajectory(xs, Reference(ConstantSchedule(50, 0.7, 0), false,
                                     Eigen::Vector2d(3, -2)));
  // Rate max |1 - alpha lambda| = 1 - 0.7 * 0.5.
  EXPECT_NEAR(Rate(xs, 20, 50), 0.65, 1e-9);
}

TEST(NoiseOff, DpHbIsPolyakHeavyBallWithItsRate) {
  // Polyak's alpha_HB = 4/(sqrt(mu)+sqrt(L))^2, beta_HB = ((sqrt k - 1)/
  // (sqrt k + 1))^2; rho = sqrt(beta_HB) = 0.171573 ((3.18) at mu = 0.5,
  // L = 1).
  AcceleratedOptions o = QuadOptions(Method::kHeavyBall, 200);
  o.learning_rate = 4 / std::pow(std::sqrt(0.5) + 1, 2);
  const double sk = std::sqrt(2.0);
  o.momentum = std::pow((sk - 1) / (sk + 1), 2);
  EXPECT_NEAR(o.learning_rate, 1.372583, 1e-6);
  EXPECT_NEAR(o.momentum, 0.029437, 1e-6);
  const auto xs = RunNoiseOff(o, Quadratic());
  ExpectSameTrajectory(
      xs, Reference(ConstantSchedule(200, o.learning_rate, o.momentum), false,
                    Eigen::Vector2d(3, -2)));
  // Double eigenvalue: ||x_t|| ~ t rho^t, so the ratio over [100, 200] is
  // rho * 2^{1/100} up to lower-order terms.
  EXPECT_NEAR(Rate(xs, 100, 200), 0.171573 * std::pow(2.0, 0.01), 2e-4);
}

TEST(NoiseOff, DpNagIsNesterovWithRateOneMinusSqrtMuOverL) {
  AcceleratedOptions o = QuadOptions(Method::kNag, 200);  // alpha = 1/L
  const auto xs = RunNoiseOff(o, Quadratic());
  const double beta = MomentumForStep(1.0, 0.5);
  ExpectSameTrajectory(xs, Reference(ConstantSchedule(200, 1.0, beta), true,
                                     Eigen::Vector2d(3, -2)));
  EXPECT_NEAR(Rate(xs, 100, 200), 0.292893 * std::pow(2.0, 0.01), 2e-4);
  // F(x_t) - F* <= (1 - sqrt(mu alpha))^t (F(x0) - F* + mu/2 ||x0 - x*||^2).
  const Eigen::Vector2d x0(3, -2);
  const double e0 = QuadF(x0) + 0.25 * x0.squaredNorm();
  for (int t = 1; t <= 200; ++t) {
    EXPECT_LE(QuadF(xs[t - 1]), std::pow(1 - std::sqrt(0.5), t) * e0) << t;
  }
}

TEST(NoiseOff, DpMasgIsMultistageNesterovWithRestarts) {
  // kappa = 2: n_1 = 1, C = 3 => stages [1], [2..13], [14..37], ...
  AcceleratedOptions o = QuadOptions(Method::kMasg, 60);
  const auto xs = RunNoiseOff(o, Quadratic());
  MasgOptions mo;
  mo.smoothness = 1;
  mo.strong_convexity = 0.5;
  ASSERT_OK_AND_ASSIGN(StepSchedule s, MasgSchedule(60, mo));
  ASSERT_TRUE(s.restart[1] && s.restart[13] && s.restart[37]);
  ExpectSameTrajectory(xs, Reference(s, true, Eigen::Vector2d(3, -2)));
  // Without the restarts the trajectory differs (the restart is real).
  StepSchedule no_restart = s;
  no_restart.restart.assign(60, false);
  const auto other = Reference(no_restart, true, Eigen::Vector2d(3, -2));
  EXPECT_GT((other[20] - xs[20]).norm(), 1e-6 * xs[20].norm());
}

TEST(NoiseOff, OptVariantsRunTFinalStepsOfTheirSchedule) {
  for (Method m : {Method::kNagOpt, Method::kMasgOpt}) {
    AcceleratedOptions o = QuadOptions(m, 300);
    ASSERT_OK_AND_ASSIGN(auto alg, NewAcceleratedAlgorithm(o));
    ASSERT_OK_AND_ASSIGN(Calibration c,
                         alg->Calibrate(InfoFor(Quadratic()), PureTarget()));
    EXPECT_GE(c.steps, 1);
    EXPECT_LE(c.steps, 300);
    const auto xs = RunNoiseOff(o, Quadratic());
    ASSERT_EQ(static_cast<int64_t>(xs.size()), c.steps);
    ASSERT_OK_AND_ASSIGN(StepSchedule s, MakeSchedule(o, 0.5, c.steps));
    ExpectSameTrajectory(xs, Reference(s, true, Eigen::Vector2d(3, -2)));
  }
}

// ---- Accounting: the charged event is exactly what the job spends. ----

PublicDatasetInfo ReferenceInfo(
    privacy::Relation relation = privacy::Relation::kAddRemove) {
  PublicDatasetInfo info;  // paper Sec. 5: n = 1e5, d = 20, logistic
  info.rows = 100000;
  info.dimension = 20;
  info.relation = relation;
  return info;
}

AcceleratedOptions ReferenceOptions(Method m, int64_t steps, int64_t batch) {
  AcceleratedOptions o;
  o.method = m;
  o.steps = steps;
  o.batch_size = batch;
  o.clip_norm = 40;  // S1 of the paper, as an L1 clip under add/remove
  o.smoothness = 5.10434;
  o.strong_convexity = 0.02;
  o.model.loss = LossKind::kLogistic;
  o.model.l2 = 0.02;  // lambda ||x||^2 with lambda = 0.01
  o.initial_point.assign(20, 10.0);
  return o;
}

struct AccountingCase {
  Method method;
  int64_t steps;
  int64_t batch;
  int64_t expected_steps;
};

class LaplaceAccounting : public ::testing::TestWithParam<AccountingCase> {};

TEST_P(LaplaceAccounting, EventSumsToEpsilonAndMatchesPaperNoise) {
  const AccountingCase k = GetParam();
  const double eps = 1.0;
  ASSERT_OK_AND_ASSIGN(auto alg, NewAcceleratedAlgorithm(ReferenceOptions(
                                     k.method, k.steps, k.batch)));
  ASSERT_OK_AND_ASSIGN(Calibration c,
                       alg->Calibrate(ReferenceInfo(), PureTarget(eps)));
  EXPECT_EQ(c.steps, k.expected_steps);
  EXPECT_EQ(c.relation, privacy::Relation::kAddRemove);
  const double n = 1e5, m = static_cast<double>(k.batch);
  const double q = m / n;
  EXPECT_DOUBLE_EQ(c.sampling_rate, q);
  // Independent recomputation from the event tree: per step,
  // PoissonSampled(q, DiscreteLaplace(b)) costs log(1 + q (e^{1/b} - 1)).
  ASSERT_OK_AND_ASSIGN(std::vector<privacy::DpEvent> steps,
                       FlattenStepEvents(c.event));
  ASSERT_EQ(static_cast<int64_t>(steps.size()), c.steps);
  double total = 0;
  std::vector<double> per_step;
  for (const privacy::DpEvent& e : steps) {
    ASSERT_EQ(e.kind(), privacy::DpEvent::Kind::kPoissonSampled);
    ASSERT_EQ(e.sampling_probability(), q);
    ASSERT_EQ(e.inner().kind(), privacy::DpEvent::Kind::kDiscreteLaplace);
    const double b = e.inner().noise_multiplier();
    const double eps_t = std::log(1 + q * (std::exp(1 / b) - 1));
    per_step.push_back(eps_t);
    total += eps_t;
    // Noise scale on the averaged gradient (before grid rounding): b C / m
    // equals the paper's S1 / (m ln(1 + (n/m)(e^{eps_t} - 1))), S1 = 40.
    EXPECT_NEAR(b * 40 / m,
                40 / (m * std::log(1 + (n / m) * std::expm1(eps_t))),
                1e-12 * b * 40 / m);
  }
  EXPECT_NEAR(total, eps, 1e-12 * eps);
  if (!IsNoiseDividing(k.method)) {
    // The accountant agrees (its alpha = inf order is basic composition).
    // (For the -opt events, hundreds of distinct sampled events, the RDP
    // curve is slow to compute; Run.SpendsExactly... covers them.)
    ASSERT_OK_AND_ASSIGN(
        privacy::EpsilonResult acc,
        privacy::ComputeEpsilon(c.event, 0.0, privacy::AccountantKind::kRdp));
    EXPECT_NEAR(acc.epsilon, eps, 1e-12);
    for (double e : per_step) EXPECT_NEAR(e, eps / k.steps, 1e-15);
    // Uniform split (Prop. 3.1, (3.4)-(3.5)): b for (m, T).
    const double b_avg = steps[0].inner().noise_multiplier() * 40 / m;
    EXPECT_NEAR(b_avg,
                40 / (m * std::log1p((n / m) * std::expm1(eps / k.steps))),
                1e-15);
  } else {
    // Budget grows along the run within a stage (b_t decreases).
    EXPECT_GT(per_step.back(), per_step.front());
  }
}

INSTANTIATE_TEST_SUITE_P(
    Reference, LaplaceAccounting,
    ::testing::Values(AccountingCase{Method::kGd, 100, 1000, 100},
                      AccountingCase{Method::kHeavyBall, 1000, 1000, 1000},
                      AccountingCase{Method::kNag, 200, 1000, 200},
                      AccountingCase{Method::kNagOpt, 1000, 1000, 136},
                      AccountingCase{Method::kMasg, 500, 1000, 500},
                      AccountingCase{Method::kMasgOpt, 1000, 1000, 89}));

TEST(LaplaceAccounting, FullBatchAddRemoveHasNoSampling) {
  ASSERT_OK_AND_ASSIGN(auto alg, NewAcceleratedAlgorithm(ReferenceOptions(
                                     Method::kNagOpt, 1000, 0)));
  ASSERT_OK_AND_ASSIGN(Calibration c,
                       alg->Calibrate(ReferenceInfo(), PureTarget(1.0)));
  EXPECT_EQ(c.steps, 136);  // C = 40 under add/remove plays S1 = 40
  ASSERT_OK_AND_ASSIGN(auto steps, FlattenStepEvents(c.event));
  double total = 0;
  for (const auto& e : steps) {
    ASSERT_EQ(e.kind(), privacy::DpEvent::Kind::kDiscreteLaplace);
    total += 1 / e.noise_multiplier();
  }
  EXPECT_NEAR(total, 1.0, 1e-12);
  ASSERT_OK_AND_ASSIGN(
      privacy::EpsilonResult acc,
      privacy::ComputeEpsilon(c.event, 0.0, privacy::AccountantKind::kRdp));
  EXPECT_NEAR(acc.epsilon, 1.0, 1e-12);
}

TEST(ReplaceOne, FullBatchChargesPaperSensitivityTwoC) {
  // Replace-one, m = n: S1 = 2C, event DiscreteLaplace(1/eps_t) relative to
  // the replace-one sensitivity; the oracle adds noise of scale 2C/eps_t.
  AcceleratedOptions o = ReferenceOptions(Method::kNag, 100, 0);
  o.clip_norm = 20;  // C = 20 => S1 = 40 as in the paper
  ASSERT_OK_AND_ASSIGN(auto alg, NewAcceleratedAlgorithm(o));
  ASSERT_OK_AND_ASSIGN(
      Calibration c,
      alg->Calibrate(ReferenceInfo(privacy::Relation::kReplaceOne),
                     PureTarget(1.0)));
  EXPECT_EQ(c.relation, privacy::Relation::kReplaceOne);
  ASSERT_OK_AND_ASSIGN(auto steps, FlattenStepEvents(c.event));
  ASSERT_EQ(steps.size(), 100u);
  EXPECT_EQ(steps[0], privacy::DpEvent::DiscreteLaplace(100.0));
  // Oracle multiplier 2/eps_t of C: scale on the average 2 C/(n eps_t) =
  // S1/(n eps_t) = 0.04 ((3.4) with m = n = 1e5, T = 100).
  EXPECT_DOUBLE_EQ(c.noise_multiplier, 200.0);
  EXPECT_NEAR(c.noise_multiplier * 20 / 1e5, 0.04, 1e-15);
  ASSERT_OK_AND_ASSIGN(
      privacy::EpsilonResult acc,
      privacy::ComputeEpsilon(c.event, 0.0, privacy::AccountantKind::kRdp));
  EXPECT_NEAR(acc.epsilon, 1.0, 1e-12);
}

TEST(ReplaceOne, MinibatchesAreRefused) {
  ASSERT_OK_AND_ASSIGN(auto alg, NewAcceleratedAlgorithm(
                                     ReferenceOptions(Method::kGd, 100, 1000)));
  EXPECT_THAT(
      alg->Calibrate(ReferenceInfo(privacy::Relation::kReplaceOne),
                     PureTarget()),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("add/remove")));
}

// The Gaussian extension on the reference problem, C = 5, target (1, 1e-6).
AcceleratedOptions GaussianOptions(Method m, int64_t batch) {
  AcceleratedOptions o = ReferenceOptions(m, 200, batch);
  o.noise = NoiseFamily::kGaussian;
  o.clip_norm = 5;
  return o;
}

PrivacyTarget GaussianTarget() {
  PrivacyTarget t = PureTarget(1.0);
  t.delta = 1e-6;
  return t;
}

TEST(Gaussian, UniformAndOptMeetTheTargetTightly) {
  for (Method m : {Method::kNag, Method::kNagOpt, Method::kMasgOpt}) {
    ASSERT_OK_AND_ASSIGN(auto alg,
                         NewAcceleratedAlgorithm(GaussianOptions(m, 0)));
    const PrivacyTarget t = GaussianTarget();
    ASSERT_OK_AND_ASSIGN(Calibration c, alg->Calibrate(ReferenceInfo(), t));
    ASSERT_OK_AND_ASSIGN(
        privacy::EpsilonResult acc,
        privacy::ComputeEpsilon(c.event, 1e-6, privacy::AccountantKind::kRdp));
    EXPECT_LE(acc.epsilon, 1.0) << MethodName(m);
    EXPECT_GE(acc.epsilon, 0.999) << MethodName(m);
    ASSERT_OK_AND_ASSIGN(auto steps, FlattenStepEvents(c.event));
    ASSERT_EQ(static_cast<int64_t>(steps.size()), c.steps);
    if (m == Method::kNagOpt) {
      // More budget later: the noise multiplier decreases along the run.
      EXPECT_GT(steps.front().noise_multiplier(),
                steps.back().noise_multiplier());
    }
  }
}

// The Gaussian extension's noise is a post-processing of the continuous
// Gaussian (exact rounded sampler), so its releases are Gaussian events that
// the PLD accountant prices: a PLD target calibrates, meets the target under
// PLD, and needs no more noise than under RDP (with a Poisson-sampled batch).
TEST(Gaussian, PldAccountantCalibratesAtMostTheRdpNoise) {
  ASSERT_OK_AND_ASSIGN(
      auto alg, NewAcceleratedAlgorithm(GaussianOptions(Method::kNag, 100)));
  PrivacyTarget t = GaussianTarget();
  ASSERT_OK_AND_ASSIGN(Calibration rdp, alg->Calibrate(ReferenceInfo(), t));
  t.accountant = privacy::AccountantKind::kPld;
  ASSERT_OK_AND_ASSIGN(Calibration pld, alg->Calibrate(ReferenceInfo(), t));
  ASSERT_OK_AND_ASSIGN(auto steps, FlattenStepEvents(pld.event));
  ASSERT_FALSE(steps.empty());
  ASSERT_EQ(steps.front().kind(), privacy::DpEvent::Kind::kPoissonSampled);
  EXPECT_EQ(steps.front().inner().kind(), privacy::DpEvent::Kind::kGaussian);
  ASSERT_OK_AND_ASSIGN(
      privacy::EpsilonResult acc,
      privacy::ComputeEpsilon(pld.event, 1e-6, privacy::AccountantKind::kPld));
  EXPECT_LE(acc.epsilon, 1.0);
  EXPECT_LT(pld.noise_multiplier, rdp.noise_multiplier);
}

// ---- Run-time behaviour with real (seeded) noise. ----

Dataset SmallLogistic(int n = 200, int d = 5) {
  std::mt19937_64 gen(11);
  std::uniform_real_distribution<double> u(0, 1);
  Eigen::MatrixXd x(n, d);
  Eigen::VectorXd y(n);
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < d; ++j) x(i, j) = u(gen);
    y[i] = x.row(i).sum() > d / 2.0 ? 1 : -1;
  }
  return Dataset::Dense(x, y, LabelKind::kBinary);
}

AcceleratedOptions SmallOptions(Method m, int64_t batch) {
  AcceleratedOptions o;
  o.method = m;
  o.steps = 60;
  o.batch_size = batch;
  o.clip_norm = 5;
  o.smoothness = 2;
  o.model.loss = LossKind::kLogistic;
  o.model.l2 = 0.1;  // mu defaults to l2
  return o;
}

std::vector<Eigen::VectorXd> RunSeeded(const Algorithm& alg,
                                       const Calibration& c,
                                       const Dataset& data, uint64_t seed,
                                       SolveResult* result = nullptr) {
  SeededRandomForTesting rng(seed);
  Recorder rec;
  SolveContext context(&rng, &rec);
  absl::StatusOr<SolveResult> r = alg.Run(data, c, context);
  EXPECT_OK(r);
  if (result != nullptr && r.ok()) *result = *r;
  return rec.iterates;
}

TEST(Run, SpendsExactlyTheCalibrationAndIsDeterministicPerSeed) {
  const Dataset data = SmallLogistic();
  for (Method m : {Method::kGd, Method::kHeavyBall, Method::kNag,
                   Method::kNagOpt, Method::kMasg, Method::kMasgOpt}) {
    for (int64_t batch : {int64_t{0}, int64_t{20}}) {
      ASSERT_OK_AND_ASSIGN(auto alg,
                           NewAcceleratedAlgorithm(SmallOptions(m, batch)));
      ASSERT_OK_AND_ASSIGN(Calibration c,
                           alg->Calibrate(InfoFor(data), PureTarget(0.5)));
      SolveResult r1;
      const auto a = RunSeeded(*alg, c, data, 5, &r1);
      const auto b = RunSeeded(*alg, c, data, 5);
      const auto other = RunSeeded(*alg, c, data, 6);
      ASSERT_EQ(static_cast<int64_t>(a.size()), c.steps);
      EXPECT_EQ(r1.steps_done, c.steps);
      for (size_t t = 0; t < a.size(); ++t) ASSERT_EQ(a[t], b[t]);
      EXPECT_NE(a.back(), other.back());
      ASSERT_OK_AND_ASSIGN(privacy::EpsilonResult spent,
                           privacy::ComputeEpsilon(
                               r1.spent, 0.0, privacy::AccountantKind::kRdp));
      EXPECT_NEAR(spent.epsilon, 0.5, 1e-12) << MethodName(m);
    }
  }
}

TEST(Run, RefusesACalibrationItDidNotMake) {
  const Dataset data = SmallLogistic();
  ASSERT_OK_AND_ASSIGN(
      auto alg, NewAcceleratedAlgorithm(SmallOptions(Method::kNagOpt, 0)));
  ASSERT_OK_AND_ASSIGN(Calibration c,
                       alg->Calibrate(InfoFor(data), PureTarget(0.5)));
  SeededRandomForTesting rng(1);
  SolveContext context(&rng);
  {
    Calibration bad = c;  // an event the oracle's releases do not match
    ASSERT_OK_AND_ASSIGN(auto steps, FlattenStepEvents(c.event));
    steps[0] = privacy::DpEvent::PoissonSampled(0.5, steps[0]);
    bad.event = privacy::DpEvent::Composed(steps);
    EXPECT_THAT(alg->Run(data, bad, context),
                StatusIs(absl::StatusCode::kFailedPrecondition));
  }
  {
    Calibration bad = c;
    bad.steps = c.steps + 1;
    EXPECT_THAT(alg->Run(data, bad, context),
                StatusIs(absl::StatusCode::kFailedPrecondition));
  }
  {
    Calibration bad = c;
    bad.clip_norm = 2 * c.clip_norm;
    EXPECT_THAT(alg->Run(data, bad, context),
                StatusIs(absl::StatusCode::kFailedPrecondition));
  }
}

TEST(Options, RejectsWhatDoesNotApply) {
  auto invalid = [](AcceleratedOptions o) {
    EXPECT_THAT(NewAcceleratedAlgorithm(o),
                StatusIs(absl::StatusCode::kInvalidArgument));
  };
  AcceleratedOptions o = SmallOptions(Method::kGd, 0);
  o.momentum = 0.5;  // DP-GD has no momentum
  invalid(o);
  o = SmallOptions(Method::kMasg, 0);
  o.learning_rate = 0.1;  // MASG steps are c / (2^{2k} L)
  invalid(o);
  o = SmallOptions(Method::kMasg, 0);
  o.step_scale = 1.5;  // Thm 4.3 needs c <= 1
  invalid(o);
  o = SmallOptions(Method::kNag, 0);
  o.model.l1 = 0.1;  // no proximal step
  invalid(o);
  o = SmallOptions(Method::kNag, 0);
  o.clip_norm = std::nan("");
  invalid(o);

  const Dataset data = SmallLogistic();
  o = SmallOptions(Method::kNag, 500);  // m > n
  ASSERT_OK_AND_ASSIGN(auto alg, NewAcceleratedAlgorithm(o));
  EXPECT_THAT(alg->Calibrate(InfoFor(data), PureTarget()),
              StatusIs(absl::StatusCode::kInvalidArgument));
  o = SmallOptions(Method::kNag, 0);
  o.initial_point = {1, 2};  // wrong size
  ASSERT_OK_AND_ASSIGN(alg, NewAcceleratedAlgorithm(o));
  EXPECT_THAT(alg->Calibrate(InfoFor(data), PureTarget()),
              StatusIs(absl::StatusCode::kInvalidArgument));
  o = SmallOptions(Method::kNag, 0);
  ASSERT_OK_AND_ASSIGN(alg, NewAcceleratedAlgorithm(o));
  PrivacyTarget pld = PureTarget();
  pld.accountant = privacy::AccountantKind::kPld;
  EXPECT_THAT(alg->Calibrate(InfoFor(data), pld),
              StatusIs(absl::StatusCode::kInvalidArgument));
  o.noise = NoiseFamily::kGaussian;  // needs delta > 0
  ASSERT_OK_AND_ASSIGN(alg, NewAcceleratedAlgorithm(o));
  EXPECT_THAT(alg->Calibrate(InfoFor(data), PureTarget()),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace dpopt::optim::accelerated
