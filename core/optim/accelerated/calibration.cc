#include "core/optim/accelerated/calibration.h"

#include <cmath>
#include <limits>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/common/status_macros.h"
#include "core/noise/vector_mechanisms.h"
#include "core/optim/objective.h"
#include "core/optim/private_oracle.h"
#include "core/privacy/accountant.h"

namespace dpopt::optim::accelerated {
namespace {

constexpr int64_t kMaxSteps = 1'000'000;
constexpr double kMaxValue = 1e6;

bool FinitePositive(double x) { return std::isfinite(x) && x > 0; }

const char* RelationLabel(privacy::Relation r) {
  return r == privacy::Relation::kReplaceOne ? "replace-one" : "add/remove";
}

absl::Status CheckRange(double v, double hi, const char* what) {
  if (!(FinitePositive(v) && v <= hi)) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " must be finite, > 0 and <= ", hi));
  }
  return absl::OkStatus();
}

// The (relation-specific) per-step event and the oracle's add/remove
// multiplier for a Laplace step costing eps_t (see the header comment).
struct StepRelease {
  privacy::DpEvent event;
  double oracle_multiplier = 0;
};

absl::StatusOr<StepRelease> LaplaceStep(double eps_t, double q, double clip,
                                        int64_t p, privacy::Relation relation) {
  StepRelease r;
  if (relation == privacy::Relation::kReplaceOne) {
    // m = n; S1 = 2C (paper (5.2)): scale 2C/(n eps_t) on the average, i.e.
    // multiplier 1/eps_t of the replace-one sensitivity (paper (3.4)).
    r.oracle_multiplier = 2 / eps_t;
    ASSIGN_OR_RETURN(privacy::DpEvent checked,
                     LaplaceGradientEvent({1.0, clip, r.oracle_multiplier}, p));
    (void)checked;
    r.event = privacy::DpEvent::DiscreteLaplace(1 / eps_t);
    return r;
  }
  // Inverse of (3.3) for Poisson at rate q under add/remove (S = C).
  r.oracle_multiplier = 1 / BaseEpsilon(eps_t, q);
  ASSIGN_OR_RETURN(r.event,
                   LaplaceGradientEvent({q, clip, r.oracle_multiplier}, p));
  return r;
}

absl::StatusOr<StepRelease> GaussianStep(double z, double q, double clip,
                                         int64_t p,
                                         privacy::Relation relation) {
  StepRelease r;
  if (relation == privacy::Relation::kReplaceOne) {
    // Group privacy (size 2): z relative to 2 (C + g sqrt(p)) >= the
    // replace-one effective sensitivity 2C + g sqrt(p).
    r.oracle_multiplier = 2 * z;
    // Validates the oracle's query; its add/remove event is Gaussian(2z).
    RETURN_IF_ERROR(
        GaussianGradientEvent({1.0, clip, r.oracle_multiplier}, p).status());
    r.event = privacy::DpEvent::Gaussian(z);
    return r;
  }
  r.oracle_multiplier = z;
  ASSIGN_OR_RETURN(r.event, GaussianGradientEvent({q, clip, z}, p));
  return r;
}

privacy::DpEvent Compose(const std::vector<privacy::DpEvent>& steps,
                         bool uniform) {
  if (uniform) {
    return privacy::DpEvent::SelfComposed(static_cast<int64_t>(steps.size()),
                                          steps.front());
  }
  return privacy::DpEvent::Composed(steps);
}

}  // namespace

std::string MethodName(Method method) {
  switch (method) {
    case Method::kGd:
      return "accel_dp_gd";
    case Method::kHeavyBall:
      return "accel_dp_hb";
    case Method::kNag:
      return "accel_dp_nag";
    case Method::kNagOpt:
      return "accel_dp_nag_opt";
    case Method::kMasg:
      return "accel_dp_masg";
    case Method::kMasgOpt:
      return "accel_dp_masg_opt";
  }
  return "unknown";
}

