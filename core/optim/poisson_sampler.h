// Exact Poisson subsampling (each row independently with probability q)
// that reads few random bits: about 2 + 53 q' bits per row instead of 64,
// where q' = q 2^Z in [1/2, 1) and Z counts q's leading zero bits.
//
// Exactness: row i is included iff U_i < q, where U_i is a uniform real in
// [0, 1) whose binary digits are read lazily from the RandomSource and
// compared with q's (finite) binary expansion; the first differing digit
// decides (U_i < q iff that digit of U_i is 0). The inclusion probability is
// therefore exactly the double q, and rows are independent (each consumes
// fresh bits). On average the comparison ends after ~2 digits.
#ifndef DPOPT_CORE_OPTIM_POISSON_SAMPLER_H_
#define DPOPT_CORE_OPTIM_POISSON_SAMPLER_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "core/noise/random.h"

namespace dpopt::optim {

class PoissonSampler {
 public:
  // Smallest supported rate (keeps q's expansion within 128 bits).
  static constexpr double kMinRate = 1e-12;

  // REQUIRES: kMinRate <= q <= 1. rng must outlive the sampler.
  PoissonSampler(double q, noise::RandomSource& rng);

  // Replaces *rows with the sorted indices in [0, n) that were included.
  // q == 1 includes every row and draws nothing. Returns the rng's status:
  // on error *rows must not be used (a failed source reads as zeros).
  absl::Status Sample(int64_t n, std::vector<int64_t>* rows);

  // One Bernoulli(q) draw (exposed for tests).
  bool Include();

 private:
  const double q_;
  noise::RandomSource& rng_;
  unsigned __int128 pattern_ = 0;  // q's binary digits, left-aligned
  int length_ = 0;                 // number of significant digits
  uint64_t word_ = 0;              // unread random bits, left-aligned
  int left_ = 0;                   // number of unread bits in word_
};

}  // namespace dpopt::optim

#endif  // DPOPT_CORE_OPTIM_POISSON_SAMPLER_H_
