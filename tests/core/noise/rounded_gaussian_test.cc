// Tests of the exact rounded-Gaussian sampler (tabulated exact normal with an
// MPFR-certified envelope, Karney 2016 exact normal as a reference, exact
// rounding; core/noise/rounded_gaussian.h).
//
// Distribution checks are chi-square goodness-of-fit tests against the exact
// law computed here independently with erfc (double precision, far below the
// tests' resolution), on fixed seeds of the NOT DIFFERENTIALLY PRIVATE test
// generator. A correct sampler fails a given check with probability
// kAlpha = 1e-4 (the documented false-alarm rate); with fixed seeds the outcome
// is deterministic. The Power* tests show the same checks reject a discrete
// Gaussian of the same scale and a 3% error in the scale.
#include "core/noise/rounded_gaussian.h"

// clang-format off
#include <stdint.h>  // before mpfr.h: enables mpfr_{get,set}_uj
#include <mpfr.h>
// clang-format on

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <thread>
#include <utility>
#include <vector>

#include "core/audit/statistics.h"
#include "core/noise/discrete_samplers.h"
#include "core/noise/mpfr_util.h"
#include "core/noise/testing/seeded_random.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/common/status_matchers.h"

namespace dpopt::noise {
namespace {

using ::dpopt::audit::ChiSquareSurvival;
using ::dpopt::noise::testing::FailingRandomForTesting;
using ::dpopt::noise::testing::SeededRandomForTesting;
using ::dpopt::testing::StatusIs;

constexpr double kAlpha = 1e-4;
constexpr int kSamples = 200000;

double NormalCdf(double t) { return 0.5 * std::erfc(-t / std::sqrt(2.0)); }

// P(round(tau Z) <= m) = Phi((m + 1/2) / tau).
double RoundedCdf(double tau, double m) { return NormalCdf((m + 0.5) / tau); }

// Binomial z-score of k successes in n trials at probability p.
double ZScore(int64_t k, int64_t n, double p) {
  return (k - n * p) / std::sqrt(n * p * (1 - p));
}

// Chi-square p-value of integer samples against a law given by its CDF on
// the integers. Bins are runs of consecutive integers (candidate cuts every
// `step` integers), cut where the mass since the last cut reaches 1/200 (so
// every bin expects >= 1000 samples at n = 200000; a light last bin is merged
// into its neighbour).
double PValue(const std::vector<int64_t>& samples,
              const std::function<double(double)>& cdf, int64_t range,
              int64_t step = 1) {
  std::vector<int64_t> edges;  // Bin i is [edges[i], edges[i+1]).
  edges.push_back(-range);
  double last = cdf(-range - 1.0);
  for (int64_t m = -range; m < range; m += step) {
    if (cdf(static_cast<double>(m)) - last >= 0.005) {
      edges.push_back(m + 1);
      last = cdf(static_cast<double>(m));
    }
  }
  if (edges.size() > 2 && 1 - last < 0.005) edges.pop_back();  // Merge tail.
  edges.push_back(range + 1);
  const size_t bins = edges.size() - 1;
  std::vector<int64_t> counts(bins, 0);
  for (int64_t s : samples) {
    const int64_t c = std::max(-range, std::min(range, s));
    const size_t b =
        std::upper_bound(edges.begin(), edges.end(), c) - edges.begin() - 1;
    ++counts[b];
  }
  double stat = 0;
  const double n = static_cast<double>(samples.size());
  for (size_t i = 0; i < bins; ++i) {
    // Tails beyond +-range are folded into the end bins, as the samples are.
    const double lo = i == 0 ? 0 : cdf(edges[i] - 1.0);
    const double hi = i + 1 == bins ? 1 : cdf(edges[i + 1] - 1.0);
    const double expected = n * (hi - lo);
    stat += (counts[i] - expected) * (counts[i] - expected) / expected;
  }
  return ChiSquareSurvival(stat, static_cast<double>(bins - 1));
}

std::vector<int64_t> DrawRounded(RoundedGaussianSampler& sampler, uint64_t seed,
                                 int n) {
  SeededRandomForTesting rng(seed);
  RandomBits bits(rng);
  std::vector<int64_t> out(n);
  for (int64_t& x : out) x = sampler.Sample(bits);
  EXPECT_TRUE(bits.ok());
  return out;
}

TEST(LazyUniformTest, ComparisonsHaveTheRightProbabilities) {
  SeededRandomForTesting rng(1);
  RandomBits bits(rng);
  constexpr int64_t kN = 200000;
  LazyUniform u, v;
  int64_t less = 0, third = 0, big = 0;
  for (int64_t i = 0; i < kN; ++i) {
    u.Reset();
    v.Reset();
    less += u.LessThan(bits, v);
    // Antisymmetry: the same two reals compare the other way round.
    EXPECT_NE(u.LessThan(bits, v), v.LessThan(bits, u));
    u.Reset();
    third += u.LessThanRational(bits, 1, 3);
    u.Reset();
    big += u.LessThanRational(bits, 999, 1000);
  }
  EXPECT_LT(std::abs(ZScore(less, kN, 0.5)), 5);
  EXPECT_LT(std::abs(ZScore(third, kN, 1.0 / 3)), 5);
  EXPECT_LT(std::abs(ZScore(big, kN, 0.999)), 5);
  EXPECT_TRUE(bits.ok());
}

TEST(LazyUniformTest, DigitsAreStableAndPrefixMatchesThem) {
  SeededRandomForTesting rng(2);
  RandomBits bits(rng);
  LazyUniform u;
  const int first = u.Digit(bits, 0);
  EXPECT_EQ(u.digits_drawn(), 1);
  const uint64_t prefix = u.Prefix64(bits);
  EXPECT_EQ(u.digits_drawn(), 64);
  EXPECT_EQ(static_cast<int>(prefix >> 63), first);
  for (int i = 0; i < 64; ++i) {
    EXPECT_EQ(u.Digit(bits, i), static_cast<int>((prefix >> (63 - i)) & 1));
  }
  EXPECT_EQ(u.Prefix(bits, 5), prefix >> 59);
  u.Digit(bits, 200);  // Grows past the inline words.
  EXPECT_EQ(u.Prefix64(bits), prefix);
  // Exact rational comparisons against this real's own prefix.
  const uint128 p = prefix;
  const uint128 two64 = static_cast<uint128>(1) << 64;
  EXPECT_FALSE(u.LessThanRational(bits, p, two64));     // u >= X / 2^64
  EXPECT_TRUE(u.LessThanRational(bits, p + 1, two64));  // u < (X+1) / 2^64
  EXPECT_FALSE(u.LessThanRational(bits, 0, 7));
  EXPECT_TRUE(u.LessThanRational(bits, 7, 7));
}

// n draws of Z against the standard normal law, in bins of width 0.1 on
// [-3, 3] plus the two tails (every bin expects >= 88 samples at n = 200000,
// so the chi-square approximation holds; the fraction to 53 bits, far finer
// than the bins), and the mean and variance.
void ExpectStandardNormal(const std::function<double()>& draw, int n) {
  constexpr int kBins = 60;
  std::vector<int64_t> counts(kBins + 2, 0);
  double sum = 0, sum2 = 0;
  for (int i = 0; i < n; ++i) {
    const double z = draw();
    sum += z;
    sum2 += z * z;
    const int b = static_cast<int>(std::floor((z + 3) / 0.1)) + 1;
    ++counts[std::max(0, std::min(kBins + 1, b))];
  }
  double stat = 0;
  for (int b = 0; b < kBins + 2; ++b) {
    const double lo = b == 0 ? -INFINITY : -3 + (b - 1) * 0.1;
    const double hi = b == kBins + 1 ? INFINITY : -3 + b * 0.1;
    const double expected = n * (NormalCdf(hi) - NormalCdf(lo));
    stat += (counts[b] - expected) * (counts[b] - expected) / expected;
  }
  EXPECT_GT(ChiSquareSurvival(stat, kBins + 1), kAlpha);
  // Mean 0 (sd 1/sqrt(n)) and variance 1 (sd sqrt(2/n)).
  EXPECT_LT(std::abs(sum / n) * std::sqrt(n), 5);
  EXPECT_LT(std::abs(sum2 / n - 1) / std::sqrt(2.0 / n), 5);
}

double Fraction53(LazyUniform& x, RandomBits& bits) {
  return std::ldexp(static_cast<double>(x.Prefix64(bits) >> 11), -53);
}

// Z = +-(k + x) from ExactStandardNormal (Karney's Algorithm N).
TEST(ExactStandardNormalTest, MatchesTheNormalLaw) {
  SeededRandomForTesting rng(3);
  RandomBits bits(rng);
  ExactStandardNormal normal;
  ExpectStandardNormal(
      [&] {
        normal.Draw(bits);
        return (normal.negative() ? -1 : 1) *
               (normal.integer_part() + Fraction53(normal.fraction(), bits));
      },
      kSamples);
  EXPECT_TRUE(bits.ok());
}

double DrawFast(FastStandardNormal& normal, RandomBits& bits) {
  normal.Draw(bits);
  return (normal.negative() ? -1 : 1) *
         std::ldexp(normal.integer() + Fraction53(normal.fraction(), bits),
                    -normal.exponent());
}

// Z = +-(I + x) 2^-e from the tabulated sampler, with the tables deciding
// (the production path) and with every comparison left to the exact
// fallback: both must have the normal law.
TEST(FastStandardNormalTest, MatchesTheNormalLaw) {
  SeededRandomForTesting rng(13);
  RandomBits bits(rng);
  FastStandardNormal normal;
  ExpectStandardNormal([&] { return DrawFast(normal, bits); }, kSamples);
  EXPECT_TRUE(bits.ok());
  // The tables decide all but about 2^-10 of the comparisons.
  EXPECT_GT(normal.exact_comparisons(), 0);
  EXPECT_LT(normal.exact_comparisons(), kSamples / 500);
}

TEST(FastStandardNormalTest, ExactFallbackAloneMatchesTheNormalLaw) {
  SeededRandomForTesting rng(14);
  RandomBits bits(rng);
  FastStandardNormal normal;
  normal.set_exact_comparisons_only_for_testing(true);
  ExpectStandardNormal([&] { return DrawFast(normal, bits); }, kSamples);
  EXPECT_TRUE(bits.ok());
  EXPECT_GE(normal.exact_comparisons(), kSamples);
}

// As for Karney's sampler below: counts of floor(|Z|) = 3, 4 and >= 5 in 2M
// draws against their exact expectations.
TEST(FastStandardNormalTest, TailsHaveTheNormalMass) {
  SeededRandomForTesting rng(15);
  RandomBits bits(rng);
  FastStandardNormal normal;
  constexpr int64_t kDraws = 2'000'000;
  int64_t count[6] = {0, 0, 0, 0, 0, 0};
  for (int64_t i = 0; i < kDraws; ++i) {
    normal.Draw(bits);
    ++count[std::min<uint32_t>(normal.integer() >> normal.exponent(), 5)];
  }
  ASSERT_TRUE(bits.ok());
  for (int k : {3, 4}) {
    const double expected =
        kDraws * 2 * (NormalCdf(k + 1.0) - NormalCdf(static_cast<double>(k)));
    EXPECT_LT(std::abs(count[k] - expected) / std::sqrt(expected), 5)
        << "k=" << k << " count " << count[k] << " expected " << expected;
  }
  EXPECT_LE(count[5], 10);
}

// The tails matter for privacy: noise cut off at a few sigma makes outputs
// possible under one input and impossible under its neighbour. Counts of the
// integer part k = |Z| rounded down, for k = 3 and 4, against their exact
// expectations (Poisson z-scores; 2M draws expect 5279 and 126), and k >= 5
// (expected 1.15; P(count > 10) < 1e-7). A sampler truncated at |Z| < 4 or
// with a thin tail fails.
TEST(ExactStandardNormalTest, TailsHaveTheNormalMass) {
  SeededRandomForTesting rng(4);
  RandomBits bits(rng);
  ExactStandardNormal normal;
  constexpr int64_t kDraws = 2'000'000;
  int64_t count[6] = {0, 0, 0, 0, 0, 0};
  for (int64_t i = 0; i < kDraws; ++i) {
    normal.Draw(bits);
    ++count[std::min<uint32_t>(normal.integer_part(), 5)];
  }
  ASSERT_TRUE(bits.ok());
  for (int k : {3, 4}) {
    const double expected =
        kDraws * 2 * (NormalCdf(k + 1.0) - NormalCdf(static_cast<double>(k)));
    EXPECT_LT(std::abs(count[k] - expected) / std::sqrt(expected), 5)
        << "k=" << k << " count " << count[k] << " expected " << expected;
  }
  EXPECT_LE(count[5], 10);
}

class RoundedGaussianTest : public ::testing::TestWithParam<double> {};

TEST_P(RoundedGaussianTest, MatchesTheExactLaw) {
  const double requested = GetParam();
  ASSERT_OK_AND_ASSIGN(auto sampler, RoundedGaussianSampler::Create(requested));
  const double tau = sampler.tau();
  EXPECT_GE(tau, requested);
  EXPECT_LE(tau, requested * (1 + 0x1.0p-23));
  const std::vector<int64_t> samples = DrawRounded(sampler, 100, kSamples);
  const int64_t range = static_cast<int64_t>(std::ceil(8 * tau)) + 2;
  const int64_t step = std::max<int64_t>(1, static_cast<int64_t>(tau / 64));
  const double p = PValue(
      samples, [&](double m) { return RoundedCdf(tau, m); }, range, step);
  EXPECT_GT(p, kAlpha) << "tau=" << tau;
  // Variance and fourth moment: sums over P(m) from the CDF; for large tau
  // Sheppard's values for a rounded normal, tau^2 + 1/12 and
  // 3 tau^4 + tau^2 / 2 + 1/80 (exact up to terms of order
  // exp(-2 pi^2 tau^2)).
  double variance = tau * tau + 1.0 / 12;
  double fourth = 3 * tau * tau * tau * tau + tau * tau / 2 + 1.0 / 80;
  if (tau < 100) {
    variance = 0;
    fourth = 0;
    for (int64_t m = 1; m <= range; ++m) {
      const double pm = RoundedCdf(tau, m) - RoundedCdf(tau, m - 1.0);
      const double m2 = static_cast<double>(m) * m;
      variance += 2 * m2 * pm;
      fourth += 2 * m2 * m2 * pm;
    }
  }
  double sum2 = 0;
  for (int64_t x : samples) sum2 += static_cast<double>(x) * x;
  const double se = std::sqrt((fourth - variance * variance) / kSamples);
  EXPECT_LT(std::abs(sum2 / kSamples - variance) / se, 5) << "tau=" << tau;
}

// Small scales, where the rounded Gaussian differs most from the discrete
// Gaussian, up to the grid-unit scale used for gradient noise (~2^20).
INSTANTIATE_TEST_SUITE_P(Taus, RoundedGaussianTest,
                         ::testing::Values(0.2, 0.3, 0.5, 1.0, 3.0, 3.7, 40.0,
                                           1234.5, 0x1.0p20, 1048587.1,
                                           0x1.0p28));

TEST(RoundedGaussianTest, SmallestScaleIsAlmostAlwaysZero) {
  // tau = 2^-4: P(round(tau Z) != 0) = 2 Phi(-8) = 1.2e-15.
  ASSERT_OK_AND_ASSIGN(auto sampler, RoundedGaussianSampler::Create(0.0625));
  for (int64_t x : DrawRounded(sampler, 99, kSamples)) ASSERT_EQ(x, 0);
}

TEST(RoundedGaussianTest, PowerAgainstTheDiscreteGaussian) {
  // At scale 0.5 the discrete Gaussian puts 0.79 of its mass on 0, the
  // rounded Gaussian 0.68: the check must tell them apart.
  ASSERT_OK_AND_ASSIGN(auto dg, DiscreteGaussianSampler::Create(0.5));
  SeededRandomForTesting rng(7);
  RandomBits bits(rng);
  std::vector<int64_t> samples(kSamples);
  for (int64_t& x : samples) x = dg.Sample(bits);
  EXPECT_LT(PValue(
                samples, [](double m) { return RoundedCdf(0.5, m); }, 8),
            kAlpha);
}

TEST(RoundedGaussianTest, PowerAgainstWrongScale) {
  ASSERT_OK_AND_ASSIGN(auto sampler, RoundedGaussianSampler::Create(5.0));
  const std::vector<int64_t> samples = DrawRounded(sampler, 101, kSamples);
  EXPECT_LT(
      PValue(
          samples, [](double m) { return RoundedCdf(5.0 * 1.03, m); }, 80),
      kAlpha);
}

// The rare path: the prefix leaves one rounding boundary inside x's interval
// and the exact rational comparison decides. Short prefixes force it, also at
// the production scale (tau ~ 2^20, prefixes just above log2(tau)) and at
// scales whose boundaries have finite binary expansions (tau = 4, 6: the
// comparison's early exit). The answer must not depend on the prefix length
// and must match a long-double evaluation away from boundaries.
TEST(RoundScaledLazyTest, ShortPrefixesAgreeWithTheFullComparison) {
  SeededRandomForTesting rng(5);
  RandomBits bits(rng);
  for (double t : {0.3, 1.0, 3.7, 4.0, 6.0, 100.25, 1048587.1}) {
    const Dyadic tau = RoundUpToDyadic(t);
    const long double tau_ld =
        std::ldexp(static_cast<long double>(tau.mantissa), -tau.exponent);
    const int log2_tau = static_cast<int>(std::ceil(std::log2(t)));
    std::vector<int> prefixes = {1, 2, 4, 8, 13};
    for (int extra : {1, 2, 4, 8}) {
      if (log2_tau + extra >= 1) prefixes.push_back(log2_tau + extra);
    }
    int64_t boundary_cases = 0;  // One boundary strictly inside: hi == lo+1.
    for (int i = 0; i < 20000; ++i) {
      LazyUniform x;
      const uint32_t k = static_cast<uint32_t>(i % 7);
      const int64_t full = RoundScaledLazy(tau, k, x, bits, 64);
      for (int p : prefixes) {
        const uint128 base = (static_cast<uint128>(k) << p) | x.Prefix(bits, p);
        const uint128 m2 = 2 * static_cast<uint128>(tau.mantissa);
        const int shift = tau.exponent + p + 1;
        const uint128 na =
            base * m2 + (static_cast<uint128>(1) << (tau.exponent + p));
        if ((na + m2 - 1) >> shift == (na >> shift) + 1) ++boundary_cases;
        EXPECT_EQ(RoundScaledLazy(tau, k, x, bits, p), full)
            << "tau=" << t << " k=" << k << " p=" << p;
      }
      const long double v =
          tau_ld *
          (k + std::ldexp(static_cast<long double>(x.Prefix64(bits)), -64));
      const long double frac = v - std::floor(v);
      if (std::abs(frac - 0.5L) > 1e-9L) {
        EXPECT_EQ(full, static_cast<int64_t>(std::floor(v + 0.5L)))
            << "tau=" << t << " k=" << k;
      }
    }
    // The path was taken, except at tau = 1, where the only boundary
    // x = 1/2 is an end of every prefix interval (never strictly inside).
    if (t != 1.0) {
      EXPECT_GT(boundary_cases, 1000) << "tau=" << t;
    }
  }
  EXPECT_TRUE(bits.ok());
}

// ---------------------------------------------------------------------------
// The certified envelope (NormalEnvelope) and its exact fallback.

using Envelope = NormalEnvelope;
constexpr uint128 kTwo64 = static_cast<uint128>(1) << 64;

// RAII mpfr_t for the reference computations (the samplers' own wrapper:
// only the arithmetic below is independent of the sampler's code).
using MpRef = internal::Mp;

// a_c(z) = K 2^-e exp(-z^2 / 2) / w_c with z = (I_c + x) 2^-e, recomputed
// independently of the sampler's code, to nearest at `prec` bits (far more
// than any comparison below needs).
void ReferenceAcceptance(int c, mpfr_ptr x, mpfr_ptr out) {
  const Envelope& env = Envelope::Get();
  const mpfr_prec_t prec = mpfr_get_prec(out);
  MpRef z(prec), k(64), w(64);
  mpfr_add_ui(z.get(), x, Envelope::CellInteger(c), MPFR_RNDN);
  mpfr_div_2ui(z.get(), z.get(), Envelope::CellExponent(c), MPFR_RNDN);
  mpfr_sqr(z.get(), z.get(), MPFR_RNDN);
  mpfr_div_2ui(z.get(), z.get(), 1, MPFR_RNDN);
  mpfr_neg(z.get(), z.get(), MPFR_RNDN);
  mpfr_exp(out, z.get(), MPFR_RNDN);
  mpfr_set_uj(k.get(), env.scale(), MPFR_RNDN);
  mpfr_mul(out, out, k.get(), MPFR_RNDN);
  mpfr_div_2ui(out, out, Envelope::CellExponent(c), MPFR_RNDN);
  mpfr_set_uj(w.get(), env.weight(c), MPFR_RNDN);
  mpfr_div(out, out, w.get(), MPFR_RNDN);
}

// out = 0.w_0 w_1 ... (64-bit words), plus 2^-64n if `plus_ulp`.
void SetFromWords(mpfr_ptr out, const std::vector<uint64_t>& words,
                  bool plus_ulp) {
  mpfr_set_zero(out, 1);
  MpRef word(64);
  for (size_t i = 0; i < words.size(); ++i) {
    mpfr_set_uj(word.get(), words[i], MPFR_RNDN);
    mpfr_div_2ui(word.get(), word.get(), 64 * (i + 1), MPFR_RNDN);
    mpfr_add(out, out, word.get(), MPFR_RNDN);
  }
  if (plus_ulp) {
    mpfr_set_ui_2exp(word.get(), 1, -64 * static_cast<long>(words.size()),
                     MPFR_RNDN);
    mpfr_add(out, out, word.get(), MPFR_RNDN);
  }
}

// What the first n words of x and v prove about V < a_c(z): +1 (accept),
// -1 (reject), 0 (undecided at n words).
int ReferenceDecision(int c, const std::vector<uint64_t>& x,
                      const std::vector<uint64_t>& v) {
  const mpfr_prec_t prec = 64 * static_cast<mpfr_prec_t>(x.size()) + 512;
  MpRef xl(prec), xr(prec), vl(prec), vr(prec), a(prec);
  SetFromWords(xl.get(), x, false);
  SetFromWords(xr.get(), x, true);
  SetFromWords(vl.get(), v, false);
  SetFromWords(vr.get(), v, true);
  ReferenceAcceptance(c, xr.get(), a.get());  // a_c's infimum over x's range
  if (mpfr_cmp(vr.get(), a.get()) <= 0) return 1;
  ReferenceAcceptance(c, xl.get(), a.get());  // ... and its supremum
  if (mpfr_cmp(vl.get(), a.get()) >= 0) return -1;
  return 0;
}

// The first n words of a LazyUniform (already drawn: no new draws if n is at
// most what was compared).
std::vector<uint64_t> Words(LazyUniform& u, RandomBits& bits, int64_t n) {
  std::vector<uint64_t> out;
  for (int64_t w = 0; w < n; ++w) out.push_back(u.Word(bits, w));
  return out;
}

// The weights are integers summing to exactly 2^64 (so the alias word gives
// cell c with probability w_c / 2^64), and the alias table gives each cell
// exactly its weight: summing every slot's two shares reproduces w_c.
TEST(NormalEnvelopeTest, WeightsAndAliasTableAreExact) {
  const Envelope& env = Envelope::Get();
  EXPECT_EQ(&env, &Envelope::Get());  // built once
  uint128 total = 0;
  for (int c = 0; c <= Envelope::kRejectCell; ++c) total += env.weight(c);
  EXPECT_TRUE(total == kTwo64);
  const uint64_t t = uint64_t{1} << Envelope::kKeepBits;
  std::vector<uint128> mass(Envelope::kSlots, 0);
  for (int s = 0; s < Envelope::kSlots; ++s) {
    const Envelope::Slot& slot = env.slot(s);
    ASSERT_LE(slot.keep_below, t);
    mass[s] += slot.keep_below;
    if (slot.keep_below < t) {
      ASSERT_LE(slot.alias, static_cast<uint32_t>(Envelope::kRejectCell));
      mass[slot.alias] += t - slot.keep_below;
    }
    // CellOf reads the slot from the top bits and the share from the rest.
    const uint64_t top = static_cast<uint64_t>(s) << Envelope::kKeepBits;
    if (slot.keep_below > 0) {
      EXPECT_EQ(env.CellOf(top | (slot.keep_below - 1)), s);
    }
    if (slot.keep_below < t) {
      EXPECT_EQ(env.CellOf(top | slot.keep_below),
                static_cast<int>(slot.alias));
      EXPECT_EQ(env.CellOf(top | (t - 1)), static_cast<int>(slot.alias));
    }
  }
  for (int c = 0; c < Envelope::kSlots; ++c) {
    const uint128 want = c <= Envelope::kRejectCell ? env.weight(c) : 0;
    EXPECT_TRUE(mass[c] == want) << "cell " << c;
  }
  // Efficiency: a proposal is accepted with probability
  // K sqrt(pi / 2) / 2^64 (< 1, else the weights could not dominate).
  const double acceptance =
      std::ldexp(static_cast<double>(env.scale()), -64) * std::sqrt(M_PI / 2);
  EXPECT_GT(acceptance, 0.99);
  EXPECT_LT(acceptance, 1.0);
}

// Every certified number brackets the true value, recomputed here at 320
// bits: a_c <= 1 on every cell (w_c >= K h_c exp(-z_c^2 / 2)), accept_below
// <= 2^32 a_c(right end of the sub-cell), reject_above + 1 >= 2^32 a_c(left
// end). They are also tight (the floor / ceiling of the true value), so a
// table off by one in either direction fails here.
TEST(NormalEnvelopeTest, CertifiedBoundsBracketTheTrueValues) {
  const Envelope& env = Envelope::Get();
  MpRef x(320), a(320), scaled(320);
  for (int c = 0; c < Envelope::kCells; ++c) {
    mpfr_set_zero(x.get(), 1);
    ReferenceAcceptance(c, x.get(), a.get());
    ASSERT_LT(mpfr_cmp_ui(a.get(), 1), 0) << "cell " << c;  // a_c <= 1
    // Tight: w_c - 1 < K h_c exp(-z_c^2/2), i.e. a_c(z_c) > 1 - 1 / w_c.
    mpfr_mul_ui(scaled.get(), a.get(), env.weight(c), MPFR_RNDN);
    EXPECT_GT(mpfr_cmp_ui(scaled.get(), env.weight(c) - 1), 0) << c;
    for (int j = 0; j < (1 << Envelope::kSubBits); ++j) {
      const Envelope::Thresholds& th = env.thresholds(c, j);
      mpfr_set_ui_2exp(x.get(), j + 1, -Envelope::kSubBits, MPFR_RNDN);
      ReferenceAcceptance(c, x.get(), a.get());
      mpfr_mul_2ui(scaled.get(), a.get(), 32, MPFR_RNDN);
      EXPECT_GE(mpfr_cmp_ui(scaled.get(), th.accept_below), 0)
          << "cell " << c << " sub " << j;
      EXPECT_LT(mpfr_cmp_ui(scaled.get(), uint64_t{th.accept_below} + 1), 0)
          << "cell " << c << " sub " << j;
      mpfr_set_ui_2exp(x.get(), j, -Envelope::kSubBits, MPFR_RNDN);
      ReferenceAcceptance(c, x.get(), a.get());
      mpfr_mul_2ui(scaled.get(), a.get(), 32, MPFR_RNDN);
      const uint64_t reject_from = uint64_t{th.reject_above} + 1;
      EXPECT_LE(mpfr_cmp_ui(scaled.get(), reject_from), 0)
          << "cell " << c << " sub " << j;
      if (reject_from < (uint64_t{1} << 32)) {  // 2^32 is a clamp
        EXPECT_GT(mpfr_cmp_ui(scaled.get(), reject_from - 1), 0)
            << "cell " << c << " sub " << j;
      }
    }
  }
}

// Replays fixed words, then a seeded stream (NOT DIFFERENTIALLY PRIVATE).
class ScriptedThenSeeded : public RandomSource {
 public:
  ScriptedThenSeeded(std::vector<uint64_t> words, uint64_t seed)
      : words_(std::move(words)), rest_(seed) {}
  uint64_t Underflow() override {
    return next_ < words_.size() ? words_[next_++] : rest_.NextUint64();
  }
  absl::Status status() const override { return absl::OkStatus(); }

