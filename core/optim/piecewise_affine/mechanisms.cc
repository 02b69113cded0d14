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

// Clamps every coordinate into [-limit, limit]: 1-Lipschitz per coordinate,
// so it keeps every sensitivity (l2 and l-infinity) of the clamped vector.
Eigen::VectorXd ClampAll(const Eigen::VectorXd& v, double limit) {
  Eigen::VectorXd out = v;
  for (Eigen::Index i = 0; i < out.size(); ++i) {
    out[i] = std::clamp(out[i], -limit, limit);
  }
  return out;
}

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
  // Clamp first (keeps the sensitivity), so the noise's input is in range.
  out.b_tilde = ClampAll(data.labels(), std::ldexp(plan.grid, 50));
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

absl::StatusOr<Eigen::VectorXd> RunPerturbSolution(
    const ProblemInfo& info, const Dataset& data,
    const noise::VectorLaplacePlan& plan, bool project,
    const OffsetNoise& noise, noise::RandomSource& rng) {
  RETURN_IF_ERROR(CheckData(data, info));
  if (plan.dimension != info.dimension) {
    return absl::FailedPreconditionError("noise plan does not fit the problem");
  }
  // x* in the bounding box whatever happens (the sensitivity is its
  // diameter): the LP's minimiser, or the centre if the solver fails.
  absl::StatusOr<LpSolution> lp =
      SolveMaxAffine(data.dense(), data.labels(), info.polytope);
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
  plan.beta = plan.rate.ToDouble() / grid.grid;
  // Expected proposals <= exp(rate (max F - F_lo)) with F the lattice
  // scores and F_lo the certified lower bound; max F - min F <= G R / g + 2
  // and F_lo >= min F - 6 up to the LP's tolerance (f is G-Lipschitz on P,
  // so the bound is about exp(beta G R)).
  const double spread = info.slope_norm_bound * info.diameter / grid.grid + 8;
  plan.expected_proposals_bound = std::exp(plan.rate.ToDouble() * spread);
  return plan;
}

absl::StatusOr<Eigen::VectorXd> RunExponential(const ProblemInfo& info,
                                               const Dataset& data,
                                               const ExponentialPlan& plan,
                                               noise::RandomSource& rng,
                                               int64_t* proposals) {
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
  // Offsets clamped to +-2^49 g (1-Lipschitz: Lemma 18 still holds), so
  // every bound below is finite.
  const Eigen::VectorXd b = ClampAll(data.labels(), std::ldexp(grid.grid, 49));
  const std::vector<double>& lo = info.polytope.lower;
  const std::vector<double>& hi = info.polytope.upper;

  // A certified lower bound LB <= min_{x in P} f(x; b): the larger of
  //  (i) max_i (b_i + min_{x in box} a_i^T x), within G R of the minimum;
  //  (ii) the LP's dual certificate b^T lambda + min_box (A^T lambda)^T x.
  // Both hold for any lambda in the simplex (weak duality); the margins
  // cover floating-point error. The output law does not depend on LB as long
  // as LB is a lower bound; only the number of proposals does.
  double lb = -std::numeric_limits<double>::infinity();
  for (int64_t i = 0; i < m; ++i) {
    double v = b[i];
    double scale = std::abs(b[i]);
    for (int64_t j = 0; j < d; ++j) {
      v += std::min(a(i, j) * lo[j], a(i, j) * hi[j]);
      scale += std::abs(a(i, j)) * std::max(std::abs(lo[j]), std::abs(hi[j]));
    }
    lb = std::max(lb, v - 1e-9 * (scale + 1e-300));
  }
  absl::StatusOr<LpSolution> lp = SolveMaxAffine(a, b, info.polytope);
  if (lp.ok()) {
    Eigen::VectorXd lambda = Eigen::Map<const Eigen::VectorXd>(
        lp->duals.data(), static_cast<Eigen::Index>(lp->duals.size()));
    if (lambda.sum() > 0.5) {
      double v = 0;
      double scale = 0;
      for (int64_t i = 0; i < m; ++i) {
        v += lambda[i] * b[i];
        scale += lambda[i] * std::abs(b[i]);
      }
      const Eigen::VectorXd w = a.transpose() * lambda;
      for (int64_t j = 0; j < d; ++j) {
        v += std::min(w[j] * lo[j], w[j] * hi[j]);
        scale += std::abs(w[j]) * std::max(std::abs(lo[j]), std::abs(hi[j]));
      }
      // Normalisation error of lambda (sum 1 up to round-off) included.
      if (std::isfinite(v)) lb = std::max(lb, v - 1e-9 * (scale + 1e-300));
    }
  }
  const double lb_units = std::floor(lb / grid.grid) - 2;
  const int64_t floor_units = static_cast<int64_t>(
      std::clamp(lb_units, -static_cast<double>(kMaxScoreUnits),
                 static_cast<double>(kMaxScoreUnits)));

  // Rejection from the uniform law on the lattice
  //   x_j = lo_j + (k_j + 1/2) (hi_j - lo_j) / 2^bits, k_j in [0, 2^bits),
  // accepting with probability exp(-rate (F(x) - F_lo)), F(x) =
  // max_i psi(a_i^T x + b_i): the accepted x has probability proportional to
  // exp(-rate F(x)), the exponential mechanism with score -F.
  const uint64_t cells = uint64_t{1} << plan.lattice_bits;
  const noise::uint128 den = static_cast<noise::uint128>(1)
                             << plan.rate.exponent;
  noise::RandomBits bits(rng);
  Eigen::VectorXd x(d);
  int64_t count = 0;
  while (bits.ok()) {
    ++count;
    for (int64_t j = 0; j < d; ++j) {
      const double k = static_cast<double>(bits.UniformInt(cells));
      x[j] = lo[j] + (k + 0.5) * ((hi[j] - lo[j]) / static_cast<double>(cells));
    }
    int64_t f = -kMaxScoreUnits;
    for (int64_t i = 0; i < m; ++i) {
      f = std::max(f, ScoreUnits(data.RowDot(i, x), b[i], grid));
    }
    const uint64_t gap = f > floor_units
                             ? static_cast<uint64_t>(f - floor_units)
                             : 0;  // LB certified: never below
    const noise::uint128 num =
        static_cast<noise::uint128>(gap) * plan.rate.mantissa;
    if (noise::BernoulliExpMinus(bits, num, den) && bits.ok()) break;
  }
  if (!bits.ok()) {
    absl::Status s = rng.status();
    return s.ok() ? absl::InternalError("random source failed") : s;
  }
  if (proposals != nullptr) *proposals = count;
  return x;
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
    IterationCallback* callback) {
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
    if (callback != nullptr) {
      IterationSummary s{i, o.iterations, x, g.norm()};
      if (!callback->OnIteration(s)) {
        trace.cancelled = true;
        break;
      }
    }
  }
  trace.last = x;
  const int64_t done = static_cast<int64_t>(trace.indices.size());
  trace.average =
      done > 0 ? Eigen::VectorXd(sum / static_cast<double>(done)) : x;
  return trace;
}

}  // namespace dpopt::optim::piecewise_affine
