// The piecewise-affine family's run times do not depend on the private
// offsets beyond what is documented (docs/algorithms/piecewise_affine.md,
// "Timing"). M_E:
//   - its plan (certificate steps, proposal rounds) is a function of public
//     values only, and every run makes exactly that many rounds;
//   - its certified lower bound is valid and within the plan's gap of the
//     optimum (so the public bound on the proposals holds);
//   - a stop request ends a run between rounds;
//   - scores outside the representable range are refused from public
//     values;
//   - statistical test: 200 timed runs on each of two neighbouring datasets
//     (offsets moved by b_max), in random order, through the production
//     Algorithm (secure generator); a two-sample Kolmogorov-Smirnov test
//     must not reject at p < 1e-4. The instance is chosen so that the old
//     sampler (whose number of proposals was geometric with a mean that
//     depends on the offsets) would be detected: the test checks that the
//     two datasets' mean proposal counts differ by a factor >= 1.5.
// M_S: its LP on the true offsets is padded to a public budget; 100 timed
// runs of the production algorithm on each of two neighbouring datasets are
// not told apart (same KS test), while a private solve that takes twice as
// long on one of them is told apart without the padding and not with it.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "core/common/padded_duration.h"
#include "core/noise/random.h"
#include "core/noise/testing/seeded_random.h"
#include "core/optim/piecewise_affine/lp.h"
#include "core/optim/piecewise_affine/mechanisms.h"
#include "core/optim/step_reporter.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/common/status_matchers.h"
#include "tests/core/optim/piecewise_affine/test_problems.h"

namespace dpopt::optim::piecewise_affine {
namespace {

using ::dpopt::noise::testing::SeededRandomForTesting;
using ::dpopt::testing::StatusIs;
using testing::Cube;
using testing::GaussianInstance;
using testing::Instance;
using testing::MakeInstance;
using testing::PublicInfo;
using testing::Pure;

double FOpt(const Instance& in) {
  auto lp = SolveMaxAffine(in.a, in.b, in.info.polytope);
  if (!lp.ok()) std::abort();
  return lp->value;
}

// Stops after `budget` stop questions.
class StopAfter final : public IterationCallback {
 public:
  explicit StopAfter(int budget) : budget_(budget) {}
  int asked() const { return asked_; }

