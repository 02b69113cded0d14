// DP-Loc-GD (Kornowski 2024, Algorithm 2): inner feasibility and the
// averaging rule, inner accuracy with the noise off, plus the sensitivity
// bound of one release through the oracle.
#include "core/optim/bilevel/dp_loc_gd.h"

#include <cmath>
#include <limits>
#include <random>

#include "core/common/status_macros.h"
#include "core/noise/testing/seeded_random.h"
#include "core/optim/bilevel/primitives.h"
#include "core/optim/step_reporter.h"
#include "core/optim/testing/noise_off.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/common/status_matchers.h"
#include "tests/core/optim/bilevel/test_problems.h"

namespace dpopt::optim::bilevel {
namespace {

using ::dpopt::noise::testing::SeededRandomForTesting;
using ::dpopt::testing::StatusIs;

class AcceptAll final : public ReleaseBudget {
 public:
  absl::Status Charge(const privacy::DpEvent&) override {
    ++charges;
    return absl::OkStatus();
  }
  privacy::DpEvent Spent() const override { return privacy::DpEvent::NoOp(); }
  int64_t charges = 0;
};

// h_i(y) = 1/2 ||y - a_i||^2 (a_i = row i), weight 1/n, clip C.
class MeanSource final : public InnerSource {
 public:
  MeanSource(int64_t d, double clip, double weight)
      : d_(d), clip_(clip), weight_(weight) {}
  void SetPoint(const Eigen::VectorXd& y) override { y_ = y; }
  int64_t dimension() const override { return d_; }
  double bound() const override { return clip_ * weight_; }
  void AddClipped(const Dataset& data, int64_t i,
                  Eigen::Ref<Eigen::VectorXd> out,
                  Eigen::VectorXd& scratch) const override {
    scratch = y_ - data.dense().row(i).transpose();
    SafeClip(clip_, scratch);
    out += weight_ * scratch;
  }
  void AddUnclipped(const Dataset& data, int64_t i,
                    Eigen::Ref<Eigen::VectorXd> out,
                    Eigen::VectorXd& scratch) const override {
    out += weight_ * (y_ - data.dense().row(i).transpose());
  }
  void AddPublic(Eigen::Ref<Eigen::VectorXd>) const override {}

 private:
  int64_t d_;
  double clip_;
  double weight_;
  Eigen::VectorXd y_;
};

PlannedMechanism Mechanism(double sensitivity, int64_t d) {
  PlannedMechanism m;
  m.name = "test";
  m.releases = 1'000'000;
  m.weight = 1;
  m.sensitivity = sensitivity;
  m.dimension = d;
  return m;
}

Dataset MeanData(int64_t n, int64_t d, uint64_t seed) {
  std::mt19937_64 gen(seed);
  Eigen::MatrixXd x(n, d);
  for (int64_t i = 0; i < n; ++i) {
    x.row(i) =
        (testing::UnitBallPoint(gen, d) + Eigen::VectorXd::Constant(d, 0.5))
            .transpose();
  }
  return Dataset::Dense(std::move(x), Eigen::VectorXd::Zero(n),
                        LabelKind::kReal);
}

// Answers "stop" from the (budget + 1)-th question on; records nothing.
class StopAfterQuestions final : public IterationCallback {
 public:
  explicit StopAfterQuestions(int budget) : budget_(budget) {}

