// Additive noise for vector-valued queries (gradients), through exact
// discrete samplers on a power-of-two grid (design.md §5; Mironov 2012 for
// why floating-point noise leaks; Canonne, Kamath, Steinke 2020 for the
// samplers).
//
// Gaussian: the value is rounded coordinate-wise to the grid g = 2^k; two
// neighbouring values at L2 distance <= s are at distance <= s + g*sqrt(d)
// after rounding, so the mechanism's effective sensitivity is
// s_eff = s + g*sqrt(d). Discrete Gaussian noise with scale
// sigma = noise_multiplier * s_eff (in grid units sigma/g) is then added.
// The DP event to charge is DpEvent::DiscreteGaussian(noise_multiplier,
// sigma/g, d) (see core/privacy/dp_event.h).
//
// Laplace: likewise with the L1 sensitivity, s_eff = s + g*d, and discrete
// Laplace noise of scale b = s_eff / epsilon_per_release... expressed here by
// the scale relative to the sensitivity (scale_multiplier = b / s_eff), so the
// release is (1/scale_multiplier)-DP.
#ifndef DPOPT_CORE_NOISE_VECTOR_MECHANISMS_H_
#define DPOPT_CORE_NOISE_VECTOR_MECHANISMS_H_

#include <cstdint>

#include "Eigen/Dense"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/noise/random.h"

namespace dpopt::noise {

struct GaussianPlan {
  double l2_sensitivity = 0;      // s, as declared by the algorithm
  double noise_multiplier = 0;    // z
  int64_t dimension = 0;          // d
  double grid = 0;                // g, a power of two
  double effective_sensitivity = 0;  // s + g*sqrt(d)
  double sigma = 0;               // z * effective_sensitivity
  double sigma_in_grid_units = 0;    // sigma / g
};

// Chooses the grid (about 2^-20 of sigma, rounded to a power of two) and the
// noise scale. Errors: INVALID_ARGUMENT for non-positive or non-finite inputs.
absl::StatusOr<GaussianPlan> PlanGaussian(double l2_sensitivity,
                                          double noise_multiplier,
                                          int64_t dimension);

// v <- round_to_grid(v) + discrete Gaussian noise (per coordinate, scale
// plan.sigma). REQUIRES: v.size() == plan.dimension. Returns the RNG's error
// if it failed (then v must not be published).
absl::Status AddGaussianNoise(const GaussianPlan& plan, RandomSource& rng,
                              Eigen::Ref<Eigen::VectorXd> v);

struct LaplacePlan {
  double l1_sensitivity = 0;         // s
  double scale_multiplier = 0;       // b / s_eff; the release is 1/that -DP
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