 private:
  bool OnIteration(const IterationSummary&) override { return true; }
  bool StopRequested() override { return ++asked_ > budget_; }
  int budget_;
  int asked_ = 0;
};

TEST(PiecewiseAffineExponentialTiming, EveryRunMakesThePlannedRounds) {
  Instance in = GaussianInstance(30, 3, 1.0, 101);
  Eigen::VectorXd b = in.b;
  for (int i = 0; i < b.size(); i += 2) b[i] += 1.0;  // b_max = 1
  Instance other = MakeInstance(in.a, b, Cube(3, 1.0));
  Eigen::VectorXd extreme = in.b;
  extreme[0] = kMaxOffsetRatio;  // the import range's edges (b_max = 1)
  extreme[1] = -kMaxOffsetRatio;
  Instance far = MakeInstance(in.a, extreme, Cube(3, 1.0));
  ASSERT_OK_AND_ASSIGN(ExponentialPlan plan, PlanExponential(in.info, 1.0));
  ASSERT_OK_AND_ASSIGN(ExponentialPlan plan2, PlanExponential(other.info, 1.0));
  // The plan is a function of the public description only.
  EXPECT_EQ(plan.rounds, plan2.rounds);
  EXPECT_EQ(plan.certificate_steps, plan2.certificate_steps);
  EXPECT_GE(static_cast<double>(plan.rounds),
            plan.expected_proposals_bound *
                (std::log(plan.expected_proposals_bound) + 55));
  SeededRandomForTesting rng(102);
  for (const Instance* use : {&in, &other, &far}) {
    for (int i = 0; i < 20; ++i) {
      ExponentialRunStats stats;
      ASSERT_OK_AND_ASSIGN(
          Eigen::VectorXd x,
          RunExponential(use->info, use->data, plan, rng, &stats));
      EXPECT_EQ(stats.rounds, plan.rounds);
      EXPECT_GT(stats.first_accepted, 0);
      EXPECT_TRUE(use->info.polytope.Contains(x, 0));
    }
  }
}

// The certificate (no LP) is a valid lower bound and within the plan's gap
// of the optimum, on instances of several shapes and epsilons.
TEST(PiecewiseAffineExponentialTiming, CertificateIsValidAndTight) {
  SeededRandomForTesting rng(103);
  for (uint64_t seed = 0; seed < 12; ++seed) {
    const int64_t m = 5 + 17 * static_cast<int64_t>(seed % 4);
    const int64_t d = 1 + static_cast<int64_t>(seed % 5);
    Instance in = GaussianInstance(m, d, 1.0, 200 + seed);
    for (double eps : {0.05, 0.5, 2.0}) {
      ASSERT_OK_AND_ASSIGN(ExponentialPlan plan, PlanExponential(in.info, eps));
      if (plan.expected_proposals_bound > 1e6) continue;  // refused anyway
      plan.rounds = 1;  // only the certificate is checked here
      ExponentialRunStats stats;
      ASSERT_OK(RunExponential(in.info, in.data, plan, rng, &stats).status());
      const double f_opt = FOpt(in);
      EXPECT_LE(stats.floor_value, f_opt) << seed << " " << eps;
      EXPECT_LE(plan.beta * (f_opt - stats.floor_value),
                0.25 + 6 * plan.rate.ToDouble())
          << seed << " " << eps;
    }
  }
}

TEST(PiecewiseAffineExponentialTiming, StopsWhenAsked) {
  Instance in = GaussianInstance(30, 3, 1.0, 104);
  ASSERT_OK_AND_ASSIGN(ExponentialPlan plan, PlanExponential(in.info, 1.0));
  ASSERT_GT(plan.certificate_steps + plan.rounds, 100);
  SeededRandomForTesting rng(105);
  StopAfter stop(50);
  StepReporter reporter(&stop, 1);
  EXPECT_THAT(
      RunExponential(in.info, in.data, plan, rng, nullptr, &reporter).status(),
      StatusIs(absl::StatusCode::kCancelled));
  EXPECT_EQ(stop.asked(), 51);  // asked before every step and round
}

TEST(PiecewiseAffineExponentialTiming, RefusesAnUnrepresentableRange) {
  // G X = 2e9 against b_max = 1e-3: G X / b_max far beyond 2^27 (every
  // private mechanism refuses it before charging, M_E's plan too).
  Eigen::MatrixXd a = Eigen::MatrixXd::Constant(3, 2, 1e9);
  a(1, 0) = -1e9;
  Instance in = MakeInstance(a, Eigen::Vector3d(0, 0, 0), Cube(2, 1.0), 1e-3);
  EXPECT_THAT(PlanExponential(in.info, 1.0).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       ::testing::HasSubstr("representable")));
  std::vector<std::unique_ptr<Algorithm>> algs;
  algs.push_back(NewExponential({}));
  algs.push_back(NewPerturbProblem({}));
  algs.push_back(NewPerturbSolution({}));
  algs.push_back(NewSubgradient({}));
  for (const auto& alg : algs) {
    EXPECT_THAT(alg->Calibrate(PublicInfo(in), {1.0, 0}).status(),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         ::testing::HasSubstr("represent")))
        << alg->name();
  }
  // Within the range: accepted.
  Instance ok = MakeInstance(a / 1e9, Eigen::Vector3d(0, 0, 0), Cube(2, 1.0));
  EXPECT_OK(
      NewPerturbProblem({})->Calibrate(PublicInfo(ok), {1.0, 0}).status());
}

