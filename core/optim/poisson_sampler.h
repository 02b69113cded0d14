// The Poisson sampler of the private oracles lives in core/noise
// (noise::PoissonSampler, subsampling.h: exact, O(expected batch) below
// q = 1/8 by geometric skips). This alias keeps optim's spelling.
#ifndef DPOPT_CORE_OPTIM_POISSON_SAMPLER_H_
#define DPOPT_CORE_OPTIM_POISSON_SAMPLER_H_

#include "core/noise/subsampling.h"

namespace dpopt::optim {

using PoissonSampler = noise::PoissonSampler;

}  // namespace dpopt::optim

#endif  // DPOPT_CORE_OPTIM_POISSON_SAMPLER_H_
