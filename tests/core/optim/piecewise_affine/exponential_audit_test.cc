// M_E's exact sampler (its law in one and two dimensions, Theorem 21's
// constant and bounds of Han, Topcu & Pappas 2014) and the empirical privacy
// audit of every piecewise-affine mechanism on a worst-case neighbouring pair
// (core/audit: the auditor's lower bound must not exceed the charged
// epsilon).
//
// Reference laws are computed here independently: the 1-D density by a
// 2e6-point midpoint rule, multi-dimensional expectations by self-normalised
// importance sampling from uniform points (1e6 draws of the test-only
// std::mt19937_64). Statistical checks: KS at p = 1e-3, 5 standard errors.
#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <random>
#include <vector>

#include "core/audit/auditor.h"
#include "core/common/status_macros.h"
#include "core/noise/testing/seeded_random.h"
#include "core/optim/piecewise_affine/lp.h"
#include "core/optim/piecewise_affine/mechanisms.h"
#include "core/optim/piecewise_affine/scores.h"
#include "core/privacy/accountant.h"
#include "core/privacy/dp_event.h"
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

// Proposal rounds of the tests that draw many samples: far more than the
// expected number of proposals of their instances (the tests check that no
// sample is the fallback), far fewer than the public cap.
constexpr int64_t kTestRounds = 6000;

double FOpt(const Instance& in) {
  auto lp = SolveMaxAffine(in.a, in.b, in.info.polytope);
  if (!lp.ok()) std::abort();
  return lp->value;
}

// The exact law of exp(-beta f) on [l, u] for d = 1 in
// closed form. f is convex piecewise linear; on each segment [z_k, z_k+1]
// between consecutive breakpoints it is s_k x + t_k, with mass
//   M_k = exp(-beta f(z_k)) (1 - exp(-beta s_k L_k)) / (beta s_k)
// (L_k exp(-beta f(z_k)) when s_k = 0). The CDF is exact within each
// segment, and so is its inverse (a 1-D inverse-CDF sampler, here only
// a test reference: its floating-point inversion is not a secure sampler,
// so the service uses the lattice rejection sampler in every dimension).
class OneDimensionalLaw {
 public:
  OneDimensionalLaw(const Eigen::VectorXd& slope, const Eigen::VectorXd& b,
                    double lo, double hi, double beta)
      : slope_(slope), b_(b), beta_(beta) {
    std::vector<double> z = {lo, hi};
    for (int i = 0; i < slope.size(); ++i) {
      for (int j = i + 1; j < slope.size(); ++j) {
        if (slope[i] == slope[j]) continue;
        const double x = (b[j] - b[i]) / (slope[i] - slope[j]);
        if (x > lo && x < hi) z.push_back(x);
      }
    }
    std::sort(z.begin(), z.end());
    f_min_ = std::numeric_limits<double>::infinity();
    for (double x : z) f_min_ = std::min(f_min_, F(x));
    double total = 0;
    for (size_t k = 0; k + 1 < z.size(); ++k) {
      if (!(z[k + 1] > z[k])) continue;
      Segment seg;
      seg.z = z[k];
      seg.length = z[k + 1] - z[k];
      // The active piece: the maximiser at the segment's midpoint.
      const double mid = z[k] + seg.length / 2;
      Eigen::Index i = 0;
      (slope * mid + b).maxCoeff(&i);
      seg.s = slope[i];
      seg.top = std::exp(-beta_ * (F(z[k]) - f_min_));
      seg.start = total;
      total += seg.top * Partial(seg.s, seg.length);
      segments_.push_back(seg);
    }
    total_ = total;
  }

  double Cdf(double x) const {
    if (x <= segments_.front().z) return 0;
    for (const Segment& seg : segments_) {
      if (x <= seg.z + seg.length) {
        return (seg.start + seg.top * Partial(seg.s, x - seg.z)) / total_;
      }
    }
    return 1;
  }

