#include "core/noise/discrete_samplers.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"

namespace dpopt::noise {
namespace {

constexpr uint128 kTwoPow126 = static_cast<uint128>(1) << 126;
constexpr uint128 kTwoPow127 = static_cast<uint128>(1) << 127;
constexpr double kMinScale = 0x1.0p-4;
constexpr double kMaxScale = 0x1.0p28;
constexpr int64_t kLaplaceSupportBound = int64_t{1} << 62;

// Bernoulli(exp(-1)): CKS 2020 Algorithm 1 with gamma = 1. Its first trial,
// Bernoulli(gamma/1) = Bernoulli(1), always succeeds, so K starts at 2.
bool BernoulliExpMinusOne(RandomBits& bits) {
  uint64_t k = 2;
  while (bits.ok() && BernoulliRational(bits, 1, k)) ++k;
  return bits.ok() && (k & 1);
}

// Bernoulli(exp(-r/den)) for 0 <= r < den: CKS 2020 Algorithm 1, gamma in
// [0, 1]: K <- 1; while Bernoulli(gamma/K) { K <- K+1 }; return K odd.
bool BernoulliExpMinusFraction(RandomBits& bits, uint128 r, uint128 den) {
  if (r == 0) return true;
  uint64_t k = 1;
  while (bits.ok()) {
    uint128 den_k;
    bool accept;
    if (!__builtin_mul_overflow(den, static_cast<uint128>(k), &den_k) &&
        den_k < kTwoPow127) {
      accept = BernoulliRational(bits, r, den_k);
    } else {
      // Bernoulli(ab) = Bernoulli(a) AND Bernoulli(b), independently.
      accept = BernoulliRational(bits, r, den) && BernoulliRational(bits, 1, k);
    }
    if (!accept) break;
    ++k;
  }
  return bits.ok() && (k & 1);
}

// CKS 2020 Algorithm 2 with t = `t` and s = 2^`log2_s`: a sample of the
// discrete Laplace with scale t/s, conditioned on |Y| <= y_cap (a proposal
// beyond the cap is rejected like any other). REQUIRES: 0 < t < 2^62,
// log2_s < 64.
int64_t SampleDiscreteLaplace(RandomBits& bits, uint64_t t, int log2_s,
                              uint64_t y_cap) {
  while (bits.ok()) {
    const uint64_t u = bits.UniformInt(t);
    if (!BernoulliExpMinus(bits, u, t)) continue;  // Accept w.p. exp(-U/t).
    uint64_t v = 0;  // Geometric: P(V >= v) = exp(-v).
    while (BernoulliExpMinusOne(bits)) ++v;
    // X = U + t V is geometric with P(X = x) proportional to exp(-x/t).
    const uint128 x = static_cast<uint128>(u) + static_cast<uint128>(t) * v;
    const uint128 y = x >> log2_s;  // Y = floor(X / s).
    if (y > y_cap) continue;
    const int b = bits.NextBit();
    if (b == 1 && y == 0) continue;  // Do not count 0 twice.
    const int64_t magnitude = static_cast<int64_t>(y);
    return b == 1 ? -magnitude : magnitude;
  }
  return 0;
}

}  // namespace

void RandomBits::Refill() {
  word_ = source_.NextUint64();
  bits_left_ = 64;
  if (!source_.status().ok()) {
    ok_ = false;
    word_ = 0;
  }
}

uint64_t RandomBits::UniformInt(uint64_t n) {
  if (n <= 1) return 0;
  if ((n & (n - 1)) == 0) {  // Power of two: take exactly log2(n) bits.
    uint64_t x = 0;
    for (uint64_t m = n; m > 1; m >>= 1) x = (x << 1) | NextBit();
    return x;
  }
  const uint64_t x = source_.UniformInt(n);
  if (!source_.status().ok()) ok_ = false;
  return x;
}

bool BernoulliRational(RandomBits& bits, uint128 num, uint128 den) {
  if (num >= den) return true;
  if (num == 0) return false;
  // Compare U = 0.u1u2... (uniform bits) with num/den = 0.p1p2... whose
  // digits come from long division; U < num/den decides at the first
  // differing digit (expected two bits).
  uint128 r = num;
  while (true) {
    r <<= 1;  // r < den < 2^127: no overflow.
    int digit = 0;
    if (r >= den) {
      digit = 1;
      r -= den;
    }
    const int u = bits.NextBit();
    if (u != digit) return u < digit;
    if (r == 0) return false;  // Expansion ended; U >= num/den.
  }
}

bool BernoulliExpMinus(RandomBits& bits, uint128 num, uint128 den) {
  if (num == 0) return bits.ok();
  uint128 whole = 0;
  uint128 frac = num;
  if (num >= den) {
    whole = num / den;
    frac = num % den;
  }
  // CKS 2020 Algorithm 1, gamma > 1: exp(-gamma) = exp(-1)^floor(gamma) *
  // exp(-(gamma - floor(gamma))), one independent trial per factor.
  for (uint128 i = 0; i < whole; ++i) {
    if (!BernoulliExpMinusOne(bits)) return false;
  }
  return BernoulliExpMinusFraction(bits, frac, den);
}

absl::Status CheckScale(double scale, const char* name) {
  if (!std::isfinite(scale) || scale < kMinScale || scale > kMaxScale) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, " must be finite and in [2^-4, 2^28], got ", scale));
  }
  return absl::OkStatus();
}

