#include "core/optim/bilevel/accounting.h"

#include <cmath>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/common/status_macros.h"
#include "core/noise/vector_mechanisms.h"
#include "core/optim/private_oracle.h"
#include "core/privacy/accountant.h"

namespace dpopt::optim::bilevel {

absl::Status BudgetSplit::Validate() const {
  for (double w : {outer, inner1, inner2}) {
    if (!std::isfinite(w) || w < 0) {
      return absl::InvalidArgumentError(
          "budget split weights must be finite and >= 0");
    }
  }
  if (!(inner1 > 0 && inner2 > 0)) {
    return absl::InvalidArgumentError(
        "budget split: both inner solves need a positive share");
  }
  if (std::abs(outer + inner1 + inner2 - 1) > 1e-9) {
    return absl::InvalidArgumentError("budget split weights must sum to 1");
  }
  return absl::OkStatus();
}

double ZcdpFromEpsilonDelta(double epsilon, double delta) {
  const double l = std::log(1 / delta);
  const double d = std::sqrt(l + epsilon) - std::sqrt(l);
  return d * d;
}

double EpsilonFromZcdp(double rho, double delta) {
  return rho + 2 * std::sqrt(rho * std::log(1 / delta));
}

double Lemma22Sigma(double sensitivity, double epsilon, double delta) {
  return std::sqrt(2 * std::log(5 / (4 * delta))) * sensitivity / epsilon;
}

double PaperLiteralSigma(double sensitivity, double epsilon, double delta,
                         int64_t outer_iterations) {
  const double t = static_cast<double>(outer_iterations);
  return Lemma22Sigma(sensitivity, epsilon / std::sqrt(18 * t),
                      delta / (3 * (t + 1)));
}

double PaperLiteralZcdp(double epsilon, double delta,
                        int64_t outer_iterations) {
  // Each call: sensitivity^2 / (2 sigma^2) with sigma from Lemma 2.2, i.e.
  // eps0^2 / (4 ln(5 / (4 delta0))).
  const double t = static_cast<double>(outer_iterations);
  const double eps0 = epsilon / std::sqrt(18 * t);
  const double delta0 = delta / (3 * (t + 1));
  const double per_call = eps0 * eps0 / (4 * std::log(5 / (4 * delta0)));
  return 3 * t * per_call;
}

double AdvancedCompositionSigma(double sensitivity, double epsilon,
                                double delta, int64_t outer_iterations) {
  const double t = static_cast<double>(outer_iterations);
  const double delta1 = delta / (t + 1);
  const double a = std::sqrt(2 * t * std::log(1 / delta1));
  const double eps1 = (-a + std::sqrt(a * a + 8 * t * epsilon)) / (4 * t);
  return Lemma22Sigma(sensitivity, eps1 / 3, delta1 / 3);
}

absl::Status PlannedMechanism::Validate() const {
  if (releases < 1 || releases > 100'000'000) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, ": number of releases must be in [1, 1e8]"));
  }
  if (!(std::isfinite(weight) && weight > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, ": budget share must be > 0"));
  }
  if (!(sampling_rate >= 1e-12 && sampling_rate <= 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, ": sampling rate must be in [1e-12, 1]"));
  }
  if (!(std::isfinite(sensitivity) && sensitivity > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, ": sensitivity must be finite and > 0"));
  }
  if (dimension < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, ": dimension must be >= 1"));
  }
  return absl::OkStatus();
}

double PlannedMechanism::NoiseMultiplier(double scale) const {
  return scale * std::sqrt(static_cast<double>(releases) / weight);
}

double PlannedMechanism::NominalSigma(double scale) const {
  return NoiseMultiplier(scale) * sensitivity;
}

absl::StatusOr<double> PlannedMechanism::NoiseStddev(double scale) const {
  RETURN_IF_ERROR(Validate());
  ASSIGN_OR_RETURN(noise::GaussianPlan plan,
                   noise::PlanGaussian(sensitivity / sampling_rate,
                                       NoiseMultiplier(scale), dimension));
  return plan.sigma;
}

