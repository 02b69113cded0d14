#include "core/optim/line_search/svt_line_search.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/common/status_macros.h"
#include "core/noise/discrete_samplers.h"

namespace dpopt::optim::line_search {
namespace {

// Query values are compared as integers of at most 2^52 grid units (exact
// in double).
constexpr double kMaxGridUnits = 4503599627370496.0;  // 2^52
// Target noise scale in grid units (largest scale ~2^26 < sampler's 2^28).
constexpr double kGridFraction = 1.0 / 33554432.0;  // 2^-25

// The power of two >= kGridFraction * scale.
double GridFor(double scale) {
  return std::exp2(std::ceil(std::log2(kGridFraction * scale)));
}

absl::Status CheckScales(const SvtPlan& p) {
  constexpr double kMin = 1.0 / 16, kMax = 268435456.0;  // sampler range
  for (double s : {p.threshold_scale, p.query_scale}) {
    if (!(std::isfinite(s) && s >= kMin && s <= kMax)) {
      return absl::InvalidArgumentError(
          "sparse-vector noise scale out of the sampler's range");
    }
  }
  return absl::OkStatus();
}

class SecureSvtNoiseImpl final : public SvtNoise {
 public:
  absl::StatusOr<int64_t> Threshold(const SvtPlan& plan,
                                    noise::RandomSource& rng) const override {
    return Draw(plan.kind, plan.threshold_scale, rng);
  }
  absl::StatusOr<int64_t> Query(const SvtPlan& plan,
                                noise::RandomSource& rng) const override {
    return Draw(plan.kind, plan.query_scale, rng);
  }

