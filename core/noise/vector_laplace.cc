#include "core/noise/vector_laplace.h"

#include <gmpxx.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

namespace dpopt::noise {
namespace {

constexpr int kGridBits = 20;
constexpr double kRoundUp = 1 + 0x1.0p-48;
constexpr int64_t kMaxDimension = int64_t{1} << 20;
constexpr double kMaxInputUnits = 0x1.0p51;
constexpr double kMaxOutputUnits = 0x1.0p53;

// The first 64 * words digits of x as an integer.
mpz_class Digits(LazyUniform& x, RandomBits& bits, int64_t words) {
  mpz_class out = 0;
  for (int64_t w = 0; w < words; ++w) {
    out <<= 64;
    // mpz_class has no uint64_t constructor on every platform: two halves.
    const uint64_t word = x.Word(bits, w);
    out += mpz_class(static_cast<unsigned long>(word >> 32)) << 32;  // NOLINT
    out += static_cast<unsigned long>(word & 0xffffffffu);           // NOLINT
  }
  return out;
}

// Lower and upper bounds on 2^(2P+1) G at P = 64 * words digits, from the
// integer parts and digit prefixes of G's terms (see the header, step 2):
// every fraction lies strictly inside (X, X + 1) / 2^P.
struct GammaBounds {
  int64_t words = 0;
  mpz_class lo;
  mpz_class hi;
};

class GammaVariate {
 public:
  GammaVariate(int64_t dimension, RandomBits& bits)
      : even_(dimension % 2 == 0),
        terms_(even_ ? dimension / 2 : (dimension + 1) / 2) {
    integer_.resize(terms_);
    fraction_.resize(terms_);
    ExactExponential sampler;
    for (int64_t i = 0; i < terms_ && bits.ok(); ++i) {
      integer_[i] = sampler.Draw(bits, fraction_[i]);
    }
    if (even_) z0_.Draw(bits);
  }

  // Bounds at (at least) `words` words of digits; recomputed only when more
  // precision is asked for.
  const GammaBounds& Bounds(RandomBits& bits, int64_t words) {
    if (bounds_.words >= words) return bounds_;
    const int64_t p = 64 * words;
    mpz_class sum = 0;
    for (int64_t i = 0; i < terms_; ++i) {
      sum += (mpz_class(integer_[i]) << p) + Digits(fraction_[i], bits, words);
    }
    bounds_.words = words;
    bounds_.lo = sum << (p + 1);
    bounds_.hi = (sum + terms_) << (p + 1);
    if (even_) {
      // + Z_0^2 / 2, i.e. + Z_0^2 2^(2P) in units of 2^-(2P+1).
      const mpz_class z = (mpz_class(z0_.integer_part()) << p) +
                          Digits(z0_.fraction(), bits, words);
      bounds_.lo += z * z;
      bounds_.hi += (z + 1) * (z + 1);
    }
    return bounds_;
  }

