#include "core/noise/rounded_gaussian.h"

// clang-format off
#include <stdint.h>  // before mpfr.h: enables mpfr_{get,set}_uj
#include <mpfr.h>
// clang-format on

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/noise/mpfr_util.h"

namespace dpopt::noise {
namespace {

static_assert(ExactStandardNormal::kMaxInteger == 63,
              "the documented exp(-2000) truncation bound assumes |Z| < 64");
static_assert(NormalEnvelope::kFineEnd + NormalEnvelope::kCells -
                      NormalEnvelope::kFineCells ==
                  64,
              "the documented exp(-2000) truncation bound assumes |Z| < 64");

// Bernoulli(exp(-1/2)), exactly (CKS 2020 Algorithm 1).
bool ExpMinusHalf(RandomBits& bits) { return BernoulliExpMinus(bits, 1, 2); }

using internal::Mp;
using internal::ReleaseMpfrThreadCache;

// MPFR keeps per-thread caches of constants (log 2, ...) that mpfr_exp
// fills; they are not freed when a job thread exits. skip_sampling.cc frees
// them after every call; here the fallback runs often enough that refilling
// them would cost 5x the exponentials, so they are kept until the thread
// exits: the first MPFR use on a thread constructs a thread_local whose
// destructor (run at thread exit) frees them.

void ReleaseMpfrCacheAtThreadExit() {
  static thread_local ReleaseMpfrThreadCache release;
  (void)release;
}

// Precision of the table computations: the thresholds need about 40 correct
// bits, the weights 64.
constexpr mpfr_prec_t kTablePrec = 96;

[[noreturn]] void EnvelopeBroken(const char* what) {
  std::fprintf(stderr, "NormalEnvelope: %s\n", what);
  std::abort();
}

// lo <= a <= hi for a = K 2^-e exp(-z^2 / 2) / w (w = 0: no division), at
// the precision of lo and hi (equal). z^2 is exact (twice z's precision);
// exp is computed once, rounded to nearest, and its ternary value tells on
// which side of the exact value the result is: if above, the next smaller
// representable number is below (else it would be the correctly rounded
// result), and symmetrically. Products and quotients are then rounded
// outward; scalings by powers of two are exact. REQUIRES: z >= 0.
void AcceptanceBounds(mpfr_ptr lo, mpfr_ptr hi, mpfr_ptr z, uint64_t k_scale,
                      int e, uint64_t w) {
  Mp s(2 * mpfr_get_prec(z)), integer(64);
  if (mpfr_sqr(s.get(), z, MPFR_RNDN) != 0) EnvelopeBroken("inexact square");
  mpfr_div_2ui(s.get(), s.get(), 1, MPFR_RNDN);  // exact
  mpfr_neg(s.get(), s.get(), MPFR_RNDN);         // exact
  const int inexact = mpfr_exp(lo, s.get(), MPFR_RNDN);
  mpfr_set(hi, lo, MPFR_RNDN);  // exact: same precision
  if (inexact > 0) mpfr_nextbelow(lo);
  if (inexact < 0) mpfr_nextabove(hi);
  mpfr_set_uj(integer.get(), k_scale, MPFR_RNDN);  // exact: 64 bits
  mpfr_mul(lo, lo, integer.get(), MPFR_RNDD);
  mpfr_mul(hi, hi, integer.get(), MPFR_RNDU);
  mpfr_div_2ui(lo, lo, static_cast<unsigned long>(e), MPFR_RNDN);  // exact
  mpfr_div_2ui(hi, hi, static_cast<unsigned long>(e), MPFR_RNDN);  // exact
  if (w != 0) {
    mpfr_set_uj(integer.get(), w, MPFR_RNDN);  // exact
    mpfr_div(lo, lo, integer.get(), MPFR_RNDD);
    mpfr_div(hi, hi, integer.get(), MPFR_RNDU);
  }
}

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
// NormalEnvelope and FastStandardNormal (the file comment's S1-S4).

const NormalEnvelope& NormalEnvelope::Get() {
  // Built once (thread-safe static initialization), never destroyed.
  static const NormalEnvelope* const envelope = new NormalEnvelope();
  return *envelope;
}

NormalEnvelope::NormalEnvelope()
    : weight_(kCells + 1, 0),
      slots_(kSlots),
      thresholds_(static_cast<size_t>(kCells) << kSubBits) {
  ReleaseMpfrCacheAtThreadExit();
  // Grid points z = (I 2^kSubBits + j) 2^-(e + kSubBits): at most 16 + 4
  // significant bits, exact.
  Mp z(32), lo(kTablePrec), hi(kTablePrec), sum(kTablePrec);
  auto set_point = [&z](int c, int j) {
    const uint64_t first = static_cast<uint64_t>(CellInteger(c)) << kSubBits;
    mpfr_set_ui_2exp(z.get(), first + static_cast<uint64_t>(j),
                     -(CellExponent(c) + kSubBits), MPFR_RNDN);
  };

  // K = floor((2^64 - 2 kSlots) / S) with S >= sum_c h_c exp(-z_c^2 / 2).
  // Then sum_c w_c <= sum_c (K h_c exp(-z_c^2/2) + 1) < 2^64 - kSlots; the
  // exact check below is what the proof uses.
  mpfr_set_zero(sum.get(), 1);
  for (int c = 0; c < kCells; ++c) {
    set_point(c, 0);
    AcceptanceBounds(lo.get(), hi.get(), z.get(), 1, CellExponent(c), 0);
    mpfr_add(sum.get(), sum.get(), hi.get(), MPFR_RNDU);
  }
  mpfr_set_ui_2exp(lo.get(), 1, 64, MPFR_RNDN);
  mpfr_sub_ui(lo.get(), lo.get(), 2 * kSlots, MPFR_RNDN);  // exact
  mpfr_div(lo.get(), lo.get(), sum.get(), MPFR_RNDD);
  scale_ = mpfr_get_uj(lo.get(), MPFR_RNDD);

  // w_c = ceil(an upper bound of K h_c exp(-z_c^2 / 2)) >= K h_c exp(-z^2/2)
  // for every z of the cell; the reject cell takes the rest of 2^64.
  uint128 total = 0;
  for (int c = 0; c < kCells; ++c) {
    set_point(c, 0);
    AcceptanceBounds(lo.get(), hi.get(), z.get(), scale_, CellExponent(c), 0);
    weight_[c] = mpfr_get_uj(hi.get(), MPFR_RNDU);
    if (weight_[c] == 0) EnvelopeBroken("zero weight");
    total += weight_[c];
  }
  const uint128 two64 = static_cast<uint128>(1) << 64;
  if (total > two64) EnvelopeBroken("weights exceed 2^64");
  weight_[kRejectCell] = static_cast<uint64_t>(two64 - total);

  // Walker's alias table by Vose's method, in exact integer arithmetic: each
  // slot holds T = 2^kKeepBits units, and the slots not yet filled always
  // hold exactly T units each on average (the weights sum to kSlots T).
  const uint64_t t = uint64_t{1} << kKeepBits;
  std::vector<uint64_t> units(kSlots, 0);
  for (int c = 0; c <= kRejectCell; ++c) units[c] = weight_[c];
  std::vector<int> small, large;
  for (int s = kSlots - 1; s >= 0; --s) {
    (units[s] < t ? small : large).push_back(s);
  }
  while (!small.empty() && !large.empty()) {
    const int s = small.back();
    small.pop_back();
    const int l = large.back();
    slots_[s] = {units[s], static_cast<uint32_t>(l)};
    units[l] -= t - units[s];  // units[l] >= t before: no underflow.
    if (units[l] < t) {
      large.pop_back();
      small.push_back(l);
    }
  }
  // By the invariant, what is left holds exactly T units each.
  for (int s : large) {
    if (units[s] != t) EnvelopeBroken("alias invariant");
    slots_[s] = {t, static_cast<uint32_t>(s)};
  }
  if (!small.empty()) EnvelopeBroken("alias invariant");

  // Sub-cell thresholds: a_c decreases in z, so on sub-cell j it lies in
  // (a_c(z_{j+1}), a_c(z_j)]. Grid point j is the right end of sub-cell
  // j - 1 and the left end of sub-cell j.
  for (int c = 0; c < kCells; ++c) {
    for (int j = 0; j <= (1 << kSubBits); ++j) {
      set_point(c, j);
      AcceptanceBounds(lo.get(), hi.get(), z.get(), scale_, CellExponent(c),
                       weight_[c]);
      mpfr_mul_2ui(lo.get(), lo.get(), 32, MPFR_RNDN);  // exact
      mpfr_mul_2ui(hi.get(), hi.get(), 32, MPFR_RNDN);  // exact
      if (j > 0) {
        // floor(2^32 lo) <= 2^32 a_c(right end). Clamping down only loses
        // speed (and a_c < 1 at a right end anyway).
        const uint64_t accept_below = mpfr_get_uj(lo.get(), MPFR_RNDD);
        thresholds_[(c << kSubBits) | (j - 1)].accept_below =
            static_cast<uint32_t>(accept_below > 0xffffffffu ? 0xffffffffu
                                                             : accept_below);
      }
      if (j < (1 << kSubBits)) {
        // ceil(2^32 hi) >= 2^32 a_c(left end), and >= 1 since a_c > 0.
        // a_c <= 1 (w_c's choice), so 2^32 is always a valid reject_from.
        uint64_t reject_from = mpfr_get_uj(hi.get(), MPFR_RNDU);
        if (reject_from > (uint64_t{1} << 32)) reject_from = uint64_t{1} << 32;
        if (reject_from == 0) EnvelopeBroken("zero reject threshold");
        thresholds_[(c << kSubBits) | j].reject_above =
            static_cast<uint32_t>(reject_from - 1);
      }
    }
  }
}

bool NormalEnvelope::AcceptExact(int c, LazyUniform& x, LazyUniform& v,
                                 RandomBits& bits, int64_t* words_used) const {
  ReleaseMpfrCacheAtThreadExit();
  const int e = CellExponent(c);
  for (int64_t r = 1; bits.ok(); ++r) {
    if (words_used != nullptr) *words_used = r;
    // With r words known, x in [xl, xl + 2^-64r) and V in [vl, vl + 2^-64r);
    // z = (I + x) 2^-e in [zl, zr). All exact: I < 2^16 and 64 r digits.
    const mpfr_prec_t exact_prec = 64 * r + 32;
    Mp zl(exact_prec), zr(exact_prec), vl(exact_prec), vr(exact_prec), word(64),
        ulp(2);
    mpfr_set_ui(zl.get(), CellInteger(c), MPFR_RNDN);
    mpfr_set_zero(vl.get(), 1);
    for (int64_t w = 0; w < r; ++w) {
      const unsigned long shift = static_cast<unsigned long>(64 * (w + 1));
      mpfr_set_uj(word.get(), x.Word(bits, w), MPFR_RNDN);
      mpfr_div_2ui(word.get(), word.get(), shift, MPFR_RNDN);
      mpfr_add(zl.get(), zl.get(), word.get(), MPFR_RNDN);
      mpfr_set_uj(word.get(), v.Word(bits, w), MPFR_RNDN);
      mpfr_div_2ui(word.get(), word.get(), shift, MPFR_RNDN);
      mpfr_add(vl.get(), vl.get(), word.get(), MPFR_RNDN);
    }
    if (!bits.ok()) break;
    mpfr_set_si_2exp(ulp.get(), 1, -64 * r, MPFR_RNDN);
    mpfr_add(zr.get(), zl.get(), ulp.get(), MPFR_RNDN);
    mpfr_add(vr.get(), vl.get(), ulp.get(), MPFR_RNDN);
    mpfr_div_2ui(zl.get(), zl.get(), static_cast<unsigned long>(e), MPFR_RNDN);
    mpfr_div_2ui(zr.get(), zr.get(), static_cast<unsigned long>(e), MPFR_RNDN);
    // a_c(z) in [lo, hi] (a_c decreases in z). 64 bits more than V's
    // digits: the brackets are then almost always decided at r = 1.
    const mpfr_prec_t prec = 64 * r + 64;
    Mp lo(prec), hi(prec), unused(prec);
    AcceptanceBounds(lo.get(), unused.get(), zr.get(), scale_, e, weight_[c]);
    if (mpfr_cmp(vr.get(), lo.get()) <= 0) return true;  // V < vr <= a_c
    AcceptanceBounds(unused.get(), hi.get(), zl.get(), scale_, e, weight_[c]);
    if (mpfr_cmp(vl.get(), hi.get()) >= 0) return false;  // V >= vl >= a_c
  }
  return false;
}

void FastStandardNormal::Draw(RandomBits& bits) {
  const NormalEnvelope& envelope = *envelope_;
  while (bits.ok()) {
    // S1.
    const int c = envelope.CellOf(bits.NextWord());
    if (c == NormalEnvelope::kRejectCell) continue;
    // S2, S3.
    const uint64_t x_word = bits.NextWord();
    const uint64_t v_word = bits.NextWord();
    const NormalEnvelope::Thresholds& th = envelope.thresholds(
        c, static_cast<int>(x_word >> (64 - NormalEnvelope::kSubBits)));
    const uint32_t v32 = static_cast<uint32_t>(v_word >> 32);
    bool accept;
    if (!exact_only_ && v32 < th.accept_below) {
      accept = true;
      x_.ResetToWord(x_word);
    } else if (!exact_only_ && v32 > th.reject_above) {
      accept = false;
    } else {
      ++exact_comparisons_;
      x_.ResetToWord(x_word);
      v_.ResetToWord(v_word);
      accept = envelope.AcceptExact(c, x_, v_, bits);
    }
    if (!accept) continue;
    // S4.
    x_word_ = x_word;
    integer_ = NormalEnvelope::CellInteger(c);
    exponent_ = NormalEnvelope::CellExponent(c);
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
  // Sizes: M <= 2^28, k < 2^16, F <= 40, p <= 64: Na < 2^110, and the
  // boundary numerator below is at most 2M (k + 1) + 2^(F+1) < 2^47.
  // floor() over that interval is lo or hi.
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
  // |Z| = (I + x) 2^-e, so tau |Z| = M 2^-(F + e) (I + x); round it, then
  // apply the sign (round() is odd).
  const Dyadic scaled{tau_.mantissa, tau_.exponent + normal_.exponent()};
  // RoundScaledLazy's first step at p = 64, inline: almost always decides.
  const uint128 m2 = 2 * static_cast<uint128>(scaled.mantissa);
  const int f = scaled.exponent;
  const uint128 na = ((static_cast<uint128>(normal_.integer()) << 64) |
                      normal_.fraction_word()) *
                         m2 +
                     (static_cast<uint128>(1) << (f + 64));
  const uint128 lo = na >> (f + 65);
  const int64_t magnitude = lo == (na + m2 - 1) >> (f + 65)
                                ? static_cast<int64_t>(lo)
                                : RoundScaledLazy(scaled, normal_.integer(),
                                                  normal_.fraction(), bits);
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
