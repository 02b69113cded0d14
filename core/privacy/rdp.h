// Renyi differential privacy (RDP) curves of DP events and their conversion to
// (epsilon, delta)-DP. Relation-agnostic: an event's parameters are relative to
// the sensitivity under the relation it was analysed for.
//
// All values are RDP epsilons eps(alpha) (Mironov 2017, Def. 4); +inf means
// "no finite bound at this order". Orders must be > 1 (finite) or +inf, where
// eps(inf) is the pure-DP epsilon (max divergence).
#ifndef DPOPT_CORE_PRIVACY_RDP_H_
#define DPOPT_CORE_PRIVACY_RDP_H_

#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "core/privacy/accountant.h"
#include "core/privacy/dp_event.h"

namespace dpopt::privacy {

// dp_accounting's default grid: 1.1, 1.2, ..., 10.9, 11, 12, ..., 63, 128,
// 256, 512, 1024 (computed as 1 + x / 10.0 exactly as rdp_privacy_accountant.py
// does, so fractional orders are bit-identical).
const std::vector<double>& DefaultRdpOrders();

// INVALID_ARGUMENT unless every order is > 1 (or +inf) and not NaN.
absl::Status ValidateOrders(absl::Span<const double> orders);

// The RDP curve of `event` at `orders` (same length). Errors: INVALID_ARGUMENT
// for an invalid event or orders; UNIMPLEMENTED for events RDP cannot price
// (EpsilonDelta with delta > 0, sampling wrappers around inner events without
// a supported amplification bound).
absl::StatusOr<std::vector<double>> ComputeRdp(const DpEvent& event,
                                               absl::Span<const double> orders);

// Improved RDP -> (epsilon, delta) conversion (Balle, Barthe, Gaboardi, Hsu,
// Sato 2020, Prop. 12; Canonne, Kamath, Steinke 2020, Eq. 20), minimised over
// the orders, exactly as dp_accounting's rdp.compute_epsilon, plus the KL
// shortcut (epsilon = 0 when sqrt(1 - exp(-eps(alpha))) <= delta) and the
// pure-DP order alpha = inf (epsilon = eps(inf)). Never negative.
// REQUIRES: orders.size() == rdp.size(); 0 <= delta <= 1.
absl::StatusOr<EpsilonResult> RdpToEpsilon(absl::Span<const double> orders,
                                           absl::Span<const double> rdp,
                                           double delta);

struct DeltaResult {
  double delta = 1;
  double optimal_order = 0;
};
// The inverse conversion (dp_accounting's rdp.compute_delta), capped at 1.
absl::StatusOr<DeltaResult> RdpToDelta(absl::Span<const double> orders,
                                       absl::Span<const double> rdp,
                                       double epsilon);

// Epsilon of `event` over an explicit order set (ComputeEpsilon(kRdp) uses
// DefaultRdpOrders() plus +inf).
absl::StatusOr<EpsilonResult> ComputeEpsilonRdp(
    const DpEvent& event, double delta, absl::Span<const double> orders);

// ---- Building blocks (exposed for tests) ----

// Poisson-subsampled Gaussian (Mironov, Talwar, Zhang 2019): integer orders by
// the exact binomial expansion (Sec. 3.3), fractional orders by the series of
// Sec. 3.4 with absolute values of the binomial coefficients (an upper bound:
// |sum| <= sum of |terms|). Log-space throughout. z = sigma / sensitivity.
// `signed_series` selects dp_accounting's signed series (for comparison only).
double RdpPoissonSampledGaussian(double q, double z, double alpha,
                                 bool signed_series = false);

// Laplace mechanism with scale b = noise_multiplier * L1 sensitivity
// (Mironov 2017, Prop. 6 / Table II).
double RdpLaplace(double noise_multiplier, double alpha);

// Tight RDP of any pure epsilon-DP mechanism: the randomized-response pair
// dominates every epsilon-DP pair (Kairouz, Oh, Viswanath 2015), so by data
// processing D_alpha <= (1/(alpha-1)) log((e^{alpha eps} + e^{(1-alpha) eps})
// / (1 + e^eps)), which is <= min(eps, alpha eps^2 / 2) (Bun, Steinke 2016).
double RdpPureDp(double epsilon, double alpha);

// DpEvent::ExponentialMechanisms(epsilon, count): count adaptive
// exponential mechanisms, each (epsilon / count)-DP and so
// (epsilon / count)-bounded range, hence (epsilon / count)^2 / 8-zCDP
// (Cesar & Rogers 2021, "Bounding, concentrating, and truncating: unifying
// privacy loss composition for data analytics"); zCDP adds up under adaptive
// composition and rho-zCDP means eps(alpha) <= rho alpha for every alpha > 1
// (Bun & Steinke 2016, Def. 1.1):
//   eps(alpha) = min(alpha epsilon^2 / (8 count), RdpPureDp(epsilon, alpha),
//                    count RdpPureDp(epsilon / count, alpha)),
// the last two being the pure-DP bounds of the whole and of the shares
// composed, so it is never above the curve of a pure epsilon-DP event.
// eps(inf) = epsilon (pure DP).
double RdpExponentialMechanisms(double epsilon, int64_t count, double alpha);

// Gaussian AboveThreshold with cutoff 1 (DpEvent::GaussianSparseVector):
// threshold noise std zt * Delta, query noise std zq * Delta, possibly
// non-monotone queries of sensitivity Delta, at most max_queries queries
// (k = max_queries + 1 outcomes: "above" at 1..max_queries or none). Zhu &
// Wang, "Improving Sparse Vector Technique with Renyi Differential Privacy",
// NeurIPS 2020, Thm 8 (as in autodp's RDP_gaussian_svt_c1):
//   eps(alpha) = alpha / zt^2 + 2 alpha / zq^2 + log(k) / (alpha - 1).
// Any real alpha > 1; +inf at alpha = inf (no pure-DP bound) or zt/zq = 0.
// Outcome-sum check: each outcome is an event of the noise vector, and for
// neighbours it is dominated by the same event under the noise shifted by
// Delta (threshold) and 2 Delta (the answering query); Hoelder per outcome
// and the sum over the k outcomes give
// alpha / (2 zt^2) + 2 alpha / zq^2 + log(k) / (alpha - 1) <= the above.
// The shift argument needs only the Renyi divergence of the noise under
// shifts by Delta and 2 Delta, so it holds for the discrete Gaussian with
// integer shifts (Canonne, Kamath, Steinke 2020: its divergence is at most
// the continuous one).
// REQUIRES: max_queries >= 0.
double RdpGaussianSparseVector(double zt, double zq, int64_t max_queries,
                               double alpha);

// Multivariate discrete Gaussian (Canonne, Kamath, Steinke 2020, Thm. 4 and
// composition over coordinates; Kairouz, Liu, Steinke 2021, Prop. 14 for the
// tau term): eps(alpha) = alpha / (2 z^2) + d * tau(sigma_grid).
double RdpDiscreteGaussian(double noise_multiplier, double sigma_in_grid_units,
                           int64_t dimension, double alpha);
// tau = 10 * exp(-2 pi^2 sigma^2 * 1/2) (KLS21 Prop. 14 with two summands,
// taken conservatively); exactly 0.0 in double for sigma >= ~9.
double DiscreteGaussianTau(double sigma_in_grid_units);

}  // namespace dpopt::privacy

#endif  // DPOPT_CORE_PRIVACY_RDP_H_