bool IsNoiseDividing(Method method) {
  return method == Method::kNagOpt || method == Method::kMasgOpt;
}

bool IsMultistage(Method method) {
  return method == Method::kMasg || method == Method::kMasgOpt;
}

absl::Status AcceleratedOptions::Validate() const {
  if (steps < 1 || steps > kMaxSteps) {
    return absl::InvalidArgumentError(
        absl::StrCat("steps must be in [1, ", kMaxSteps, "]"));
  }
  if (batch_size < 0) {
    return absl::InvalidArgumentError("batch_size must be >= 0 (0 = full)");
  }
  RETURN_IF_ERROR(CheckRange(clip_norm, kMaxValue, "clip_norm"));
  RETURN_IF_ERROR(CheckRange(smoothness, kMaxValue, "smoothness L"));
  if (!(std::isfinite(strong_convexity) && strong_convexity >= 0 &&
        strong_convexity <= smoothness)) {
    return absl::InvalidArgumentError(
        "strong_convexity mu must be in [0, L] (0 = use model.l2)");
  }
  const double c_max = IsMultistage(method) ? 1.0 : 2.0;
  if (!(FinitePositive(step_scale) &&
        (IsMultistage(method) ? step_scale <= c_max : step_scale < c_max))) {
    return absl::InvalidArgumentError(
        IsMultistage(method) ? "step_scale c must be in (0, 1] for MASG"
                             : "step_scale c must be in (0, 2)");
  }
  if (!(std::isfinite(learning_rate) && learning_rate >= 0 &&
        learning_rate <= kMaxValue)) {
    return absl::InvalidArgumentError("learning_rate must be in [0, 1e6]");
  }
  if (learning_rate > 0 && IsMultistage(method)) {
    return absl::InvalidArgumentError(
        "learning_rate does not apply to MASG (its steps are c / (2^{2k} L))");
  }
  const bool has_momentum =
      method == Method::kHeavyBall || method == Method::kNag;
  if (!std::isfinite(momentum) || momentum >= 1) {
    return absl::InvalidArgumentError("momentum must be < 1 (< 0 = default)");
  }
  if (momentum >= 0 && !has_momentum) {
    return absl::InvalidArgumentError(
        absl::StrCat("momentum does not apply to ", MethodName(method),
                     " (DP-GD has none; -opt and MASG use beta(alpha))"));
  }
  if (!FinitePositive(initial_error)) {
    return absl::InvalidArgumentError("initial_error E0 must be > 0");
  }
  if (masg_p < 1 || masg_p > 10) {
    return absl::InvalidArgumentError("masg_p must be in [1, 10]");
  }
  for (double v : initial_point) {
    if (!std::isfinite(v) || std::abs(v) > kMaxValue) {
      return absl::InvalidArgumentError(
          "initial_point must be finite with |x0_j| <= 1e6");
    }
  }
  if (model.l1 != 0) {
    return absl::InvalidArgumentError(
        "the accelerated methods have no proximal step: model.l1 must be 0");
  }
  return model.Validate();
}

absl::StatusOr<StepSchedule> MakeSchedule(const AcceleratedOptions& options,
                                          double mu, int64_t steps) {
  const double L = options.smoothness;
  if (IsMultistage(options.method)) {
    MasgOptions mo;
    mo.smoothness = L;
    mo.strong_convexity = mu;
    mo.step_scale = options.step_scale;
    mo.p = options.masg_p;
    mo.first_stage = options.first_stage;
    return MasgSchedule(steps, mo);
  }
  // alpha = c / L (the paper's Sec. 5) unless given explicitly.
  const double alpha = options.learning_rate > 0 ? options.learning_rate
                                                 : options.step_scale / L;
  if (!(mu * alpha < 1)) {
    return absl::InvalidArgumentError(
        "the step size must satisfy alpha < 1 / mu");
  }
  double beta = 0;  // DP-GD
  if (options.method != Method::kGd) {
    beta =
        options.momentum >= 0 ? options.momentum : MomentumForStep(alpha, mu);
  }
  return ConstantSchedule(steps, alpha, beta);
}

