// Convenience helpers for DP-SGD / DP-GD accounting, used by the CLI, the
// server and the solve loop.
#ifndef DPOPT_CORE_PRIVACY_DP_SGD_ACCOUNTING_H_
#define DPOPT_CORE_PRIVACY_DP_SGD_ACCOUNTING_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "core/privacy/accountant.h"
#include "core/privacy/dp_event.h"

namespace dpopt::privacy {

// SelfComposed(steps, PoissonSampled(q, Gaussian(z))); with q == 1 there is no
// sampling wrapper: SelfComposed(steps, Gaussian(z)).
DpEvent DpSgdEvent(double noise_multiplier, double sampling_rate,
                   int64_t steps);

// Smallest noise multiplier such that DpSgdEvent(z, q, steps) is
// (epsilon, delta)-DP under `kind` (never overshooting; see
// CalibrateNoiseMultiplier). INVALID_ARGUMENT for q outside (0, 1] or
// steps < 1.
absl::StatusOr<double> CalibrateDpSgd(double epsilon, double delta,
                                      double sampling_rate, int64_t steps,
                                      AccountantKind kind);

}  // namespace dpopt::privacy

#endif  // DPOPT_CORE_PRIVACY_DP_SGD_ACCOUNTING_H_
