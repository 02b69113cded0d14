// Additive noise for vector-valued queries (gradients), through exact samplers
// on a power-of-two grid (docs/architecture.md, invariant "secure noise only";
// Mironov 2012 for why floating-point noise leaks).
//
// Gaussian: the value is rounded coordinate-wise to the nearest point of the
// grid g = 2^k; two neighbouring values at L2 distance <= s are at distance
// <= s + g*sqrt(d) after rounding, so the mechanism's effective sensitivity is
// s_eff = s + g*sqrt(d) (rounded up in floating point). Then each coordinate
// gets round(tau * Z), Z ~ N(0, 1), with tau = sigma/g >= noise_multiplier *
// s_eff / g an exact dyadic rational, sampled exactly (RoundedGaussianSampler,
// Karney 2016). Since the rounded value is an integer, the release
// round_g(v) + g round(tau Z) = g round(round_g(v)/g + tau Z) is a
// post-processing of the continuous Gaussian mechanism round_g(v) + sigma Z
// with sensitivity s_eff and sigma >= noise_multiplier * s_eff: the DP event
// to charge is DpEvent::Gaussian(noise_multiplier), and every continuous-
// Gaussian analysis (tight Poisson-subsampled RDP, PLD) applies as proven.
// (The discrete Gaussian of CKS 2020 would need its own subsampled analysis,
// which is not known to match the continuous one.)
//
// Laplace: likewise with the L1 sensitivity, s_eff = s + g*d, and
// per-coordinate discrete Laplace noise (pmf proportional to exp(-|x|/b) on
// the grid) of scale b >= scale_multiplier * s_eff. The release is
// (1/scale_multiplier)-DP with respect to L1 sensitivity s: pass
// scale_multiplier = 1/epsilon for an epsilon-DP release. The DP event is
// DpEvent::DiscreteLaplace(scale_multiplier).
//
// Both Add*Noise functions reject non-finite input or input beyond 2^62 grid
// units with INVALID_ARGUMENT before drawing any noise. If the random source
// fails they return its error and set every coordinate of v to NaN.
//
// The grid is the power of two nearest below 2^-20 * noise_multiplier * s
// (resp. 2^-20 * scale_multiplier * s), so the noise scale is between 2^20 and
// about 2^21 grid units and the rounding adds a relative
// 2^-20 * noise_multiplier * sqrt(d) (resp. 2^-20 * scale_multiplier * d) to
// the sensitivity.
#ifndef DPOPT_CORE_NOISE_VECTOR_MECHANISMS_H_
#define DPOPT_CORE_NOISE_VECTOR_MECHANISMS_H_

#include <cstdint>

#include "Eigen/Dense"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/noise/random.h"

namespace dpopt::noise {

struct GaussianPlan {
  double l2_sensitivity = 0;         // s, as declared by the algorithm
  double noise_multiplier = 0;       // z
  int64_t dimension = 0;             // d
  double grid = 0;                   // g, a power of two
  double effective_sensitivity = 0;  // s + g*sqrt(d)
  double sigma = 0;                  // z * effective_sensitivity
  double sigma_in_grid_units = 0;    // sigma / g
};

// Chooses the grid (about 2^-20 of sigma, rounded to a power of two) and the
// noise scale. Errors: INVALID_ARGUMENT for non-positive or non-finite inputs.
absl::StatusOr<GaussianPlan> PlanGaussian(double l2_sensitivity,
                                          double noise_multiplier,
                                          int64_t dimension);

// v <- round_to_grid(v) + g * round(tau Z) per coordinate (tau =
// plan.sigma_in_grid_units, so the noise has scale plan.sigma). REQUIRES:
// v.size() == plan.dimension. Returns the RNG's error if it failed (then v must
// not be published).
absl::Status AddGaussianNoise(const GaussianPlan& plan, RandomSource& rng,
                              Eigen::Ref<Eigen::VectorXd> v);

struct LaplacePlan {
  double l1_sensitivity = 0;    // s
  double scale_multiplier = 0;  // b / s_eff; the release is 1/that -DP
  int64_t dimension = 0;
  double grid = 0;
  double effective_sensitivity = 0;  // s + g*d
  double scale = 0;                  // b = scale_multiplier * s_eff
  double scale_in_grid_units = 0;
};

absl::StatusOr<LaplacePlan> PlanLaplace(double l1_sensitivity,
                                        double scale_multiplier,
                                        int64_t dimension);

absl::Status AddLaplaceNoise(const LaplacePlan& plan, RandomSource& rng,
                             Eigen::Ref<Eigen::VectorXd> v);

}  // namespace dpopt::noise

#endif  // DPOPT_CORE_NOISE_VECTOR_MECHANISMS_H_
