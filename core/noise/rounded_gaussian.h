// Exact sampling of round(tau * Z), Z ~ N(0, 1): the continuous Gaussian
// rounded to the nearest integer. No noise value is ever rounded: the fast
// path is integer comparisons, and the only floating-point arithmetic (MPFR,
// when the tables are built and in a rare fallback) computes certified
// bounds, with directed rounding, that decide comparisons exactly.
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
// How (RoundedGaussianSampler, FastStandardNormal): rejection sampling of |Z|
// from a piecewise-constant envelope (von Neumann 1951), with every decision
// made by integer comparisons against tables certified with MPFR, and an
// exact interval-refinement fallback for the rare undecided cases.
//   Cells. [0, 64) is cut into cells c: width h = 2^-6 on [0, 8) (512 cells)
//     and width 1 on [8, 64) (56 cells). Cell c is [z_c, z_c + h_c) with
//     z_c = I_c 2^-e_c, h_c = 2^-e_c (e_c = 6 or 0), so a point of the cell
//     is z = (I_c + x) 2^-e_c with x in [0, 1).
//   Weights. w_c = ceil(K h_c exp(-z_c^2 / 2)), an integer, for one integer
//     K ~ 0.79 * 2^64 chosen so that sum_c w_c <= 2^64; a "reject" cell takes
//     the remaining weight 2^64 - sum_c w_c. Since exp(-z^2/2) decreases on
//     [0, inf), w_c >= K h_c exp(-z^2/2) on the whole cell.
//   S1. Draw a cell with probability w_c / 2^64 from one 64-bit word with
//     Walker's alias method (Walker 1977; Vose 1991) built in exact integer
//     arithmetic: slot = top 10 bits, keep the slot's own cell iff the low 54
//     bits are below its integer keep_below, else take its alias. The reject
//     cell restarts at S1.
//   S2. x uniform in [0, 1) (a LazyUniform: its first 64 digits are one
//     word, more are drawn only if needed), V uniform in [0, 1) likewise.
//     (So a proposal costs three 64-bit words, and S4 one more bit.)
//   S3. Accept iff V < a_c(z) = K h_c exp(-z^2 / 2) / w_c (<= 1 by the choice
//     of w_c), else restart at S1.
//   S4. |Z| = z = (I_c + x) 2^-e_c, negated with probability 1/2.
//   The accepted z has density sum_c (w_c / 2^64) (1 / h_c) 1[z in c]
//   K h_c exp(-z^2/2) / w_c = (K / 2^64) exp(-z^2/2) on [0, 64): exactly the
//   law of |Z| given |Z| < 64. (About 0.7% of proposals are rejected.)
// Deciding S3 exactly. The top 4 digits of x name a sub-cell on which
// a_c lies in (a_c(right end), a_c(left end)]; a table holds integers
// accept_below <= 2^32 a_c(right end) and reject_from >= 2^32 a_c(left end),
// both certified at table build with MPFR (directed rounding of exp and every
// product and quotient; MPFR's functions are correctly rounded, its
// documented contract, which is all this relies on). With V's top 32 digits
// v: v < accept_below proves V < a_c(z) (accept); v >= reject_from proves
// V >= a_c(z) (reject). Otherwise (probability about 2^-10 per proposal) the
// exact fallback (NormalEnvelope::AcceptExact) brackets a_c(z) with MPFR
// from x's known digits (directed rounding again) and compares with V's known
// digits, drawing one more 64-digit word of both until the brackets separate;
// this terminates with probability 1 because V = a_c(z) has probability 0.
// The fallback is a comparison of the same V and x, not a new draw: S3's
// outcome is the same as with infinite precision. (MPFR's per-thread caches
// are kept until the thread exits, then freed: refilling them per call would
// cost 5x the exponentials.)
// The tables do not depend on tau: they are built once per process (25-40
// ms on 2 shared cores, about 90 KB, on the first Create()), then shared
// read-only by all threads; later Create() calls cost about 40 ns.
// Rounding: tau = M * 2^-F is an exact dyadic rational (RoundUpToDyadic, as
// for the discrete samplers; rounding tau up only adds privacy), so
// round(tau z) = round(M 2^-(F + e_c) (I_c + x)) is decided by comparing x's
// digits with a rational threshold in integer arithmetic (almost always from
// x's first 64 digits; RoundScaledLazy).
//
// Timing: a sample's cost depends on the sample (rejections, and about 1
// sample in 1300 takes the ~3 us fallback), never on the data; as with every
// rejection sampler, a fine enough clock on one release could learn a little
// about its noise. dpopt exposes only job start/finish times (whole jobs of
// many samples), which the documentation lists as data-independent up to
// such noise-dependent variation.
//
// Exactness: the output has exactly the law of round(tau * Z) conditioned on
// |Z| < 64; the excluded mass is below exp(-2000) (total variation, so it
// could add at most that to a delta). Ties (tau * Z a half-integer) have
// probability zero. No other approximation is made: the tables only decide
// comparisons whose outcome they prove.
//
// ExactStandardNormal is the previous sampler of the same law (Karney 2016,
// "Sampling exactly from the normal distribution", ACM TOMS 42(1), Algorithm
// N, with Bernoulli(exp(-1/2)) by CKS 2020 Algorithm 1), which uses no tables
// and no MPFR, about 7x slower; the vector Laplace mechanism still uses it:
//   N1. k >= 0 with probability exp(-k/2) (1 - exp(-1/2)): count successes of
//       Bernoulli(exp(-1/2)) before the first failure;
//   N2. accept with probability exp(-k (k - 1) / 2) (k (k - 1) such trials);
//   N3. x uniform in [0, 1), as a LazyUniform (digits drawn on demand);
//   N4. accept with probability exp(-x (2k + x) / 2), as k + 1 trials of
//       Bernoulli(exp(-x (x + 2k) / (2k + 2))) by von Neumann's descending-
//       chain method with an extra coin of probability (x + 2k) / (2k + 2);
//   N5. |Z| = k + x, negated with probability 1/2.
// Any rejection restarts at N1. P(k) * P(accept x | k) is proportional to
// exp(-k^2/2) exp(-x (2k + x)/2) = exp(-(k + x)^2 / 2).
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
  // Forgets all digits and starts a fresh uniform whose first 64 digits are
  // `word` (which must be uniform and independent of everything else).
  void ResetToWord(uint64_t word) {
    words_.clear();
    words_.push_back(word);
    digits_ = 64;
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

// The certified tables of FastStandardNormal (see the file comment). Built
// once per process with MPFR on first use (Get()), then immutable and shared
// by all threads.
class NormalEnvelope {
 public:
  static constexpr int kFineBits = 6;      // fine cells have width 2^-kFineBits
  static constexpr uint32_t kFineEnd = 8;  // ... and cover [0, kFineEnd)
  static constexpr int kFineCells = static_cast<int>(kFineEnd) << kFineBits;
  // Then unit cells [k, k + 1) for k = kFineEnd .. 63: |Z| < 64 in all.
  static constexpr int kCells = kFineCells + 64 - static_cast<int>(kFineEnd);
  static constexpr int kRejectCell = kCells;  // weight 2^64 - sum of w_c
  static constexpr int kSubBits = 4;          // sub-cells per cell: 2^kSubBits
  static constexpr int kSlotBits = 10;        // alias slots: 2^kSlotBits
  static constexpr int kSlots = 1 << kSlotBits;
  static constexpr int kKeepBits = 64 - kSlotBits;
  static_assert(kCells + 1 <= kSlots, "every cell needs its own slot");

  // Alias slot s: cell s if the low kKeepBits bits of the word are below
  // keep_below (<= 2^kKeepBits), else cell alias.
  struct Slot {
    uint64_t keep_below = 0;
    uint32_t alias = 0;
  };
  // For a sub-cell, with v = the top 32 digits of V: v < accept_below proves
  // V < a_c(z); v > reject_above (= reject_from - 1) proves V >= a_c(z).
  struct Thresholds {
    uint32_t accept_below = 0;
    uint32_t reject_above = 0;
  };

  static const NormalEnvelope& Get();

  // Cell c is [I_c, I_c + 1) * 2^-e_c (c < kCells).
  static uint32_t CellInteger(int c) {
    return c < kFineCells ? static_cast<uint32_t>(c)
                          : kFineEnd + static_cast<uint32_t>(c - kFineCells);
  }
  static int CellExponent(int c) { return c < kFineCells ? kFineBits : 0; }

  uint64_t scale() const { return scale_; }  // K
  // w_c; weight(kRejectCell) is the reject weight. Sum: exactly 2^64.
  uint64_t weight(int c) const { return weight_[c]; }
  const Slot& slot(int s) const { return slots_[s]; }
  const Thresholds& thresholds(int c, int sub) const {
    return thresholds_[(c << kSubBits) | sub];
  }
  // Alias step S1: the cell named by a uniform 64-bit word.
  int CellOf(uint64_t word) const {
    const Slot& s = slots_[word >> kKeepBits];
    const uint64_t low = word & ((uint64_t{1} << kKeepBits) - 1);
    return low < s.keep_below ? static_cast<int>(word >> kKeepBits)
                              : static_cast<int>(s.alias);
  }

  // Exactly: V < a_c(z), with z = (I_c + x) 2^-e_c, for the reals x and v
  // (S3 of the file comment), drawing further digits of both as needed.
  // Uses MPFR; for the rare undecided case (and tests). `words_used`, if
  // not null, receives the number of 64-digit words of x and of v compared.
  bool AcceptExact(int c, LazyUniform& x, LazyUniform& v, RandomBits& bits,
                   int64_t* words_used = nullptr) const;

 private:
  NormalEnvelope();

  uint64_t scale_ = 0;
  std::vector<uint64_t> weight_;        // kCells + 1
  std::vector<Slot> slots_;             // kSlots
  std::vector<Thresholds> thresholds_;  // kCells << kSubBits
};

// A sample of Z ~ N(0,1) conditioned on |Z| < 64 by the tabulated method of
// the file comment: Z = (negative ? -1 : 1) * (integer + fraction) *
// 2^-exponent, with a lazily refinable fraction. Reuses its buffers; not
// thread-safe (one per thread).
class FastStandardNormal {
 public:
  FastStandardNormal() : envelope_(&NormalEnvelope::Get()) {}

  // Draws a fresh Z. The fraction stays valid until the next Draw().
  void Draw(RandomBits& bits);

  bool negative() const { return negative_; }
  uint32_t integer() const { return integer_; }
  int exponent() const { return exponent_; }
  LazyUniform& fraction() { return x_; }
  // The fraction's first 64 digits (fraction().Prefix64(), without a call).
  uint64_t fraction_word() const { return x_word_; }

  // Tests: decide every S3 comparison with NormalEnvelope::AcceptExact (the
  // fallback) instead of the tables.
  void set_exact_comparisons_only_for_testing(bool on) { exact_only_ = on; }
  // Number of S3 comparisons the tables left to the fallback.
  int64_t exact_comparisons() const { return exact_comparisons_; }

 private:
  const NormalEnvelope* envelope_;
  bool negative_ = false;
  uint32_t integer_ = 0;
  int exponent_ = 0;
  uint64_t x_word_ = 0;
  bool exact_only_ = false;
  int64_t exact_comparisons_ = 0;
  LazyUniform x_;
  LazyUniform v_;
};

// round(tau * (k + x)) for a dyadic tau = M * 2^-F (M <= 2^28, F <= 40),
// an integer k < 2^16 and a lazy uniform x, exactly. It first tries the first
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

  // Tests: see FastStandardNormal.
  void set_exact_comparisons_only_for_testing(bool on) {
    normal_.set_exact_comparisons_only_for_testing(on);
  }
  int64_t exact_comparisons() const { return normal_.exact_comparisons(); }

 private:
  explicit RoundedGaussianSampler(Dyadic tau) : tau_(tau) {}

  Dyadic tau_;
  FastStandardNormal normal_;
};

}  // namespace dpopt::noise

#endif  // DPOPT_CORE_NOISE_ROUNDED_GAUSSIAN_H_
