// Tests of the exact discrete samplers (CKS 2020, Algorithms 1-3).
//
// Each distribution is checked with a chi-square goodness-of-fit test against
// its exact pmf (computed here independently by direct summation), using a
// fixed seed of the NOT DIFFERENTIALLY PRIVATE test generator. A correct
// sampler fails a given check with probability kAlpha = 1e-4 (the documented
// false-alarm rate); with fixed seeds the outcome is deterministic. The
// PowerAgainst* tests show the same check rejects a 3% error in the scale.
#include "core/noise/discrete_samplers.h"

#include <cmath>
#include <cstdint>
#include <functional>
#include <map>
#include <vector>

#include "core/audit/statistics.h"
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

// Unnormalized log pmfs.
double LogDiscreteGaussian(double sigma, int64_t x) {
  return -static_cast<double>(x) * x / (2 * sigma * sigma);
}
double LogDiscreteLaplace(double b, int64_t x) {
  return -std::abs(static_cast<double>(x)) / b;
}

// Chi-square p-value of `samples` against the pmf proportional to
// exp(log_pmf(x)), x in [-range, range] (mass outside is negligible). Bins are
// runs of consecutive integers holding >= 1/200 of the mass, or >= 20 expected
// counts when the next integer alone is heavy (at most 200 bins, each with
// >= 20 expected counts); a light last bin is merged into its neighbour.
double PValue(const std::vector<int64_t>& samples,
              const std::function<double(int64_t)>& log_pmf, int64_t range) {
  std::vector<double> pmf(2 * range + 1);
  double total = 0;
  for (int64_t x = -range; x <= range; ++x) {
    pmf[x + range] = std::exp(log_pmf(x));
    total += pmf[x + range];
  }
  // Bin edges: bin_of[x] for x in [-range, range].
  std::vector<int> bin_of(2 * range + 1);
  std::vector<double> bin_mass;
  const double min_mass = 20.0 / static_cast<double>(samples.size());
  double acc = 0;
  for (int64_t i = 0; i < 2 * range + 1; ++i) {
    if (bin_mass.empty() || acc >= 0.005 ||
        (acc >= min_mass && pmf[i] / total >= 0.005)) {
      bin_mass.push_back(0);
      acc = 0;
    }
    bin_of[i] = static_cast<int>(bin_mass.size() - 1);
    bin_mass.back() += pmf[i] / total;
    acc += pmf[i] / total;
  }
  // Merge a light last bin into its neighbour.
  if (bin_mass.size() > 1 && bin_mass.back() < min_mass) {
    for (int& b : bin_of) {
      if (b == static_cast<int>(bin_mass.size() - 1)) --b;
    }
    bin_mass[bin_mass.size() - 2] += bin_mass.back();
    bin_mass.pop_back();
  }
  std::vector<int64_t> counts(bin_mass.size(), 0);
  for (int64_t s : samples) {
    const int64_t clamped = std::max(-range, std::min(range, s));
    ++counts[bin_of[clamped + range]];
  }
  double stat = 0;
  const double n = static_cast<double>(samples.size());
  for (size_t i = 0; i < counts.size(); ++i) {
    const double expected = n * bin_mass[i];
    stat += (counts[i] - expected) * (counts[i] - expected) / expected;
  }
  return ChiSquareSurvival(stat, static_cast<double>(counts.size() - 1));
}

template <typename Sampler>
std::vector<int64_t> Draw(const Sampler& sampler, uint64_t seed, int n) {
  SeededRandomForTesting rng(seed);
  RandomBits bits(rng);
  std::vector<int64_t> out(n);
  for (int64_t& x : out) x = sampler.Sample(bits);
  EXPECT_TRUE(bits.ok());
  return out;
}

TEST(RoundUpToDyadicTest, KnownValues) {
  Dyadic one = RoundUpToDyadic(1.0);
  EXPECT_EQ(one.mantissa, uint64_t{1} << 23);
  EXPECT_EQ(one.exponent, 23);
  Dyadic three = RoundUpToDyadic(3.0);
  EXPECT_EQ(three.mantissa, 3 * (uint64_t{1} << 22));
  EXPECT_EQ(three.exponent, 22);
  Dyadic big = RoundUpToDyadic(0x1.0p28);
  EXPECT_EQ(big.mantissa, uint64_t{1} << 28);
  EXPECT_EQ(big.exponent, 0);
  // 0.1 is in [2^-4, 2^-3): F = 24 + 3 = 27, M = ceil(0.1 * 2^27) = 13421773.
  Dyadic tenth = RoundUpToDyadic(0.1);
  EXPECT_EQ(tenth.exponent, 27);
  EXPECT_EQ(tenth.mantissa, 13421773u);
  EXPECT_GE(tenth.ToDouble(), 0.1);
  EXPECT_LT(tenth.ToDouble(), 0.1 * (1 + 0x1.0p-23));
  // Rounding up across a power of two renormalizes: 2 - 2^-40 -> 2.
  Dyadic two = RoundUpToDyadic(2 - 0x1.0p-40);
  EXPECT_EQ(two.ToDouble(), 2.0);
  EXPECT_LT(two.mantissa, uint64_t{1} << 24);
}

