#include "core/optim/testing/noise_off.h"

namespace dpopt::optim::testing {

absl::Status NoNoiseForTesting::AddGaussian(
    const noise::GaussianPlan& plan, noise::RandomSource& rng,
    Eigen::Ref<Eigen::VectorXd> v) const {
  return rng.status();
}

absl::Status NoNoiseForTesting::AddLaplace(
    const noise::LaplacePlan& plan, noise::RandomSource& rng,
    Eigen::Ref<Eigen::VectorXd> v) const {
  return rng.status();
}

void SolveContextTestPeer::DisableNoise(SolveContext& context) {
  static const NoNoiseForTesting* const kNoNoise = new NoNoiseForTesting();
  context.noise_for_testing_ = kNoNoise;
}

void SolveContextTestPeer::SetNoise(SolveContext& context,
                                    const NoiseAdder* noise) {
  context.noise_for_testing_ = noise;
}

}  // namespace dpopt::optim::testing