  // Inverse CDF at u in (0, 1).
  double Quantile(double u) const {
    const double target = u * total_;
    for (const Segment& seg : segments_) {
      const double mass = seg.top * Partial(seg.s, seg.length);
      if (target <= seg.start + mass || &seg == &segments_.back()) {
        const double v = std::clamp((target - seg.start) / seg.top, 0.0,
                                    Partial(seg.s, seg.length));
        // Solve Partial(s, y) = v for y.
        const double bs = beta_ * seg.s;
        const double y = bs == 0 ? v : -std::log1p(-bs * v) / bs;
        return seg.z + std::clamp(y, 0.0, seg.length);
      }
    }
    return segments_.back().z + segments_.back().length;
  }

  // C(0, eps) of Theorem 21: (u - l) / integral exp(-beta (f - f_opt)).
  double ProposalConstant(double width) const { return width / total_; }

 private:
  struct Segment {
    double z = 0, length = 0, s = 0, top = 0, start = 0;
  };
  double F(double x) const { return (slope_ * x + b_).maxCoeff(); }
  // int_0^y exp(-beta s t) dt.
  double Partial(double s, double y) const {
    const double bs = beta_ * s;
    return bs == 0 ? y : -std::expm1(-bs * y) / bs;
  }
  Eigen::VectorXd slope_, b_;
  double beta_;
  double f_min_ = 0;
  double total_ = 0;
  std::vector<Segment> segments_;
};

// sqrt(n) times the KS distance of sorted samples from a CDF.
double KsStatistic(const std::vector<double>& sorted,
                   const std::function<double(double)>& cdf) {
  const double n = static_cast<double>(sorted.size());
  double d = 0;
  for (size_t i = 0; i < sorted.size(); ++i) {
    const double c = cdf(sorted[i]);
    d = std::max({d, std::abs(c - i / n), std::abs((i + 1) / n - c)});
  }
  return std::sqrt(n) * d;
}

// Kolmogorov's limit at p = 1e-3.
constexpr double kKsCritical = 1.9495;

// d = 1, P = [-1, 1], m = 6, eps = 5, b_max = 1: the service's exact
// sampler and the reference inverse-CDF sampler above both pass a
// KS test against the closed-form CDF (p = 1e-3); power check: the same
// test rejects beta off by 20%. The mean number of proposals is C(0, eps).
TEST(PiecewiseAffineExponential, OneDimensionMatchesTheExactLaw) {
  Instance in = GaussianInstance(6, 1, 1.0, 31);
  ASSERT_OK_AND_ASSIGN(ExponentialPlan plan, PlanExponential(in.info, 5.0));
  EXPECT_NEAR(plan.beta, 2.5, 2.5 * 1e-5);
  // Fewer rounds than the public cap keep the test fast; every sample below
  // is checked to come from an accepted round (not the fallback).
  plan.rounds = std::min<int64_t>(plan.rounds, kTestRounds);
  const OneDimensionalLaw law(in.a.col(0), in.b, -1, 1, plan.beta);
  const OneDimensionalLaw off(in.a.col(0), in.b, -1, 1, 1.2 * plan.beta);
  SeededRandomForTesting rng(32);
  constexpr int kSamples = 20000;
  std::vector<double> s;
  double proposals = 0;
  double floor_value = 0;
  for (int i = 0; i < kSamples; ++i) {
    ExponentialRunStats stats;
    ASSERT_OK_AND_ASSIGN(Eigen::VectorXd x,
                         RunExponential(in.info, in.data, plan, rng, &stats));
    ASSERT_TRUE(x[0] > -1 && x[0] < 1);
    ASSERT_GT(stats.first_accepted, 0);
    ASSERT_EQ(stats.rounds, plan.rounds);
    s.push_back(x[0]);
    proposals += static_cast<double>(stats.first_accepted);
    floor_value = stats.floor_value;
  }
  std::sort(s.begin(), s.end());
  auto cdf = [&](double x) { return law.Cdf(x); };
  auto cdf_off = [&](double x) { return off.Cdf(x); };
  EXPECT_LT(KsStatistic(s, cdf), kKsCritical);
  EXPECT_GT(KsStatistic(s, cdf_off), kKsCritical);

  // The reference inverse-CDF sampler against the same CDF (checks the
  // closed form itself: CDF and quantile are computed independently).
  std::mt19937_64 gen(33);
  std::uniform_real_distribution<double> unif(0, 1);
  std::vector<double> r;
  for (int i = 0; i < kSamples; ++i) r.push_back(law.Quantile(unif(gen)));
  std::sort(r.begin(), r.end());
  EXPECT_LT(KsStatistic(r, cdf), kKsCritical);
  EXPECT_GT(KsStatistic(r, cdf_off), kKsCritical);

  // The first accepted round is geometric with mean C(0, eps) (Theorem
  // 21's constant) times exp(beta (f_opt - F_lo)) for the certified lower
  // bound F_lo the sampler used, which is within the plan's gap of f_opt.
  const double f_opt = FOpt(in);
  ASSERT_LE(floor_value, f_opt);
  EXPECT_LE(plan.beta * (f_opt - floor_value), 0.25 + 6 * plan.rate.ToDouble());
  const double c =
      law.ProposalConstant(2.0) * std::exp(plan.beta * (f_opt - floor_value));
  EXPECT_NEAR(proposals / kSamples, c,
              5 * std::sqrt(c * std::max(c - 1, 1e-3) / kSamples) + 1e-3 * c);
}

