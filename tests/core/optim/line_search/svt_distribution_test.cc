// SVT distribution: for fixed query values, the empirical distribution of
// the index returned by NOISYBTLS (Chen & Lee 2022, Algorithm 1:
// AboveThreshold with cutoff 1 and public threshold 0) matches the
// AboveThreshold output probabilities, by a chi-square goodness-of-fit test.
//
// Exact probabilities. With threshold noise T and i.i.d. query noises nu_i
// (integers in grid units, as NoisyBacktracking compares them), answer i is
// "above" iff q_i + nu_i >= T. Conditioning on T = t,
//   P(out = k) = sum_t P(T = t) prod_{i<k} F(t - q_i - 1) (1 - F(t - q_k - 1)),
//   P(fail)    = sum_t P(T = t) prod_{i<=K} F(t - q_i - 1),
// with F the query noise CDF (Lyu, Su, Li 2017 Alg. 1). For the
// small hand-made plans below the sums are exact (pmfs summed over +-150
// scales, tails below e^-150). For the production plan (PlanLaplaceSvt, ~2^25
// grid units per scale) the same probabilities are a numerical integral of
// the continuous Laplace densities in real units, whose error from the
// discreteness is O(grid / b) ~ 1e-7.
//
// Test statistics. N calls per case, chi-square with K degrees of freedom
// (K + 1 outcomes), rejected above the 0.999 quantile: the false-alarm rate
// for a fresh seed is 1e-3 per case. The generator is the seeded test generator
// (dpopt_noise_testing), so the result is reproducible. Power: the same counts
// are also tested against the distribution with the query noise of monotone
// queries, b_Q = 2 Delta / eps (wrong for these non-monotone queries, which
// need 4 Delta / eps), and must reject it; its expected chi-square at this N is
// in the thousands.
#include <cmath>
#include <functional>
#include <vector>

#include "core/noise/discrete_samplers.h"
#include "core/noise/testing/seeded_random.h"
#include "core/optim/line_search/svt_line_search.h"
#include "gtest/gtest.h"
#include "tests/common/status_matchers.h"

