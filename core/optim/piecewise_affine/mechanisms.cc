// Run-time parts of piecewise-affine family's mechanisms (what each job does
// after it was charged). Calibration and the Algorithm classes are in
// algorithms.cc.
#include "core/optim/piecewise_affine/mechanisms.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "core/common/padded_duration.h"
#include "core/common/status_macros.h"
#include "core/noise/discrete_samplers.h"
#include "core/optim/piecewise_affine/lp.h"
#include "core/optim/piecewise_affine/scores.h"

namespace dpopt::optim::piecewise_affine {
namespace {

class SecureNoise final : public OffsetNoise {
 public:
  absl::Status Add(const noise::VectorLaplacePlan& plan,
                   noise::RandomSource& rng,
                   Eigen::Ref<Eigen::VectorXd> v) const override {
    return noise::AddVectorLaplaceNoise(plan, rng, v);
  }
};

Eigen::VectorXd ClampToBox(const Eigen::VectorXd& x,
                           const std::vector<double>& lower,
                           const std::vector<double>& upper) {
  Eigen::VectorXd out = x;
  for (Eigen::Index j = 0; j < out.size(); ++j) {
    out[j] = std::clamp(std::isnan(x[j]) ? lower[j] : x[j], lower[j], upper[j]);
  }
  return out;
}

}  // namespace

const OffsetNoise& SecureOffsetNoise() {
  static const SecureNoise* const kNoise = new SecureNoise();
  return *kNoise;
}

absl::Status ExponentialOptions::Validate() const {
  if (!(max_expected_proposals >= 1 && max_expected_proposals <= 1e9)) {
    return absl::InvalidArgumentError(
        "max_expected_proposals must be in [1, 1e9]");
  }
  return absl::OkStatus();
}

absl::Status SubgradientOptions::Validate() const {
  if (iterations < 1 || iterations > 100000) {
    return absl::InvalidArgumentError("iterations must be in [1, 100000]");
  }
  if (!std::isfinite(step_scale) || !(step_scale > 0)) {
    return absl::InvalidArgumentError("step_scale must be finite and > 0");
  }
  for (double v : initial_point) {
    if (!std::isfinite(v)) {
      return absl::InvalidArgumentError("initial_point must be finite");
    }
  }
  return absl::OkStatus();
}

absl::Status BaselineOptions::Validate() const {
  return subgradient.Validate();
}

// ---------------------------------------------------------------------------
// M_P and M_S.

absl::StatusOr<noise::VectorLaplacePlan> PerturbProblemPlan(
    const ProblemInfo& info, double epsilon) {
  // l2 sensitivity of b under the l-infinity relation: sqrt(m) b_max.
  const double delta = std::sqrt(static_cast<double>(info.pieces)) * info.b_max;
  return noise::PlanVectorLaplace(delta, epsilon, info.pieces);
}

absl::StatusOr<noise::VectorLaplacePlan> PerturbSolutionPlan(
    const ProblemInfo& info, double epsilon, SolutionNoise mode) {
  // Delta_S = R >= diam(P) whatever minimiser the solver returns.
  double delta = info.diameter;
  if (mode == SolutionNoise::kPaper) {
    delta *= std::sqrt(static_cast<double>(info.dimension));
  }
  return noise::PlanVectorLaplace(delta, epsilon, info.dimension);
}

absl::StatusOr<PerturbProblemOutput> RunPerturbProblem(
    const ProblemInfo& info, const Dataset& data,
    const noise::VectorLaplacePlan& plan, const OffsetNoise& noise,
    noise::RandomSource& rng) {
  RETURN_IF_ERROR(CheckData(data, info));
  if (plan.dimension != info.pieces) {
    return absl::FailedPreconditionError("noise plan does not fit the problem");
  }
  PerturbProblemOutput out;
  // No clamp: CheckData holds |b_i| <= 2^27 b_max (problem.h), far below
  // the noise's input range of 2^51 grid units (the grid is >= 2^-21 b_max).
  out.b_tilde = data.labels();
  RETURN_IF_ERROR(noise.Add(plan, rng, out.b_tilde));
  // From here on everything is post-processing of b~.
  absl::StatusOr<LpSolution> lp =
      SolveMaxAffine(data.dense(), out.b_tilde, info.polytope);
  if (lp.ok()) {
    out.x = ProjectOntoPolytope(info, lp->x);
  } else {
    out.x = info.Center();
    out.lp_fallback = true;
  }
  return out;
}

Eigen::VectorXd ProbeOffsets(int64_t m, double b_max) {
  // The fractional parts of i times the golden ratio, mapped to
  // [-b_max, b_max].
  constexpr double kGoldenFraction = 0.6180339887498949;
  Eigen::VectorXd b(m);
  for (int64_t i = 0; i < m; ++i) {
    const double u = std::fmod(static_cast<double>(i + 1) * kGoldenFraction, 1);
    b[i] = b_max * (2 * u - 1);
  }
  return b;
}

absl::Duration PerturbSolutionLpBudget(const ProblemInfo& info,
                                       const Eigen::MatrixXd& slopes) {
  const Eigen::VectorXd probe = ProbeOffsets(slopes.rows(), info.b_max);
  const absl::Time start = absl::Now();
  // Its outcome is not used: only its time, which depends on public values.
  (void)SolveMaxAffine(slopes, probe, info.polytope);
  return kLpBudgetFactor * (absl::Now() - start) + kLpBudgetFloor;
}

absl::StatusOr<Eigen::VectorXd> RunPerturbSolution(
    const ProblemInfo& info, const Dataset& data,
    const noise::VectorLaplacePlan& plan, bool project,
    const OffsetNoise& noise, noise::RandomSource& rng,
    absl::Duration lp_budget, const std::function<bool()>& stop_requested) {
  RETURN_IF_ERROR(CheckData(data, info));
  if (plan.dimension != info.dimension) {
    return absl::FailedPreconditionError("noise plan does not fit the problem");
  }
  // x* in the bounding box whatever happens (the sensitivity is its
  // diameter): the LP's minimiser, or the centre if the solver fails. The
  // solve on the true offsets is padded to the caller's public budget.
  absl::StatusOr<LpSolution> lp = common::RunPaddedTo(
      lp_budget,
      [&] {
        return SolveMaxAffine(data.dense(), data.labels(), info.polytope);
      },
      stop_requested);
  Eigen::VectorXd x_star = lp.ok() ? lp->x : info.Center();
  x_star = ClampToBox(x_star, info.bbox_lower, info.bbox_upper);
  // Noise on x* - centre (|.| <= R per coordinate; the centre is public).
  const Eigen::VectorXd c = info.Center();
  Eigen::VectorXd v = x_star - c;
  RETURN_IF_ERROR(noise.Add(plan, rng, v));
  Eigen::VectorXd x = v + c;
  if (project) x = ProjectOntoPolytope(info, x);
  return x;
}

// ---------------------------------------------------------------------------
// M_E.

namespace {

// Bounds of M_E's privacy and failure analysis (mechanisms.h).
constexpr double kFallbackLog2 = 80;  // P(no round accepts) <= 2^-80 / B
// Floating-point margin of the certified lower bound, relative to the
// magnitudes it sums.
constexpr double kCertificateMargin = 1e-9;

// max_{x in P} ||x||_2 of the box.
double MaxNorm(const Polytope& p) {
  double s = 0;
  for (size_t j = 0; j < p.lower.size(); ++j) {
    const double v = std::max(std::abs(p.lower[j]), std::abs(p.upper[j]));
    s += v * v;
  }
  return std::sqrt(s);
}

int64_t SaturatingCount(double v) {
  constexpr double kMax = 0x1.0p62;
  if (!(v < kMax)) return static_cast<int64_t>(kMax);
  return std::max<int64_t>(1, static_cast<int64_t>(std::ceil(v)));
}

}  // namespace

absl::StatusOr<ExponentialPlan> PlanExponential(const ProblemInfo& info,
                                                double epsilon) {
  if (!info.polytope.is_box()) {
    return absl::InvalidArgumentError(
        "pa_exponential needs P to be a box (the exact sampler draws "
        "uniformly from P)");
  }
  const ScoreGrid grid = MakeScoreGrid(info.b_max);
  ExponentialPlan plan;
  plan.grid = grid.grid;
  plan.sensitivity_units = grid.sensitivity_units;
  ASSIGN_OR_RETURN(plan.rate, SelectionRate(epsilon, grid));
  const double rate = plan.rate.ToDouble();
  // Pure epsilon-DP of the mixture with the fallback (mechanisms.h): the
  // selection's 2 rate Delta plus 2^-79 must stay below epsilon.
  if (!(2 * rate * grid.sensitivity_units <= epsilon * (1 - 0x1.0p-41)) ||
      !(epsilon >= 0x1.0p-37)) {
    return absl::InvalidArgumentError(
        "pa_exponential: epsilon is too small for the exact sampler");
  }
  plan.beta = rate / grid.grid;
  const double g_norm = info.slope_norm_bound;
  const double x_norm = MaxNorm(info.polytope);
  // Every score that can be the maximum at a point of P lies within
  // 3 G X of the shift (mechanisms.h); with the sensitivity it must stay
  // far inside the +-2^50 units of ScoreUnits (never clamped, floating-point
  // error below g / 4).
  const double range_units = (3 * g_norm * x_norm + 2 * info.b_max) / grid.grid;
  if (!(range_units <= 0x1.0p48)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "pa_exponential: the public score range 3 G X + 2 b_max = %.6g "
        "(G = %.6g, X = max ||x|| over P = %.6g, b_max = %.6g) is not "
        "representable on the score grid (at most 2^48 b_max / 2^20); "
        "rescale the problem",
        3 * g_norm * x_norm + 2 * info.b_max, g_norm, x_norm, info.b_max));
  }
  const double gr = g_norm * info.diameter;
  // K = ceil((4 beta G R)^2): the certificate's gap G R / sqrt(K) costs at
  // most a factor e^(1/4) in the acceptance probability.
  plan.certificate_steps = SaturatingCount(std::pow(4 * plan.beta * gr, 2));
  const double gap_units =
      gr / (grid.grid * std::sqrt(static_cast<double>(plan.certificate_steps)));
  // max F - F_lo <= (max F - min F) + (min F - F_lo) <= G R / g + 2 +
  // gap + margin + 4 (rounding of the scores and of F_lo); 8 covers the
  // constants.
  plan.spread_units = gr / grid.grid + 8 + gap_units +
                      kCertificateMargin * 3 * g_norm * x_norm / grid.grid;
  plan.expected_proposals_bound = std::exp(rate * plan.spread_units);
  const double b = std::max(1.0, plan.expected_proposals_bound);
  // (1 - 1/B)^N <= exp(-N / B) <= 2^-80 / B.
  plan.rounds =
      SaturatingCount(b * (std::log(b) + kFallbackLog2 * std::log(2.0)));
  return plan;
}

