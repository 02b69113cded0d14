// Privacy loss distribution (PLD) accountant (Meiser & Mohammadi 2018;
// Sommer, Meiser, Mohammadi 2019; Koskela, Jalko, Honkela 2020; Doroshenko,
// Ghazi, Kamath, Kumar, Manurangsi 2022 for "connect the dots").
//
// A PLD is the distribution of the privacy loss L = log(P(o)/Q(o)) for
// o ~ P, for a dominating pair (P, Q) of a mechanism; delta(eps) =
// P(L = inf) + E[(1 - e^{eps - L})_+]. Losses live on the grid h * Z.
//
// Soundness (every step yields a pair that dominates the exact one, so
// epsilons are upper bounds up to floating-point error):
//  * Continuous mechanisms (Gaussian, Laplace and their Poisson-subsampled
//    versions) are discretized with connect-the-dots: inside each grid
//    interval (l_i, l_{i+1}] the P-mass is split between the two endpoints so
//    that P- and Q-mass are both preserved; by convexity of (t - y)_+ in the
//    likelihood ratio t this can only increase every hockey-stick divergence.
//    Mass below the first grid point is moved up to it; mass above the last
//    one goes to infinity.
//  * Pure eps-DP and (eps, delta)-DP events use the randomized-response pair
//    (Kairouz, Oh, Viswanath 2015) with eps rounded up to the grid.
//  * Composition convolves PLDs (Zhu, Dong, Wang 2022, Thm. 10: products of
//    dominating pairs dominate compositions). Self-composition raises the FFT
//    to the k-th power on a window chosen by a Chernoff bound; the bound on
//    the mass outside the window is added to the infinity mass (aliased mass
//    can only appear in addition to it). Tails trimmed to keep arrays small
//    go up (low losses) or to infinity (high losses). Any mass lost to
//    floating-point round-off in an FFT is added to the infinity mass.
//  * Add/remove: both directions (remove: P = M(D u {x}), Q = M(D); add: the
//    reverse) are composed separately and the worse one is reported.
//
// Compositions of Gaussian mechanisms only (Gaussian, SelfComposed, Composed,
// NoOp) are computed exactly by ComputeEpsilonPld / ComputeDeltaPld: they are
// one Gaussian mechanism with mu^2 = sum k_i / z_i^2 (Dong, Roth, Su 2019),
// whose privacy profile has a closed form (Balle & Wang 2018, Thm. 8).
//
// Supported events: NoOp, Gaussian, Laplace, Exponential, SparseVector,
// DiscreteLaplace, EpsilonDelta, PoissonSampled(Gaussian | Laplace | pure or
// (eps, delta) events), SampledWithoutReplacement(pure or (eps, delta)
// events), SelfComposed, Composed. DiscreteGaussian and sampled inner events
// without a PLD analysis here give UNIMPLEMENTED (the RDP accountant covers
// them).
#ifndef DPOPT_CORE_PRIVACY_PLD_H_
#define DPOPT_CORE_PRIVACY_PLD_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/privacy/accountant.h"
#include "core/privacy/dp_event.h"

namespace dpopt::privacy {

struct PldOptions {
  // Grid step h of the privacy loss (dp_accounting's default).
  double value_discretization_interval = 1e-4;
  // Tail mass allowed outside each discretization / self-composition window
  // (added to the infinity mass, i.e. directly to delta).
  double tail_mass_truncation = 1e-15;
  // Largest array (grid points) a single PLD may have.
  int64_t max_points = int64_t{1} << 22;
  absl::Status Validate() const;
};

// A discrete PLD: mass pmf[i] at loss (offset + i) * h, plus infinity_mass.
struct DiscretePld {
  double h = 1e-4;
  int64_t offset = 0;
  std::vector<double> pmf;
  double infinity_mass = 0;

  // delta(eps) = infinity_mass + sum_{l_i > eps} pmf[i] (1 - e^{eps - l_i}).
  double Delta(double epsilon) const;
  // Smallest eps >= 0 with Delta(eps) <= delta (+inf if none).
  double Epsilon(double delta) const;
};

// Both directions of the add/remove relation.
struct PldPair {
  DiscretePld remove;
  DiscretePld add;
};

absl::StatusOr<PldPair> ComputePld(const DpEvent& event,
                                   const PldOptions& options = {});

// Epsilon / delta of `event` under the PLD accountant (see ComputeEpsilon);
// the worse of the two directions.
absl::StatusOr<EpsilonResult> ComputeEpsilonPld(const DpEvent& event,
                                                double delta,
                                                const PldOptions& options = {});
absl::StatusOr<double> ComputeDeltaPld(const DpEvent& event, double epsilon,
                                       const PldOptions& options = {});

}  // namespace dpopt::privacy

#endif  // DPOPT_CORE_PRIVACY_PLD_H_