// Mean number of proposals of the old sampler (until the first acceptance
// with the exact lower bound f_opt): 1 / E_U exp(-beta (f(U) - f_opt)),
// by 2e5 uniform draws (test-only generator).
double OldMeanProposals(const Instance& in, double beta) {
  const double f_opt = FOpt(in);
  std::mt19937_64 gen(7);
  std::uniform_real_distribution<double> u(-1, 1);
  const int64_t d = in.info.dimension;
  Eigen::VectorXd x(d);
  double sum = 0;
  constexpr int kDraws = 200000;
  for (int i = 0; i < kDraws; ++i) {
    for (int64_t j = 0; j < d; ++j) x[j] = u(gen);
    sum += std::exp(-beta * ((in.a * x + in.b).maxCoeff() - f_opt));
  }
  return kDraws / sum;
}

// Two-sample KS statistic and its asymptotic p-value (Kolmogorov's series).
double KsPValue(std::vector<double> a, std::vector<double> b) {
  std::sort(a.begin(), a.end());
  std::sort(b.begin(), b.end());
  size_t i = 0, j = 0;
  double dmax = 0;
  while (i < a.size() && j < b.size()) {
    const double v = std::min(a[i], b[j]);
    while (i < a.size() && a[i] <= v) ++i;
    while (j < b.size() && b[j] <= v) ++j;
    dmax = std::max(dmax, std::abs(static_cast<double>(i) / a.size() -
                                   static_cast<double>(j) / b.size()));
  }
  const double n = static_cast<double>(a.size() * b.size()) /
                   static_cast<double>(a.size() + b.size());
  const double lambda = (std::sqrt(n) + 0.12 + 0.11 / std::sqrt(n)) * dmax;
  double p = 0;
  for (int k = 1; k <= 100; ++k) {
    p += 2 * ((k & 1) ? 1 : -1) * std::exp(-2.0 * k * k * lambda * lambda);
  }
  return std::clamp(p, 0.0, 1.0);
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// kRuns zeros and kRuns ones in an order shuffled by `seed`: which dataset
// each timed run uses, so that drifts of the machine hit both alike.
std::vector<int> RandomOrder(int runs, uint64_t seed) {
  std::vector<int> order(2 * runs);
  for (int i = 0; i < 2 * runs; ++i) order[i] = i % 2;
  std::mt19937_64 shuffle(seed);
  std::shuffle(order.begin(), order.end(), shuffle);
  return order;
}

// Milliseconds `f` takes.
template <typename F>
double TimeMs(F&& f) {
  const auto start = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double, std::milli>(
             std::chrono::steady_clock::now() - start)
      .count();
}

TEST(PiecewiseAffineExponentialTiming, RunTimeDoesNotDistinguishNeighbours) {
  // d = 10, b_max = 1, epsilon 2 (beta = 1). f = max(0, s |x_j| - c) over
  // the 20 pieces +-s e_j (s = 0.6), plus 1979 pieces that are never
  // active (slope 0, offset -10) so that a proposal costs m d = 2e4
  // multiply-adds. Dataset 1 has c = 1 (f = 0 on P: every proposal is
  // accepted), its neighbour c = 0 (offsets moved by b_max: f = s max |x_j|),
  // so the old sampler's expected proposal counts differ by a factor > 1.5.
  constexpr int64_t kM = 2000;
  constexpr int64_t kD = 10;
  Eigen::MatrixXd a = Eigen::MatrixXd::Zero(kM, kD);
  Eigen::VectorXd b = Eigen::VectorXd::Constant(kM, -10.0);
  b[0] = 0;  // the zero piece
  for (int64_t j = 0; j < kD; ++j) {
    a(1 + 2 * j, j) = 0.6;
    a(2 + 2 * j, j) = -0.6;
    b[1 + 2 * j] = -1;
    b[2 + 2 * j] = -1;
  }
  Eigen::VectorXd b2 = b;
  for (int64_t i = 1; i <= 2 * kD; ++i) b2[i] = 0;  // moved by b_max
  Instance d1 = MakeInstance(a, b, Cube(kD, 1.0));
  Instance d2 = MakeInstance(a, b2, Cube(kD, 1.0));
  const PublicDatasetInfo info = PublicInfo(d1);
  const PrivacyTarget target{2.0, 0};
  std::unique_ptr<Algorithm> alg = NewExponential({});
  ASSERT_OK_AND_ASSIGN(Calibration c, alg->Calibrate(info, target));
  ASSERT_OK_AND_ASSIGN(ExponentialPlan plan, PlanExponential(d1.info, 2.0));
  std::printf("plan: B %.4g, K %lld, rounds %lld\n",
              plan.expected_proposals_bound,
              static_cast<long long>(plan.certificate_steps),
              static_cast<long long>(plan.rounds));
  // Power: the old sampler's time would differ (geometric proposals).
  const double old1 = OldMeanProposals(d1, plan.beta);
  const double old2 = OldMeanProposals(d2, plan.beta);
  std::printf("old sampler's mean proposals: %.4g vs %.4g\n", old1, old2);
  ASSERT_GE(std::max(old1, old2) / std::min(old1, old2), 1.5);

  constexpr int kRuns = 200;
  const std::vector<int> order = RandomOrder(kRuns, 12);
  ASSERT_OK_AND_ASSIGN(auto rng, noise::NewSecureRandom());
  SolveContext context(rng.get());
  // Warm-up (caches, page faults) on both, not measured.
  for (int k = 0; k < 4; ++k) {
    ASSERT_OK(alg->Run(k % 2 ? d2.data : d1.data, c, context).status());
  }
  std::vector<double> t1, t2;
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(400);
  for (int which : order) {
    ASSERT_LT(std::chrono::steady_clock::now(), deadline)
        << "the timing test exceeded its time bound";
    (which ? t2 : t1).push_back(TimeMs([&] {
      ASSERT_OK(alg->Run(which ? d2.data : d1.data, c, context).status());
    }));
  }
  const double p = KsPValue(t1, t2);
  std::printf(
      "run time over %d runs each: medians %.3f ms and %.3f ms; two-sample "
      "KS p-value %.4g\n",
      kRuns, Median(t1), Median(t2), p);
  EXPECT_GE(p, 1e-4);

  // Power: run times that scale like the old sampler's (proportional to the
  // mean proposal counts old1 and old2, here as proportionally many rounds
  // of the same sampler on the same dataset) are told apart by the same
  // test at p < 1e-4 with half the runs.
  constexpr int kPowerRuns = 100;
  ExponentialPlan scaled = plan;
  scaled.rounds = static_cast<int64_t>(
      std::llround(static_cast<double>(plan.rounds) * old2 / old1));
  noise::RandomSource& secure = *rng;
  std::vector<double> p1, p2;
  for (int k = 0; k < 2 * kPowerRuns; ++k) {
    ASSERT_LT(std::chrono::steady_clock::now(), deadline)
        << "the timing test exceeded its time bound";
    const ExponentialPlan& use = order[k] ? scaled : plan;
    (order[k] ? p2 : p1).push_back(TimeMs([&] {
      ASSERT_OK(RunExponential(d1.info, d1.data, use, secure).status());
    }));
  }
  const double power_p = KsPValue(p1, p2);
  std::printf("power check: medians %.3f ms and %.3f ms; KS p-value %.4g\n",
              Median(p1), Median(p2), power_p);
  EXPECT_LT(power_p, 1e-4);
}

TEST(PiecewiseAffinePerturbSolutionTiming,
     PaddedLpDoesNotDistinguishNeighbours) {
  // m = 200, d = 20 (an LP of about a millisecond); the neighbour has 20
  // offsets moved by b_max.
  Instance d1 = GaussianInstance(200, 20, 1.0, 31);
  d1.b = d1.b.cwiseMax(-1.0).cwiseMin(1.0);
  Eigen::VectorXd b2 = d1.b;
  for (int64_t i = 0; i < 20; ++i) b2[i] = std::min(1.0, b2[i] + 1.0);
  d1 = MakeInstance(d1.a, d1.b, Cube(20, 1.0));
  const Instance d2 = MakeInstance(d1.a, b2, Cube(20, 1.0));
  const PublicDatasetInfo info = PublicInfo(d1);
  std::unique_ptr<Algorithm> alg = NewPerturbSolution({});
  ASSERT_OK_AND_ASSIGN(Calibration c, alg->Calibrate(info, Pure(1.0)));
  ASSERT_OK_AND_ASSIGN(auto rng, noise::NewSecureRandom());
  SolveContext context(rng.get());
  for (int k = 0; k < 4; ++k) {  // warm-up, not measured
    ASSERT_OK(alg->Run(k % 2 ? d2.data : d1.data, c, context).status());
  }
  constexpr int kRuns = 100;
  const std::vector<int> order = RandomOrder(kRuns, 13);
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(120);
  std::vector<double> t1, t2;
  for (int which : order) {
    ASSERT_LT(std::chrono::steady_clock::now(), deadline)
        << "the timing test exceeded its time bound";
    (which ? t2 : t1).push_back(TimeMs([&] {
      ASSERT_OK(alg->Run(which ? d2.data : d1.data, c, context).status());
    }));
  }
  const double p = KsPValue(t1, t2);
  std::printf(
      "M_S run time over %d runs each: medians %.3f ms and %.3f ms; KS "
      "p-value %.4g\n",
      kRuns, Median(t1), Median(t2), p);
  EXPECT_GE(p, 1e-4);

  // Power: a private solve that takes twice as long on one dataset (the LP
  // solved twice) is told apart unpadded, and not once padded to the
  // budget M_S uses.
  auto solve = [&](bool twice) {
    for (int k = 0; k < (twice ? 2 : 1); ++k) {
      if (!SolveMaxAffine(d1.a, d1.b, d1.info.polytope).ok()) std::abort();
    }
    return 0;
  };
  // One budget for both sides, timed before the loop: timed inside it, the
  // probe ran just after one side's work or the other's, whose different
  // cache states made it (and so the padded times) differ by a fraction of
  // a millisecond: a difference of the test's order, not of the data.
  const absl::Duration budget = PerturbSolutionLpBudget(d1.info, d1.a);
  std::vector<double> u1, u2, q1, q2;
  for (int which : order) {
    ASSERT_LT(std::chrono::steady_clock::now(), deadline)
        << "the timing test exceeded its time bound";
    (which ? u2 : u1).push_back(TimeMs([&] { solve(which); }));
    (which ? q2 : q1).push_back(TimeMs([&] {
      common::RunPaddedTo(budget, [&] { return solve(which); });
    }));
  }
  const double unpadded_p = KsPValue(u1, u2);
  const double padded_p = KsPValue(q1, q2);
  std::printf(
      "power check: unpadded medians %.3f ms and %.3f ms, KS p-value %.4g; "
      "padded %.3f ms and %.3f ms, KS p-value %.4g\n",
      Median(u1), Median(u2), unpadded_p, Median(q1), Median(q2), padded_p);
  EXPECT_LT(unpadded_p, 1e-4);
  EXPECT_GE(padded_p, 1e-4);
}

TEST(PaddedDuration, PadsToTheBudgetAndStopsWhenTheJobIsCancelled) {
  double ms = TimeMs([] {
    EXPECT_EQ(common::RunPaddedTo(absl::Milliseconds(200), [] { return 7; }),
              7);
  });
  EXPECT_GE(ms, 200);
  // A cancelled job stops padding at the next check, not after 30 s.
  ms = TimeMs([] {
    EXPECT_EQ(common::RunPaddedTo(
                  absl::Seconds(30), [] { return 7; }, [] { return true; }),
              7);
  });
  EXPECT_LT(ms, 5000);
}

}  // namespace
}  // namespace dpopt::optim::piecewise_affine