// d = 2, m = 10, eps in {0.1, 1, 10}: E f and E x of the
// exact samples agree with importance-sampling estimates (5 SE), the mean
// number of proposals is C(0, eps) = 1 / E_U exp(-beta (f(U) - f_opt))
// (Theorem 21's constant; 5 SE), and E f - f_opt <= C 2 b_max / eps and
// <= (1 + ln C) 2 b_max / eps, decreasing in eps.
TEST(PiecewiseAffineExponential, MultiDimensionalLawAndTheoremTwentyOne) {
  Instance in = GaussianInstance(10, 2, 1.0, 33);
  const double f_opt = FOpt(in);
  double previous_mean = std::numeric_limits<double>::infinity();
  double previous_se = 0;
  for (double eps : {0.1, 1.0, 10.0}) {
    ASSERT_OK_AND_ASSIGN(ExponentialPlan plan, PlanExponential(in.info, eps));
    plan.rounds = std::min<int64_t>(plan.rounds, kTestRounds);
    const double beta = plan.beta;
    // Reference by importance sampling from Uniform(P).
    std::mt19937_64 gen(34);
    std::uniform_real_distribution<double> u(-1, 1);
    double w_sum = 0, wf = 0, ws = 0;
    Eigen::Vector2d wx = Eigen::Vector2d::Zero();
    Eigen::Vector2d wxx = Eigen::Vector2d::Zero();
    constexpr int kRef = 1000000;
    for (int i = 0; i < kRef; ++i) {
      const Eigen::Vector2d x(u(gen), u(gen));
      const double f = (in.a * x + in.b).maxCoeff();
      const double w = std::exp(-beta * (f - f_opt));
      w_sum += w;
      wf += w * f;
      wx += w * x;
      wxx += w * x.cwiseProduct(x);
      ws += w * f * f;
    }
    const double ef = wf / w_sum;
    const Eigen::Vector2d ex = wx / w_sum;
    const Eigen::Vector2d exx = wxx / w_sum;
    const double sd_f = std::sqrt(std::max(0.0, ws / w_sum - ef * ef));
    const double c = kRef / w_sum;  // C(0, eps)
    SeededRandomForTesting rng(35);
    constexpr int kSamples = 4000;
    double sf = 0, props = 0, floor_value = 0;
    Eigen::Vector2d sx = Eigen::Vector2d::Zero();
    Eigen::Vector2d sxx = Eigen::Vector2d::Zero();
    for (int i = 0; i < kSamples; ++i) {
      ExponentialRunStats stats;
      ASSERT_OK_AND_ASSIGN(Eigen::VectorXd x,
                           RunExponential(in.info, in.data, plan, rng, &stats));
      ASSERT_GT(stats.first_accepted, 0);
      floor_value = stats.floor_value;
      sf += Evaluate(in.data, in.b, x);
      sx += x;
      sxx += x.cwiseProduct(x);
      props += static_cast<double>(stats.first_accepted);
    }
    const double n = kSamples;
    EXPECT_NEAR(sf / n, ef, 5 * sd_f / std::sqrt(n)) << "eps " << eps;
    // Marginals: mean and second moment of each coordinate (|x_j| <= 1).
    for (int j = 0; j < 2; ++j) {
      EXPECT_NEAR(sx[j] / n, ex[j], 5 / std::sqrt(n)) << "eps " << eps;
      EXPECT_NEAR(sxx[j] / n, exx[j], 5 / std::sqrt(n)) << "eps " << eps;
    }
    // The first accepted round is geometric with mean C exp(beta (f_opt -
    // F_lo)): sd sqrt(C (C - 1)). F_lo is certified (<= f_opt) and within
    // the plan's gap (beta G R / sqrt(K) <= 1/4, plus grid rounding).
    ASSERT_LE(floor_value, f_opt) << "eps " << eps;
    EXPECT_LE(beta * (f_opt - floor_value), 0.25 + 6 * plan.rate.ToDouble())
        << "eps " << eps;
    const double mean = c * std::exp(beta * (f_opt - floor_value));
    EXPECT_NEAR(
        props / n, mean,
        5 * std::sqrt(mean * std::max(mean - 1, 1e-3) / n) + 1e-3 * mean)
        << "eps " << eps;
    EXPECT_LE(sf / n - f_opt, c * 2 / eps) << "eps " << eps;
    // The tighter (1 + ln C) 2 b_max / eps bound (integrate
    // min(1, C e^{-beta gamma}) instead of Theorem 21's tail bound), and
    // E f - f_opt decreasing in eps (d/d beta E f = -Var f), within 5 SE.
    EXPECT_LE(sf / n - f_opt, (1 + std::log(c)) * 2 / eps) << "eps " << eps;
    const double se = sd_f / std::sqrt(n);
    EXPECT_LT(sf / n, previous_mean + 5 * std::hypot(se, previous_se))
        << "eps " << eps;
    previous_mean = sf / n;
    previous_se = se;
    EXPECT_LE(c, plan.expected_proposals_bound);
  }
}

