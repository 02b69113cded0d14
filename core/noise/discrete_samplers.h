// Exact samplers for the discrete Laplace and discrete Gaussian distributions
// on the integers (Canonne, Kamath, Steinke 2020, "The Discrete Gaussian for
// Differential Privacy", Algorithms 1-3), and the exact Bernoulli helpers they
// are built from.
//
// What is exact. Every probability used is a rational number held in integer
// arithmetic (64/128-bit), and every Bernoulli(p) compares p's binary
// expansion, produced by long division, with lazily drawn uniform bits. There
// is no floating point on the sampling path. Consequently:
//  * the scale (Laplace b, Gaussian sigma) is a dyadic rational M * 2^-F with
//    M < 2^24 unless F = 0 (so it is exactly representable as a double).
//    Create() rounds the requested scale UP to the nearest such value (relative
//    change
//    <= 2^-23; more noise never weakens privacy), and scale()/sigma() return
//    the exact value actually sampled. Charge privacy with that value.
//  * the samplers return the exact distribution conditioned on |x| <= a cap
//    (support_bound()); the cap is at least 64 scales (2^62 for Laplace), so
//    the excluded mass is below exp(-2000) and never matters numerically, and
//    the conditioned distribution is still symmetric.
// Range: the scale must lie in [2^-4, 2^28] (INVALID_ARGUMENT otherwise).
//
// Failure: if the RandomSource fails, every loop stops, the sample is garbage
// and the StatusOr overloads return the source's error (fail closed).
#ifndef DPOPT_CORE_NOISE_DISCRETE_SAMPLERS_H_
#define DPOPT_CORE_NOISE_DISCRETE_SAMPLERS_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/noise/random.h"

namespace dpopt::noise {

using uint128 = unsigned __int128;

// Lazily consumed bits of a RandomSource (64 per draw), so that exact
// Bernoulli trials cost about two random bits each.
class RandomBits {
 public:
  explicit RandomBits(RandomSource& source) : source_(source) {}
  RandomBits(const RandomBits&) = delete;
  RandomBits& operator=(const RandomBits&) = delete;

  int NextBit() {
    if (bits_left_ == 0) Refill();
    const int bit = static_cast<int>(word_ >> 63);
    word_ <<= 1;
    --bits_left_;
    return bit;
  }
  // 64 fresh uniform bits, straight from the source (the buffered bits of
  // NextBit() are independent of them and stay for later). 0 after a failure.
  // A failed source returns 0 (RandomSource's contract), so its status is
  // only read when the word is 0.
  uint64_t NextWord() {
    const uint64_t word = source_.NextUint64();
    if (word == 0 && !source_.status().ok()) ok_ = false;
    return word;
  }
  // Uniform in [0, n), unbiased. REQUIRES: n > 0.
  uint64_t UniformInt(uint64_t n);
  // False once the underlying source has failed (sticky).
  bool ok() const { return ok_; }
  absl::Status status() const { return source_.status(); }
  RandomSource& source() { return source_; }

 private:
  void Refill();

  RandomSource& source_;
  uint64_t word_ = 0;
  int bits_left_ = 0;
  bool ok_ = true;
};

// Exact Bernoulli(num / den). REQUIRES: den > 0, den < 2^127. num >= den
// gives true.
bool BernoulliRational(RandomBits& bits, uint128 num, uint128 den);

// Exact Bernoulli(exp(-num / den)) (CKS 2020, Algorithm 1, including its
// reduction for gamma > 1). REQUIRES: den > 0, den < 2^126. Returns false if
// the source has failed.
bool BernoulliExpMinus(RandomBits& bits, uint128 num, uint128 den);

// A dyadic rational M * 2^-F, M > 0.
struct Dyadic {
  uint64_t mantissa = 0;  // M
  int exponent = 0;       // F >= 0
  double ToDouble() const;
};

// OK iff scale is finite and in [2^-4, 2^28], the range of every exact
// sampler's scale; otherwise INVALID_ARGUMENT naming `name`.
absl::Status CheckScale(double scale, const char* name);

// Smallest M * 2^-F >= x with M < 2^24 (or F = 0). REQUIRES: x finite > 0.
Dyadic RoundUpToDyadic(double x);

// Largest M * 2^-F <= x with M < 2^24 and F <= 62; mantissa 0 if x is below
// 2^-62. REQUIRES: x finite > 0. (Rates of exact samplers are rounded down:
// a smaller rate only adds privacy.)
Dyadic RoundDownToDyadic(double x);

// Discrete Laplace: P(x) proportional to exp(-|x| / b) on the integers.
class DiscreteLaplaceSampler {
 public:
  // INVALID_ARGUMENT unless scale is finite and in [2^-4, 2^28].
  static absl::StatusOr<DiscreteLaplaceSampler> Create(double scale);

  // The exact scale b sampled (>= the requested one).
  double scale() const { return scale_.ToDouble(); }
  int64_t support_bound() const { return support_bound_; }

  // One sample; on source failure returns its error.
  absl::StatusOr<int64_t> Sample(RandomSource& rng) const;
  // One sample; the caller checks bits.ok() afterwards.
  int64_t Sample(RandomBits& bits) const;

 private:
  explicit DiscreteLaplaceSampler(Dyadic scale);
  Dyadic scale_;
  int64_t support_bound_ = 0;
};

// Discrete Gaussian: P(x) proportional to exp(-x^2 / (2 sigma^2)) on the
// integers.
class DiscreteGaussianSampler {
 public:
  // INVALID_ARGUMENT unless sigma is finite and in [2^-4, 2^28].
  static absl::StatusOr<DiscreteGaussianSampler> Create(double sigma);

  // The exact sigma sampled (>= the requested one).
  double sigma() const { return sigma_.ToDouble(); }
  int64_t support_bound() const { return support_bound_; }

  absl::StatusOr<int64_t> Sample(RandomSource& rng) const;
  int64_t Sample(RandomBits& bits) const;

 private:
  DiscreteGaussianSampler() = default;
  Dyadic sigma_;
  uint64_t t_ = 0;             // floor(sigma) + 1, the Laplace proposal scale
  uint64_t sigma2_num_ = 0;    // sigma^2 = sigma2_num_ / sigma2_den_
  uint64_t sigma2_den_ = 0;    // 2^(2F)
  uint64_t t_den_ = 0;         // t * sigma2_den_
  uint128 gamma_den_ = 0;      // 2 * sigma2_num * sigma2_den * t^2
  int64_t support_bound_ = 0;  // proposals above it are rejected
};

}  // namespace dpopt::noise

#endif  // DPOPT_CORE_NOISE_DISCRETE_SAMPLERS_H_
