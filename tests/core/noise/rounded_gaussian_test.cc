// Tests of the exact rounded-Gaussian sampler (Karney 2016 exact normal,
// exact rounding; core/noise/rounded_gaussian.h).
//
// Distribution checks are chi-square goodness-of-fit tests against the exact
// law computed here independently with erfc (double precision, far below the
// tests' resolution), on fixed seeds of the NOT DIFFERENTIALLY PRIVATE test
// generator. A correct sampler fails a given check with probability
// kAlpha = 1e-4 (the documented false-alarm rate); with fixed seeds the outcome
// is deterministic. The Power* tests show the same checks reject a discrete
// Gaussian of the same scale and a 3% error in the scale.
#include "core/noise/rounded_gaussian.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <vector>

#include "core/audit/statistics.h"
#include "core/noise/discrete_samplers.h"
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

// Z = +-(k + x) from ExactStandardNormal, against the standard normal law, in
// bins of width 0.1 on [-3, 3] plus the two tails (every bin expects >= 88
// samples, so the chi-square approximation holds; x to 53 bits, far finer
// than the bins).
TEST(ExactStandardNormalTest, MatchesTheNormalLaw) {
  SeededRandomForTesting rng(3);
  RandomBits bits(rng);
  ExactStandardNormal normal;
  constexpr int kBins = 60;
  std::vector<int64_t> counts(kBins + 2, 0);
  double sum = 0, sum2 = 0;
  for (int i = 0; i < kSamples; ++i) {
    normal.Draw(bits);
    const double frac = std::ldexp(
        static_cast<double>(normal.fraction().Prefix64(bits) >> 11), -53);
    const double z = (normal.negative() ? -1 : 1) *
                     (static_cast<double>(normal.integer_part()) + frac);
    sum += z;
    sum2 += z * z;
    const int b = static_cast<int>(std::floor((z + 3) / 0.1)) + 1;
    ++counts[std::max(0, std::min(kBins + 1, b))];
  }
  ASSERT_TRUE(bits.ok());
  double stat = 0;
  for (int b = 0; b < kBins + 2; ++b) {
    const double lo = b == 0 ? -INFINITY : -3 + (b - 1) * 0.1;
    const double hi = b == kBins + 1 ? INFINITY : -3 + b * 0.1;
    const double expected = kSamples * (NormalCdf(hi) - NormalCdf(lo));
    stat += (counts[b] - expected) * (counts[b] - expected) / expected;
  }
  EXPECT_GT(ChiSquareSurvival(stat, kBins + 1), kAlpha);
  // Mean 0 (sd 1/sqrt(n)) and variance 1 (sd sqrt(2/n)).
  EXPECT_LT(std::abs(sum / kSamples) * std::sqrt(kSamples), 5);
  EXPECT_LT(std::abs(sum2 / kSamples - 1) / std::sqrt(2.0 / kSamples), 5);
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
                         ::testing::Values(0.2, 0.3, 0.5, 1.0, 3.7, 40.0,
                                           1234.5, 1048587.1, 0x1.0p28));

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
