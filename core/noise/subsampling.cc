#include "core/noise/subsampling.h"

#include <cmath>
#include <cstdint>
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

absl::StatusOr<std::vector<int64_t>> PoissonSubsample(int64_t n, double q,
                                                      RandomSource& rng) {
  if (n < 0 || !(q >= 0 && q <= 1)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Poisson subsampling needs n >= 0 and q in [0, 1], got n=", n,
        ", q=", q));
  }
  std::vector<int64_t> batch;
  batch.reserve(static_cast<size_t>(q * n * 1.2) + 16);
  RandomBits bits(rng);
  for (int64_t i = 0; i < n; ++i) {
    if (BernoulliDouble(bits, q)) batch.push_back(i);
  }
  if (!bits.ok()) {
    absl::Status s = rng.status();
    return s.ok() ? absl::InternalError("random source failed") : s;
  }
  return batch;
}

}  // namespace dpopt::noise