// At eps = 1e-6 the samples are uniform on P: coordinate mean 0,
// variance c^2 / 3 (5 SE).
TEST(PiecewiseAffineExponential, TinyEpsilonIsUniform) {
  Instance in = GaussianInstance(10, 3, 2.0, 36);
  ASSERT_OK_AND_ASSIGN(ExponentialPlan plan, PlanExponential(in.info, 1e-6));
  SeededRandomForTesting rng(37);
  constexpr int kSamples = 20000;
  Eigen::VectorXd sum = Eigen::VectorXd::Zero(3);
  Eigen::VectorXd sq = Eigen::VectorXd::Zero(3);
  for (int i = 0; i < kSamples; ++i) {
    ASSERT_OK_AND_ASSIGN(Eigen::VectorXd x,
                         RunExponential(in.info, in.data, plan, rng));
    sum += x;
    sq += x.cwiseProduct(x);
  }
  const double var = 4.0 / 3;              // c^2 / 3, c = 2
  const double var_of_sq = 16.0 * 4 / 45;  // Var(U^2) = 4 c^4 / 45
  for (int j = 0; j < 3; ++j) {
    EXPECT_NEAR(sum[j] / kSamples, 0, 5 * std::sqrt(var / kSamples));
    EXPECT_NEAR(sq[j] / kSamples, var, 5 * std::sqrt(var_of_sq / kSamples));
  }
}