absl::StatusOr<privacy::DpEvent> PlannedMechanism::ReleaseEvent(
    double scale) const {
  RETURN_IF_ERROR(Validate());
  // The same event the oracle charges for a release of this mechanism
  // (also validates the noise plan's range).
  return GaussianGradientEvent(
      {sampling_rate, sensitivity, NoiseMultiplier(scale)}, dimension);
}

absl::StatusOr<privacy::DpEvent> JobEvent(
    const std::vector<PlannedMechanism>& mechanisms, double scale,
    const std::vector<privacy::DpEvent>& fixed) {
  if (mechanisms.empty()) {
    return absl::InvalidArgumentError("a job needs at least one mechanism");
  }
  std::vector<privacy::DpEvent> events;
  for (const PlannedMechanism& m : mechanisms) {
    ASSIGN_OR_RETURN(privacy::DpEvent e, m.ReleaseEvent(scale));
    events.push_back(privacy::DpEvent::SelfComposed(m.releases, std::move(e)));
  }
  for (const privacy::DpEvent& e : fixed) {
    RETURN_IF_ERROR(e.Validate());
    events.push_back(e);
  }
  return privacy::DpEvent::Composed(std::move(events));
}

absl::StatusOr<double> CalibrateScale(
    const std::vector<PlannedMechanism>& mechanisms,
    const PrivacyTarget& target, CalibrationMode mode,
    const std::vector<privacy::DpEvent>& fixed) {
  RETURN_IF_ERROR(CheckPrivateTarget(target));
  double total_weight = 0;
  bool sampled = false;
  for (const PlannedMechanism& m : mechanisms) {
    RETURN_IF_ERROR(m.Validate());
    total_weight += m.weight;
    sampled = sampled || m.sampling_rate < 1;
  }
  if (mechanisms.empty()) {
    return absl::InvalidArgumentError("a job needs at least one mechanism");
  }
  double scale = 0;
  if (mode == CalibrationMode::kZcdpClosedForm) {
    if (!fixed.empty()) {
      return absl::InvalidArgumentError(
          "the zCDP closed form calibrates Gaussian mechanisms only");
    }
    if (sampled) {
      return absl::InvalidArgumentError(
          "the zCDP closed form does not capture subsampling; use the "
          "accountant calibration for mini-batch jobs");
    }
    if (std::abs(total_weight - 1) > 1e-9) {
      return absl::InvalidArgumentError("budget shares must sum to 1");
    }
    const double rho = ZcdpFromEpsilonDelta(target.epsilon, target.delta);
    scale = 1 / std::sqrt(2 * rho);
  } else {
    absl::Status event_error;
    auto make_event = [&](double s) -> privacy::DpEvent {
      absl::StatusOr<privacy::DpEvent> e = JobEvent(mechanisms, s, fixed);
      if (!e.ok()) {
        // Never let an invalid scale look cheap.
        if (event_error.ok()) event_error = e.status();
        return privacy::DpEvent::EpsilonDelta(
            std::numeric_limits<double>::max(), 1.0);
      }
      return *std::move(e);
    };
    ASSIGN_OR_RETURN(scale, privacy::CalibrateNoiseMultiplier(
                                make_event, target.epsilon, target.delta,
                                target.accountant));
    RETURN_IF_ERROR(event_error);
  }
  // Verify the claim with the accountant in both modes.
  ASSIGN_OR_RETURN(privacy::DpEvent event, JobEvent(mechanisms, scale, fixed));
  ASSIGN_OR_RETURN(
      privacy::EpsilonResult check,
      privacy::ComputeEpsilon(event, target.delta, target.accountant));
  if (!(check.epsilon <= target.epsilon)) {
    // Only possible in closed form (zCDP is a valid guarantee, but the
    // ledger prices the RDP curve on its order grid, which may not reach the
    // optimal order for tiny budgets).
    return absl::OutOfRangeError(absl::StrCat(
        "the zCDP closed-form calibration costs epsilon ", check.epsilon,
        " under the ", privacy::AccountantName(target.accountant),
        " accountant, above the target; use the accountant calibration"));
  }
  return scale;
}

double RelationFactor(privacy::Relation relation) {
  return relation == privacy::Relation::kReplaceOne ? 2.0 : 1.0;
}

}  // namespace dpopt::optim::bilevel