absl::StatusOr<std::vector<privacy::DpEvent>> FlattenStepEvents(
    const privacy::DpEvent& event) {
  using K = privacy::DpEvent::Kind;
  if (event.kind() == K::kSelfComposed) {
    if (event.count() < 1 || event.count() > kMaxSteps) {
      return absl::InvalidArgumentError("bad step count in the event");
    }
    return std::vector<privacy::DpEvent>(event.count(), event.inner());
  }
  if (event.kind() == K::kComposed) return event.events();
  return absl::InvalidArgumentError(
      "not a accelerated event (expected a composition of per-step events)");
}

absl::StatusOr<Plan> MakePlan(const AcceleratedOptions& options,
                              const PublicDatasetInfo& info,
                              const PrivacyTarget& target) {
  RETURN_IF_ERROR(options.Validate());
  RETURN_IF_ERROR(CheckPublicInfo(info, options.model, /*private_run=*/true));
  RETURN_IF_ERROR(CheckRelation(
      info.relation,
      {privacy::Relation::kAddRemove, privacy::Relation::kReplaceOne},
      "accelerated methods"));
  if (target.non_private) {
    return absl::InvalidArgumentError(
        "accelerated methods are private; non-private targets are refused");
  }
  if (!FinitePositive(target.epsilon)) {
    return absl::InvalidArgumentError("epsilon must be finite and > 0");
  }
  const bool laplace = options.noise == NoiseFamily::kLaplace;
  if (laplace && target.accountant != privacy::AccountantKind::kRdp) {
    return absl::InvalidArgumentError(
        "Laplace (pure epsilon-DP) jobs are priced exactly by basic "
        "composition, i.e. the rdp accountant's alpha = inf order; choose "
        "the rdp accountant");
  }
  if (!laplace && !(target.delta > 0 && target.delta < 1)) {
    return absl::InvalidArgumentError(
        "the Gaussian variant needs a delta in (0, 1)");
  }
  ASSIGN_OR_RETURN(std::unique_ptr<Objective> objective,
                   Objective::Create(options.model, info.dimension));
  const int64_t p = objective->parameter_size();
  if (!options.initial_point.empty() &&
      static_cast<int64_t>(options.initial_point.size()) != p) {
    return absl::InvalidArgumentError(
        absl::StrCat("initial_point has ", options.initial_point.size(),
                     " entries; the model has ", p, " parameters"));
  }

  Plan plan;
  plan.smoothness = options.smoothness;
  // mu: public input, or the model's l2 (the loss is convex, so F is at least
  // l2-strongly convex). Never estimated from the data (the paper's Sec. 5
  // computes L from the private data and does not account for it).
  plan.strong_convexity = options.strong_convexity > 0
                              ? options.strong_convexity
                              : options.model.l2;
  const double mu = plan.strong_convexity;
  if (!(mu > 0 && mu <= options.smoothness)) {
    return absl::InvalidArgumentError(
        "strong_convexity mu must be given (or model.l2 > 0) and <= L");
  }
  const int64_t n = info.rows;
  const int64_t m = options.batch_size == 0 ? n : options.batch_size;
  if (m > n) {
    return absl::InvalidArgumentError(absl::StrCat(
        "batch_size ", m, " exceeds the dataset's public row count ", n));
  }
  plan.relation = info.relation;
  const bool replace_one = info.relation == privacy::Relation::kReplaceOne;
  if (replace_one && m < n) {
    return absl::InvalidArgumentError(
        "minibatches (batch_size < rows) need an add/remove dataset: the "
        "server samples by Poisson sampling, which is exact under "
        "add/remove; on a replace-one dataset use the full batch");
  }
  plan.sampling_rate =
      m == n ? 1.0 : static_cast<double>(m) / static_cast<double>(n);
  plan.expected_batch_size = static_cast<double>(m);
  const double q = plan.sampling_rate;
  const double clip = options.clip_norm;
  const double eps = target.epsilon;

  ASSIGN_OR_RETURN(StepSchedule full, MakeSchedule(options, mu, options.steps));
  plan.steps = options.steps;
  const bool uniform = !IsNoiseDividing(options.method);
  std::vector<double> shares;
  if (!uniform) {
    NoiseDividingOptions nd;
    nd.smoothness = options.smoothness;
    nd.strong_convexity = mu;
    nd.convention = options.convention;
    nd.initial_error = options.initial_error;
    // Sensitivity of the noisy sum under the dataset's relation.
    const double s = replace_one ? 2 * clip : clip;
    const double nn = static_cast<double>(n);
    if (laplace) {
      // Remark 4.1 / (4.6): d (S/(n eps))^2 (sum a^{1/3})^3.
      nd.exponent = 1.0 / 3.0;
      nd.noise_unit = static_cast<double>(p) * std::pow(s / (nn * eps), 2);
    } else {
      // Gaussian extension (not in the paper): rho from
      // eps = rho + 2 sqrt(rho ln(1/delta)) (Bun & Steinke 2016); noise term
      // d S2^2/(2 n^2 rho) (sum a^{1/2})^2. Used only to choose T_final.
      const double l = std::log(1 / target.delta);
      const double sqrt_rho = std::sqrt(l + eps) - std::sqrt(l);
      nd.exponent = 0.5;
      nd.noise_unit =
          static_cast<double>(p) * s * s / (2 * nn * nn * sqrt_rho * sqrt_rho);
    }
    if (options.select_steps) {
      ASSIGN_OR_RETURN(plan.steps, SelectFinalSteps(full, nd));
    }
    ASSIGN_OR_RETURN(shares, BudgetShares(full, plan.steps, nd));
  } else {
    shares.assign(plan.steps, 1.0 / static_cast<double>(plan.steps));
  }
  ASSIGN_OR_RETURN(plan.schedule, MakeSchedule(options, mu, plan.steps));

  if (laplace) {
    for (int64_t t = 0; t < plan.steps; ++t) {
      const double eps_t = eps * shares[t];  // Prop. 3.1 / Prop. 4.2
      ASSIGN_OR_RETURN(StepRelease r,
                       LaplaceStep(eps_t, q, clip, p, info.relation));
      plan.step_share.push_back(eps_t);
      plan.oracle_multiplier.push_back(r.oracle_multiplier);
      plan.step_events.push_back(std::move(r.event));
      if (uniform) break;  // identical steps
    }
    if (uniform) {
      plan.step_share.assign(plan.steps, plan.step_share.front());
      plan.oracle_multiplier.assign(plan.steps, plan.oracle_multiplier.front());
      plan.step_events.assign(plan.steps, plan.step_events.front());
    }
    plan.event = Compose(plan.step_events, uniform);
    // The spend is eps (pure DP, basic composition). The ledger prices the same
    // event with the accountant (alpha = inf order); here the per-step values
    // are summed directly, which is much cheaper than the RDP curve of hundreds
    // of distinct sampled events.
    double spent = 0;
    for (const privacy::DpEvent& e : plan.step_events) {
      const bool sampled = e.kind() == privacy::DpEvent::Kind::kPoissonSampled;
      const double b =
          sampled ? e.inner().noise_multiplier() : e.noise_multiplier();
      spent +=
          sampled ? AmplifiedEpsilon(1 / b, e.sampling_probability()) : 1 / b;
    }
    if (!(std::abs(spent - eps) <= 1e-9 * eps)) {
      return absl::InternalError(absl::StrFormat(
          "Laplace calibration spends %.15g instead of %.15g", spent, eps));
    }
  } else {
    // z_t = k / sqrt(T_final w_t): rho_t proportional to w_t (minimises
    // sum_t a_t s_t^2 at fixed sum_t rho_t; calibration.h).
    std::vector<double> v(plan.steps);
    for (int64_t t = 0; t < plan.steps; ++t) {
      v[t] = 1 / std::sqrt(static_cast<double>(plan.steps) * shares[t]);
    }
    absl::Status event_error;
    auto steps_for = [&](double k, std::vector<StepRelease>* out) {
      out->clear();
      for (int64_t t = 0; t < plan.steps; ++t) {
        absl::StatusOr<StepRelease> r =
            GaussianStep(k * v[t], q, clip, p, info.relation);
        if (!r.ok()) {
          if (event_error.ok()) event_error = r.status();
          return false;
        }
        out->push_back(*std::move(r));
        if (uniform) break;
      }
      return true;
    };
    auto make_event = [&](double k) -> privacy::DpEvent {
      std::vector<StepRelease> releases;
      if (!steps_for(k, &releases)) {
        // Never let an invalid k look cheap (see dp_sgd.cc).
        return privacy::DpEvent::EpsilonDelta(
            std::numeric_limits<double>::max(), 1.0);
      }
      if (uniform) {
        return privacy::DpEvent::SelfComposed(plan.steps, releases[0].event);
      }
      std::vector<privacy::DpEvent> events;
      for (auto& r : releases) events.push_back(std::move(r.event));
      return privacy::DpEvent::Composed(std::move(events));
    };
    ASSIGN_OR_RETURN(double k,
                     privacy::CalibrateNoiseMultiplier(
                         make_event, eps, target.delta, target.accountant));
    RETURN_IF_ERROR(event_error);
    std::vector<StepRelease> releases;
    steps_for(k, &releases);
    RETURN_IF_ERROR(event_error);
    for (int64_t t = 0; t < plan.steps; ++t) {
      const StepRelease& r = releases[uniform ? 0 : t];
      plan.step_share.push_back(shares[t]);
      plan.oracle_multiplier.push_back(r.oracle_multiplier);
      plan.step_events.push_back(r.event);
    }
    plan.event = Compose(plan.step_events, uniform);
    ASSIGN_OR_RETURN(
        privacy::EpsilonResult check,
        privacy::ComputeEpsilon(plan.event, target.delta, target.accountant));
    if (!(check.epsilon <= eps)) {
      return absl::InternalError("calibration overshot the privacy target");
    }
  }

  // Public notes (T_final and the schedule are public: they depend only on
  // public constants).
  plan.notes.push_back(absl::StrFormat(
      "%s, %s noise: L = %.6g, mu = %.6g, T = %d of T_max = %d, m = %d of "
      "n = %d (q = %.6g%s)",
      MethodName(options.method), laplace ? "Laplace (L1)" : "Gaussian (L2)",
      plan.smoothness, mu, plan.steps, options.steps, m, n, q,
      q < 1 ? ", Poisson sampling by the server" : ""));
  plan.notes.push_back(absl::StrFormat(
      "alpha_1 = %.6g, beta_1 = %.6g, alpha_T = %.6g, beta_T = %.6g, "
      "stages = %d",
      plan.schedule.alpha.front(), plan.schedule.beta.front(),
      plan.schedule.alpha.back(), plan.schedule.beta.back(),
      plan.schedule.stage.back()));
  if (laplace) {
    plan.notes.push_back(absl::StrFormat(
        "pure epsilon-DP under %s: eps_1 = %.6g, eps_T = %.6g (sum = %.6g); "
        "oracle scale multipliers %.6g .. %.6g of C = %g",
        RelationLabel(info.relation), plan.step_share.front(),
        plan.step_share.back(), eps, plan.oracle_multiplier.front(),
        plan.oracle_multiplier.back(), clip));
  } else {
    plan.notes.push_back(absl::StrFormat(
        "Gaussian (an extension, not in the paper) under %s: noise "
        "multipliers %.6g .. %.6g of C = %g, (%.6g, %.3g)-DP by %s",
        RelationLabel(info.relation), plan.oracle_multiplier.front(),
        plan.oracle_multiplier.back(), clip, eps, target.delta,
        privacy::AccountantName(target.accountant)));
  }
  return plan;
}

}  // namespace dpopt::optim::accelerated