// Extreme offsets: offsets at the edges of the import range (|b_i| =
// 2^27 b_max) sample correctly (the scores are shifted by max b, never
// clamped); offsets beyond it, which no import admits, are refused rather
// than clamped.
TEST(PiecewiseAffineExponential, ExtremeOffsetsAreInRangeOrRefused) {
  Instance in = GaussianInstance(6, 2, 1.0, 38);
  Eigen::VectorXd b = in.b;
  b[0] = kMaxOffsetRatio;
  b[1] = -kMaxOffsetRatio;
  b[2] = 4.9406564584124654e-324;
  Instance ex = MakeInstance(in.a, b, Cube(2, 1.0));
  ASSERT_OK_AND_ASSIGN(ExponentialPlan plan, PlanExponential(ex.info, 1.0));
  SeededRandomForTesting rng(39);
  for (int i = 0; i < 100; ++i) {
    ExponentialRunStats stats;
    ASSERT_OK_AND_ASSIGN(Eigen::VectorXd x,
                         RunExponential(ex.info, ex.data, plan, rng, &stats));
    EXPECT_TRUE(ex.info.polytope.Contains(x, 0));
    EXPECT_GT(stats.first_accepted, 0);
    // Certified: f_opt <= f(0) = max_i b_i.
    EXPECT_LE(stats.floor_value, kMaxOffsetRatio);
  }
  for (double big : {1e308, -1e308, 2 * kMaxOffsetRatio}) {
    Eigen::VectorXd far = in.b;
    far[3] = big;
    Instance out = MakeInstance(in.a, far, Cube(2, 1.0));
    EXPECT_THAT(RunExponential(out.info, out.data, plan, rng).status(),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         ::testing::HasSubstr("range checked at import")));
  }
}

// ---------------------------------------------------------------------------
// Empirical audits: lower bound (99% confidence) <= the charged epsilon on
// worst-case neighbours (b' = b + b_max v, ||v||_inf = 1).

audit::AuditResult Audit(const audit::ScalarMechanism& m, uint64_t seed) {
  SeededRandomForTesting rng(seed);
  audit::AuditOptions o;
  o.selection_trials = 2000;
  o.evaluation_trials = 20000;
  auto r = audit::AuditScalarMechanism(m, o, rng);
  EXPECT_OK(r.status());
  return r.value_or(audit::AuditResult{});
}

TEST(PiecewiseAffineAudit, PerturbProblem) {
  Instance in = GaussianInstance(3, 2, 1.0, 40);
  Eigen::VectorXd shifted = in.b.array() + 1.0;  // l2 shift sqrt(m) b_max
  Instance other = MakeInstance(in.a, shifted, Cube(2, 1.0));
  const double eps = 1.0;
  ASSERT_OK_AND_ASSIGN(noise::VectorLaplacePlan plan,
                       PerturbProblemPlan(in.info, eps));
  auto r = Audit(
      [&](bool neighbour, noise::RandomSource& rng) -> absl::StatusOr<double> {
        const Instance& use = neighbour ? other : in;
        ASSIGN_OR_RETURN(PerturbProblemOutput out,
                         RunPerturbProblem(use.info, use.data, plan,
                                           SecureOffsetNoise(), rng));
        return out.b_tilde.sum();
      },
      41);
  EXPECT_LE(r.epsilon_lower_bound, eps);
  EXPECT_GT(r.epsilon_lower_bound, 0.2 * eps);  // the audit sees something
}

TEST(PiecewiseAffineAudit, PerturbSolution) {
  // x*(b) = 0 and x*(b') = 1 on P = [-2, 2]: adjacent offsets (b_max = 1)
  // whose minimisers are far apart.
  Eigen::MatrixXd a(2, 1);
  a << 1, -1;
  Instance in = MakeInstance(a, Eigen::Vector2d(0, 0), Cube(1, 2.0));
  Instance other = MakeInstance(a, Eigen::Vector2d(-1, 1), Cube(1, 2.0));
  const double eps = 1.0;
  ASSERT_OK_AND_ASSIGN(
      noise::VectorLaplacePlan plan,
      PerturbSolutionPlan(in.info, eps, SolutionNoise::kTight));
  auto r = Audit(
      [&](bool neighbour, noise::RandomSource& rng) -> absl::StatusOr<double> {
        const Instance& use = neighbour ? other : in;
        ASSIGN_OR_RETURN(
            Eigen::VectorXd x,
            RunPerturbSolution(use.info, use.data, plan, false,
                               SecureOffsetNoise(), rng, absl::ZeroDuration()));
        return x[0];
      },
      42);
  EXPECT_LE(r.epsilon_lower_bound, eps);
}

