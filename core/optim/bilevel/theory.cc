#include "core/optim/bilevel/theory.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_format.h"
#include "core/common/status_macros.h"
#include "core/optim/bilevel/dp_loc_gd.h"

namespace dpopt::optim::bilevel {
namespace {

constexpr int64_t kMaxRows = 3'000'000'000;
constexpr double kInf = std::numeric_limits<double>::infinity();

// a / b with a / 0 = +inf (a constant that is 0 imposes no condition).
double Ratio(double a, double b) { return b > 0 ? a / b : kInf; }

// R_M of one paper-mode solve: the radii recursion (dp_loc_gd.h) run M
// times from R_0
// (SetPaperRadii fills R_0..R_M when asked for M + 1 rounds with the same
// M and T_GD in its logarithms).
double FinalRadius(const InnerProblem& problem, int64_t rounds, double steps,
                   double sigma, double gamma_in) {
  InnerPlan plan;
  plan.rounds = rounds + 1;
  plan.steps = static_cast<int64_t>(steps);
  // The recursion's ln(4M/gamma) and ln(2 M T_GD/gamma) use M: evaluate with
  // M rounds by scaling gamma (4 (M+1)/gamma' = 4 M/gamma).
  const double gamma_adj =
      gamma_in * static_cast<double>(rounds + 1) / static_cast<double>(rounds);
  SetPaperRadii(problem, sigma, /*minibatch=*/false, gamma_adj, &plan);
  return plan.radii.back();
}

}  // namespace

absl::Status TheoryInputs::Validate() const {
  RETURN_IF_ERROR(constants.Validate());
  RETURN_IF_ERROR(split.Validate());
  if (!(std::isfinite(initial_gap) && initial_gap > 0)) {
    return absl::InvalidArgumentError("Delta_F must be finite and > 0");
  }
  if (rows < 1 || rows > kMaxRows || dx < 1 || dy < 1) {
    return absl::InvalidArgumentError(
        "n must be in [1, 3e9] (T_GD = n^2 inner steps) and dx, dy >= 1");
  }
  if (!(std::isfinite(epsilon) && epsilon > 0) || !(delta > 0 && delta < 1) ||
      !(failure > 0 && failure < 1)) {
    return absl::InvalidArgumentError(
        "need epsilon > 0, delta in (0, 1) and gamma in (0, 1)");
  }
  if (!(split.outer > 0)) {
    return absl::InvalidArgumentError(
        "the theory calculator needs an outer budget share > 0 (Theorem 4.1 "
        "has outer noise)");
  }
  if (relation_factor != 1 && relation_factor != 2) {
    return absl::InvalidArgumentError("relation factor must be 1 or 2");
  }
  return absl::OkStatus();
}

double TheoryLambdaMin(const ProblemConstants& k) {
  const double mu = k.strong_convexity_g;
  return std::max({2 * k.smoothness_f / mu, 2 * k.smoothness_g / mu,
                   Ratio(k.lipschitz_f, k.lipschitz_g),
                   Ratio(k.smoothness_f, k.smoothness_g)});
}

double TheoryAlphaMax(const ProblemConstants& k, double initial_gap) {
  const double ell = k.ell();
  const double kappa = k.kappa();
  return ell * std::pow(kappa, 3) *
         std::min({1 / (2 * kappa), Ratio(k.lipschitz_g, k.lipschitz_f),
                   Ratio(k.smoothness_g, k.smoothness_f),
                   initial_gap / (ell * kappa)});
}

absl::StatusOr<TheoryPoint> EvaluateTheory(const TheoryInputs& in,
                                           double alpha) {
  RETURN_IF_ERROR(in.Validate());
  if (!(std::isfinite(alpha) && alpha > 0)) {
    return absl::InvalidArgumentError("alpha must be finite and > 0");
  }
  const ProblemConstants& k = in.constants;
  const double ell = k.ell();
  const double kappa = k.kappa();
  const double mu_g = k.strong_convexity_g;
  const double n = static_cast<double>(in.rows);
  TheoryPoint p;
  p.alpha = alpha;
  // lambda, L_out, eta and T at this alpha (theory.h).
  p.lambda = std::max(TheoryLambdaMin(k), 2 * ell * std::pow(kappa, 3) / alpha);
  p.smoothness_out = ell * std::pow(1 + kappa, 3);
  p.eta = 1 / (2 * p.smoothness_out);
  const double t_real = std::ceil(
      (256.0 / 3.0) * p.smoothness_out *
      (in.initial_gap + 2 * ell * kappa / p.lambda) / (alpha * alpha));
  if (!(t_real <= 1e15)) {
    return absl::OutOfRangeError(absl::StrFormat(
        "alpha %g needs more than 1e15 outer iterations", alpha));
  }
  p.outer_iterations = static_cast<int64_t>(t_real);
  const double t = t_real;
  // rho split as w_j rho / T per iteration; Gaussian with sensitivity
  // Delta and std s is Delta^2 / (2 s^2)-zCDP.
  const double rho = ZcdpFromEpsilonDelta(in.epsilon, in.delta);
  const double f = in.relation_factor;
  const double c_gy = k.lipschitz_g;
  const double c_fy = k.lipschitz_f;
  const double c_out =
      k.lipschitz_f + 2 * k.smoothness_g * k.lipschitz_f / mu_g;
  p.sigma = (f * c_out / n) / std::sqrt(2 * in.split.outer * rho / t);
  // Inner solves (Algorithm 1, steps 1-2) in the paper's mode: T_GD = n^2, M
  // from the zCDP-equivalent epsilon' of the call's share, failure gamma/(4T).
  const double t_gd = n * n;
  const double gamma_in = in.failure / (4 * t);
  const double radius_y = 2 * c_gy / mu_g;
  InnerProblem s1;
  s1.mu = mu_g;
  s1.beta = k.smoothness_g;
  s1.lipschitz = c_gy;
  s1.radius = radius_y;
  s1.dimension = in.dy;
  InnerProblem s2;
  s2.mu = p.lambda * mu_g / 2;
  s2.beta = k.smoothness_f + p.lambda * k.smoothness_g;
  s2.lipschitz = c_fy + p.lambda * c_gy;
  s2.radius = radius_y + k.lipschitz_f / (p.lambda * mu_g);  // Lemma 8.5
  s2.dimension = in.dy;
  const double rho1 = in.split.inner1 * rho / t;
  const double rho2 = in.split.inner2 * rho / t;
  p.inner_rounds1 =
      PaperRounds(s1.mu, EpsilonFromZcdp(rho1, in.delta), n, s1.lipschitz);
  p.inner_rounds2 =
      PaperRounds(s2.mu, EpsilonFromZcdp(rho2, in.delta), n, s2.lipschitz);
  p.sigma_inner1 =
      (f * s1.lipschitz / n) *
      std::sqrt(static_cast<double>(p.inner_rounds1) * t_gd / (2 * rho1));
  p.sigma_inner2 =
      (f * s2.lipschitz / n) *
      std::sqrt(static_cast<double>(p.inner_rounds2) * t_gd / (2 * rho2));
  p.radius_inner1 =
      FinalRadius(s1, p.inner_rounds1, t_gd, p.sigma_inner1, gamma_in);
  p.radius_inner2 =
      FinalRadius(s2, p.inner_rounds2, t_gd, p.sigma_inner2, gamma_in);
  p.bias = (k.smoothness_f + p.lambda * k.smoothness_g) * p.radius_inner2 +
           p.lambda * k.smoothness_g * p.radius_inner1;
  p.noise_bound = p.sigma * (std::sqrt(static_cast<double>(in.dx)) +
                             std::sqrt(2 * std::log(2 * t / in.failure)));
  // Feasibility: Prop. 4.6's conditions beta <= alpha'/8 and
  // ||nu_t|| <= alpha'/8 at alpha' = alpha / 2.
  p.feasible = alpha <= TheoryAlphaMax(k, in.initial_gap) &&
               16 * p.bias <= alpha && 16 * p.noise_bound <= alpha;
  return p;
}

absl::StatusOr<TheoryResult> TheoryCalculator(const TheoryInputs& in) {
  RETURN_IF_ERROR(in.Validate());
  TheoryResult r;
  r.lambda_min = TheoryLambdaMin(in.constants);
  r.alpha_max = TheoryAlphaMax(in.constants, in.initial_gap);
  if (!(std::isfinite(r.alpha_max) && r.alpha_max > 0)) {
    return absl::InvalidArgumentError("alpha_max is not a positive number");
  }
  // Step 5: scan alpha_max * 10^(-k/20), k = 240..0 (twelve decades, from
  // small to large), take the first feasible grid point, then bisect between
  // it and its infeasible neighbour below.
  constexpr int kGrid = 240;
  auto grid = [&](int k) { return r.alpha_max * std::pow(10.0, -k / 20.0); };
  auto evaluate = [&](double alpha) -> absl::StatusOr<TheoryPoint> {
    absl::StatusOr<TheoryPoint> p = EvaluateTheory(in, alpha);
    if (p.status().code() == absl::StatusCode::kOutOfRange) {
      TheoryPoint infeasible;  // too many iterations: not feasible here
      infeasible.alpha = alpha;
      return infeasible;
    }
    return p;
  };
  int found = -1;
  TheoryPoint best;
  for (int k = kGrid; k >= 0; --k) {
    ASSIGN_OR_RETURN(TheoryPoint p, evaluate(grid(k)));
    if (p.feasible) {
      found = k;
      best = p;
      break;
    }
  }
  if (found < 0) {
    ASSIGN_OR_RETURN(r.point, evaluate(r.alpha_max));
    r.message = absl::StrFormat(
        "n too small for the theory: no alpha in (%g, %g] meets 16 beta <= "
        "alpha and 16 a_sigma <= alpha at n = %d; use the practical defaults "
        "(dp_bilevel.h)",
        grid(kGrid), r.alpha_max, in.rows);
    return r;
  }
  if (found < kGrid) {
    double lo = grid(found + 1);  // infeasible
    double hi = best.alpha;       // feasible
    for (int i = 0; i < 60 && hi - lo > 1e-12 * hi; ++i) {
      const double mid = std::sqrt(lo * hi);
      ASSIGN_OR_RETURN(TheoryPoint p, evaluate(mid));
      if (p.feasible) {
        hi = mid;
        best = p;
      } else {
        lo = mid;
      }
    }
  }
  r.point = best;
  r.feasible = true;
  return r;
}

}  // namespace dpopt::optim::bilevel
