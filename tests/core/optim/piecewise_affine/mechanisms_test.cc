// Piecewise-affine's mechanisms (Han, Topcu & Pappas 2014, Sec. 4): calibration
// against hand-computed values, noise off = the classic method (M_P and M_S
// reduce to the LP, Algorithm 2 at huge epsilon to the regular subgradient
// method), Algorithm 1's exact privacy ratio, sampling law, sign and
// Theorem 13, M_P's per-draw bound, M_S's noise norm (Theorem 17), Theorem 24
// at large epsilon, composition and charge, trace replay, feasibility,
// determinism, M_E's refusal when infeasible. Statistical checks use fixed
// seeds of the NOT DIFFERENTIALLY PRIVATE test generator at p = 1e-3 or 5
// standard errors.
#include "core/optim/piecewise_affine/mechanisms.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "core/audit/statistics.h"
#include "core/noise/testing/seeded_random.h"
#include "core/optim/piecewise_affine/lp.h"
#include "core/optim/piecewise_affine/scores.h"
#include "core/privacy/rdp.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/common/status_matchers.h"
#include "tests/core/optim/piecewise_affine/test_problems.h"

namespace dpopt::optim::piecewise_affine {
namespace {

using ::dpopt::noise::testing::SeededRandomForTesting;
using ::dpopt::testing::StatusIs;
using testing::GaussianInstance;
using testing::Instance;
using testing::PublicInfo;
using testing::Pure;

// TEST ONLY, NOT DIFFERENTIALLY PRIVATE: adds no noise.
class NoNoiseForTesting final : public OffsetNoise {
 public:
  absl::Status Add(const noise::VectorLaplacePlan&, noise::RandomSource&,
                   Eigen::Ref<Eigen::VectorXd>) const override {
    return absl::OkStatus();
  }
};

double FOpt(const Instance& in) {
  auto lp = SolveMaxAffine(in.a, in.b, in.info.polytope);
  if (!lp.ok()) std::abort();
  return lp->value;
}

// ---------------------------------------------------------------------------
// Calibration.

TEST(PiecewiseAffineCalibration, NoiseParametersMatchTheSpec) {
  // The paper's regime: d = 5, c = 1, m = 20, b_max = 1, eps = 0.1.
  Instance in = GaussianInstance(20, 5, 1.0, 1);
  const double eps = 0.1;
  ASSERT_OK_AND_ASSIGN(noise::VectorLaplacePlan mp,
                       PerturbProblemPlan(in.info, eps));
  // lambda_P = eps / (sqrt(m) b_max) = 0.1 / sqrt(20) = 0.0223607; the grid
  // costs a relative 2^-20 at most.
  EXPECT_NEAR(mp.lambda, 0.1 / std::sqrt(20.0), 0.1 / std::sqrt(20.0) * 2e-6);
  EXPECT_LE(mp.lambda, 0.1 / std::sqrt(20.0));
  EXPECT_EQ(mp.dimension, 20);
  // E||w_P|| = m^{3/2} b_max / eps = 894.43.
  EXPECT_NEAR(mp.expected_norm, std::pow(20.0, 1.5) / 0.1, 0.01);

  // M_S, cube: Delta_S = 2 sqrt(d) c; paper lambda = eps / (2 d c) = 0.01,
  // E||w_S|| = 2 d^2 c / eps = 500; tight eps / (2 sqrt(5)).
  ASSERT_OK_AND_ASSIGN(
      noise::VectorLaplacePlan ms,
      PerturbSolutionPlan(in.info, eps, SolutionNoise::kPaper));
  EXPECT_NEAR(ms.lambda, 0.01, 0.01 * 2e-6);
  EXPECT_NEAR(ms.expected_norm, 500, 0.01);
  ASSERT_OK_AND_ASSIGN(
      noise::VectorLaplacePlan tight,
      PerturbSolutionPlan(in.info, eps, SolutionNoise::kTight));
  EXPECT_NEAR(tight.lambda, 0.1 / (2 * std::sqrt(5.0)), 0.0224 * 2e-6);

  // M_E: beta = eps / (2 b_max) = 0.05.
  ASSERT_OK_AND_ASSIGN(ExponentialPlan me, PlanExponential(in.info, eps));
  EXPECT_NEAR(me.beta, 0.05, 0.05 * 1e-5);
  EXPECT_LE(me.beta, 0.05);

  // Algorithm 1 inside Algorithm 2 (k = 100): eps' = eps / k and Du = b_max,
  // i.e. 5e-4 per unit of score: at the paper's settings the selections are
  // within about 0.5% of uniform.
  const ScoreGrid grid = MakeScoreGrid(1.0);
  EXPECT_EQ(grid.grid, std::ldexp(1.0, -20));
  ASSERT_OK_AND_ASSIGN(noise::Dyadic rate, SelectionRate(eps / 100, grid));
  EXPECT_NEAR(rate.ToDouble() / grid.grid, 5e-4, 5e-4 * 1e-5);
  EXPECT_LE(2 * rate.ToDouble() * grid.sensitivity_units, eps / 100);
}

TEST(PiecewiseAffineCalibration, EveryJobChargesItsEpsilonOnce) {
  Instance in = GaussianInstance(20, 5, 1.0, 2);
  const PublicDatasetInfo info = PublicInfo(in);
  for (double eps : {0.01, 0.1, 1.0}) {
    std::vector<std::unique_ptr<Algorithm>> algs;
    algs.push_back(NewPerturbProblem({}));
    algs.push_back(NewPerturbSolution({}));
    for (const auto& alg : algs) {
      ASSERT_OK_AND_ASSIGN(Calibration c, alg->Calibrate(info, Pure(eps)));
      EXPECT_EQ(c.event, privacy::DpEvent::EpsilonDelta(eps, 0)) << alg->name();
      EXPECT_EQ(c.relation, privacy::Relation::kLinfOffsets);
      EXPECT_EQ(c.guarantee_epsilon, eps);
    }
    ASSERT_OK_AND_ASSIGN(Calibration c,
                         NewExponential({})->Calibrate(info, Pure(eps)));
    EXPECT_EQ(c.event, privacy::DpEvent::Exponential(eps));
    EXPECT_EQ(c.guarantee_epsilon, eps);
    // Algorithm 2: its k = 100 (default) selections as exponential
    // mechanisms, eps in total; the stated guarantee is still pure eps.
    ASSERT_OK_AND_ASSIGN(c, NewSubgradient({})->Calibrate(info, Pure(eps)));
    EXPECT_EQ(c.event, privacy::DpEvent::ExponentialMechanisms(eps, 100));
    EXPECT_EQ(c.relation, privacy::Relation::kLinfOffsets);
    EXPECT_EQ(c.guarantee_epsilon, eps);
  }
  // Algorithm 2: k planned steps, k exponential mechanisms charged.
  SubgradientOptions o;
  o.iterations = 37;
  ASSERT_OK_AND_ASSIGN(Calibration c,
                       NewSubgradient(o)->Calibrate(info, Pure(0.3)));
  EXPECT_EQ(c.steps, 37);
  EXPECT_EQ(c.event, privacy::DpEvent::ExponentialMechanisms(0.3, 37));
  // Its charge: exactly eps under basic composition, eps^2 / (8 k) zCDP
  // under RDP (alpha 0.09 / 296 at every order), below the pure curve.
  ASSERT_OK_AND_ASSIGN(std::vector<double> rdp,
                       privacy::ComputeRdp(c.event, std::vector<double>{2, 5}));
  EXPECT_DOUBLE_EQ(rdp[0], 2 * 0.09 / 296);
  EXPECT_DOUBLE_EQ(rdp[1], 5 * 0.09 / 296);
}

TEST(PiecewiseAffineCalibration, RefusesWhatItCannotCertify) {
  Instance in = GaussianInstance(20, 5, 1.0, 3);
  PublicDatasetInfo info = PublicInfo(in);
  // M_E at a large epsilon: exp(beta G R) far beyond 1e6 -> refused before
  // any data access (docs/architecture.md, invariant "public work bounds").
  EXPECT_THAT(NewExponential({})->Calibrate(info, Pure(50)).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       ::testing::HasSubstr("infeasible")));
  ExponentialOptions loose;
  loose.max_expected_proposals = 1e9;
  EXPECT_OK(NewExponential(loose)->Calibrate(info, Pure(1)).status());
  // Another relation, no description, a non-private target.
  info.relation = privacy::Relation::kAddRemove;
  EXPECT_THAT(NewPerturbProblem({})->Calibrate(info, Pure(1)).status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
  info = PublicInfo(in);
  info.problem_json.clear();
  EXPECT_THAT(NewSubgradient({})->Calibrate(info, Pure(1)).status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
  PrivacyTarget np;
  np.non_private = true;
  EXPECT_THAT(NewSubgradient({})->Calibrate(PublicInfo(in), np).status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(NewBaseline({})->Calibrate(PublicInfo(in), Pure(1)).status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
  // An initial point outside P.
  SubgradientOptions o;
  o.initial_point = {2, 0, 0, 0, 0};
  EXPECT_THAT(NewSubgradient(o)->Calibrate(PublicInfo(in), Pure(1)).status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

// ---------------------------------------------------------------------------
// Noise off = the classic method.

TEST(PiecewiseAffineNoiseOff, PerturbationsReduceToTheLp) {
  Instance in = GaussianInstance(20, 5, 1.0, 4);
  const double f_opt = FOpt(in);
  NoNoiseForTesting none;
  SeededRandomForTesting rng(1);
  ASSERT_OK_AND_ASSIGN(noise::VectorLaplacePlan mp,
                       PerturbProblemPlan(in.info, 1.0));
  ASSERT_OK_AND_ASSIGN(PerturbProblemOutput out,
                       RunPerturbProblem(in.info, in.data, mp, none, rng));
  EXPECT_EQ(out.b_tilde, in.b);
  EXPECT_NEAR(Evaluate(in.data, in.b, out.x), f_opt, 1e-9);
  ASSERT_OK_AND_ASSIGN(
      noise::VectorLaplacePlan ms,
      PerturbSolutionPlan(in.info, 1.0, SolutionNoise::kPaper));
  ASSERT_OK_AND_ASSIGN(Eigen::VectorXd x,
                       RunPerturbSolution(in.info, in.data, ms, true, none, rng,
                                          absl::ZeroDuration()));
  EXPECT_NEAR(Evaluate(in.data, in.b, x), f_opt, 1e-9);
}

// With eps / k huge, Algorithm 2 reproduces the regular subgradient
// trajectory exactly; with eps' = 1e4 b_max one selection is the argmax in
// >= 99.9% of draws (Remark 23).
TEST(PiecewiseAffineNoiseOff, HugeEpsilonIsTheRegularSubgradientMethod) {
  Instance in = GaussianInstance(20, 5, 1.0, 5);
  SubgradientOptions o;
  o.iterations = 100;
  ASSERT_OK_AND_ASSIGN(
      SubgradientTrace regular,
      RunSubgradient(in.info, in.data, o, false, 0, nullptr, nullptr));
  SeededRandomForTesting rng(2);
  ASSERT_OK_AND_ASSIGN(
      SubgradientTrace priv,
      RunSubgradient(in.info, in.data, o, true, 1e9, &rng, nullptr));
  EXPECT_EQ(priv.indices, regular.indices);
  ASSERT_EQ(priv.iterates.size(), regular.iterates.size());
  for (size_t i = 0; i < priv.iterates.size(); ++i) {
    EXPECT_EQ(priv.iterates[i], regular.iterates[i]);
  }
  // The regular method makes progress on this instance.
  EXPECT_LT(Evaluate(in.data, in.b, regular.average),
            Evaluate(in.data, in.b, in.info.Center()));

  const ScoreGrid grid = MakeScoreGrid(1.0);
  ASSERT_OK_AND_ASSIGN(noise::Dyadic rate, SelectionRate(1e4, grid));
  Eigen::VectorXd x = Eigen::VectorXd::Constant(5, 0.3);
  const std::vector<int64_t> s = PieceScores(in.data, in.b, x, grid);
  const int64_t argmax = std::max_element(s.begin(), s.end()) - s.begin();
  int hits = 0;
  for (int t = 0; t < 10000; ++t) {
    ASSERT_OK_AND_ASSIGN(int64_t i, SampleSoftmax(s, rate, rng));
    hits += i == argmax;
  }
  EXPECT_GE(hits, 9990);
}

// ---------------------------------------------------------------------------
// Algorithm 1.

std::vector<double> Softmax(const std::vector<int64_t>& s, noise::Dyadic rate) {
  const double r = rate.ToDouble();
  const int64_t best = *std::max_element(s.begin(), s.end());
  std::vector<double> p(s.size());
  double z = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    p[i] = std::exp(-r * static_cast<double>(best - s[i]));
    z += p[i];
  }
  for (double& v : p) v /= z;
  return p;
}

// For adversarial neighbours (+-b_max e_j and random sign
// patterns), the exact selection probabilities satisfy
// max_i |ln p_i(b) - ln p_i(b')| <= eps'.
TEST(PiecewiseAffineAlgorithm1, ExactPrivacyRatio) {
  Instance in = GaussianInstance(10, 3, 1.0, 6, 0.5);
  const ScoreGrid grid = MakeScoreGrid(0.5);
  std::mt19937_64 gen(3);
  std::uniform_real_distribution<double> u(-1, 1);
  for (double eps : {0.1, 1.0, 5.0}) {
    ASSERT_OK_AND_ASSIGN(noise::Dyadic rate, SelectionRate(eps, grid));
    for (int trial = 0; trial < 200; ++trial) {
      Eigen::VectorXd x(3);
      for (int j = 0; j < 3; ++j) x[j] = u(gen);
      Eigen::VectorXd b2 = in.b;
      if (trial % 2 == 0) {
        b2[trial % 10] += (trial % 4 == 0 ? 0.5 : -0.5);
      } else {
        for (int i = 0; i < 10; ++i) b2[i] += u(gen) > 0 ? 0.5 : -0.5;
      }
      const auto p = Softmax(PieceScores(in.data, in.b, x, grid), rate);
      const auto q = Softmax(PieceScores(in.data, b2, x, grid), rate);
      for (int i = 0; i < 10; ++i) {
        EXPECT_LE(std::abs(std::log(p[i]) - std::log(q[i])), eps + 1e-12);
      }
    }
  }
}

// m = 5, eps' = 2, b_max = 1: chi-square of 1e5 draws against the
// softmax probabilities, p > 1e-3; the probabilities are the paper's
// exp(+eps' s_i / (2 b_max)) (the printed minus sign is a typo) to 1e-5.
TEST(PiecewiseAffineAlgorithm1, SamplesTheSoftmax) {
  Instance in = GaussianInstance(5, 2, 1.0, 7);
  const ScoreGrid grid = MakeScoreGrid(1.0);
  ASSERT_OK_AND_ASSIGN(noise::Dyadic rate, SelectionRate(2.0, grid));
  const Eigen::Vector2d x(0.2, -0.4);
  const std::vector<int64_t> s = PieceScores(in.data, in.b, x, grid);
  const std::vector<double> p = Softmax(s, rate);
  // Against the real-valued formula.
  std::vector<double> paper(5);
  double z = 0;
  for (int i = 0; i < 5; ++i) {
    paper[i] = std::exp(2.0 * (in.a.row(i).dot(x) + in.b[i]) / 2.0);
    z += paper[i];
  }
  for (int i = 0; i < 5; ++i) EXPECT_NEAR(p[i], paper[i] / z, 1e-5);
  SeededRandomForTesting rng(8);
  std::vector<int64_t> counts(5, 0);
  constexpr int kDraws = 100000;
  for (int t = 0; t < kDraws; ++t) {
    ASSERT_OK_AND_ASSIGN(int64_t i, SampleSoftmax(s, rate, rng));
    ++counts[i];
  }
  double chi2 = 0;
  for (int i = 0; i < 5; ++i) {
    const double e = kDraws * p[i];
    chi2 += (counts[i] - e) * (counts[i] - e) / e;
  }
  EXPECT_GT(audit::ChiSquareSurvival(chi2, 4), 1e-3) << chi2;
}

// Eq. (13) and Theorem 13: E gamma(i*; x0) <= 2 b_max (1 + ln m) / eps' over
// 1e5 draws, and Lemma 22 deterministically:
// f(x) >= f(x0) + a_j^T (x - x0) - gamma(j; x0).
TEST(PiecewiseAffineAlgorithm1, TheoremThirteenAndLemmaTwentyTwo) {
  Instance in = GaussianInstance(20, 5, 1.0, 9);
  const ScoreGrid grid = MakeScoreGrid(1.0);
  const double eps = 0.5;
  ASSERT_OK_AND_ASSIGN(noise::Dyadic rate, SelectionRate(eps, grid));
  const Eigen::VectorXd x0 = Eigen::VectorXd::Constant(5, -0.2);
  const double f0 = Evaluate(in.data, in.b, x0);
  SeededRandomForTesting rng(10);
  double sum = 0;
  constexpr int kDraws = 100000;
  for (int t = 0; t < kDraws; ++t) {
    ASSERT_OK_AND_ASSIGN(
        int64_t i, PrivateSubgradientIndex(in.data, in.b, x0, grid, rate, rng));
    sum += f0 - (in.a.row(i).dot(x0) + in.b[i]);
  }
  EXPECT_LE(sum / kDraws, 2 * (1 + std::log(20.0)) / eps);
  std::mt19937_64 gen(4);
  std::uniform_real_distribution<double> u(-1, 1);
  for (int t = 0; t < 1000; ++t) {
    Eigen::VectorXd x(5);
    for (int j = 0; j < 5; ++j) x[j] = u(gen);
    const int j = t % 20;
    const double gamma = f0 - (in.a.row(j).dot(x0) + in.b[j]);
    EXPECT_GE(Evaluate(in.data, in.b, x) + 1e-12,
              f0 + in.a.row(j).dot(x - x0) - gamma);
  }
}

// Scores in grid units move by at most sensitivity_units between
// neighbours, whatever the offsets (1e308 included): the charge's premise.
TEST(PiecewiseAffineAlgorithm1, ScoreSensitivityIncludingExtremes) {
  const ScoreGrid grid = MakeScoreGrid(0.75);
  std::mt19937_64 gen(11);
  std::uniform_real_distribution<double> u(-1, 1);
  const std::vector<double> magnitudes = {1, 1e3, 1e9, 1e15, 1e300};
  for (int t = 0; t < 20000; ++t) {
    const double c = u(gen) * magnitudes[t % 5];
    const double b = u(gen) * magnitudes[(t / 5) % 5];
    const double b2 = b + 0.75 * u(gen);
    EXPECT_LE(std::abs(static_cast<double>(ScoreUnits(c, b, grid) -
                                           ScoreUnits(c, b2, grid))),
              grid.sensitivity_units);
  }
  EXPECT_EQ(ScoreUnits(1e308, 1e308, grid), kMaxScoreUnits);
  EXPECT_EQ(ScoreUnits(-std::numeric_limits<double>::infinity(), 5, grid),
            -kMaxScoreUnits);
  EXPECT_EQ(ScoreUnits(std::nan(""), 5, grid), -kMaxScoreUnits);
}

// ---------------------------------------------------------------------------
// Algorithm 2.

// Composition and replay: k selections, each at eps / k; replaying (x^(1),
// alpha, projection, A, P, i*_1..i*_k) without b reproduces the trace bit for
// bit; every iterate lies in P; the same seed gives the same trace.
TEST(PiecewiseAffineAlgorithm2, TraceIsPostProcessingOfTheSelections) {
  Instance in = GaussianInstance(20, 5, 1.0, 12);
  SubgradientOptions o;
  o.iterations = 50;
  o.step_rule = StepRule::kDecreasing;
  SeededRandomForTesting rng(13);
  ASSERT_OK_AND_ASSIGN(
      SubgradientTrace t,
      RunSubgradient(in.info, in.data, o, true, 1.0 / 50, &rng, nullptr));
  ASSERT_EQ(t.indices.size(), 50u);
  ASSERT_EQ(t.iterates.size(), 51u);
  Eigen::VectorXd x = in.info.Center();
  EXPECT_EQ(t.iterates[0], x);
  for (int i = 1; i <= 50; ++i) {
    x = ProjectOntoPolytope(in.info,
                            x - SubgradientStep(in.info, o, i) *
                                    in.a.row(t.indices[i - 1]).transpose());
    EXPECT_EQ(x, t.iterates[i]) << i;
    EXPECT_TRUE(in.info.polytope.Contains(t.iterates[i], 1e-12));
  }
  EXPECT_EQ(t.last, t.iterates[50]);
  Eigen::VectorXd avg = Eigen::VectorXd::Zero(5);
  for (int i = 0; i < 50; ++i) avg += t.iterates[i];
  EXPECT_TRUE(t.average.isApprox(avg / 50, 1e-14));
  SeededRandomForTesting again(13);
  ASSERT_OK_AND_ASSIGN(
      SubgradientTrace t2,
      RunSubgradient(in.info, in.data, o, true, 1.0 / 50, &again, nullptr));
  EXPECT_EQ(t2.indices, t.indices);
  SeededRandomForTesting other(14);
  ASSERT_OK_AND_ASSIGN(
      SubgradientTrace t3,
      RunSubgradient(in.info, in.data, o, true, 1.0 / 50, &other, nullptr));
  EXPECT_NE(t3.indices, t.indices);
}

// Theorem 24 at a large epsilon (1e3), where the bound is not
// trivial, over 200 runs: mean of min_i f(x^(i)) - f_opt <= (R^2 + G^2
// sum alpha^2) / (2 sum alpha) + 2 k b_max (1 + ln m) / eps; the AVERAGE
// readout satisfies the same bound (the proof bounds the weighted mean).
TEST(PiecewiseAffineAlgorithm2, TheoremTwentyFour) {
  Instance in = GaussianInstance(20, 5, 1.0, 15);
  const double f_opt = FOpt(in);
  SubgradientOptions o;
  o.iterations = 100;
  const double eps = 1e3;
  const double alpha = SubgradientStep(in.info, o, 1);
  const double r = in.info.diameter;
  const double g = in.info.slope_norm_bound;
  const double bound =
      (r * r + g * g * 100 * alpha * alpha) / (2 * 100 * alpha) +
      2 * 100 * (1 + std::log(20.0)) / eps;
  SeededRandomForTesting rng(16);
  double best_sum = 0;
  double avg_sum = 0;
  constexpr int kRuns = 200;
  for (int run = 0; run < kRuns; ++run) {
    ASSERT_OK_AND_ASSIGN(
        SubgradientTrace t,
        RunSubgradient(in.info, in.data, o, true, eps / 100, &rng, nullptr));
    double best = std::numeric_limits<double>::infinity();
    for (const auto& x : t.iterates) {
      best = std::min(best, Evaluate(in.data, in.b, x));
    }
    best_sum += best - f_opt;
    avg_sum += Evaluate(in.data, in.b, t.average) - f_opt;
  }
  EXPECT_LE(best_sum / kRuns, bound);
  EXPECT_LE(avg_sum / kRuns, bound);
  EXPECT_LT(bound, 3.0);  // the check is not vacuous
}

// ---------------------------------------------------------------------------
// M_P and M_S with the real (exact) noise.

// M_P's per-draw bound: every draw has
// f(x~; b) - f_opt <= 2 ||b~ - b||_inf (+ 1e-9); and E ||w_P|| = m / lambda_P.
TEST(PiecewiseAffinePerturbProblem, PerDrawBoundAndNoiseNorm) {
  Instance in = GaussianInstance(10, 3, 1.0, 17);
  const double f_opt = FOpt(in);
  ASSERT_OK_AND_ASSIGN(noise::VectorLaplacePlan plan,
                       PerturbProblemPlan(in.info, 2.0));
  SeededRandomForTesting rng(18);
  double norm_sum = 0;
  constexpr int kRuns = 2000;
  for (int run = 0; run < kRuns; ++run) {
    ASSERT_OK_AND_ASSIGN(
        PerturbProblemOutput out,
        RunPerturbProblem(in.info, in.data, plan, SecureOffsetNoise(), rng));
    const Eigen::VectorXd w = out.b_tilde - in.b;
    EXPECT_LE(Evaluate(in.data, in.b, out.x) - f_opt,
              2 * w.lpNorm<Eigen::Infinity>() + 1e-9);
    EXPECT_TRUE(in.info.polytope.Contains(out.x, 1e-12));
    norm_sum += w.norm();
  }
  // ||w|| ~ Gamma(m, lambda): sd sqrt(m) / lambda.
  EXPECT_NEAR(norm_sum / kRuns, plan.expected_norm,
              5 * std::sqrt(10.0) / plan.lambda / std::sqrt(kRuns));
}

// Theorem 17: the mean of f(M_S) - f_opt, projected and raw, is <= G d^{3/2}
// Delta_S / eps (Thm 17), and E||w_S|| = d sqrt(d) Delta_S / eps.
TEST(PiecewiseAffinePerturbSolution, TheoremSeventeen) {
  Instance in = GaussianInstance(20, 3, 1.0, 19);
  const double f_opt = FOpt(in);
  const double eps = 5;
  ASSERT_OK_AND_ASSIGN(
      noise::VectorLaplacePlan plan,
      PerturbSolutionPlan(in.info, eps, SolutionNoise::kPaper));
  const double bound =
      in.info.slope_norm_bound * std::pow(3.0, 1.5) * in.info.diameter / eps;
  NoNoiseForTesting none;
  SeededRandomForTesting rng(20);
  ASSERT_OK_AND_ASSIGN(Eigen::VectorXd x_star,
                       RunPerturbSolution(in.info, in.data, plan, false, none,
                                          rng, absl::ZeroDuration()));
  double proj = 0, raw = 0, norm = 0;
  constexpr int kRuns = 2000;
  for (int run = 0; run < kRuns; ++run) {
    SeededRandomForTesting a(1000 + run), b(1000 + run);
    ASSERT_OK_AND_ASSIGN(
        Eigen::VectorXd xp,
        RunPerturbSolution(in.info, in.data, plan, true, SecureOffsetNoise(), a,
                           absl::ZeroDuration()));
    ASSERT_OK_AND_ASSIGN(
        Eigen::VectorXd xr,
        RunPerturbSolution(in.info, in.data, plan, false, SecureOffsetNoise(),
                           b, absl::ZeroDuration()));
    EXPECT_TRUE(in.info.polytope.Contains(xp, 1e-12));
    proj += Evaluate(in.data, in.b, xp) - f_opt;
    raw += Evaluate(in.data, in.b, xr) - f_opt;
    norm += (xr - x_star).norm();
  }
  EXPECT_LE(proj / kRuns, bound);
  EXPECT_LE(raw / kRuns, bound);
  EXPECT_NEAR(norm / kRuns, 3 * std::sqrt(3.0) * in.info.diameter / eps,
              5 * std::sqrt(3.0) / plan.lambda / std::sqrt(kRuns));
}

// Determinism and fail-closed: same seed, same output; a failing source fails
// the run.
TEST(PiecewiseAffinePerturbProblem, DeterministicGivenTheSeedAndFailsClosed) {
  Instance in = GaussianInstance(10, 3, 1.0, 21);
  ASSERT_OK_AND_ASSIGN(noise::VectorLaplacePlan plan,
                       PerturbProblemPlan(in.info, 1.0));
  SeededRandomForTesting a(5), b(5), c(6);
  ASSERT_OK_AND_ASSIGN(auto x, RunPerturbProblem(in.info, in.data, plan,
                                                 SecureOffsetNoise(), a));
  ASSERT_OK_AND_ASSIGN(auto y, RunPerturbProblem(in.info, in.data, plan,
                                                 SecureOffsetNoise(), b));
  ASSERT_OK_AND_ASSIGN(auto z, RunPerturbProblem(in.info, in.data, plan,
                                                 SecureOffsetNoise(), c));
  EXPECT_EQ(x.b_tilde, y.b_tilde);
  EXPECT_NE(x.b_tilde, z.b_tilde);
  noise::testing::FailingRandomForTesting failing(1, 3);
  EXPECT_FALSE(
      RunPerturbProblem(in.info, in.data, plan, SecureOffsetNoise(), failing)
          .ok());
}

}  // namespace
}  // namespace dpopt::optim::piecewise_affine