absl::StatusOr<Eigen::VectorXd> RunExponential(const ProblemInfo& info,
                                               const Dataset& data,
                                               const ExponentialPlan& plan,
                                               noise::RandomSource& rng,
                                               ExponentialRunStats* stats,
                                               StepReporter* reporter) {
  RETURN_IF_ERROR(CheckData(data, info));
  if (!info.polytope.is_box()) {
    return absl::FailedPreconditionError("M_E needs a box");
  }
  const int64_t m = info.pieces;
  const int64_t d = info.dimension;
  ScoreGrid grid;
  grid.grid = plan.grid;
  grid.sensitivity_units = plan.sensitivity_units;
  const Eigen::MatrixXd& a = data.dense();
  const std::vector<double>& lo = info.polytope.lower;
  const std::vector<double>& hi = info.polytope.upper;

  // 1. Shift: bs = b - max b. The same constant in every score cancels in
  // the mechanism's normalisation (its law is that of the scores' exact
  // values up to rounding, which the sensitivity's +2 units cover). Pieces
  // far below the maximum may overflow to -Inf: they are never the maximum.
  double shift = -std::numeric_limits<double>::infinity();
  for (int64_t i = 0; i < m; ++i) shift = std::max(shift, data.label(i));
  Eigen::VectorXd bs(m);
  for (int64_t i = 0; i < m; ++i) bs[i] = data.label(i) - shift;

  // 2. Certified lower bound on min_P f(.; bs) in fixed work: K steps of the
  // projected subgradient method from the centre, the step-weighted average
  // lambda of the visited (maximising) pieces, and the dual value
  // L(lambda) = lambda^T bs + min_box (A^T lambda)^T x <= min f (weak
  // duality, for any lambda in the simplex). Also the bound
  // max_i (bs_i + min_box a_i^T x). Margins cover floating-point error.
  const int64_t k_steps = plan.certificate_steps;
  const double g_norm = info.slope_norm_bound;
  const double step =
      g_norm > 0
          ? info.diameter / (g_norm * std::sqrt(static_cast<double>(k_steps)))
          : 0.0;
  Eigen::VectorXd x = info.Center();
  Eigen::VectorXd visits = Eigen::VectorXd::Zero(m);
  for (int64_t k = 0; k < k_steps; ++k) {
    if (reporter != nullptr && reporter->StopRequested()) {
      return absl::CancelledError("cancelled");
    }
    int64_t best = 0;
    double best_value = -std::numeric_limits<double>::infinity();
    for (int64_t i = 0; i < m; ++i) {
      const double v = data.RowDot(i, x) + bs[i];
      const bool better = v > best_value;  // first maximiser on ties
      best = better ? i : best;
      best_value = better ? v : best_value;
    }
    visits[best] += 1;
    for (int64_t j = 0; j < d; ++j) {
      x[j] = std::clamp(x[j] - step * a(best, j), lo[j], hi[j]);
    }
  }
  double lb = -std::numeric_limits<double>::infinity();
  for (int64_t i = 0; i < m; ++i) {
    double v = bs[i];
    double scale = std::abs(bs[i]);
    for (int64_t j = 0; j < d; ++j) {
      v += std::min(a(i, j) * lo[j], a(i, j) * hi[j]);
      scale += std::abs(a(i, j)) * std::max(std::abs(lo[j]), std::abs(hi[j]));
    }
    if (std::isfinite(v)) {
      lb = std::max(lb, v - kCertificateMargin * (scale + 1e-300));
    }
  }
  {
    const Eigen::VectorXd lambda =
        visits / static_cast<double>(std::max<int64_t>(1, k_steps));
    double v = 0;
    double scale = 0;
    for (int64_t i = 0; i < m; ++i) {
      if (lambda[i] == 0) continue;  // keeps -Inf offsets out of the sum
      v += lambda[i] * bs[i];
      scale += lambda[i] * std::abs(bs[i]);
    }
    const Eigen::VectorXd w = a.transpose() * lambda;
    for (int64_t j = 0; j < d; ++j) {
      v += std::min(w[j] * lo[j], w[j] * hi[j]);
      scale += std::abs(w[j]) * std::max(std::abs(lo[j]), std::abs(hi[j]));
    }
    if (std::isfinite(v))
      lb = std::max(lb, v - kCertificateMargin * (scale + 1e-300));
  }
  const double lb_units = std::floor(lb / grid.grid) - 2;
  const int64_t floor_units = static_cast<int64_t>(
      std::clamp(lb_units, -static_cast<double>(kMaxScoreUnits),
                 static_cast<double>(kMaxScoreUnits)));

  // 3. Exactly plan.rounds rounds of rejection from the uniform law on the
  // lattice x_j = lo_j + (k_j + 1/2) (hi_j - lo_j) / 2^bits, accepting with
  // probability exp(-rate (F(x) - F_lo)), F(x) = max_i psi(a_i^T x + bs_i):
  // the first accepted x has probability proportional to exp(-rate F(x)),
  // the exponential mechanism with score -F. Every round does the same
  // work whether or not an earlier one accepted; then the fallback draw.
  const uint64_t cells = uint64_t{1} << plan.lattice_bits;
  const noise::uint128 den = static_cast<noise::uint128>(1)
                             << plan.rate.exponent;
  noise::RandomBits bits(rng);
  Eigen::VectorXd proposal(d);
  Eigen::VectorXd sample = Eigen::VectorXd::Zero(d);
  int64_t first_accepted = 0;
  int64_t round = 0;
  auto draw = [&](Eigen::VectorXd& out) {
    for (int64_t j = 0; j < d; ++j) {
      const double k = static_cast<double>(bits.UniformInt(cells));
      out[j] =
          lo[j] + (k + 0.5) * ((hi[j] - lo[j]) / static_cast<double>(cells));
    }
  };
  for (round = 0; round < plan.rounds && bits.ok(); ++round) {
    // Asked every round (an atomic read next to m d multiply-adds).
    if (reporter != nullptr && reporter->StopRequested()) {
      return absl::CancelledError("cancelled");
    }
    draw(proposal);
    int64_t f = -kMaxScoreUnits;
    for (int64_t i = 0; i < m; ++i) {
      f = std::max(f, ScoreUnits(data.RowDot(i, proposal), bs[i], grid));
    }
    const uint64_t gap = f > floor_units
                             ? static_cast<uint64_t>(f - floor_units)
                             : 0;  // F_lo certified: never below
    const noise::uint128 num =
        static_cast<noise::uint128>(gap) * plan.rate.mantissa;
    const bool take =
        noise::BernoulliExpMinus(bits, num, den) && first_accepted == 0;
    // The same copy in every round: only which value is kept differs.
    for (int64_t j = 0; j < d; ++j) {
      sample[j] = take ? proposal[j] : sample[j];
    }
    first_accepted = take ? round + 1 : first_accepted;
  }
  Eigen::VectorXd fallback(d);
  draw(fallback);
  if (!bits.ok()) {
    absl::Status s = rng.status();
    return s.ok() ? absl::InternalError("random source failed") : s;
  }
  if (stats != nullptr) {
    stats->first_accepted = first_accepted;
    stats->rounds = round;
    stats->floor_value = static_cast<double>(floor_units) * grid.grid + shift;
  }
  return first_accepted > 0 ? sample : fallback;
}

