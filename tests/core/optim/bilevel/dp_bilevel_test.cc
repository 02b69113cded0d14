// dp_bilevel (Kornowski 2024, Algorithms 1 and 3): the non-private
// reduction, charges, the output rule, mini-batch consistency,
// reproducibility, release hygiene, the non-private limit, totality on
// extreme rows.
#include "core/optim/bilevel/dp_bilevel.h"

#include <cmath>
#include <limits>
#include <random>
#include <set>
#include <string>

#include "core/common/status_macros.h"
#include "core/noise/testing/seeded_random.h"
#include "core/optim/testing/noise_off.h"
#include "core/privacy/accountant.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/common/status_matchers.h"
#include "tests/core/optim/bilevel/test_problems.h"

namespace dpopt::optim::bilevel {
namespace {

using ::dpopt::noise::testing::SeededRandomForTesting;
using ::dpopt::optim::testing::SolveContextTestPeer;
using ::dpopt::testing::StatusIs;

PrivacyTarget Private(double epsilon = 1, double delta = 1e-6) {
  PrivacyTarget t;
  t.epsilon = epsilon;
  t.delta = delta;
  return t;
}

PrivacyTarget NonPrivate() {
  PrivacyTarget t;
  t.non_private = true;
  return t;
}

PublicDatasetInfo Info(const Dataset& data, privacy::Relation relation =
                                                privacy::Relation::kAddRemove) {
  PublicDatasetInfo info;
  info.rows = data.rows();
  info.dimension = data.dimension();
  info.label_kind = LabelKind::kReal;
  info.relation = relation;
  return info;
}

struct JobRun {
  Calibration calibration;
  SolveResult result;
  BilevelTrace trace;
};

absl::StatusOr<JobRun> RunJob(
    const DpBilevelOptions& o, const Dataset& data, const PrivacyTarget& target,
    uint64_t seed, bool noise_off = false,
    privacy::Relation relation = privacy::Relation::kAddRemove) {
  JobRun run;
  ASSIGN_OR_RETURN(auto algorithm, NewDpBilevel(o));
  ASSIGN_OR_RETURN(run.calibration,
                   algorithm->Calibrate(Info(data, relation), target));
  SeededRandomForTesting rng(seed);
  SolveContext context(&rng);
  if (noise_off) SolveContextTestPeer::DisableNoise(context);
  ASSIGN_OR_RETURN(run.result,
                   RunDpBilevel(o, data, run.calibration, context, &run.trace));
  return run;
}

// A public B (dy x dx) with spectral norm 0.9.
std::vector<double> RandomB(int64_t dy, int64_t dx, uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::normal_distribution<double> normal(0, 1);
  Eigen::MatrixXd b(dy, dx);
  for (int64_t j = 0; j < dy; ++j) {
    for (int64_t k = 0; k < dx; ++k) b(j, k) = normal(gen);
  }
  b *= 0.9 / Eigen::JacobiSVD<Eigen::MatrixXd>(b).singularValues()(0);
  std::vector<double> out;
  for (int64_t j = 0; j < dy; ++j) {
    for (int64_t k = 0; k < dx; ++k) out.push_back(b(j, k));
  }
  return out;
}

Eigen::MatrixXd ToMatrix(const std::vector<double>& v, int64_t dy, int64_t dx) {
  Eigen::MatrixXd b(dy, dx);
  for (int64_t j = 0; j < dy; ++j) {
    for (int64_t k = 0; k < dx; ++k) b(j, k) = v[j * dx + k];
  }
  return b;
}

TEST(DpBilevelTest, NaiveModeIsProjectedGdOnThePenaltyFunctionOnFamilyQ) {
  // On family Q: x_{t+1} = x_t - eta grad L*_lambda(x_t), with
  // grad L*_lambda(x) = rho_x x + (lambda/(1+lambda)) B^T (B x + u - v).
  const int64_t dy = 3, dx = 2, n = 300;
  const Dataset data = testing::QuadraticData(n, dy, 21);
  DpBilevelOptions o;
  o.problem.outer_dimension = dx;
  o.problem.b_matrix = RandomB(dy, dx, 5);
  o.problem.rho_x = 0.2;
  o.penalty = 20;
  o.outer_step = 1.0;
  o.outer_iterations = 150;
  o.inner_radius = 50;
  o.initial_outer = {1.0, -2.0};
  o.naive = true;
  ASSERT_OK_AND_ASSIGN(JobRun run, RunJob(o, data, NonPrivate(), 1));
  EXPECT_EQ(run.calibration.event, privacy::DpEvent::NoOp());
  const Eigen::MatrixXd b = ToMatrix(o.problem.b_matrix, dy, dx);
  const Eigen::VectorXd u = testing::ColumnMean(data, 0, dy);
  const Eigen::VectorXd v = testing::ColumnMean(data, dy, dy);
  const double lam = 20;
  auto grad_penalty = [&](const Eigen::VectorXd& x) {
    return Eigen::VectorXd(0.2 * x +
                           (lam / (1 + lam)) * b.transpose() * (b * x + u - v));
  };
  Eigen::VectorXd x = Eigen::Vector2d(1.0, -2.0);
  ASSERT_EQ(run.trace.x.size(), 151u);
  for (int t = 0; t < 150; ++t) {
    EXPECT_NEAR((run.trace.x[t] - x).norm(), 0, 1e-10) << t;
    x -= 1.0 * grad_penalty(x);
  }
  // Converges to the stationary point of L*_lambda, which is
  // O(1/lambda)-stationary for F: grad F - grad L* = B^T(Bx + u - v)/(1+lam).
  const Eigen::VectorXd x_out = run.result.model.weights;
  EXPECT_LT(grad_penalty(x_out).norm(), 1e-8);
  const Eigen::VectorXd grad_f =
      0.2 * x_out + b.transpose() * (b * x_out + u - v);
  EXPECT_LE(grad_f.norm(),
            (b.transpose() * (b * x_out + u - v)).norm() / (1 + lam) + 1e-8);
  EXPECT_GT(grad_f.norm(), 0);
}

TEST(DpBilevelTest, NaiveModeOnExample31ConvergesToMinusTheMean) {
  // On Example 3.1: x_{t+1} = x_t - eta (lambda/(1+lambda)) (x_t + xi_bar).
  const int64_t n = 500;
  const Dataset data = testing::LeakData(n, Eigen::Vector2d(1, 0), 3);
  const Eigen::VectorXd xi_bar = testing::ColumnMean(data, 0, 2);
  DpBilevelOptions o;
  o.problem.kind = ProblemKind::kLeakExample;
  o.penalty = 9;
  o.outer_step = 0.5;
  o.outer_iterations = 80;
  o.naive = true;
  ASSERT_OK_AND_ASSIGN(JobRun run, RunJob(o, data, NonPrivate(), 1));
  Eigen::VectorXd x = Eigen::VectorXd::Zero(2);
  for (int t = 0; t < 80; ++t) {
    EXPECT_NEAR((run.trace.x[t] - x).norm(), 0, 1e-12);
    x -= 0.5 * (9.0 / 10) * (x + xi_bar);
  }
  EXPECT_NEAR((run.trace.x.back() + xi_bar).norm(), 0, 1e-12);
}

TEST(DpBilevelTest, NoiseOffDpModeIsThePenaltyMethodWithPracticalSolves) {
  // Noise off and clip norms that never bind: Algorithm 1 with the
  // practical inner solver approximates the exact penalty method (the
  // practical solver's own error only).
  const int64_t dy = 2, n = 400;
  const Dataset data = testing::QuadraticData(n, dy, 8);
  DpBilevelOptions o;
  o.penalty = 10;
  o.outer_step = 0.5;
  o.outer_iterations = 15;
  o.inner_radius = 20;
  o.clip_gy = 100;
  o.clip_fy = 100;
  o.inner.steps = 80;
  ASSERT_OK_AND_ASSIGN(JobRun dp, RunJob(o, data, Private(), 1, true));
  DpBilevelOptions naive = o;
  naive.naive = true;
  naive.inner.steps = 0;
  naive.inner.mode = InnerMode::kPractical;
  ASSERT_OK_AND_ASSIGN(JobRun exact, RunJob(naive, data, NonPrivate(), 1));
  for (int t = 0; t <= 15; ++t) {
    EXPECT_NEAR((dp.trace.x[t] - exact.trace.x[t]).norm(), 0, 1e-9) << t;
  }
}

TEST(DpBilevelTest, ChargesExactlyThePlannedReleases) {
  const Dataset data = testing::QuadraticData(1000, 2, 4);
  DpBilevelOptions o;
  o.penalty = 10;
  o.outer_step = 0.2;
  o.outer_iterations = 7;
  ASSERT_OK_AND_ASSIGN(JobRun run, RunJob(o, data, Private(1, 1e-6), 2));
  ASSERT_OK_AND_ASSIGN(
      BilevelPlan plan,
      MakeBilevelPlan(o, 1000, 4, privacy::Relation::kAddRemove,
                      Private(1, 1e-6)));
  // Three mechanisms per outer iteration: K1 + K2 + 1 releases.
  EXPECT_EQ(plan.mechanisms[0].releases, 7 * plan.plan1.steps);
  EXPECT_EQ(plan.mechanisms[1].releases, 7 * plan.plan2.steps);
  EXPECT_EQ(plan.mechanisms[2].releases, 7);
  for (auto kind : {privacy::AccountantKind::kRdp}) {
    ASSERT_OK_AND_ASSIGN(auto spent,
                         privacy::ComputeEpsilon(run.result.spent, 1e-6, kind));
    ASSERT_OK_AND_ASSIGN(auto planned, privacy::ComputeEpsilon(
                                           run.calibration.event, 1e-6, kind));
    EXPECT_NEAR(spent.epsilon, planned.epsilon, 1e-9);
    EXPECT_LE(planned.epsilon, 1.0);
    EXPECT_GT(planned.epsilon, 0.99);
  }
  // A calibration for other parameters is refused before any release.
  DpBilevelOptions other = o;
  other.outer_iterations = 8;
  SeededRandomForTesting rng(1);
  SolveContext context(&rng);
  EXPECT_THAT(RunDpBilevel(other, data, run.calibration, context, nullptr),
              StatusIs(absl::StatusCode::kFailedPrecondition));
}

TEST(DpBilevelTest, OutputRuleTakesThePointBeforeTheSmallestMove) {
  std::vector<Eigen::VectorXd> x = {
      Eigen::Vector2d(0, 0), Eigen::Vector2d(1, 0), Eigen::Vector2d(1, 0.5),
      Eigen::Vector2d(1.5, 0.5), Eigen::Vector2d(1.5, 1.0)};
  // Moves: 1, 0.5, 0.5, 0.5 -> the first of the ties, t = 1.
  EXPECT_EQ(OutputIndex(x), 1);
  x.push_back(Eigen::Vector2d(1.5, 1.1));
  EXPECT_EQ(OutputIndex(x), 4);
  // In a run: x_out = x_{t_out}, not x_{t_out + 1}.
  const Dataset data = testing::QuadraticData(500, 2, 9);
  DpBilevelOptions o;
  o.penalty = 10;
  o.outer_step = 0.3;
  o.outer_iterations = 12;
  ASSERT_OK_AND_ASSIGN(JobRun run, RunJob(o, data, Private(), 3));
  const int64_t t_out = OutputIndex(run.trace.x);
  EXPECT_EQ(run.trace.t_out, t_out);
  EXPECT_EQ(run.result.model.weights, run.trace.x[t_out]);
}

TEST(DpBilevelTest, FixedSeedReproducesAndQOneMinibatchIsFullBatch) {
  // Reproducibility, and mini-batch with b = n (q = 1: every row, the same
  // unsampled events, the same noise) equals full batch.
  const Dataset data = testing::QuadraticData(300, 3, 10);
  DpBilevelOptions o;
  o.penalty = 10;
  o.outer_step = 0.3;
  o.outer_iterations = 5;
  ASSERT_OK_AND_ASSIGN(JobRun a, RunJob(o, data, Private(), 42));
  ASSERT_OK_AND_ASSIGN(JobRun b, RunJob(o, data, Private(), 42));
  ASSERT_OK_AND_ASSIGN(JobRun c, RunJob(o, data, Private(), 43));
  for (size_t t = 0; t < a.trace.x.size(); ++t) {
    EXPECT_EQ(a.trace.x[t], b.trace.x[t]);
  }
  EXPECT_NE(a.trace.x.back(), c.trace.x.back());
  DpBilevelOptions mb = o;
  mb.inner_sampling_rate = 1.0;
  mb.outer_sampling_rate = 1.0;
  ASSERT_OK_AND_ASSIGN(JobRun m, RunJob(mb, data, Private(), 42));
  EXPECT_EQ(m.calibration.event, a.calibration.event);
  for (size_t t = 0; t < a.trace.x.size(); ++t) {
    EXPECT_EQ(a.trace.x[t], m.trace.x[t]);
  }
}

TEST(DpBilevelTest, MinibatchChargesPoissonSampledGaussians) {
  const Dataset data = testing::QuadraticData(2000, 2, 12);
  DpBilevelOptions o;
  o.penalty = 10;
  o.outer_step = 0.3;
  o.outer_iterations = 5;
  o.inner_sampling_rate = 0.1;
  o.outer_sampling_rate = 0.2;
  ASSERT_OK_AND_ASSIGN(auto algorithm, NewDpBilevel(o));
  EXPECT_EQ(algorithm->name(), "dp_bilevel_minibatch");
  ASSERT_OK_AND_ASSIGN(JobRun run, RunJob(o, data, Private(), 5));
  const auto& events = run.calibration.event.events();
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[0].inner().kind(), privacy::DpEvent::Kind::kPoissonSampled);
  EXPECT_DOUBLE_EQ(events[0].inner().sampling_probability(), 0.1);
  EXPECT_DOUBLE_EQ(events[2].inner().sampling_probability(), 0.2);
  EXPECT_TRUE(run.result.model.weights.allFinite());
  // Amplification: less noise than the full-batch job at the same target.
  DpBilevelOptions full = o;
  full.inner_sampling_rate = 1;
  full.outer_sampling_rate = 1;
  ASSERT_OK_AND_ASSIGN(auto full_alg, NewDpBilevel(full));
  ASSERT_OK_AND_ASSIGN(Calibration fc,
                       full_alg->Calibrate(Info(data), Private()));
  EXPECT_LT(run.calibration.noise_multiplier, fc.noise_multiplier);
}

TEST(DpBilevelTest, ReleasesOnlyTheDocumentedOutputs) {
  const Dataset data = testing::QuadraticData(200, 2, 13);
  DpBilevelOptions o;
  o.penalty = 10;
  o.outer_iterations = 4;
  ASSERT_OK_AND_ASSIGN(JobRun run, RunJob(o, data, Private(), 6));
  const std::set<std::string> allowed = {
      "x_out",   "t_out",    "outer_iterates", "outer_gradients",
      "y_inner", "y_lambda", "penalty",        "outer_step"};
  std::set<std::string> names;
  for (const auto& r : run.result.released) {
    EXPECT_TRUE(allowed.count(r.name)) << r.name;
    names.insert(r.name);
    for (double v : r.values) EXPECT_TRUE(std::isfinite(v));
  }
  EXPECT_EQ(names, allowed);
  for (const auto& r : run.result.released) {
    if (r.name == "outer_iterates") {
      EXPECT_EQ(r.values.size(), 5u * 2);
    }
    if (r.name == "outer_gradients") {
      EXPECT_EQ(r.values.size(), 4u * 2);
    }
  }
}

TEST(DpBilevelTest, ExtremeFiniteRowsGiveAFiniteModel) {
  const double big = std::numeric_limits<double>::max();
  const double tiny = std::numeric_limits<double>::denorm_min();
  Eigen::MatrixXd x(6, 4);
  x << big, -big, big, big,          //
      tiny, -0.0, tiny, 0.0,         //
      1e308, 1e308, -1e308, -1e308,  //
      -0.0, -0.0, -0.0, -0.0,        //
      1e-308, 5, -7, 1e300,          //
      0.1, 0.2, 0.3, 0.4;
  const Dataset data =
      Dataset::Dense(x, Eigen::VectorXd::Zero(6), LabelKind::kReal);
  for (bool nonconvex : {false, true}) {
    for (double q : {1.0, 0.5}) {
      DpBilevelOptions o;
      o.problem.kind = nonconvex ? ProblemKind::kQuadraticNonconvex
                                 : ProblemKind::kQuadratic;
      o.penalty = 10;
      o.outer_iterations = 3;
      o.inner_sampling_rate = q;
      ASSERT_OK_AND_ASSIGN(JobRun run, RunJob(o, data, Private(), 7));
      EXPECT_TRUE(run.result.model.weights.allFinite());
      for (const auto& r : run.result.released) {
        for (double v : r.values) EXPECT_TRUE(std::isfinite(v)) << r.name;
      }
    }
  }
  DpBilevelOptions leak;
  leak.problem.kind = ProblemKind::kLeakExample;
  leak.outer_iterations = 3;
  ASSERT_OK_AND_ASSIGN(JobRun run, RunJob(leak, data, Private(), 8));
  EXPECT_TRUE(run.result.model.weights.allFinite());
}

class StopAfter final : public IterationCallback {
 public:
  explicit StopAfter(int64_t k) : k_(k) {}
  bool OnIteration(const IterationSummary& s) override {
    ++calls;
    EXPECT_EQ(s.iterate.size(), 2);
    return s.step < k_;
  }
  int64_t calls = 0;