TEST(PiecewiseAffineAudit, PrivateSubgradientSelection) {
  // One step of Algorithm 2 (k = 1): the released index moves most when one
  // piece goes up by b_max and the others down.
  Instance in = GaussianInstance(4, 2, 1.0, 43);
  Eigen::VectorXd b2 = in.b.array() - 1.0;
  b2[0] += 2.0;
  Instance other = MakeInstance(in.a, b2, Cube(2, 1.0));
  const double eps = 2.0;
  SubgradientOptions o;
  o.iterations = 1;
  o.release_trace = true;
  auto r = Audit(
      [&](bool neighbour, noise::RandomSource& rng) -> absl::StatusOr<double> {
        const Instance& use = neighbour ? other : in;
        ASSIGN_OR_RETURN(
            SubgradientTrace t,
            RunSubgradient(use.info, use.data, o, true, eps, &rng, nullptr));
        return t.indices[0] == 0 ? 1.0 : 0.0;
      },
      44);
  EXPECT_LE(r.epsilon_lower_bound, eps);
  EXPECT_GT(r.epsilon_lower_bound, 0.3 * eps);
}

// Algorithm 2 with k = 20 steps at eps = 1 in total, audited against its
// charge under an RDP filter at delta = 1e-6 (the k selections priced as
// exponential mechanisms, eps^2 / (8 k)-zCDP): a lower (epsilon, 1e-6) bound
// from how often piece 0 is chosen when it goes up by b_max and the others
// down must not exceed that charge, which is below the job's pure eps.
TEST(PiecewiseAffineAudit, SubgradientAgainstItsRdpCharge) {
  Instance in = GaussianInstance(4, 2, 1.0, 45);
  Eigen::VectorXd b2 = in.b.array() - 1.0;
  b2[0] += 2.0;
  Instance other = MakeInstance(in.a, b2, Cube(2, 1.0));
  const double eps = 1.0;
  const int64_t k = 20;
  ASSERT_OK_AND_ASSIGN(
      privacy::EpsilonResult charged,
      privacy::ComputeEpsilon(privacy::DpEvent::ExponentialMechanisms(eps, k),
                              1e-6, privacy::AccountantKind::kRdp));
  EXPECT_LT(charged.epsilon, 0.7 * eps);
  SubgradientOptions o;
  o.iterations = k;
  SeededRandomForTesting rng(46);
  audit::AuditOptions ao;
  ao.selection_trials = 2000;
  ao.evaluation_trials = 20000;
  ao.delta = 1e-6;
  auto r = audit::AuditScalarMechanism(
      [&](bool neighbour, noise::RandomSource& g) -> absl::StatusOr<double> {
        const Instance& use = neighbour ? other : in;
        ASSIGN_OR_RETURN(
            SubgradientTrace t,
            RunSubgradient(use.info, use.data, o, true,
                           eps / static_cast<double>(k), &g, nullptr));
        return static_cast<double>(
            std::count(t.indices.begin(), t.indices.end(), 0));
      },
      ao, rng);
  ASSERT_OK(r.status());
  EXPECT_LE(r->epsilon_lower_bound, charged.epsilon);
}

TEST(PiecewiseAffineAudit, Exponential) {
  Eigen::MatrixXd a(2, 1);
  a << 1, -1;
  Instance in = MakeInstance(a, Eigen::Vector2d(0, 0), Cube(1, 1.0));
  Instance other = MakeInstance(a, Eigen::Vector2d(1, -1), Cube(1, 1.0));
  const double eps = 2.0;
  ASSERT_OK_AND_ASSIGN(ExponentialPlan plan, PlanExponential(in.info, eps));
  auto r = Audit(
      [&](bool neighbour, noise::RandomSource& rng) -> absl::StatusOr<double> {
        const Instance& use = neighbour ? other : in;
        ASSIGN_OR_RETURN(Eigen::VectorXd x,
                         RunExponential(use.info, use.data, plan, rng));
        return x[0];
      },
      45);
  EXPECT_LE(r.epsilon_lower_bound, eps);
  EXPECT_GT(r.epsilon_lower_bound, 0.2 * eps);
}

}  // namespace
}  // namespace dpopt::optim::piecewise_affine
