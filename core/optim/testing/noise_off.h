// TEST ONLY. NOT DIFFERENTIALLY PRIVATE.
//
// Switches the oracle's noise off (no grid rounding, no noise) for tests
// with known answers, e.g. "DP-GD with noise off, q = 1 and a huge clip norm
// is exactly gradient descent". Lives in target dpopt_optim_testing, which
// the server binary never links; SolveContext's hook is private and reachable
// only through SolveContextTestPeer.
#ifndef DPOPT_CORE_OPTIM_TESTING_NOISE_OFF_H_
#define DPOPT_CORE_OPTIM_TESTING_NOISE_OFF_H_

#include "core/optim/algorithm.h"
#include "core/optim/private_oracle.h"

namespace dpopt::optim::testing {

// Adds nothing (and checks nothing but the rng's status).
class NoNoiseForTesting final : public NoiseAdder {
 public:
  absl::Status AddGaussian(const noise::GaussianPlan& plan,
                           noise::RandomSource& rng,
                           Eigen::Ref<Eigen::VectorXd> v) const override;
  absl::Status AddLaplace(const noise::LaplacePlan& plan,
                          noise::RandomSource& rng,
                          Eigen::Ref<Eigen::VectorXd> v) const override;
};

class SolveContextTestPeer {
 public:
  // Makes every oracle built from `context` add no noise. NOT DP.
  static void DisableNoise(SolveContext& context);
  // Uses `noise` (must outlive the context's use). NOT DP.
  static void SetNoise(SolveContext& context, const NoiseAdder* noise);
};

}  // namespace dpopt::optim::testing

#endif  // DPOPT_CORE_OPTIM_TESTING_NOISE_OFF_H_
