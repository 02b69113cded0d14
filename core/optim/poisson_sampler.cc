#include "core/optim/poisson_sampler.h"

#include <cmath>

namespace dpopt::optim {

PoissonSampler::PoissonSampler(double q, noise::RandomSource& rng)
    : q_(q), rng_(rng) {
  if (q >= 1.0 || !(q > 0)) return;
  // q = f 2^e with f in [1/2, 1): digits are (-e) zeros then the 53 bits of
  // the integer M = f 2^53 (trailing zeros of M are dropped).
  int e = 0;
  const double f = std::frexp(q, &e);
  uint64_t m = static_cast<uint64_t>(std::ldexp(f, 53));
  int bits = 53;
  while ((m & 1) == 0) {
    m >>= 1;
    --bits;
  }
  length_ = -e + bits;  // <= 40 + 53 for q >= kMinRate
  pattern_ = static_cast<unsigned __int128>(m) << (128 - length_);
}

bool PoissonSampler::Include() {
  if (q_ >= 1.0) return true;
  // Compare U's digits with q's, 64 at a time, until they differ.
  int pos = 0;
  while (pos < length_) {
    if (left_ == 0) {
      word_ = rng_.NextUint64();
      left_ = 64;
    }
    const int n = std::min(left_, length_ - pos);
    const uint64_t mask = n == 64 ? ~uint64_t{0} : ~(~uint64_t{0} >> n);
    const uint64_t u = word_ & mask;
    const uint64_t t = static_cast<uint64_t>((pattern_ << pos) >> 64) & mask;
    const uint64_t x = u ^ t;
    if (x != 0) {
      const int k = __builtin_clzll(x);  // first differing digit, k < n
      const bool q_digit = (t >> (63 - k)) & 1;
      const int used = k + 1;
      word_ = used == 64 ? 0 : word_ << used;
      left_ -= used;
      return q_digit;  // U < q iff U has 0 where q has 1
    }
    word_ = n == 64 ? 0 : word_ << n;
    left_ -= n;
    pos += n;
  }
  // All of q's digits matched: U >= q (q's remaining digits are 0).
  return false;
}

absl::Status PoissonSampler::Sample(int64_t n, std::vector<int64_t>* rows) {
  rows->clear();
  if (q_ >= 1.0) {
    rows->resize(n);
    for (int64_t i = 0; i < n; ++i) (*rows)[i] = i;
    return absl::OkStatus();
  }
  for (int64_t i = 0; i < n; ++i) {
    if (Include()) rows->push_back(i);
  }
  return rng_.status();
}

}  // namespace dpopt::optim
