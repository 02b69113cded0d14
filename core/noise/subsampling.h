// Server-side Poisson subsampling (each record independently with
// probability q), as assumed by the subsampled-Gaussian accountants.
//
// PoissonSampler picks its method by rate; both are exact (the inclusion
// probability is exactly the double q, rows are independent):
//  * q < kSkipBelow: SkipPoissonSampler (skip_sampling.h): geometric skips
//    plus an exact thinning, O(expected batch) time whatever n is.
//  * otherwise: one lazy comparison per row of a uniform's binary digits with
//    q's (the first differing digit decides U < q), ~2 random bits per row;
//    O(n) = O(batch / q) <= O(8 batch) time.
#ifndef DPOPT_CORE_NOISE_SUBSAMPLING_H_
#define DPOPT_CORE_NOISE_SUBSAMPLING_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/noise/discrete_samplers.h"
#include "core/noise/random.h"
#include "core/noise/skip_sampling.h"

namespace dpopt::noise {

// Exact Bernoulli(p) for a double p (p <= 0 or NaN: false; p >= 1: true).
bool BernoulliDouble(RandomBits& bits, double p);

class PoissonSampler {
 public:
  // Smallest rate accepted by job specs (kept for validation; the sampler
  // itself is exact for any q in (0, 1]).
  static constexpr double kMinRate = 1e-12;
  // Rates below this use geometric skips (measured crossover, see
  // docs/performance.md); at and above it the per-row comparison.
  static constexpr double kSkipBelow = 0.125;

  // REQUIRES: kMinRate <= q <= 1. rng must outlive the sampler.
  PoissonSampler(double q, RandomSource& rng);

  // Replaces *rows with the sorted indices in [0, n) that were included.
  // q == 1 includes every row and draws nothing. Returns the rng's status:
  // on error *rows must not be used (a failed source reads as zeros).
  absl::Status Sample(int64_t n, std::vector<int64_t>* rows);

  // One per-row Bernoulli(q) draw by digit comparison (exposed for tests;
  // Sample() uses it only when q >= kSkipBelow).
  bool Include();

 private:
  const double q_;
  RandomSource& rng_;
  std::unique_ptr<SkipPoissonSampler> skip_;  // q < kSkipBelow
  unsigned __int128 pattern_ = 0;             // q's binary digits, left-aligned
  int length_ = 0;                            // number of significant digits
  uint64_t word_ = 0;  // unread random bits, left-aligned
  int left_ = 0;       // number of unread bits in word_
};

// The indices in [0, n), increasing, each included independently with
// probability q (PoissonSampler; q = 0 gives none). Errors: INVALID_ARGUMENT
// unless n >= 0 and q is 0 or in [PoissonSampler::kMinRate, 1]; the source's
// error if it fails (then no batch may be used).
absl::StatusOr<std::vector<int64_t>> PoissonSubsample(int64_t n, double q,
                                                      RandomSource& rng);

}  // namespace dpopt::noise

#endif  // DPOPT_CORE_NOISE_SUBSAMPLING_H_