class BernoulliExpMinusTest
    : public ::testing::TestWithParam<std::pair<uint64_t, uint64_t>> {};

TEST_P(BernoulliExpMinusTest, MatchesExpMinusGamma) {
  const auto [num, den] = GetParam();
  const double p = std::exp(-static_cast<double>(num) / den);
  SeededRandomForTesting rng(num * 1000 + den);
  RandomBits bits(rng);
  constexpr int64_t kN = 400000;
  int64_t k = 0;
  for (int64_t i = 0; i < kN; ++i) k += BernoulliExpMinus(bits, num, den);
  const double z = (k - kN * p) / std::sqrt(kN * p * (1 - p));
  EXPECT_LT(std::abs(z), 5) << num << "/" << den << " k=" << k;
}

INSTANTIATE_TEST_SUITE_P(
    Gammas, BernoulliExpMinusTest,
    ::testing::Values(std::pair<uint64_t, uint64_t>{1, 2},
                      std::pair<uint64_t, uint64_t>{1, 1},
                      std::pair<uint64_t, uint64_t>{27, 10},
                      std::pair<uint64_t, uint64_t>{7, 3},
                      std::pair<uint64_t, uint64_t>{1, 1000003},
                      std::pair<uint64_t, uint64_t>{999999, 1000000}));

TEST(BernoulliRationalTest, MatchesProbability) {
  SeededRandomForTesting rng(11);
  RandomBits bits(rng);
  constexpr int64_t kN = 400000;
  int64_t k = 0;
  for (int64_t i = 0; i < kN; ++i) k += BernoulliRational(bits, 1, 3);
  const double p = 1.0 / 3;
  EXPECT_LT(std::abs((k - kN * p) / std::sqrt(kN * p * (1 - p))), 5);
  EXPECT_TRUE(BernoulliRational(bits, 5, 5));
  EXPECT_FALSE(BernoulliRational(bits, 0, 5));
}

class DiscreteGaussianTest : public ::testing::TestWithParam<double> {};

TEST_P(DiscreteGaussianTest, MatchesExactPmf) {
  const double requested = GetParam();
  ASSERT_OK_AND_ASSIGN(auto sampler,
                       DiscreteGaussianSampler::Create(requested));
  const double sigma = sampler.sigma();
  EXPECT_GE(sigma, requested);
  EXPECT_LE(sigma, requested * (1 + 0x1.0p-23));
  const std::vector<int64_t> samples = Draw(sampler, 100, kSamples);
  const int64_t range = static_cast<int64_t>(std::ceil(12 * sigma)) + 2;
  const double p = PValue(
      samples, [&](int64_t x) { return LogDiscreteGaussian(sigma, x); }, range);
  EXPECT_GT(p, kAlpha) << "sigma=" << sigma;
  // Symmetry and variance: the exact variance sum x^2 pmf(x) vs the sample.
  double z = 0, m2 = 0, m4 = 0;
  for (int64_t x = -range; x <= range; ++x) {
    const double w = std::exp(LogDiscreteGaussian(sigma, x));
    const double x2 = static_cast<double>(x) * x;
    z += w;
    m2 += w * x2;
    m4 += w * x2 * x2;
  }
  const double variance = m2 / z;
  const double fourth_moment = m4 / z;
  double sum = 0, sum2 = 0;
  for (int64_t x : samples) {
    sum += x;
    sum2 += static_cast<double>(x) * x;
  }
  EXPECT_LT(std::abs(sum / kSamples) / std::sqrt(variance / kSamples), 5);
  const double var_se =
      std::sqrt((fourth_moment - variance * variance) / kSamples);
  EXPECT_LT(std::abs(sum2 / kSamples - variance) / var_se, 5);
}

INSTANTIATE_TEST_SUITE_P(Sigmas, DiscreteGaussianTest,
                         ::testing::Values(0.25, 0.6, 1.0, 2.5, 7.3, 40.0,
                                           1234.5));

TEST(DiscreteGaussianTest, PowerAgainstWrongSigma) {
  ASSERT_OK_AND_ASSIGN(auto sampler, DiscreteGaussianSampler::Create(5.0));
  const std::vector<int64_t> samples = Draw(sampler, 101, kSamples);
  const double p = PValue(
      samples, [](int64_t x) { return LogDiscreteGaussian(5.0 * 1.03, x); },
      80);
  EXPECT_LT(p, kAlpha);
}