// ---------------------------------------------------------------------------
// Algorithm 2 (and the regular subgradient method).

double SubgradientStep(const ProblemInfo& info, const SubgradientOptions& o,
                       int64_t i) {
  const double g = info.slope_norm_bound;
  if (!(g > 0)) return 0;  // every slope is 0: nothing moves
  const double k = static_cast<double>(
      o.step_rule == StepRule::kConstant ? o.iterations : i);
  return o.step_scale * info.diameter / (g * std::sqrt(k));
}

absl::StatusOr<SubgradientTrace> RunSubgradient(
    const ProblemInfo& info, const Dataset& data, const SubgradientOptions& o,
    bool private_selection, double step_epsilon, noise::RandomSource* rng,
    StepReporter* reporter) {
  RETURN_IF_ERROR(CheckData(data, info));
  RETURN_IF_ERROR(o.Validate());
  const ScoreGrid grid = MakeScoreGrid(info.b_max);
  noise::Dyadic rate;
  if (private_selection) {
    if (rng == nullptr) {
      return absl::FailedPreconditionError("no random source");
    }
    ASSIGN_OR_RETURN(rate, SelectionRate(step_epsilon, grid));
  }
  const Eigen::VectorXd& b = data.labels();
  const int64_t d = info.dimension;
  Eigen::VectorXd x =
      o.initial_point.empty()
          ? info.Center()
          : Eigen::Map<const Eigen::VectorXd>(o.initial_point.data(), d);
  SubgradientTrace trace;
  trace.iterates.reserve(o.iterations + 1);
  trace.indices.reserve(o.iterations);
  trace.iterates.push_back(x);
  Eigen::VectorXd sum = Eigen::VectorXd::Zero(d);
  for (int64_t i = 1; i <= o.iterations; ++i) {
    sum += x;
    int64_t chosen = 0;
    if (private_selection) {
      ASSIGN_OR_RETURN(chosen,
                       PrivateSubgradientIndex(data, b, x, grid, rate, *rng));
    } else {
      // Regular subgradient method: the maximising piece, lowest index.
      double best = -std::numeric_limits<double>::infinity();
      for (int64_t r = 0; r < data.rows(); ++r) {
        const double v = data.RowDot(r, x) + b[r];
        if (v > best) {
          best = v;
          chosen = r;
        }
      }
    }
    trace.indices.push_back(chosen);
    const Eigen::VectorXd g = data.dense().row(chosen).transpose();
    x = x - SubgradientStep(info, o, i) * g;
    if (o.project) x = ProjectOntoPolytope(info, x);
    trace.iterates.push_back(x);
    if (reporter != nullptr && !reporter->Report(i, x, g.norm())) {
      trace.cancelled = true;
      break;
    }
  }
  trace.last = x;
  const int64_t done = static_cast<int64_t>(trace.indices.size());
  trace.average =
      done > 0 ? Eigen::VectorXd(sum / static_cast<double>(done)) : x;
  return trace;
}

}  // namespace dpopt::optim::piecewise_affine
