// Exact sampling of round(tau * Z), Z ~ N(0, 1): the continuous Gaussian
// rounded to the nearest integer, with no floating point on the sampling path.
//
// Why. Adding round(tau * Z) to an integer (a value already on the noise grid)
// releases round(x + tau * Z), a post-processing of the continuous Gaussian
// mechanism x + tau * Z. Every continuous-Gaussian analysis therefore applies
// as proven, including the tight Poisson-subsampled RDP (Mironov, Talwar &
// Zhang 2019) and PLD accountants, which are not proven for the discrete
// Gaussian (CKS 2020). Floating-point Gaussian noise would leak through its
// low-order bits (Mironov 2012); this sampler never forms a floating-point
// noise value.
//
// How (Karney 2016, "Sampling exactly from the normal distribution", ACM TOMS
// 42(1), Algorithm N):
//   N1. k >= 0 with probability exp(-k/2) (1 - exp(-1/2)): count successes of
//       Bernoulli(exp(-1/2)) before the first failure;
//   N2. accept with probability exp(-k (k - 1) / 2) (k (k - 1) such trials);
//   N3. x uniform in [0, 1), as a LazyUniform (digits drawn on demand);
//   N4. accept with probability exp(-x (2k + x) / 2), as k + 1 trials of
//       Bernoulli(exp(-x (x + 2k) / (2k + 2))) by von Neumann's descending-
//       chain method with an extra coin of probability (x + 2k) / (2k + 2);
//   N5. |Z| = k + x, negated with probability 1/2.
// Any rejection restarts at N1. P(k) * P(accept x | k) is proportional to
// exp(-k^2/2) exp(-x (2k + x)/2) = exp(-(k + x)^2 / 2), so |Z| has density
// proportional to exp(-z^2/2) on [0, inf).
// Rounding: tau = M * 2^-F is an exact dyadic rational (RoundUpToDyadic, as
// for the discrete samplers; rounding tau up only adds privacy), so
// round(tau (k + x)) is decided by comparing x's digits with a rational
// threshold in integer arithmetic (almost always from x's first 64 digits).
// Exponentials of rational arguments use CKS 2020 Algorithm 1.
//
// Exactness: the output has exactly the law of round(tau * Z) conditioned on
// |Z| < 64 (N1 restarts when k >= 64); the excluded mass is below exp(-2000)
// (total variation, so it could add at most that to a delta). Ties (tau * Z a
// half-integer) have probability zero.
//
// Failure: if the RandomSource fails, loops stop, the sample is garbage, and
// the caller must check RandomBits::ok() (the StatusOr overload does).
#ifndef DPOPT_CORE_NOISE_ROUNDED_GAUSSIAN_H_
#define DPOPT_CORE_NOISE_ROUNDED_GAUSSIAN_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "core/noise/discrete_samplers.h"
#include "core/noise/random.h"

namespace dpopt::noise {

// A uniform random real in [0, 1) whose binary digits are drawn lazily from
// RandomBits. Two different LazyUniforms are independent.
class LazyUniform {
 public:
  // Forgets all digits: the next use is a fresh uniform.
  void Reset() {
    words_.clear();
    digits_ = 0;
  }
  // Digit i after the binary point (i = 0 is the 1/2 digit).
  int Digit(RandomBits& bits, int64_t i);
  // The first 64 digits as an integer: the real lies in [X/2^64, (X+1)/2^64).
  uint64_t Prefix64(RandomBits& bits);
  // True iff this < other. Draws digits of both until they differ (expected
  // two each); equality has probability zero.
  bool LessThan(RandomBits& bits, LazyUniform& other);
  // True iff this < num/den. REQUIRES: 0 < den < 2^127, num <= den.
  bool LessThanRational(RandomBits& bits, uint128 num, uint128 den);
  // Digits [64 w, 64 w + 64) as an integer (word 0 is Prefix64()).
  // REQUIRES: w >= 0.
  uint64_t Word(RandomBits& bits, int64_t w) {
    Digit(bits, 64 * w + 63);
    return words_[w];
  }
  // The first n <= 64 digits as an integer.
  uint64_t Prefix(RandomBits& bits, int n) {
    return n == 0 ? 0 : Prefix64(bits) >> (64 - n);
  }
  // Number of digits drawn so far (for tests).
  int64_t digits_drawn() const { return digits_; }

 private:
  std::vector<uint64_t> words_;  // clear() keeps the capacity: reuse me.
  int64_t digits_ = 0;
};

// A sample of Z ~ N(0,1) conditioned on |Z| < 64, as sign, integer part and
// a lazily refinable fraction: Z = (negative ? -1 : 1) * (integer + fraction).
// Reuses its buffers; not thread-safe (one per thread).
class ExactStandardNormal {
 public:
  // |Z| < kMaxInteger + 1 = 64: the file comment's exp(-2000) bound on the
  // excluded mass depends on it.
  static constexpr uint32_t kMaxInteger = 63;

  // Draws a fresh Z. The fraction stays valid until the next Draw().
  void Draw(RandomBits& bits);

  bool negative() const { return negative_; }
  uint32_t integer_part() const { return k_; }
  LazyUniform& fraction() { return x_; }

 private:
  // Bernoulli(exp(-x (x + 2k) / (2k + 2))) for the current fraction x.
  bool FractionTrial(RandomBits& bits, uint32_t k);
  // Bernoulli((x + 2k) / (2k + 2)).
  bool ChainCoin(RandomBits& bits, uint32_t k);

  bool negative_ = false;
  uint32_t k_ = 0;
  LazyUniform x_;
  LazyUniform a_;
  LazyUniform b_;
  LazyUniform v_;
};

// round(tau * (k + x)) for a dyadic tau = M * 2^-F (M <= 2^28, F <= 27),
// an integer k < 64 and a lazy uniform x, exactly. It first tries the first
// `prefix_digits` digits of x (values outside [1, 64] mean 64; production
// uses 64), falls back to 64 digits, and then to an exact digit-by-digit
// comparison with the one rounding boundary inside the interval. Exposed so
// tests can exercise the rare boundary path with short prefixes.
int64_t RoundScaledLazy(Dyadic tau, uint32_t k, LazyUniform& x,
                        RandomBits& bits, int prefix_digits = 64);

// round(tau * Z) on the integers, Z ~ N(0, 1) (see the file comment).
class RoundedGaussianSampler {
 public:
  // INVALID_ARGUMENT unless tau is finite and in [2^-4, 2^28]; tau is rounded
  // UP to a dyadic M * 2^-F with M < 2^24 (or F = 0).
  static absl::StatusOr<RoundedGaussianSampler> Create(double tau);

  // The exact tau sampled (>= the requested one).
  double tau() const { return tau_.ToDouble(); }

  absl::StatusOr<int64_t> Sample(RandomSource& rng);
  // The caller checks bits.ok() afterwards.
  int64_t Sample(RandomBits& bits);

 private:
  explicit RoundedGaussianSampler(Dyadic tau) : tau_(tau) {}

  Dyadic tau_;
  ExactStandardNormal normal_;
};

}  // namespace dpopt::noise

#endif  // DPOPT_CORE_NOISE_ROUNDED_GAUSSIAN_H_
