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
//  * kRdp: the RDP curve (core/privacy/rdp.h) at DefaultRdpOrders() plus
//    alpha = inf, converted with the improved conversion of Balle et al. 2020;
//    optimal_order is the order attaining the minimum (inf for pure DP).
//  * kPld: privacy loss distributions (core/privacy/pld.h) with
//    connect-the-dots discretization (grid 1e-4); optimal_order = 0.
// Both are relation-agnostic: the event's parameters are relative to the
// sensitivity under the relation it was analysed for.
// Errors: INVALID_ARGUMENT (bad event or delta); UNIMPLEMENTED if the
// accountant cannot price an event kind (RDP: EpsilonDelta with delta > 0;
// PLD: DiscreteGaussian and sampling around non-Gaussian/Laplace inner
// events without a pure/approximate DP guarantee).
absl::StatusOr<EpsilonResult> ComputeEpsilon(const DpEvent& event, double delta,
                                             AccountantKind kind);
absl::StatusOr<double> ComputeDelta(const DpEvent& event, double epsilon,
                                    AccountantKind kind);

// Smallest noise multiplier z (to a relative precision of 1e-6, rounded up)
// such that make_event(z) is (epsilon, delta)-DP under `kind`; the returned z
// never overshoots the target: ComputeEpsilon(make_event(z)) <= epsilon
// (bisection that only ever returns a z it has checked).
// make_event must be monotone (more noise, less privacy loss).
// The inverse (epsilon of a given z) is ComputeEpsilon(make_event(z)).
// DP-SGD helpers: core/privacy/dp_sgd_accounting.h.
// Errors: INVALID_ARGUMENT for bad targets; OUT_OF_RANGE if no z up to
// `max_noise_multiplier` meets the target.
absl::StatusOr<double> CalibrateNoiseMultiplier(
    const std::function<DpEvent(double)>& make_event, double epsilon,
    double delta, AccountantKind kind, double max_noise_multiplier = 1e6);

}  // namespace dpopt::privacy

#endif  // DPOPT_CORE_PRIVACY_ACCOUNTANT_H_
