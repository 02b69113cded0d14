// Server-side Poisson subsampling (each record independently with
// probability q), as assumed by the subsampled-Gaussian accountants.
//
// Exact: Bernoulli(q) for the double q = m * 2^-k is decided by comparing
// lazily drawn uniform bits with q's binary expansion (about two random bits
// per record instead of a 64-bit word), so sampling a batch from n = 32561
// rows costs ~10x less than n calls to RandomSource::Bernoulli.
#ifndef DPOPT_CORE_NOISE_SUBSAMPLING_H_
#define DPOPT_CORE_NOISE_SUBSAMPLING_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "core/noise/discrete_samplers.h"
#include "core/noise/random.h"

namespace dpopt::noise {

// Exact Bernoulli(p) for a double p (p <= 0 or NaN: false; p >= 1: true).
bool BernoulliDouble(RandomBits& bits, double p);

// The indices in [0, n), increasing, each included independently with
// probability q. Errors: INVALID_ARGUMENT unless n >= 0 and q in [0, 1]; the
// source's error if it fails (then no batch may be used).
absl::StatusOr<std::vector<int64_t>> PoissonSubsample(int64_t n, double q,
                                                      RandomSource& rng);

}  // namespace dpopt::noise

#endif  // DPOPT_CORE_NOISE_SUBSAMPLING_H_