 private:
  std::vector<uint64_t> words_;
  size_t next_ = 0;
  SeededRandomForTesting rest_;
};

// An alias word that names cell c.
uint64_t WordForCell(int c) {
  const Envelope& env = Envelope::Get();
  const uint64_t t = uint64_t{1} << Envelope::kKeepBits;
  if (env.slot(c).keep_below > 0) {
    return static_cast<uint64_t>(c) << Envelope::kKeepBits;
  }
  for (int s = 0; s < Envelope::kSlots; ++s) {
    if (env.slot(s).keep_below < t && static_cast<int>(env.slot(s).alias) == c)
      return (static_cast<uint64_t>(s) << Envelope::kKeepBits) | (t - 1);
  }
  ADD_FAILURE() << "no slot names cell " << c;
  return 0;
}

// Words landing exactly on the thresholds of every sub-cell of every cell,
// at both ends of the sub-cell: the last word the table accepts, the first
// and last words it leaves to the fallback, the first word it rejects. The
// sampler must take the fallback exactly for the middle two, and every
// decision (fast or exact) must be the true one, recomputed at high
// precision; the fallback's decision is also checked on its own
// (AcceptExact) against the digits it actually compared.
TEST(NormalEnvelopeTest, DecisionsAtThresholdWordsAreTheTrueOnes) {
  const Envelope& env = Envelope::Get();
  SeededRandomForTesting extra_rng(21);
  RandomBits extra(extra_rng);
  int64_t fast_accepts = 0, fast_rejects = 0, fallbacks = 0, undecided = 0;
  for (int c = 0; c < Envelope::kCells; ++c) {
    const uint64_t cell_word = WordForCell(c);
    ASSERT_EQ(env.CellOf(cell_word), c);
    for (int j = 0; j < (1 << Envelope::kSubBits); ++j) {
      const Envelope::Thresholds& th = env.thresholds(c, j);
      const uint64_t sub = static_cast<uint64_t>(j)
                           << (64 - Envelope::kSubBits);
      const uint64_t sub_last =
          sub | ((uint64_t{1} << (64 - Envelope::kSubBits)) - 1);
      for (uint64_t x_word : {sub, sub_last}) {
        struct Case {
          uint64_t v_word;
          int expect;  // +1 fast accept, -1 fast reject, 0 fallback
        };
        std::vector<Case> cases;
        const uint64_t lo32 = th.accept_below, hi32 = th.reject_above;
        if (lo32 > 0) cases.push_back({((lo32 - 1) << 32) | 0xffffffffu, 1});
        cases.push_back({lo32 << 32, 0});
        cases.push_back({(hi32 << 32) | 0xffffffffu, 0});
        if (hi32 < 0xffffffffu) cases.push_back({(hi32 + 1) << 32, -1});
        for (const Case& k : cases) {
          // Through the sampler: S1 names c, then x, then V.
          ScriptedThenSeeded rng({cell_word, x_word, k.v_word},
                                 1000 + static_cast<uint64_t>(c));
          RandomBits bits(rng);
          FastStandardNormal normal;
          normal.Draw(bits);
          ASSERT_TRUE(bits.ok());
          const bool took_first =
              normal.fraction().Prefix64(bits) == x_word &&
              normal.exponent() == Envelope::CellExponent(c) &&
              normal.integer() == Envelope::CellInteger(c);
          const int truth = ReferenceDecision(c, {x_word}, {k.v_word});
          if (k.expect == 1) {
            ++fast_accepts;
            EXPECT_EQ(truth, 1) << "cell " << c << " sub " << j;
            EXPECT_TRUE(took_first) << "cell " << c << " sub " << j;
            EXPECT_EQ(normal.exact_comparisons(), 0);
          } else if (k.expect == -1) {
            ++fast_rejects;
            EXPECT_EQ(truth, -1) << "cell " << c << " sub " << j;
            EXPECT_FALSE(took_first) << "cell " << c << " sub " << j;
          } else {
            ++fallbacks;
            EXPECT_GE(normal.exact_comparisons(), 1);
            if (truth == 0) ++undecided;
            if (truth == 1) {
              EXPECT_TRUE(took_first) << "cell " << c << " sub " << j;
            }
            if (truth == -1) {
              EXPECT_FALSE(took_first) << "cell " << c << " sub " << j;
            }
          }
          // The fallback alone on the same words (drawing more digits from
          // `extra` if 64 do not decide).
          LazyUniform x, v;
          x.ResetToWord(x_word);
          v.ResetToWord(k.v_word);
          int64_t used = 0;
          const bool accept = env.AcceptExact(c, x, v, extra, &used);
          ASSERT_TRUE(extra.ok());
          EXPECT_EQ(ReferenceDecision(c, Words(x, extra, used),
                                      Words(v, extra, used)),
                    accept ? 1 : -1)
              << "cell " << c << " sub " << j << " words " << used;
          if (k.expect != 0) {
            EXPECT_EQ(accept ? 1 : -1, k.expect);
          }
        }
      }
    }
  }
  // The fast paths were exercised in (almost) every sub-cell, and the
  // fallback words were mostly decided at 64 digits.
  EXPECT_GT(fast_accepts, Envelope::kFineCells * 16);
  EXPECT_GT(fast_rejects, Envelope::kFineCells * 16);
  EXPECT_LT(undecided, fallbacks / 10);
}

// V equal to a_c(z) in its first 64 digits: the fallback cannot decide on
// one word and must draw more digits of both x and V. Its decision must be
// what the digits it compared prove.
TEST(NormalEnvelopeTest, ExactComparisonRefinesBeyondSixtyFourDigits) {
  const Envelope& env = Envelope::Get();
  SeededRandomForTesting rng(22);
  RandomBits bits(rng);
  int64_t refined = 0, accepted = 0;
  constexpr int kTrials = 2000;
  for (int i = 0; i < kTrials; ++i) {
    const int c = env.CellOf(bits.NextWord());
    if (c == Envelope::kRejectCell) continue;
    const uint64_t x_word = bits.NextWord();
    MpRef xl(256), a(256);
    SetFromWords(xl.get(), {x_word}, false);
    ReferenceAcceptance(c, xl.get(), a.get());
    mpfr_mul_2ui(a.get(), a.get(), 64, MPFR_RNDN);
    const uint64_t v_word = mpfr_get_uj(a.get(), MPFR_RNDD);
    LazyUniform x, v;
    x.ResetToWord(x_word);
    v.ResetToWord(v_word);
    int64_t used = 0;
    const bool accept = env.AcceptExact(c, x, v, bits, &used);
    ASSERT_TRUE(bits.ok());
    refined += used >= 2;
    accepted += accept;
    EXPECT_EQ(ReferenceDecision(c, Words(x, bits, used), Words(v, bits, used)),
              accept ? 1 : -1)
        << "cell " << c << " words " << used;
  }
  EXPECT_GT(refined, kTrials * 9 / 10);
  // The next digits decide like fair coins.
  EXPECT_GT(accepted, kTrials / 4);
  EXPECT_LT(accepted, kTrials * 3 / 4);
}

// Where a_c is steep (the unit cells past 8: a_c' = -z a_c), a_c varies by
// several units of 2^-64 over x's 64-digit interval, so a V strictly inside
// that range is undecided at one word even though V's interval lies between
// a_c(x's right end) and a_c(x's left end). Using the wrong end for either
// bound would decide it at one word, wrongly for some completions.
TEST(NormalEnvelopeTest, ExactComparisonHandlesVInsideTheRangeOfX) {
  const Envelope& env = Envelope::Get();
  SeededRandomForTesting rng(23);
  RandomBits bits(rng);
  int64_t inside = 0, accepted = 0;
  for (int c = Envelope::kFineCells; c < Envelope::kFineCells + 2; ++c) {
    for (int i = 0; i < 500; ++i) {
      const uint64_t x_word = bits.NextWord() >> 3;  // x < 1/8: a_c > 0.3
      MpRef xr(256), xl(256), a(256);
      SetFromWords(xr.get(), {x_word}, true);
      ReferenceAcceptance(c, xr.get(), a.get());
      mpfr_mul_2ui(a.get(), a.get(), 64, MPFR_RNDN);
      const uint64_t v_word = mpfr_get_uj(a.get(), MPFR_RNDU);  // >= a(xr)
      SetFromWords(xl.get(), {x_word}, false);
      ReferenceAcceptance(c, xl.get(), a.get());
      mpfr_mul_2ui(a.get(), a.get(), 64, MPFR_RNDN);
      if (mpfr_cmp_ui(a.get(), v_word + 1) < 0) continue;  // not inside
      ++inside;
      ASSERT_EQ(ReferenceDecision(c, {x_word}, {v_word}), 0);
      LazyUniform x, v;
      x.ResetToWord(x_word);
      v.ResetToWord(v_word);
      int64_t used = 0;
      const bool accept = env.AcceptExact(c, x, v, bits, &used);
      ASSERT_TRUE(bits.ok());
      EXPECT_GE(used, 2);
      accepted += accept;
      EXPECT_EQ(
          ReferenceDecision(c, Words(x, bits, used), Words(v, bits, used)),
          accept ? 1 : -1)
          << "cell " << c << " words " << used;
    }
  }
  EXPECT_GT(inside, 500);
  EXPECT_GT(accepted, inside / 10);
  EXPECT_LT(accepted, inside * 9 / 10);
}

// The whole sampler with every comparison left to the exact fallback has
// the exact law too (so the fallback is right, not merely rare).
TEST(RoundedGaussianTest, ExactFallbackAloneMatchesTheExactLaw) {
  for (double requested : {1.0, 3.0, 0x1.0p20}) {
    ASSERT_OK_AND_ASSIGN(auto sampler,
                         RoundedGaussianSampler::Create(requested));
    sampler.set_exact_comparisons_only_for_testing(true);
    const double tau = sampler.tau();
    const std::vector<int64_t> samples = DrawRounded(sampler, 102, kSamples);
    EXPECT_GE(sampler.exact_comparisons(), kSamples);
    const int64_t range = static_cast<int64_t>(std::ceil(8 * tau)) + 2;
    const int64_t step = std::max<int64_t>(1, static_cast<int64_t>(tau / 64));
    EXPECT_GT(
        PValue(
            samples, [&](double m) { return RoundedCdf(tau, m); }, range, step),
        kAlpha)
        << "tau=" << tau;
  }
  ASSERT_OK_AND_ASSIGN(auto tiny, RoundedGaussianSampler::Create(0.0625));
  tiny.set_exact_comparisons_only_for_testing(true);
  for (int64_t x : DrawRounded(tiny, 103, 20000)) ASSERT_EQ(x, 0);
}

// Job threads draw noise and exit: the fallback's MPFR caches are freed at
// thread exit (under LeakSanitizer, scripts/sanitize.sh, a leak fails this).
// Threads share the one envelope.
TEST(RoundedGaussianTest, FallbackOnThreadsThatExit) {
  std::vector<std::thread> threads;
  std::vector<int64_t> fallbacks(2, 0);
  for (int t = 0; t < 2; ++t) {
    threads.emplace_back([t, &fallbacks] {
      absl::StatusOr<RoundedGaussianSampler> sampler =
          RoundedGaussianSampler::Create(3.0);
      if (!sampler.ok()) return;
      sampler->set_exact_comparisons_only_for_testing(true);
      SeededRandomForTesting rng(200 + t);
      RandomBits bits(rng);
      for (int i = 0; i < 1000; ++i) sampler->Sample(bits);
      fallbacks[t] = sampler->exact_comparisons();
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_GE(fallbacks[0], 1000);
  EXPECT_GE(fallbacks[1], 1000);
}

TEST(RoundedGaussianTest, RejectsOutOfRangeScales) {
  for (double bad : {0.0, -1.0, 0.01, 1e9, std::nan(""), HUGE_VAL}) {
    EXPECT_THAT(RoundedGaussianSampler::Create(bad),
                StatusIs(absl::StatusCode::kInvalidArgument));
  }
  EXPECT_OK(RoundedGaussianSampler::Create(0x1.0p-4));
  EXPECT_OK(RoundedGaussianSampler::Create(0x1.0p28));
}

// Smoke test: a failing source ends the draw (no hang) and is reported.
TEST(RoundedGaussianTest, FailsClosedWithoutHanging) {
  ASSERT_OK_AND_ASSIGN(auto sampler, RoundedGaussianSampler::Create(1048576));
  for (int64_t good : {0, 1, 2, 3, 5, 8, 50}) {
    FailingRandomForTesting rng(9, good);
    absl::StatusOr<int64_t> x = sampler.Sample(rng);
    EXPECT_EQ(x.ok(), rng.status().ok()) << good;
    if (good == 0) {
      EXPECT_THAT(x, StatusIs(absl::StatusCode::kUnavailable));
    }
  }
}

// Smoke test: the production generator drives the sampler.
TEST(RoundedGaussianTest, WorksWithSecureRandom) {
  ASSERT_OK_AND_ASSIGN(auto rng, NewSecureRandom());
  ASSERT_OK_AND_ASSIGN(auto sampler, RoundedGaussianSampler::Create(3.0));
  ASSERT_OK_AND_ASSIGN(int64_t x, sampler.Sample(*rng));
  EXPECT_LE(std::abs(x), 3 * 64);
}

}  // namespace
}  // namespace dpopt::noise