namespace dpopt::optim::line_search {
namespace {

using ::dpopt::noise::testing::SeededRandomForTesting;

// 0.999 quantiles of chi-square with df = 1..8 (standard tables).
constexpr double kChi2Q999[] = {0,      10.828, 13.816, 16.266, 18.467,
                                20.515, 22.458, 24.322, 26.124};

// Query values q_1..q_5 (grid units for the hand plans, real units for the
// production plan). They spread the outputs over all six outcomes.
const std::vector<double> kQueries = {-12, -6, -2, 0, 3};

// pmf on [-half, half] of a discrete distribution, as a vector.
std::vector<double> Pmf(const std::function<double(int64_t)>& unnormalised,
                        int64_t half) {
  std::vector<double> p(2 * half + 1);
  double z = 0;
  for (int64_t x = -half; x <= half; ++x) z += p[x + half] = unnormalised(x);
  for (double& v : p) v /= z;
  return p;
}

// Exact P(out = k), k = 1..K, then P(fail), for integer queries.
std::vector<double> ExactOutputProbabilities(const std::vector<double>& p_t,
                                             const std::vector<double>& p_q,
                                             int64_t half,
                                             const std::vector<double>& q) {
  std::vector<double> cdf(p_q.size());
  double acc = 0;
  for (size_t i = 0; i < p_q.size(); ++i) cdf[i] = acc += p_q[i];
  auto f = [&](int64_t x) {  // P(nu <= x)
    if (x < -half) return 0.0;
    if (x > half) return 1.0;
    return cdf[x + half];
  };
  std::vector<double> out(q.size() + 1, 0);
  for (int64_t t = -half; t <= half; ++t) {
    double below_so_far = p_t[t + half];
    for (size_t i = 0; i < q.size(); ++i) {
      const double below = f(t - static_cast<int64_t>(q[i]) - 1);
      out[i] += below_so_far * (1 - below);
      below_so_far *= below;
    }
    out.back() += below_so_far;
  }
  return out;
}

// Same probabilities for continuous Laplace noise (scales in real units),
// by the trapezoidal rule on [-60 b_T, 60 b_T] with 4e5 panels.
std::vector<double> LaplaceIntegralProbabilities(double b_t, double b_q,
                                                 const std::vector<double>& q) {
  auto cdf = [b_q](double x) {
    return x < 0 ? 0.5 * std::exp(x / b_q) : 1 - 0.5 * std::exp(-x / b_q);
  };
  const int panels = 400000;
  const double lo = -60 * b_t, h = 120 * b_t / panels;
  std::vector<double> out(q.size() + 1, 0);
  for (int j = 0; j <= panels; ++j) {
    const double t = lo + j * h;
    const double wt = (j == 0 || j == panels ? 0.5 : 1.0) * h *
                      std::exp(-std::fabs(t) / b_t) / (2 * b_t);
    double below_so_far = wt;
    for (size_t i = 0; i < q.size(); ++i) {
      const double below = cdf(t - q[i]);
      out[i] += below_so_far * (1 - below);
      below_so_far *= below;
    }
    out.back() += below_so_far;
  }
  return out;
}

// Runs NoisyBacktracking n times on fixed queries (in real units: F(w) = 0,
// F(w - eta_i g) = -q_i, c_A = 0, so the Armijo slack is q_i exactly) and
// returns the counts of outputs 1..K and of "fail".
std::vector<int64_t> SampleOutputs(const SvtPlan& plan,
                                   const std::vector<double>& q, int n,
                                   uint64_t seed) {
  LineSearchOptions o;
  o.initial_step = 1;
  o.shrink = 0.5;
  o.armijo = 0;
  o.max_candidates = static_cast<int>(q.size());
  o.fallback_step = 0;
  EXPECT_OK(o.Validate());
  const Eigen::VectorXd w = Eigen::VectorXd::Zero(1);
  const Eigen::VectorXd g = Eigen::VectorXd::Ones(1);
  // v = w - eta_i g = -2^{-(i-1)}: i = 1 + log2(1 / -v).
  auto f = [&q](const Eigen::VectorXd& v) {
    if (v[0] == 0) return 0.0;
    const int i = static_cast<int>(std::lround(std::log2(-1 / v[0])));
    return -q[i];
  };
  SeededRandomForTesting rng(seed);
  std::vector<int64_t> counts(q.size() + 1, 0);
  for (int s = 0; s < n; ++s) {
    absl::StatusOr<LineSearchResult> r =
        NoisyBacktracking(f, w, g, 1.0, o, plan, SecureSvtNoise(), rng);
    if (!r.ok()) {
      ADD_FAILURE() << r.status();
      return counts;
    }
    if (r->accepted) {
      EXPECT_EQ(r->step, std::exp2(-(r->candidates - 1)));
      ++counts[r->candidates - 1];
    } else {
      EXPECT_EQ(r->candidates, static_cast<int>(q.size()));
      ++counts.back();
    }
  }
  return counts;
}

double ChiSquare(const std::vector<int64_t>& counts,
                 const std::vector<double>& p, int n) {
  double chi2 = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    const double e = n * p[i];
    EXPECT_GE(e, 20) << "cell " << i << " too small for the chi-square test";
    chi2 += (counts[i] - e) * (counts[i] - e) / e;
  }
  return chi2;
}

// A hand-made plan: grid 1 (query values are grid units), Delta_g = 2 and
// eps_BT = 1 (Laplace: b_T = 2 Delta_g / eps = 4, b_Q = 4 Delta_g / eps = 8,
// paper Thm 1).
SvtPlan SmallLaplacePlan(double b_q) {
  SvtPlan p;
  p.kind = SvtNoiseKind::kLaplace;
  p.sensitivity = 2;
  p.epsilon = 1;
  p.grid = 1;
  p.sensitivity_in_grid_units = 2;
  p.effective_sensitivity = 2;
  p.threshold_scale = 4;
  p.query_scale = b_q;
  return p;
}

std::vector<double> LaplaceExact(double b_t, double b_q) {
  const int64_t half = 150 * static_cast<int64_t>(std::ceil(b_q));
  auto lap = [](double b) {
    return [b](int64_t x) { return std::exp(-std::fabs(x) / b); };
  };
  return ExactOutputProbabilities(Pmf(lap(b_t), half), Pmf(lap(b_q), half),
                                  half, kQueries);
}

TEST(SvtDistributionTest, LaplaceOutputIndexMatchesAboveThreshold) {
  const int n = 40000;
  const SvtPlan plan = SmallLaplacePlan(8);
  const std::vector<double> p = LaplaceExact(4, 8);
  double total = 0;
  for (double v : p) total += v;
  ASSERT_NEAR(total, 1, 1e-12);
  const std::vector<int64_t> counts = SampleOutputs(plan, kQueries, n, 25);
  const int df = static_cast<int>(p.size()) - 1;
  EXPECT_LT(ChiSquare(counts, p, n), kChi2Q999[df]);
  // Power: the monotone-query scale b_Q = 2 Delta / eps is rejected.
  EXPECT_GT(ChiSquare(counts, LaplaceExact(4, 4), n), 10 * kChi2Q999[df]);
}

// Gaussian version (paper Thm 3): s_T = Delta_g
// sqrt(3 / (2 rho)), s_Q = Delta_g sqrt(3 / rho) with Delta_g = 2 and
// rho = 0.375 (s_T = 4, s_Q = 5.66). The discrete Gaussian sampler rounds
// sigma up to a dyadic; the exact probabilities use the sigma it samples.
TEST(SvtDistributionTest, GaussianOutputIndexMatchesAboveThreshold) {
  const int n = 40000;
  SvtPlan plan;
  plan.kind = SvtNoiseKind::kGaussian;
  plan.sensitivity = 2;
  plan.rho = 0.375;
  plan.grid = 1;
  plan.sensitivity_in_grid_units = 2;
  plan.effective_sensitivity = 2;
  plan.threshold_scale = 2 * std::sqrt(3 / (2 * plan.rho));
  plan.query_scale = 2 * std::sqrt(3 / plan.rho);
  ASSERT_OK_AND_ASSIGN(
      noise::DiscreteGaussianSampler st,
      noise::DiscreteGaussianSampler::Create(plan.threshold_scale));
  ASSERT_OK_AND_ASSIGN(
      noise::DiscreteGaussianSampler sq,
      noise::DiscreteGaussianSampler::Create(plan.query_scale));
  const int64_t half = 200;  // > 35 sigma
  auto gauss = [](double s) {
    return [s](int64_t x) { return std::exp(-0.5 * x * x / (s * s)); };
  };
  const std::vector<double> p =
      ExactOutputProbabilities(Pmf(gauss(st.sigma()), half),
                               Pmf(gauss(sq.sigma()), half), half, kQueries);
  const std::vector<int64_t> counts = SampleOutputs(plan, kQueries, n, 26);
  const int df = static_cast<int>(p.size()) - 1;
  EXPECT_LT(ChiSquare(counts, p, n), kChi2Q999[df]);
  // Power: query noise at the threshold's scale is rejected.
  const std::vector<double> wrong =
      ExactOutputProbabilities(Pmf(gauss(st.sigma()), half),
                               Pmf(gauss(st.sigma()), half), half, kQueries);
  EXPECT_GT(ChiSquare(counts, wrong, n), 10 * kChi2Q999[df]);
}

// The production plan (C_obj = 1, eps_BT = 0.5: b_T ~ 4, b_Q ~ 8 in loss
// units, on a grid of ~2^-23), including the rounding of q_i to the grid.
TEST(SvtDistributionTest, ProductionLaplacePlanMatchesNumericalIntegration) {
  const int n = 40000;
  ASSERT_OK_AND_ASSIGN(SvtPlan plan, PlanLaplaceSvt(1.0, 0.5));
  const double b_t = plan.threshold_scale * plan.grid;
  const double b_q = plan.query_scale * plan.grid;
  EXPECT_NEAR(b_t, 4, 1e-5);
  EXPECT_NEAR(b_q, 8, 1e-5);
  const std::vector<double> p =
      LaplaceIntegralProbabilities(b_t, b_q, kQueries);
  double total = 0;
  for (double v : p) total += v;
  ASSERT_NEAR(total, 1, 1e-7);  // trapezoidal error at the kink
  // The integral agrees with the exact discrete sum of the hand plan (same
  // scales in units of Delta) up to the discreteness of that plan.
  const std::vector<double> exact = LaplaceExact(4, 8);
  for (size_t i = 0; i < p.size(); ++i) EXPECT_NEAR(p[i], exact[i], 0.03);
  const std::vector<int64_t> counts = SampleOutputs(plan, kQueries, n, 27);
  const int df = static_cast<int>(p.size()) - 1;
  EXPECT_LT(ChiSquare(counts, p, n), kChi2Q999[df]);
  EXPECT_GT(
      ChiSquare(counts, LaplaceIntegralProbabilities(b_t, b_t, kQueries), n),
      10 * kChi2Q999[df]);
}

}  // namespace
}  // namespace dpopt::optim::line_search