TEST(DiscreteGaussianTest, LargeSigmaMatchesNormalBins) {
  // sigma ~ 2^20, the grid-units scale used by AddGaussianNoise.
  ASSERT_OK_AND_ASSIGN(auto sampler,
                       DiscreteGaussianSampler::Create(1048587.1));
  const std::vector<int64_t> samples = Draw(sampler, 102, kSamples);
  const double sigma = sampler.sigma();
  // Bin by standard-normal quantile intervals of width 0.25 sigma: for sigma
  // this large the discrete Gaussian's bin masses equal the continuous ones
  // to ~1e-12 (the test has no power below that).
  constexpr int kBins = 32;  // [-4, 4] in 0.25 steps, tails merged.
  std::vector<int64_t> counts(kBins, 0);
  for (int64_t x : samples) {
    int b = static_cast<int>(std::floor(x / sigma / 0.25)) + kBins / 2;
    ++counts[std::max(0, std::min(kBins - 1, b))];
  }
  auto cdf = [](double t) { return 0.5 * std::erfc(-t / std::sqrt(2.0)); };
  double stat = 0;
  for (int b = 0; b < kBins; ++b) {
    const double lo = b == 0 ? -INFINITY : (b - kBins / 2) * 0.25;
    const double hi = b == kBins - 1 ? INFINITY : (b + 1 - kBins / 2) * 0.25;
    const double expected = kSamples * (cdf(hi) - cdf(lo));
    stat += (counts[b] - expected) * (counts[b] - expected) / expected;
  }
  EXPECT_GT(ChiSquareSurvival(stat, kBins - 1), kAlpha);
}

class DiscreteLaplaceTest : public ::testing::TestWithParam<double> {};

TEST_P(DiscreteLaplaceTest, MatchesExactPmf) {
  const double requested = GetParam();
  ASSERT_OK_AND_ASSIGN(auto sampler, DiscreteLaplaceSampler::Create(requested));
  const double b = sampler.scale();
  EXPECT_GE(b, requested);
  EXPECT_LE(b, requested * (1 + 0x1.0p-23));
  const std::vector<int64_t> samples = Draw(sampler, 200, kSamples);
  const int64_t range = static_cast<int64_t>(std::ceil(40 * b)) + 2;
  const double p = PValue(
      samples, [&](int64_t x) { return LogDiscreteLaplace(b, x); }, range);
  EXPECT_GT(p, kAlpha) << "b=" << b;
}

INSTANTIATE_TEST_SUITE_P(Scales, DiscreteLaplaceTest,
                         ::testing::Values(0.2, 0.5, 1.0, 3.7, 20.0, 333.3));

TEST(DiscreteLaplaceTest, PowerAgainstWrongScale) {
  ASSERT_OK_AND_ASSIGN(auto sampler, DiscreteLaplaceSampler::Create(5.0));
  const std::vector<int64_t> samples = Draw(sampler, 201, kSamples);
  const double p = PValue(
      samples, [](int64_t x) { return LogDiscreteLaplace(5.0 * 1.03, x); },
      200);
  EXPECT_LT(p, kAlpha);
}

TEST(DiscreteSamplersTest, RejectsOutOfRangeScales) {
  for (double bad : {0.0, -1.0, 0.01, 1e9, std::nan(""), HUGE_VAL}) {
    EXPECT_THAT(DiscreteGaussianSampler::Create(bad),
                StatusIs(absl::StatusCode::kInvalidArgument));
    EXPECT_THAT(DiscreteLaplaceSampler::Create(bad),
                StatusIs(absl::StatusCode::kInvalidArgument));
  }
  EXPECT_OK(DiscreteGaussianSampler::Create(0x1.0p-4));
  EXPECT_OK(DiscreteGaussianSampler::Create(0x1.0p28));
  EXPECT_OK(DiscreteLaplaceSampler::Create(0x1.0p28));
}

TEST(DiscreteSamplersTest, SupportBoundIsFarInTheTail) {
  for (double s : {0x1.0p-4, 1.0, 1048576.0, 0x1.0p28}) {
    ASSERT_OK_AND_ASSIGN(auto g, DiscreteGaussianSampler::Create(s));
    EXPECT_GE(g.support_bound(), 64 * g.sigma());
  }
}

TEST(DiscreteSamplersTest, FailClosedWithoutHanging) {
  ASSERT_OK_AND_ASSIGN(auto gauss, DiscreteGaussianSampler::Create(1048576));
  ASSERT_OK_AND_ASSIGN(auto lap, DiscreteLaplaceSampler::Create(3.5));
  // A sample completed before the failure is legitimate; one that saw the
  // failure must report it.
  for (int64_t good : {0, 1, 2, 3, 5, 8, 50}) {
    FailingRandomForTesting rng1(9, good);
    absl::StatusOr<int64_t> g = gauss.Sample(rng1);
    EXPECT_EQ(g.ok(), rng1.status().ok()) << good;
    FailingRandomForTesting rng2(9, good);
    absl::StatusOr<int64_t> l = lap.Sample(rng2);
    EXPECT_EQ(l.ok(), rng2.status().ok()) << good;
    if (good == 0) {
      EXPECT_THAT(g, StatusIs(absl::StatusCode::kUnavailable));
      EXPECT_THAT(l, StatusIs(absl::StatusCode::kUnavailable));
    }
  }
}

TEST(DiscreteSamplersTest, WorksWithSecureRandom) {
  ASSERT_OK_AND_ASSIGN(auto rng, NewSecureRandom());
  ASSERT_OK_AND_ASSIGN(auto gauss, DiscreteGaussianSampler::Create(3.0));
  ASSERT_OK_AND_ASSIGN(int64_t x, gauss.Sample(*rng));
  EXPECT_LT(std::abs(x), 3 * 64);
}

}  // namespace
}  // namespace dpopt::noise
