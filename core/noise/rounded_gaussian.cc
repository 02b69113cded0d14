#include "core/noise/rounded_gaussian.h"

#include <cstdint>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace dpopt::noise {
namespace {

static_assert(ExactStandardNormal::kMaxInteger == 63,
              "the documented exp(-2000) truncation bound assumes |Z| < 64");

// Bernoulli(exp(-1/2)), exactly (CKS 2020 Algorithm 1).
bool ExpMinusHalf(RandomBits& bits) { return BernoulliExpMinus(bits, 1, 2); }

}  // namespace

// ---------------------------------------------------------------------------
// LazyUniform.

int LazyUniform::Digit(RandomBits& bits, int64_t i) {
  while (digits_ <= i) {
    const int offset = static_cast<int>(digits_ % 64);
    if (offset == 0) words_.push_back(0);
    words_.back() |= static_cast<uint64_t>(bits.NextBit()) << (63 - offset);
    ++digits_;
  }
  return static_cast<int>((words_[i / 64] >> (63 - i % 64)) & 1);
}

uint64_t LazyUniform::Prefix64(RandomBits& bits) {
  Digit(bits, 63);
  return words_[0];
}

bool LazyUniform::LessThan(RandomBits& bits, LazyUniform& other) {
  for (int64_t i = 0; bits.ok(); ++i) {
    const int a = Digit(bits, i);
    const int b = other.Digit(bits, i);
    if (a != b) return a < b;
  }
  return false;
}

bool LazyUniform::LessThanRational(RandomBits& bits, uint128 num, uint128 den) {
  if (num >= den) return true;  // num/den >= 1 > this.
  // Digits of num/den by long division, compared with this real's digits.
  uint128 r = num;
  for (int64_t i = 0; bits.ok(); ++i) {
    r <<= 1;  // r < den < 2^127: no overflow.
    int digit = 0;
    if (r >= den) {
      digit = 1;
      r -= den;
    }
    const int mine = Digit(bits, i);
    if (mine != digit) return mine < digit;
    // The expansion of num/den ended; this real's later digits are not all
    // zero (probability one), so it is larger.
    if (r == 0) return false;
  }
  return false;
}

// ---------------------------------------------------------------------------
// ExactStandardNormal (Karney 2016, Algorithm N).

bool ExactStandardNormal::ChainCoin(RandomBits& bits, uint32_t k) {
  // P(true) = 2k/(2k+2) + (2/(2k+2)) * (1/2) * P(V < x) = (x + 2k)/(2k+2).
  if (BernoulliRational(bits, 2 * static_cast<uint128>(k),
                        2 * static_cast<uint128>(k) + 2)) {
    return true;
  }
  if (bits.NextBit() == 1) return false;
  v_.Reset();
  return v_.LessThan(bits, x_);
}

bool ExactStandardNormal::FractionTrial(RandomBits& bits, uint32_t k) {
  // Von Neumann: N = the largest n with x > U_1 > ... > U_n and n successful
  // coins of probability p = (x + 2k)/(2k + 2). P(N >= n) = (x p)^n / n!, so
  // P(N even) = exp(-x p) = exp(-x (x + 2k) / (2k + 2)) (Karney 2016, N4).
  LazyUniform* prev = &x_;
  LazyUniform* cur = &a_;
  LazyUniform* spare = &b_;
  uint64_t n = 0;
  while (bits.ok()) {
    cur->Reset();
    if (!cur->LessThan(bits, *prev)) break;
    if (!ChainCoin(bits, k)) break;
    ++n;
    prev = cur;
    std::swap(cur, spare);
  }
  return bits.ok() && n % 2 == 0;
}

void ExactStandardNormal::Draw(RandomBits& bits) {
  while (bits.ok()) {
    // N1: P(k) proportional to exp(-k/2); k >= 64 restarts (conditioning
    // on |Z| < 64).
    uint32_t k = 0;
    while (k <= kMaxInteger && ExpMinusHalf(bits)) ++k;
    if (k > kMaxInteger) continue;
    // N2: accept with probability exp(-1/2)^(k (k - 1)).
    bool accept = true;
    const uint32_t trials = k < 2 ? 0 : k * (k - 1);
    for (uint32_t i = 0; accept && i < trials; ++i) {
      accept = ExpMinusHalf(bits);
    }
    if (!accept) continue;
    // N3, N4: x uniform, accepted with probability exp(-x (2k + x) / 2).
    x_.Reset();
    for (uint32_t j = 0; accept && j <= k; ++j) accept = FractionTrial(bits, k);
    if (!accept) continue;
    // N5.
    k_ = k;
    negative_ = bits.NextBit() == 1;
    return;
  }
}

// ---------------------------------------------------------------------------
// RoundedGaussianSampler.

absl::StatusOr<RoundedGaussianSampler> RoundedGaussianSampler::Create(
    double tau) {
  if (absl::Status s = CheckScale(tau, "rounded Gaussian scale"); !s.ok()) {
    return s;
  }
  return RoundedGaussianSampler(RoundUpToDyadic(tau));
}

int64_t RoundScaledLazy(Dyadic tau, uint32_t k, LazyUniform& x,
                        RandomBits& bits, int prefix_digits) {
  // With X = the first p digits of x, x lies in the open interval
  // (X, X + 1) / 2^p (almost surely), so tau (k + x) + 1/2 lies in the open
  // interval (Na, Na + 2M) / 2^(F+p+1) with Na = 2M (k 2^p + X) + 2^(F+p).
  // Sizes: M <= 2^28, k < 64, F <= 27, p <= 64: everything stays below
  // 2^100. floor() over that interval is lo or hi.
  const uint128 m2 = 2 * static_cast<uint128>(tau.mantissa);
  const int f = tau.exponent;
  uint128 lo = 0;
  uint128 hi = 0;
  if (prefix_digits < 1 || prefix_digits > 64) prefix_digits = 64;
  for (int p = prefix_digits;; p = 64) {
    const uint128 base = (static_cast<uint128>(k) << p) | x.Prefix(bits, p);
    const uint128 na = base * m2 + (static_cast<uint128>(1) << (f + p));
    const int shift = f + p + 1;
    lo = na >> shift;
    hi = (na + m2 - 1) >> shift;
    if (hi <= lo + 1 || p == 64) break;  // At p = 64 the width is < 1.
  }
  if (lo == hi) return static_cast<int64_t>(lo);
  // The interval straddles the boundary tau (k + x) = hi - 1/2, i.e.
  // x = ((2 hi - 1) 2^F - 2 M k) / (2M), a rational in (0, 1): compare.
  const uint128 num = (2 * hi - 1) * (static_cast<uint128>(1) << f) - m2 * k;
  return static_cast<int64_t>(x.LessThanRational(bits, num, m2) ? lo : hi);
}

int64_t RoundedGaussianSampler::Sample(RandomBits& bits) {
  normal_.Draw(bits);
  if (!bits.ok()) return 0;
  // Karney's |Z| = k + x; round(tau |Z|), then the sign (round() is odd).
  const int64_t magnitude =
      RoundScaledLazy(tau_, normal_.integer_part(), normal_.fraction(), bits);
  return normal_.negative() ? -magnitude : magnitude;
}

absl::StatusOr<int64_t> RoundedGaussianSampler::Sample(RandomSource& rng) {
  RandomBits bits(rng);
  const int64_t x = Sample(bits);
  if (!bits.ok()) {
    absl::Status s = rng.status();
    return s.ok() ? absl::InternalError("random source failed") : s;
  }
  return x;
}

}  // namespace dpopt::noise