 private:
  static absl::StatusOr<int64_t> Draw(SvtNoiseKind kind, double scale,
                                      noise::RandomSource& rng) {
    if (kind == SvtNoiseKind::kLaplace) {
      ASSIGN_OR_RETURN(noise::DiscreteLaplaceSampler s,
                       noise::DiscreteLaplaceSampler::Create(scale));
      return s.Sample(rng);
    }
    ASSIGN_OR_RETURN(noise::DiscreteGaussianSampler s,
                     noise::DiscreteGaussianSampler::Create(scale));
    return s.Sample(rng);
  }
};

}  // namespace

absl::StatusOr<SvtPlan> PlanLaplaceSvt(double sensitivity, double epsilon) {
  if (!(std::isfinite(sensitivity) && sensitivity > 0)) {
    return absl::InvalidArgumentError("SVT sensitivity must be finite and > 0");
  }
  if (!(std::isfinite(epsilon) && epsilon > 0)) {
    return absl::InvalidArgumentError("SVT epsilon must be finite and > 0");
  }
  SvtPlan p;
  p.kind = SvtNoiseKind::kLaplace;
  p.sensitivity = sensitivity;
  p.epsilon = epsilon;
  // Alg. 1 line 3 (paper Thm 1): eps1 = eps/2 on the threshold, eps2 =
  // eps/4 on the queries: b_T = 2 Delta / eps, b_Q = 4 Delta / eps.
  p.grid = GridFor(2 * sensitivity / epsilon);
  p.sensitivity_in_grid_units =
      static_cast<int64_t>(std::ceil(sensitivity / p.grid)) + 2;
  p.effective_sensitivity = p.sensitivity_in_grid_units * p.grid;
  p.threshold_scale = 2.0 * p.sensitivity_in_grid_units / epsilon;
  p.query_scale = 4.0 * p.sensitivity_in_grid_units / epsilon;
  RETURN_IF_ERROR(CheckScales(p));
  return p;
}

absl::StatusOr<SvtPlan> PlanGaussianSvt(double sensitivity, double rho) {
  if (!(std::isfinite(sensitivity) && sensitivity > 0)) {
    return absl::InvalidArgumentError("SVT sensitivity must be finite and > 0");
  }
  if (!(std::isfinite(rho) && rho > 0)) {
    return absl::InvalidArgumentError("SVT rho must be finite and > 0");
  }
  SvtPlan p;
  p.kind = SvtNoiseKind::kGaussian;
  p.sensitivity = sensitivity;
  p.rho = rho;
  // Alg. 1 line 3 (paper Thm 3): s_T = Delta sqrt(3/(2 rho)),
  // s_Q = Delta sqrt(3/rho).
  p.grid = GridFor(sensitivity * std::sqrt(3 / (2 * rho)));
  p.sensitivity_in_grid_units =
      static_cast<int64_t>(std::ceil(sensitivity / p.grid)) + 2;
  p.effective_sensitivity = p.sensitivity_in_grid_units * p.grid;
  const double dg = static_cast<double>(p.sensitivity_in_grid_units);
  p.threshold_scale = dg * std::sqrt(3 / (2 * rho));
  p.query_scale = dg * std::sqrt(3 / rho);
  RETURN_IF_ERROR(CheckScales(p));
  return p;
}

const SvtNoise& SecureSvtNoise() {
  static const SvtNoise* const kNoise = new SecureSvtNoiseImpl();
  return *kNoise;
}

absl::Status LineSearchOptions::Validate() const {
  if (!(std::isfinite(initial_step) && initial_step > 0 &&
        initial_step <= 1e6)) {
    return absl::InvalidArgumentError("initial_step must be in (0, 1e6]");
  }
  if (!(shrink > 0 && shrink < 1)) {
    return absl::InvalidArgumentError("shrink (beta) must be in (0, 1)");
  }
  if (max_candidates < 1 || max_candidates > 100) {
    return absl::InvalidArgumentError("max_candidates must be in [1, 100]");
  }
  if (!(armijo >= 0 && armijo < 1)) {
    return absl::InvalidArgumentError("armijo (c_A) must be in [0, 1)");
  }
  if (!(std::isfinite(fallback_step) && fallback_step >= 0)) {
    return absl::InvalidArgumentError("fallback_step must be finite and >= 0");
  }
  return absl::OkStatus();
}

absl::StatusOr<LineSearchResult> NoisyBacktracking(
    const std::function<double(const Eigen::VectorXd&)>& batch_objective,
    const Eigen::VectorXd& w, const Eigen::VectorXd& g, double m,
    const LineSearchOptions& options, const SvtPlan& plan,
    const SvtNoise& noise, noise::RandomSource& rng) {
  RETURN_IF_ERROR(options.Validate());
  if (w.size() != g.size()) {
    return absl::InvalidArgumentError("w and g must have the same size");
  }
  if (!(std::isfinite(m) && m > 0)) {
    return absl::InvalidArgumentError("normaliser m must be finite and > 0");
  }
  if (!(plan.grid > 0)) {
    return absl::InvalidArgumentError("invalid sparse-vector plan");
  }
  LineSearchResult result;
  // Alg. 1 line 4: ONE threshold noise per call; public threshold T = 0.
  ASSIGN_OR_RETURN(const int64_t threshold, noise.Threshold(plan, rng));
  // f(w) of line 7: the reference value, once per call.
  const double f0 = batch_objective(w);
  result.objective_evaluations = 1;
  const double g_sq = g.squaredNorm();
  double eta = options.initial_step;
  Eigen::VectorXd candidate(w.size());
  for (int i = 1; i <= options.max_candidates; ++i) {
    candidate = w - eta * g;
    const double f1 = batch_objective(candidate);
    ++result.objective_evaluations;
    ++result.candidates;
    // Alg. 1 line 7, the Armijo term scaled by m (svt_line_search.h).
    const double q = f0 - f1 - options.armijo * eta * m * g_sq;
    const double units = std::nearbyint(q / plan.grid);
    if (!(std::isfinite(units) && std::fabs(units) <= kMaxGridUnits)) {
      return absl::InvalidArgumentError(
          "line-search query out of range (step or direction too large)");
    }
    // Line 8: fresh query noise per evaluated candidate.
    ASSIGN_OR_RETURN(const int64_t nu, noise.Query(plan, rng));
    // Lines 9-10: "above" answer, compared exactly in grid units.
    if (static_cast<int64_t>(units) + nu >= threshold) {
      result.step = eta;
      result.accepted = true;
      return result;
    }
    eta *= options.shrink;  // line 11
  }
  result.step = options.fallback_step;  // line 12
  return result;
}

absl::StatusOr<privacy::DpEvent> LaplaceSvtEvent(double epsilon,
                                                 double sampling_rate) {
  if (!(std::isfinite(epsilon) && epsilon > 0)) {
    return absl::InvalidArgumentError("SVT epsilon must be finite and > 0");
  }
  if (!(sampling_rate >= PoissonSampler::kMinRate && sampling_rate <= 1)) {
    return absl::InvalidArgumentError("sampling_rate must be in [1e-12, 1]");
  }
  privacy::DpEvent inner = privacy::DpEvent::SparseVector(epsilon);
  if (sampling_rate == 1) return inner;
  return privacy::DpEvent::PoissonSampled(sampling_rate, std::move(inner));
}

absl::StatusOr<privacy::DpEvent> GaussianSvtEvent(double rho,
                                                  int max_candidates,
                                                  double sampling_rate) {
  if (!(std::isfinite(rho) && rho > 0)) {
    return absl::InvalidArgumentError("SVT rho must be finite and > 0");
  }
  if (max_candidates < 1) {
    return absl::InvalidArgumentError("max_candidates must be >= 1");
  }
  if (!(sampling_rate >= PoissonSampler::kMinRate && sampling_rate <= 1)) {
    return absl::InvalidArgumentError("sampling_rate must be in [1e-12, 1]");
  }
  // Alg. 1 line 3 (paper Thm 3 calibration): s_T = Delta sqrt(3/(2 rho)),
  // s_Q = Delta sqrt(3/rho), exactly the multipliers of PlanGaussianSvt.
  privacy::DpEvent inner = privacy::DpEvent::GaussianSparseVector(
      std::sqrt(3 / (2 * rho)), std::sqrt(3 / rho), max_candidates);
  RETURN_IF_ERROR(inner.Validate());
  if (sampling_rate == 1) return inner;
  return privacy::DpEvent::PoissonSampled(sampling_rate, std::move(inner));
}

absl::StatusOr<privacy::DpEvent> SvtQueryEvent(
    const SvtQuery& query, const LineSearchOptions& options) {
  RETURN_IF_ERROR(query.Validate());
  if (query.noise == SvtNoiseKind::kGaussian) {
    return GaussianSvtEvent(query.rho, options.max_candidates,
                            query.sampling_rate);
  }
  return LaplaceSvtEvent(query.epsilon, query.sampling_rate);
}

double ClippedBatchObjective(const Objective& objective, const Dataset& data,
                             const std::vector<int64_t>& batch, double clip,
                             double m, const Eigen::VectorXd& v) {
  double sum = 0;
  for (int64_t i : batch) {
    sum += std::min(objective.ExampleLoss(data, i, v), clip);
  }
  return sum + m * objective.Regularizer(v);
}

absl::Status SvtQuery::Validate() const {
  if (noise == SvtNoiseKind::kGaussian) {
    if (!(std::isfinite(rho) && rho > 0)) {
      return absl::InvalidArgumentError("SVT rho must be finite and > 0");
    }
  } else if (!(std::isfinite(epsilon) && epsilon > 0)) {
    return absl::InvalidArgumentError("SVT epsilon must be finite and > 0");
  }
  if (!(std::isfinite(clip_objective) && clip_objective > 0)) {
    return absl::InvalidArgumentError("clip_objective must be finite and > 0");
  }
  if (!(sampling_rate >= PoissonSampler::kMinRate && sampling_rate <= 1)) {
    return absl::InvalidArgumentError("sampling_rate must be in [1e-12, 1]");
  }
  return absl::OkStatus();
}

LineSearchOracle::LineSearchOracle(std::unique_ptr<RowSums> owned,
                                   RowSums& rows, const Objective& objective,
                                   int64_t public_rows,
                                   noise::RandomSource& rng,
                                   const SvtNoise& noise, ReleaseBudget& budget)
    : owned_rows_(std::move(owned)),
      rows_(rows),
      objective_(objective),
      public_rows_(public_rows),
      rng_(rng),
      noise_(noise),
      budget_(budget) {}

absl::StatusOr<std::unique_ptr<LineSearchOracle>> LineSearchOracle::Create(
    const Dataset& data, const Objective& objective, int64_t public_rows,
    noise::RandomSource& rng, const SvtNoise& noise, ReleaseBudget& budget) {
  RETURN_IF_ERROR(objective.CheckDataset(data));
  auto rows = std::make_unique<LocalRowSums>(data, objective, rng);
  RowSums& borrowed = *rows;
  ASSIGN_OR_RETURN(
      std::unique_ptr<LineSearchOracle> oracle,
      Create(borrowed, objective, public_rows, rng, noise, budget));
  oracle->owned_rows_ = std::move(rows);
  return oracle;
}

absl::StatusOr<std::unique_ptr<LineSearchOracle>> LineSearchOracle::Create(
    RowSums& rows, const Objective& objective, int64_t public_rows,
    noise::RandomSource& rng, const SvtNoise& noise, ReleaseBudget& budget) {
  if (public_rows < 1) {
    return absl::InvalidArgumentError("public row count must be >= 1");
  }
  // Every supported loss is >= 0, so each clipped term lies in [0, C_obj]
  // and Delta_q = C_obj (Thm 1 states |f| <= Delta_f, but its proof needs
  // 0 <= f <= Delta_f). Keep this list in sync with
  // LossKind: a loss that can be negative would need Delta_q = 2 C_obj.
  switch (objective.config().loss) {
    case LossKind::kLogistic:
    case LossKind::kSoftmax:
    case LossKind::kLeastSquares:
    case LossKind::kHinge:
    case LossKind::kHuberizedHinge:
      break;
    default:
      return absl::InvalidArgumentError(
          "loss not supported by the line search");
  }
  return std::unique_ptr<LineSearchOracle>(new LineSearchOracle(
      nullptr, rows, objective, public_rows, rng, noise, budget));
}

absl::StatusOr<LineSearchResult> LineSearchOracle::Search(
    const SvtQuery& query, const Eigen::VectorXd& w, const Eigen::VectorXd& g,
    const LineSearchOptions& options) {
  RETURN_IF_ERROR(query.Validate());
  RETURN_IF_ERROR(options.Validate());
  if (w.size() != objective_.parameter_size() || g.size() != w.size()) {
    return absl::InvalidArgumentError("w / g size does not match the model");
  }
  ASSIGN_OR_RETURN(const SvtPlan plan,
                   query.noise == SvtNoiseKind::kGaussian
                       ? PlanGaussianSvt(query.clip_objective, query.rho)
                       : PlanLaplaceSvt(query.clip_objective, query.epsilon));
  ASSIGN_OR_RETURN(privacy::DpEvent event, SvtQueryEvent(query, options));
  // Charge first: on refusal nothing is read and nothing is drawn.
  RETURN_IF_ERROR(budget_.Charge(event));

  // A fresh Poisson batch for this access (the paper reuses the gradient's
  // batch, which its per-access amplification does not cover), drawn where
  // the rows are.
  const double q = query.sampling_rate;
  RETURN_IF_ERROR(rows_.SampleForLosses(q));
  const double m = q * static_cast<double>(public_rows_);
  const double clip = query.clip_objective;
  // A failed sum (a worker pool that stopped) ends the search with its
  // error; the value returned with it is never compared.
  absl::Status sum_status;
  auto batch_objective = [&](const Eigen::VectorXd& v) {
    double sum = 0;
    if (sum_status.ok()) sum_status = rows_.ClippedLossSum(clip, v, &sum);
    return sum + m * objective_.Regularizer(v);
  };
  absl::StatusOr<LineSearchResult> result =
      NoisyBacktracking(batch_objective, w, g, m, options, plan, noise_, rng_);
  RETURN_IF_ERROR(sum_status);
  return result;
}
}  // namespace dpopt::optim::line_search