 private:
  bool OnIteration(const IterationSummary&) override { return true; }
  bool StopRequested() override { return ++asked_ > budget_; }
  int budget_;
  int asked_ = 0;
};

TEST(DpLocGdTest, NoiseOffConvergesToTheMinimiser) {
  const int64_t n = 200, d = 3;
  const Dataset data = MeanData(n, d, 3);
  const Eigen::VectorXd y_star = data.dense().colwise().mean().transpose();
  SeededRandomForTesting rng(1);
  AcceptAll budget;
  optim::testing::NoNoiseForTesting no_noise;
  ASSERT_OK_AND_ASSIGN(
      auto oracle, PrivateSumOracle::Create(data, privacy::Relation::kAddRemove,
                                            rng, no_noise, budget));
  InnerProblem problem{1, 1, 3, 5, d};
  for (InnerMode mode : {InnerMode::kPractical, InnerMode::kPaper}) {
    InnerSolverOptions o;
    o.mode = mode;
    o.rounds = mode == InnerMode::kPaper ? 3 : 0;
    o.steps = mode == InnerMode::kPaper ? 4000 : 0;
    ASSERT_OK_AND_ASSIGN(InnerPlan plan, PlanInnerSolve(o, problem, n, 1.0));
    MeanSource source(d, 3, 1.0 / n);
    InnerTrace trace;
    ASSERT_OK_AND_ASSIGN(
        Eigen::VectorXd y,
        RunInnerSolve(plan, Mechanism(3.0 / n, d), 10, *oracle, source,
                      Eigen::VectorXd::Zero(d), &trace, nullptr));
    // Practical: constant step 1/beta = exact minimiser after one step.
    // Paper: eta_t = 1/(mu (t+1)) averaging converges like log(T)/T.
    EXPECT_LT((y - y_star).norm(), mode == InnerMode::kPaper ? 1e-3 : 1e-12)
        << static_cast<int>(mode);
  }
}

TEST(DpLocGdTest, PaperModeFeasibilityAndAveragingRule) {
  const int64_t n = 100, d = 2;
  const Dataset data = MeanData(n, d, 5);
  SeededRandomForTesting rng(2);
  AcceptAll budget;
  ASSERT_OK_AND_ASSIGN(
      auto oracle, PrivateSumOracle::Create(data, privacy::Relation::kAddRemove,
                                            rng, SecureNoise(), budget));
  InnerProblem problem{1, 1, 3, 0.5, d};
  InnerSolverOptions o;
  o.mode = InnerMode::kPaper;
  o.rounds = 3;
  o.steps = 50;
  ASSERT_OK_AND_ASSIGN(InnerPlan plan, PlanInnerSolve(o, problem, n, 1.0));
  SetPaperRadii(problem, 0.05, false, 0.01, &plan);
  ASSERT_EQ(plan.radii.size(), 3u);
  EXPECT_EQ(plan.radii[0], 0.5);
  for (int m = 1; m < 3; ++m) {
    EXPECT_LE(plan.radii[m], 2 * plan.radii[m - 1]);
    EXPECT_GT(plan.radii[m], 0);
  }
  MeanSource source(d, 3, 1.0 / n);
  InnerTrace trace;
  ASSERT_OK_AND_ASSIGN(
      Eigen::VectorXd y,
      RunInnerSolve(plan, Mechanism(3.0 / n, d), 50, *oracle, source,
                    Eigen::VectorXd::Zero(d), &trace, nullptr));
  EXPECT_EQ(budget.charges, 150);
  ASSERT_EQ(trace.rounds.size(), 3u);
  ASSERT_EQ(trace.round_starts.size(), 4u);
  for (int m = 0; m < 3; ++m) {
    const auto& it = trace.rounds[m];
    ASSERT_EQ(it.size(), 51u);  // y^m_0..y^m_{T_GD}
    Eigen::VectorXd mean = Eigen::VectorXd::Zero(d);
    for (int t = 0; t < 50; ++t) {
      EXPECT_LE((it[t] - it[0]).norm(), plan.radii[m] + 1e-12);
      mean += it[t];
    }
    EXPECT_LE((it[50] - it[0]).norm(), plan.radii[m] + 1e-12);
    // y^{m+1}_0 = mean of y^m_0..y^m_{T-1} (excludes y^m_T).
    EXPECT_NEAR((trace.round_starts[m + 1] - mean / 50).norm(), 0, 1e-12);
  }
  EXPECT_NEAR((y - trace.round_starts[3]).norm(), 0, 0);
}

TEST(DpLocGdTest, PracticalOutputIsTheMeanOfTheLastHalf) {
  const int64_t n = 100, d = 2;
  const Dataset data = MeanData(n, d, 6);
  SeededRandomForTesting rng(3);
  AcceptAll budget;
  ASSERT_OK_AND_ASSIGN(
      auto oracle, PrivateSumOracle::Create(data, privacy::Relation::kAddRemove,
                                            rng, SecureNoise(), budget));
  InnerProblem problem{0.5, 1, 3, 2, d};
  InnerSolverOptions o;
  o.steps = 7;
  ASSERT_OK_AND_ASSIGN(InnerPlan plan, PlanInnerSolve(o, problem, n, 1.0));
  EXPECT_EQ(plan.averaged, 4);
  MeanSource source(d, 3, 1.0 / n);
  InnerTrace trace;
  ASSERT_OK_AND_ASSIGN(
      Eigen::VectorXd y,
      RunInnerSolve(plan, Mechanism(3.0 / n, d), 30, *oracle, source,
                    Eigen::VectorXd::Zero(d), &trace, nullptr));
  const auto& it = trace.rounds[0];
  Eigen::VectorXd mean = (it[4] + it[5] + it[6] + it[7]) / 4;
  EXPECT_NEAR((y - mean).norm(), 0, 1e-14);
  for (const auto& v : it) EXPECT_LE(v.norm(), 2 + 1e-12);
  // Default T_GD = ceil(2 (beta/mu) ln n).
  o.steps = 0;
  ASSERT_OK_AND_ASSIGN(InnerPlan def, PlanInnerSolve(o, problem, n, 1.0));
  EXPECT_EQ(def.steps, static_cast<int64_t>(std::ceil(4 * std::log(100.0))));
}

TEST(DpLocGdTest, PaperDefaultsFollowSpecA9) {
  InnerProblem problem{1, 2, 1, 1, 4};
  InnerSolverOptions o;
  o.mode = InnerMode::kPaper;
  // M = max(1, ceil(log2(ln(max(e^2, mu eps' n / L))))), T_GD = n^2.
  ASSERT_OK_AND_ASSIGN(InnerPlan p, PlanInnerSolve(o, problem, 300, 2.0));
  EXPECT_EQ(p.steps, 90000);
  EXPECT_EQ(p.rounds,
            static_cast<int64_t>(std::ceil(std::log2(std::log(600.0)))));
  ASSERT_OK_AND_ASSIGN(InnerPlan small, PlanInnerSolve(o, problem, 3, 0.1));
  EXPECT_EQ(small.rounds, 1);  // ln(e^2) = 2, log2(2) = 1
  // T_GD = n^2 for large n is refused with a clear message.
  EXPECT_THAT(PlanInnerSolve(o, problem, 5000, 1.0),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       ::testing::HasSubstr("n^2")));
}

// Sensitivity: for fixed upstream values, the pre-noise sums of neighbours
// differ by <= 2C/n (replace-one) even for adversarial records with huge
// values.
TEST(PrivateSumOracleTest, NeighbouringSumsDifferByAtMostTheSensitivity) {
  const int64_t n = 50, d = 3;
  const Dataset base = MeanData(n, d, 9);
  optim::testing::NoNoiseForTesting no_noise;
  std::mt19937_64 gen(4);
  const double big = std::numeric_limits<double>::max();
  auto sum = [&](const Dataset& data, const Eigen::VectorXd& point) {
    SeededRandomForTesting rng(1);
    AcceptAll budget;
    auto oracle = PrivateSumOracle::Create(data, privacy::Relation::kReplaceOne,
                                           rng, no_noise, budget);
    EXPECT_OK(oracle);
    MeanSource source(d, 1.5, 1.0 / n);
    source.SetPoint(point);
    Eigen::VectorXd out;
    EXPECT_OK((*oracle)->NoisySum(Mechanism(2 * 1.5 / n, d), 5, source, &out));
    return out;
  };
  for (int trial = 0; trial < 40; ++trial) {
    Eigen::MatrixXd x2 = base.dense();
    const int64_t i = (trial * 7) % n;
    Eigen::VectorXd record = testing::UnitBallPoint(gen, d) * 1e6;
    if (trial % 4 == 0) record.setConstant(big);
    if (trial % 4 == 1) record.setConstant(-1e300);
    if (trial % 4 == 2) record.setConstant(5e-324);
    x2.row(i) = record.transpose();
    const Dataset neighbour =
        Dataset::Dense(x2, Eigen::VectorXd::Zero(n), LabelKind::kReal);
    const Eigen::VectorXd point = testing::UnitBallPoint(gen, d);
    const Eigen::VectorXd a = sum(base, point);
    const Eigen::VectorXd b = sum(neighbour, point);
    EXPECT_TRUE(b.allFinite());
    EXPECT_LE((a - b).norm(), 2 * 1.5 / n + 1e-15) << trial;
  }
}

TEST(PrivateSumOracleTest, RefusesAnUndersizedSensitivityBeforeCharging) {
  const Dataset data = MeanData(10, 2, 1);
  SeededRandomForTesting rng(1);
  AcceptAll budget;
  ASSERT_OK_AND_ASSIGN(auto oracle, PrivateSumOracle::Create(
                                        data, privacy::Relation::kReplaceOne,
                                        rng, SecureNoise(), budget));
  MeanSource source(2, 1, 0.1);
  source.SetPoint(Eigen::VectorXd::Zero(2));
  Eigen::VectorXd out;
  // Replace-one needs 2 * bound = 0.2.
  EXPECT_THAT(oracle->NoisySum(Mechanism(0.1, 2), 1, source, &out),
              StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_EQ(budget.charges, 0);
  EXPECT_OK(oracle->NoisySum(Mechanism(0.2, 2), 1, source, &out));
  EXPECT_EQ(budget.charges, 1);
}

// A stop request ends an inner solve between two steps (each step is one
// pass over the rows), with CANCELLED; nothing is returned.
TEST(DpLocGdTest, StopsInsideTheSolveWhenAsked) {
  const int64_t n = 50, d = 2;
  const Dataset data = MeanData(n, d, 7);
  SeededRandomForTesting rng(3);
  AcceptAll budget;
  ASSERT_OK_AND_ASSIGN(
      auto oracle, PrivateSumOracle::Create(data, privacy::Relation::kAddRemove,
                                            rng, SecureNoise(), budget));
  InnerProblem problem{1, 1, 3, 5, d};
  InnerSolverOptions o;
  o.steps = 100000;
  ASSERT_OK_AND_ASSIGN(InnerPlan plan, PlanInnerSolve(o, problem, n, 1.0));
  MeanSource source(d, 3, 1.0 / n);
  InnerTrace trace;
  StopAfterQuestions stop(25);
  StepReporter reporter(&stop, 1);
  EXPECT_THAT(RunInnerSolve(plan, Mechanism(3.0 / n, d), 10, *oracle, source,
                            Eigen::VectorXd::Zero(d), &trace, &reporter)
                  .status(),
              StatusIs(absl::StatusCode::kCancelled));
  // 25 steps ran (y_0 and 25 iterates), then the 26th question stopped it.
  ASSERT_EQ(trace.rounds.size(), 1u);
  EXPECT_EQ(trace.rounds[0].size(), 26u);
  EXPECT_TRUE(reporter.stopped());
}

}  // namespace
}  // namespace dpopt::optim::bilevel
