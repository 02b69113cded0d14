#include "core/noise/subsampling.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"

namespace dpopt::noise {

bool BernoulliDouble(RandomBits& bits, double p) {
  if (!(p > 0)) return false;
  if (p >= 1) return true;
  int e = 0;
  const double mantissa = std::frexp(p, &e);  // p = mantissa * 2^e
  // p = m / 2^(53 - e) with m a 53-bit integer.
  const uint64_t m = static_cast<uint64_t>(std::ldexp(mantissa, 53));
  const int shift = 53 - e;
  if (shift <= 126) {
    return BernoulliRational(bits, m, static_cast<uint128>(1) << shift);
  }
  // p < 2^-73: Bernoulli(p) = Bernoulli(2^-73) AND Bernoulli(p * 2^73).
  for (int i = 0; i < 73; ++i) {
    if (bits.NextBit()) return false;
  }
  return BernoulliDouble(bits, std::ldexp(p, 73));
}

PoissonSampler::PoissonSampler(double q, RandomSource& rng) : q_(q), rng_(rng) {
  if (q >= 1.0 || !(q > 0)) return;
  if (q < kSkipBelow) skip_ = std::make_unique<SkipPoissonSampler>(q, rng);
  if (q < kMinRate) return;  // Include() is only defined from kMinRate up.
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
  if (skip_ != nullptr) return skip_->Sample(n, rows);
  for (int64_t i = 0; i < n; ++i) {
    if (Include()) rows->push_back(i);
  }
  return rng_.status();
}

absl::StatusOr<std::vector<int64_t>> PoissonSubsample(int64_t n, double q,
                                                      RandomSource& rng) {
  if (n < 0 || !(q == 0 || (q >= PoissonSampler::kMinRate && q <= 1))) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Poisson subsampling needs n >= 0 and q = 0 or in [1e-12, 1], got n=",
        n, ", q=", q));
  }
  std::vector<int64_t> batch;
  if (q == 0) return batch;
  PoissonSampler sampler(q, rng);
  const absl::Status s = sampler.Sample(n, &batch);
  if (!s.ok()) return s;
  return batch;
}

}  // namespace dpopt::noise
