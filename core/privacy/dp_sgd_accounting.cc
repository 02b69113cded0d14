#include "core/privacy/dp_sgd_accounting.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace dpopt::privacy {

DpEvent DpSgdEvent(double noise_multiplier, double sampling_rate,
                   int64_t steps) {
  DpEvent step = DpEvent::Gaussian(noise_multiplier);
  if (sampling_rate != 1.0) {
    step = DpEvent::PoissonSampled(sampling_rate, std::move(step));
  }
  return DpEvent::SelfComposed(steps, std::move(step));
}

absl::StatusOr<double> CalibrateDpSgd(double epsilon, double delta,
                                      double sampling_rate, int64_t steps,
                                      AccountantKind kind) {
  if (!(sampling_rate > 0 && sampling_rate <= 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("sampling_rate must be in (0, 1], got ", sampling_rate));
  }
  if (steps < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("steps must be >= 1, got ", steps));
  }
  return CalibrateNoiseMultiplier(
      [&](double z) { return DpSgdEvent(z, sampling_rate, steps); }, epsilon,
      delta, kind);
}

}  // namespace dpopt::privacy