double Dyadic::ToDouble() const { return std::ldexp(mantissa, -exponent); }

Dyadic RoundUpToDyadic(double x) {
  int e = 0;
  std::frexp(x, &e);  // x in [2^(e-1), 2^e).
  Dyadic d;
  d.exponent = e >= 24 ? 0 : 24 - e;
  d.mantissa = static_cast<uint64_t>(std::ceil(std::ldexp(x, d.exponent)));
  if (d.exponent > 0 && d.mantissa == (uint64_t{1} << 24)) {
    d.mantissa >>= 1;
    --d.exponent;
  }
  return d;
}

Dyadic RoundDownToDyadic(double x) {
  constexpr int kRateBits = 24;
  constexpr int kMaxRateExponent = 62;
  int e = 0;
  std::frexp(x, &e);  // x in [2^(e-1), 2^e)
  Dyadic d;
  d.exponent = std::max(0, std::min(kMaxRateExponent, kRateBits - e));
  d.mantissa = static_cast<uint64_t>(std::floor(std::ldexp(x, d.exponent)));
  return d;
}

// ---------------------------------------------------------------------------
// Discrete Laplace.

DiscreteLaplaceSampler::DiscreteLaplaceSampler(Dyadic scale)
    : scale_(scale), support_bound_(kLaplaceSupportBound) {}

absl::StatusOr<DiscreteLaplaceSampler> DiscreteLaplaceSampler::Create(
    double scale) {
  if (absl::Status s = CheckScale(scale, "discrete Laplace scale"); !s.ok()) {
    return s;
  }
  return DiscreteLaplaceSampler(RoundUpToDyadic(scale));
}

int64_t DiscreteLaplaceSampler::Sample(RandomBits& bits) const {
  // Scale b = M / 2^F = t / s with t = M, s = 2^F.
  return SampleDiscreteLaplace(bits, scale_.mantissa, scale_.exponent,
                               static_cast<uint64_t>(support_bound_));
}

absl::StatusOr<int64_t> DiscreteLaplaceSampler::Sample(
    RandomSource& rng) const {
  RandomBits bits(rng);
  const int64_t x = Sample(bits);
  if (!bits.ok()) return rng.status();
  return x;
}

// ---------------------------------------------------------------------------
// Discrete Gaussian.

absl::StatusOr<DiscreteGaussianSampler> DiscreteGaussianSampler::Create(
    double sigma) {
  if (absl::Status s = CheckScale(sigma, "discrete Gaussian sigma"); !s.ok()) {
    return s;
  }
  DiscreteGaussianSampler g;
  g.sigma_ = RoundUpToDyadic(sigma);
  const uint64_t m = g.sigma_.mantissa;
  const int f = g.sigma_.exponent;  // <= 28 in the supported range.
  g.t_ = (m >> f) + 1;              // floor(sigma) + 1 (CKS Algorithm 3).
  g.sigma2_num_ = m * m;            // < 2^56
  g.sigma2_den_ = uint64_t{1} << (2 * f);
  const double sigma_exact = g.sigma_.ToDouble();
  uint128 q = 2;
  bool overflow = __builtin_mul_overflow(g.t_, g.sigma2_den_, &g.t_den_);
  overflow |=
      __builtin_mul_overflow(q, static_cast<uint128>(g.sigma2_num_), &q);
  overflow |=
      __builtin_mul_overflow(q, static_cast<uint128>(g.sigma2_den_), &q);
  overflow |= __builtin_mul_overflow(q, static_cast<uint128>(g.t_), &q);
  overflow |= __builtin_mul_overflow(q, static_cast<uint128>(g.t_), &q);
  if (overflow || q >= kTwoPow126) {
    return absl::InternalError("discrete Gaussian parameters overflow");
  }
  g.gamma_den_ = q;
  // Keep y * t * den below 2^64 so the acceptance exponent fits in 128 bits.
  const uint64_t cap = std::numeric_limits<uint64_t>::max() / g.t_den_;
  g.support_bound_ =
      static_cast<int64_t>(std::min<uint64_t>(cap, kLaplaceSupportBound));
  if (static_cast<double>(g.support_bound_) < 64 * sigma_exact) {
    return absl::InternalError("discrete Gaussian support bound too small");
  }
  return g;
}

int64_t DiscreteGaussianSampler::Sample(RandomBits& bits) const {
  // CKS 2020 Algorithm 3: Y ~ Lap_Z(t); accept with probability
  // exp(-(|Y| - sigma^2/t)^2 / (2 sigma^2)). With sigma^2 = num/den that
  // exponent is (|Y| t den - num)^2 / (2 num den t^2), exactly.
  while (bits.ok()) {
    const int64_t y = SampleDiscreteLaplace(
        bits, t_, 0, static_cast<uint64_t>(support_bound_));
    const uint64_t a = static_cast<uint64_t>(y < 0 ? -y : y) * t_den_;
    const uint64_t diff = a >= sigma2_num_ ? a - sigma2_num_ : sigma2_num_ - a;
    const uint128 numerator = static_cast<uint128>(diff) * diff;
    if (BernoulliExpMinus(bits, numerator, gamma_den_)) return y;
  }
  return 0;
}

absl::StatusOr<int64_t> DiscreteGaussianSampler::Sample(
    RandomSource& rng) const {
  RandomBits bits(rng);
  const int64_t x = Sample(bits);
  if (!bits.ok()) return rng.status();
  return x;
}

}  // namespace dpopt::noise