 private:
  bool even_;
  int64_t terms_;
  std::vector<uint32_t> integer_;
  std::vector<LazyUniform> fraction_;
  ExactStandardNormal z0_;
  GammaBounds bounds_;
};

// t = round(sqrt(q / 4)) for q = 4 V / beta^2 given as num / den: the largest
// t with (2t - 1)^2 <= floor(q), i.e. t = floor((isqrt(floor(q)) + 1) / 2).
int64_t RoundedRoot(const mpz_class& num, const mpz_class& den) {
  mpz_class q;
  mpz_fdiv_q(q.get_mpz_t(), num.get_mpz_t(), den.get_mpz_t());
  mpz_class s;
  mpz_sqrt(s.get_mpz_t(), q.get_mpz_t());
  mpz_class t = (s + 1) / 2;
  // |K_j| is far below 2^62 unless G or Z_j are absurd (probability below
  // exp(-1000)); saturate instead of overflowing.
  if (!mpz_fits_slong_p(t.get_mpz_t())) return int64_t{1} << 62;
  return static_cast<int64_t>(t.get_si());
}

// Largest M 2^-F <= x with 2^23 <= M < 2^24 (F may be large: the rate per
// grid unit can be tiny; GMP handles any F). REQUIRES: x finite, > 2^-1000.
Dyadic RoundDownToFineDyadic(double x) {
  int e = 0;
  std::frexp(x, &e);  // x in [2^(e-1), 2^e)
  Dyadic d;
  d.exponent = std::max(0, 24 - e);
  d.mantissa = static_cast<uint64_t>(std::floor(std::ldexp(x, d.exponent)));
  return d;
}

}  // namespace

absl::StatusOr<VectorLaplacePlan> PlanVectorLaplace(double l2_sensitivity,
                                                    double epsilon,
                                                    int64_t dimension) {
  if (!std::isfinite(l2_sensitivity) || !(l2_sensitivity > 0) ||
      !std::isfinite(epsilon) || !(epsilon > 0)) {
    return absl::InvalidArgumentError(
        "vector Laplace: sensitivity and epsilon must be finite and > 0");
  }
  const double scale = l2_sensitivity / epsilon;
  if (!(scale >= 0x1.0p-900 && scale <= 0x1.0p900)) {
    return absl::InvalidArgumentError(
        absl::StrCat("vector Laplace: sensitivity / epsilon = ", scale,
                     " is outside [2^-900, 2^900]"));
  }
  if (dimension < 1 || dimension > kMaxDimension) {
    return absl::InvalidArgumentError(absl::StrCat(
        "vector Laplace: dimension must be in [1, 2^20], got ", dimension));
  }
  VectorLaplacePlan plan;
  plan.l2_sensitivity = l2_sensitivity;
  plan.epsilon = epsilon;
  plan.dimension = dimension;
  // The grid: the power of two nearest below 2^-20 Delta / sqrt(n), so the
  // rounding adds at most a relative 2^-20 to the sensitivity.
  const double n_sqrt = std::sqrt(static_cast<double>(dimension));
  int e = 0;
  std::frexp(l2_sensitivity / n_sqrt, &e);  // in [2^(e-1), 2^e)
  plan.grid = std::ldexp(1.0, e - 1 - kGridBits);
  plan.effective_sensitivity = (l2_sensitivity + plan.grid * n_sqrt) * kRoundUp;
  const double lambda = epsilon / plan.effective_sensitivity / kRoundUp;
  plan.beta = RoundDownToFineDyadic(lambda * plan.grid);
  if (plan.beta.mantissa == 0) {
    return absl::InternalError("vector Laplace: rate underflow");
  }
  plan.lambda = plan.beta.ToDouble() / plan.grid;  // exact (power of two)
  const double n = static_cast<double>(dimension);
  plan.expected_norm = n / plan.lambda;
  plan.coordinate_stddev = std::sqrt(n + 1) / plan.lambda;
  return plan;
}

// ---------------------------------------------------------------------------
// ExactExponential.

bool ExactExponential::Accept(RandomBits& bits, LazyUniform& x) {
  // P(x > U_1 > ... > U_n) = x^n / n!, so the chain length N has
  // P(N even) = sum_n (-x)^n / n! = exp(-x).
  LazyUniform* prev = &x;
  LazyUniform* cur = &a_;
  LazyUniform* spare = &b_;
  uint64_t n = 0;
  while (bits.ok()) {
    cur->Reset();
    if (!cur->LessThan(bits, *prev)) break;
    ++n;
    prev = cur;
    std::swap(cur, spare);
  }
  return bits.ok() && n % 2 == 0;
}

uint32_t ExactExponential::Draw(RandomBits& bits, LazyUniform& x) {
  // Each rejection of x (probability exp(-1) overall) adds one to the
  // integer part: P(k) = exp(-k) (1 - exp(-1)), and x has density
  // proportional to exp(-x) on [0, 1). Restart beyond kMaxInteger.
  while (bits.ok()) {
    for (uint32_t k = 0; k <= kMaxInteger && bits.ok(); ++k) {
      x.Reset();
      if (Accept(bits, x)) return k;
    }
  }
  return 0;
}

// ---------------------------------------------------------------------------
// Sampling.

absl::Status SampleVectorLaplaceUnits(const VectorLaplacePlan& plan,
                                      RandomSource& rng,
                                      std::vector<int64_t>* out) {
  const int64_t n = plan.dimension;
  if (n < 1 || n > kMaxDimension || plan.beta.mantissa == 0) {
    return absl::InvalidArgumentError("vector Laplace: invalid plan");
  }
  out->assign(n, 0);
  RandomBits bits(rng);
  GammaVariate gamma(n, bits);
  // q = 4 * 2 G Z^2 / beta^2 with G = Gnum / 2^(2P+1), Z = Znum / 2^Q and
  // beta = M / 2^F:  q = Gnum Znum^2 2^(2F+2) / (M^2 2^(2P+2Q)).
  const mpz_class m = static_cast<unsigned long>(plan.beta.mantissa);  // NOLINT
  const mpz_class m2 = m * m;
  const int f = plan.beta.exponent;
  ExactStandardNormal normal;
  for (int64_t j = 0; j < n && bits.ok(); ++j) {
    normal.Draw(bits);
    for (int64_t words = 1; bits.ok(); ++words) {
      const GammaBounds& g = gamma.Bounds(bits, words);
      const int64_t p = 64 * g.words;
      const int64_t q = 64 * words;
      const mpz_class z_lo = (mpz_class(normal.integer_part()) << q) +
                             Digits(normal.fraction(), bits, words);
      const mpz_class z_hi = z_lo + 1;
      const mpz_class den = m2 << (2 * p + 2 * q);
      const int64_t t_lo =
          RoundedRoot((g.lo * z_lo * z_lo) << (2 * f + 2), den);
      const int64_t t_hi =
          RoundedRoot((g.hi * z_hi * z_hi) << (2 * f + 2), den);
      if (t_lo == t_hi) {
        (*out)[j] = normal.negative() ? -t_lo : t_lo;
        break;
      }
    }
  }
  if (!bits.ok()) {
    absl::Status s = rng.status();
    return s.ok() ? absl::InternalError("random source failed") : s;
  }
  return absl::OkStatus();
}

absl::Status AddVectorLaplaceNoise(const VectorLaplacePlan& plan,
                                   RandomSource& rng,
                                   Eigen::Ref<Eigen::VectorXd> v) {
  if (v.size() != plan.dimension) {
    return absl::InvalidArgumentError(
        absl::StrCat("vector Laplace: value has dimension ", v.size(),
                     ", plan has ", plan.dimension));
  }
  std::vector<double> units(v.size());
  for (Eigen::Index j = 0; j < v.size(); ++j) {
    const double u = v[j] / plan.grid;  // exact scaling by a power of two
    if (!std::isfinite(u) || std::abs(u) > kMaxInputUnits) {
      return absl::InvalidArgumentError(absl::StrCat(
          "vector Laplace: coordinate ", j,
          " is not finite or beyond 2^51 grid units (clamp it first)"));
    }
    units[j] = std::nearbyint(u);
  }
  std::vector<int64_t> noise;
  absl::Status s = SampleVectorLaplaceUnits(plan, rng, &noise);
  if (!s.ok()) {
    v.setConstant(std::nan(""));
    return s;
  }
  for (Eigen::Index j = 0; j < v.size(); ++j) {
    const double k = static_cast<double>(noise[j]);
    const double total =
        std::clamp(units[j] + k, -kMaxOutputUnits, kMaxOutputUnits);
    v[j] = total * plan.grid;
  }
  return absl::OkStatus();
}

}  // namespace dpopt::noise
