// Accountants: turn a DpEvent into (epsilon, delta) guarantees, and calibrate
// noise to a target.
#ifndef DPOPT_CORE_PRIVACY_ACCOUNTANT_H_
#define DPOPT_CORE_PRIVACY_ACCOUNTANT_H_

#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/privacy/dp_event.h"

namespace dpopt::privacy {

enum class AccountantKind { kRdp, kPld };

// "rdp" / "pld".
std::string AccountantName(AccountantKind kind);
absl::StatusOr<AccountantKind> ParseAccountant(absl::string_view name);

struct EpsilonResult {
  double epsilon = 0;
  // RDP only: the order at which the bound was attained (0 for PLD).
  double optimal_order = 0;
};

// Smallest epsilon such that `event` is (epsilon, delta)-DP under `kind`.
// Never negative; +inf when no finite bound exists.
// Errors: INVALID_ARGUMENT (bad event or delta); UNIMPLEMENTED if the
// accountant cannot price an event kind.
absl::StatusOr<EpsilonResult> ComputeEpsilon(const DpEvent& event, double delta,
                                             AccountantKind kind);
absl::StatusOr<double> ComputeDelta(const DpEvent& event, double epsilon,
                                    AccountantKind kind);

// Smallest noise multiplier z (to a relative precision of 1e-6, rounded up)
// such that make_event(z) is (epsilon, delta)-DP under `kind`; the returned z
// never overshoots the target: ComputeEpsilon(make_event(z)) <= epsilon.
// make_event must be monotone (more noise, less privacy loss).
// Errors: INVALID_ARGUMENT for bad targets; OUT_OF_RANGE if no z up to
// `max_noise_multiplier` meets the target.
absl::StatusOr<double> CalibrateNoiseMultiplier(
    const std::function<DpEvent(double)>& make_event, double epsilon,
    double delta, AccountantKind kind, double max_noise_multiplier = 1e6);

}  // namespace dpopt::privacy

#endif  // DPOPT_CORE_PRIVACY_ACCOUNTANT_H_
