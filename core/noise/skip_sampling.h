// Poisson subsampling in time proportional to the batch: geometric
// skips between candidate rows, then an exact thinning, so that every row is
// included independently with probability EXACTLY q (the double the
// accountant charges), using only the secure generator's uniform words and
// exact comparisons. No floating-point number ever decides an inclusion.
//
// Construction (the proof is in skip_sampling.cc, next to the code):
//  * lambda = s / 2^64 with the integer s = ceil(-ln(1 - q) 2^64), computed
//    once with MPFR's correctly rounded log1p (downward), so lambda >=
//    mu := -ln(1 - q) is certified, not hoped for.
//  * Stage 1: the gaps between candidate rows are iid Geometric with
//    P(gap >= k) = exp(-lambda k), sampled as floor(E / lambda) for an exact
//    standard exponential E (von Neumann 1951: an exact exponential from
//    comparisons of uniform words). Candidates therefore form a Bernoulli
//    process of rate r = 1 - exp(-lambda) >= q.
//  * Stage 2: each candidate is kept independently with probability q / r,
//    i.e. rejected iff a fresh uniform V < c := 1 - q / r
//    = ((1 - q) - exp(-lambda)) / (1 - exp(-lambda)). c is irrational; one
//    64-bit word of V decides against a certified bracket [c_lo, c_hi]
//    (MPFR, directed rounding) except with probability ~2^-64 + (c_hi - c_lo),
//    and then more words of V are compared with brackets of doubling
//    precision until they decide (terminates with probability 1).
//  Result: rows included independently, each with probability r (q/r) = q.
//
// Cost: ~5.3 secure 64-bit words and O(1) integer work per candidate, about
// q n + 1 candidates per batch: O(expected batch), independent of n.
#ifndef DPOPT_CORE_NOISE_SKIP_SAMPLING_H_
#define DPOPT_CORE_NOISE_SKIP_SAMPLING_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "core/noise/random.h"

namespace dpopt::noise {

class SkipPoissonSampler {
 public:
  // Supported rates (the exponential gap needs lambda < 1, i.e. q < 1 - 1/e;
  // above ~1/8 the per-row sampler of subsampling.h is as fast anyway).
  static constexpr double kMaxRate = 0.5;

  // REQUIRES: 0 < q <= kMaxRate. rng must outlive the sampler.
  SkipPoissonSampler(double q, RandomSource& rng);

  // Replaces *rows with the sorted indices in [0, n) that were included.
  // Returns the rng's status: on error *rows must not be used.
  absl::Status Sample(int64_t n, std::vector<int64_t>* rows);

  // --- For tests. ---------------------------------------------------------
  double rate() const { return q_; }
  // lambda * 2^64.
  uint64_t lambda_numerator() const { return s_; }
  // floor(E 2^64) for one exact standard exponential E.
  unsigned __int128 SampleExponentialFixed();
  // One stage-2 decision for a uniform V whose first 64-bit word is `word`;
  // further words, if needed, come from the rng.
  bool Keep(uint64_t word);
  // Certified 64-bit bracket of c: V < reject_below 2^-64 implies V < c,
  // V >= keep_from 2^-64 implies V >= c.
  uint64_t reject_below() const { return reject_below_; }
  unsigned __int128 keep_from() const { return keep_from_; }
  // Number of stage-2 decisions that needed the slow path so far.
  int64_t slow_decisions() const { return slow_decisions_; }

 private:
  // Whether the lazily extended uniform `a` is below `b` (extends both from
  // the rng while their words tie). False once the rng has failed.
  bool LazyLess(std::vector<uint64_t>& a, std::vector<uint64_t>& b);
  bool KeepSlow(uint64_t word);

  double q_;
  RandomSource& rng_;
  uint64_t s_ = 0;
  uint64_t reject_below_ = 0;
  unsigned __int128 keep_from_ = 0;
  int64_t slow_decisions_ = 0;
  std::vector<uint64_t> prev_, cur_;  // scratch for lazy uniforms
};

}  // namespace dpopt::noise

#endif  // DPOPT_CORE_NOISE_SKIP_SAMPLING_H_