 private:
  int64_t k_;
};

TEST(DpBilevelTest, CallbackCancels) {
  const Dataset data = testing::QuadraticData(200, 2, 14);
  DpBilevelOptions o;
  o.penalty = 10;
  o.outer_iterations = 6;
  ASSERT_OK_AND_ASSIGN(auto algorithm, NewDpBilevel(o));
  ASSERT_OK_AND_ASSIGN(Calibration c,
                       algorithm->Calibrate(Info(data), Private()));
  SeededRandomForTesting rng(1);
  StopAfter stop(2);
  SolveContext context(&rng, &stop);
  ASSERT_OK_AND_ASSIGN(SolveResult r, algorithm->Run(data, c, context));
  EXPECT_TRUE(r.cancelled);
  EXPECT_EQ(stop.calls, 2);
  EXPECT_EQ(r.steps_done, 2);
}

TEST(DpBilevelTest, ZeroOuterShareOnlyWithoutPerExampleOuterVector) {
  const Dataset data = testing::QuadraticData(300, 2, 15);
  DpBilevelOptions o;
  o.penalty = 10;
  o.outer_iterations = 3;
  o.split = {0, 0.5, 0.5};
  // Family Q's outer vector is public (sensitivity 0): allowed, and
  // only two mechanisms are charged.
  ASSERT_OK_AND_ASSIGN(JobRun run, RunJob(o, data, Private(), 9));
  EXPECT_EQ(run.calibration.event.events().size(), 2u);
}

}  // namespace
}  // namespace dpopt::optim::bilevel
