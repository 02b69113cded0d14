// Tests of the O(batch) exact Poisson sampler (geometric skips + thinning).
// Statistical checks use fixed seeds of the NOT DIFFERENTIALLY PRIVATE test
// generator; each passes for a correct sampler except with probability
// ~1e-6 (|z| < 5, chi-square p > 1e-6).
#include "core/noise/skip_sampling.h"

// clang-format off
#include <stdint.h>
#include <mpfr.h>
// clang-format on

#include <cmath>
#include <cstdint>
#include <map>
#include <vector>

#include "core/audit/statistics.h"
#include "core/noise/subsampling.h"
#include "core/noise/testing/seeded_random.h"
#include "gtest/gtest.h"
#include "tests/common/status_matchers.h"

namespace dpopt::noise {
namespace {

using ::dpopt::noise::testing::FailingRandomForTesting;
using ::dpopt::noise::testing::SeededRandomForTesting;
using uint128 = unsigned __int128;

// Replays fixed words, then zeros; counts draws.
class ScriptedRandom : public RandomSource {
 public:
  explicit ScriptedRandom(std::vector<uint64_t> words)
      : words_(std::move(words)) {}
  uint64_t Underflow() override {
    ++draws;
    return next_ < words_.size() ? words_[next_++] : 0;
  }
  absl::Status status() const override { return absl::OkStatus(); }
  int64_t draws = 0;

 private:
  std::vector<uint64_t> words_;
  size_t next_ = 0;
};

// Records the words drawn from an inner source.
class RecordingRandom : public RandomSource {
 public:
  explicit RecordingRandom(RandomSource& inner) : inner_(inner) {}
  uint64_t Underflow() override {
    words.push_back(inner_.NextUint64());
    return words.back();
  }
  absl::Status status() const override { return inner_.status(); }
  std::vector<uint64_t> words;

 private:
  RandomSource& inner_;
};

// High-precision reference values, computed independently of the sampler.
struct Reference {
  explicit Reference(mpfr_prec_t prec = 3000) {
    mpfr_inits2(prec, mu, lambda, c, tmp, (mpfr_ptr)0);
  }
  ~Reference() { mpfr_clears(mu, lambda, c, tmp, (mpfr_ptr)0); }
  void Compute(double q, uint64_t s) {
    mpfr_set_d(tmp, -q, MPFR_RNDN);
    mpfr_log1p(mu, tmp, MPFR_RNDN);
    mpfr_neg(mu, mu, MPFR_RNDN);  // -ln(1 - q)
    mpfr_set_uj(lambda, s, MPFR_RNDN);
    mpfr_div_2ui(lambda, lambda, 64, MPFR_RNDN);
    // c = ((1 - q) - e^-l) / (1 - e^-l)
    mpfr_neg(tmp, lambda, MPFR_RNDN);
    mpfr_exp(tmp, tmp, MPFR_RNDN);  // e^-l
    mpfr_t w;
    mpfr_init2(w, 3000);
    mpfr_set_d(w, q, MPFR_RNDN);
    mpfr_ui_sub(w, 1, w, MPFR_RNDN);
    mpfr_sub(c, w, tmp, MPFR_RNDN);
    mpfr_ui_sub(tmp, 1, tmp, MPFR_RNDN);
    mpfr_div(c, c, tmp, MPFR_RNDN);
    mpfr_clear(w);
  }
  mpfr_t mu, lambda, c, tmp;
};

class BracketTest : public ::testing::TestWithParam<double> {};

// lambda >= mu (tightly), and the 64-bit bracket contains c.
TEST_P(BracketTest, LambdaAndThresholdsAreCertified) {
  const double q = GetParam();
  SeededRandomForTesting rng(1);
  SkipPoissonSampler s(q, rng);
  Reference ref;
  ref.Compute(q, s.lambda_numerator());
  EXPECT_GE(mpfr_cmp(ref.lambda, ref.mu), 0) << q;
  mpfr_sub(ref.tmp, ref.lambda, ref.mu, MPFR_RNDN);
  mpfr_mul_2ui(ref.tmp, ref.tmp, 64, MPFR_RNDN);
  EXPECT_LE(mpfr_get_d(ref.tmp, MPFR_RNDN), 1.0) << "lambda not tight";
  ASSERT_GE(mpfr_sgn(ref.c), 0);
  mpfr_mul_2ui(ref.tmp, ref.c, 64, MPFR_RNDN);  // c 2^64
  mpfr_t lo, hi;
  mpfr_inits2(200, lo, hi, (mpfr_ptr)0);
  mpfr_set_uj(lo, s.reject_below(), MPFR_RNDN);
  EXPECT_LE(mpfr_cmp(lo, ref.tmp), 0);
  const uint128 keep = s.keep_from();
  ASSERT_LE(keep, static_cast<uint128>(1) << 64);
  mpfr_set_uj(hi, static_cast<uint64_t>(keep >> 1), MPFR_RNDN);
  mpfr_mul_2ui(hi, hi, 1, MPFR_RNDN);
  mpfr_add_ui(hi, hi, static_cast<unsigned long>(keep & 1), MPFR_RNDN);
  EXPECT_GE(mpfr_cmp(hi, ref.tmp), 0);
  // Tight: at most two ambiguous first words.
  EXPECT_LE(keep - s.reject_below(), 2u);
  mpfr_clears(lo, hi, (mpfr_ptr)0);
}

INSTANTIATE_TEST_SUITE_P(Rates, BracketTest,
                         ::testing::Values(1e-12, 3e-7, 1e-3, 0.01, 0.1,
                                           1.0 / 3, 0.5, 0x1p-60));

// floor(E 2^64) for E ~ Exp(1): chi-square over bins of width 1/4 up to 6,
// plus the tail.
TEST(SkipPoissonSamplerTest, ExponentialIsExponential) {
  SeededRandomForTesting rng(2);
  SkipPoissonSampler s(0.01, rng);
  constexpr int kBins = 24;
  constexpr int64_t kN = 1'000'000;
  std::vector<int64_t> counts(kBins + 1, 0);
  for (int64_t i = 0; i < kN; ++i) {
    const uint128 x = s.SampleExponentialFixed();
    const double e = static_cast<double>(x) * 0x1p-64;
    const int bin = std::min<int>(kBins, static_cast<int>(e * 4));
    ++counts[bin];
  }
  double stat = 0;
  for (int b = 0; b <= kBins; ++b) {
    const double p = b < kBins ? std::exp(-b / 4.0) - std::exp(-(b + 1) / 4.0)
                               : std::exp(-kBins / 4.0);
    const double expected = p * kN;
    stat += (counts[b] - expected) * (counts[b] - expected) / expected;
  }
  EXPECT_GT(audit::ChiSquareSurvival(stat, kBins), 1e-6) << stat;
}

// Ties between 64-bit words extend both uniforms (words chosen by hand).
TEST(SkipPoissonSamplerTest, TiesExtendTheUniforms) {
  // Candidate 10; U'1 = 10|3 < 10|7 (tie, then 3 < 7); U'2 = 10|2 < 10|3
  // (tie with the extended U'1); U'3 = 11 breaks: N = 3, odd: accept E's
  // fixed-point value 10.
  ScriptedRandom rng({10, 10, 3, 7, 10, 2, 11});
  SkipPoissonSampler s(0.01, rng);
  EXPECT_EQ(s.SampleExponentialFixed(), static_cast<uint128>(10));
  EXPECT_EQ(rng.draws, 7);
  // 10, 9, 11: N = 2, even: reject (V = 1); then 20, 25: N = 1: accept.
  ScriptedRandom rng2({10, 9, 11, 20, 25});
  SkipPoissonSampler s2(0.01, rng2);
  EXPECT_EQ(s2.SampleExponentialFixed(), (static_cast<uint128>(1) << 64) | 20u);
  // A tie whose extension breaks the chain: 10, 10|9 vs 10|4: 9 > 4 -> N=1.
  ScriptedRandom rng3({10, 10, 9, 4});
  SkipPoissonSampler s3(0.01, rng3);
  EXPECT_EQ(s3.SampleExponentialFixed(), static_cast<uint128>(10));
  // An extended uniform replaced by a smaller one, which then ties: the tie
  // compares against the new uniform (8, extended by 6), not the old 10|3.
  // 10; 10|3 < 10|7; 8 < 10|3; 8|5 < 8|6; 9 breaks: N = 4, even: reject
  // (V = 1); then 20, 25: accept.
  ScriptedRandom rng4({10, 10, 3, 7, 8, 8, 5, 6, 9, 20, 25});
  SkipPoissonSampler s4(0.01, rng4);
  EXPECT_EQ(s4.SampleExponentialFixed(), (static_cast<uint128>(1) << 64) | 20u);
  EXPECT_EQ(rng4.draws, 11);
}

// The thinning's slow path: a first word inside the certified bracket is
// decided by further words, exactly against c (reference at 3000 bits), and
// it keeps with probability (1 - frac(c 2^64)) given that word.
TEST(SkipPoissonSamplerTest, SlowThinningDecidesExactly) {
  for (double q : {0.01, 0.1, 1e-6}) {
    SeededRandomForTesting seeded(3);
    RecordingRandom rng(seeded);
    SkipPoissonSampler s(q, rng);
    Reference ref;
    ref.Compute(q, s.lambda_numerator());
    mpfr_mul_2ui(ref.tmp, ref.c, 64, MPFR_RNDN);
    const uint64_t ambiguous = mpfr_get_uj(ref.tmp, MPFR_RNDD);
    mpfr_frac(ref.tmp, ref.tmp, MPFR_RNDN);
    const double frac = mpfr_get_d(ref.tmp, MPFR_RNDN);
    ASSERT_GE(ambiguous, s.reject_below());
    ASSERT_LT(ambiguous, s.keep_from());
    constexpr int kTrials = 2000;
    int kept = 0;
    for (int t = 0; t < kTrials; ++t) {
      rng.words.clear();
      const bool keep = s.Keep(ambiguous);
      kept += keep;
      // V's known words: `ambiguous`, then the recorded extension.
      std::vector<uint64_t> v = {ambiguous};
      v.insert(v.end(), rng.words.begin(), rng.words.end());
      ASSERT_GE(v.size(), 2u);
      mpfr_t a;
      mpfr_init2(a, 64 * (v.size() + 1));
      mpfr_set_zero(a, 1);
      for (uint64_t w : v) {
        mpfr_mul_2ui(a, a, 64, MPFR_RNDN);
        mpfr_t x;
        mpfr_init2(x, 64);
        mpfr_set_uj(x, w, MPFR_RNDN);
        mpfr_add(a, a, x, MPFR_RNDN);
        mpfr_clear(x);
      }
      mpfr_div_2ui(a, a, 64 * v.size(), MPFR_RNDN);
      if (keep) {
        EXPECT_GE(mpfr_cmp(a, ref.c), 0);  // V >= a >= c
      } else {                             // V < a + 2^-64k <= c
        mpfr_t ulp;
        mpfr_init2(ulp, 64);
        mpfr_set_ui_2exp(ulp, 1, -64 * static_cast<long>(v.size()), MPFR_RNDN);
        mpfr_add(a, a, ulp, MPFR_RNDN);
        EXPECT_LE(mpfr_cmp(a, ref.c), 0);
        mpfr_clear(ulp);
      }
      mpfr_clear(a);
    }
    const double p = 1 - frac;
    EXPECT_LT(
        std::abs(kept - kTrials * p) / std::sqrt(kTrials * p * (1 - p) + 1e-12),
        5)
        << q << " kept " << kept << " p " << p;
    EXPECT_EQ(s.slow_decisions(), kTrials);
    // Outside the bracket no further word is drawn.
    rng.words.clear();
    EXPECT_TRUE(s.Keep(~uint64_t{0}));
    if (s.reject_below() > 0) {
      EXPECT_FALSE(s.Keep(0));
    }
    EXPECT_TRUE(rng.words.empty());
  }
}

// The whole distribution of the included subset of n = 4 rows against
// q^|S| (1 - q)^(4 - |S|) (chi-square, 15 degrees of freedom).
TEST(SkipPoissonSamplerTest, SubsetDistributionIsPoisson) {
  for (double q : {0.01, 0.1, 0.37, 0.5}) {
    SeededRandomForTesting rng(4);
    SkipPoissonSampler s(q, rng);
    constexpr int kN = 4;
    const int64_t rounds = q < 0.05 ? 4'000'000 : 400'000;
    std::vector<int64_t> counts(1 << kN, 0);
    std::vector<int64_t> rows;
    for (int64_t r = 0; r < rounds; ++r) {
      ASSERT_OK(s.Sample(kN, &rows));
      int mask = 0;
      for (size_t i = 0; i < rows.size(); ++i) {
        ASSERT_TRUE(rows[i] >= 0 && rows[i] < kN);
        if (i > 0) {
          ASSERT_LT(rows[i - 1], rows[i]);
        }
        mask |= 1 << rows[i];
      }
      ++counts[mask];
    }
    // Pool subsets of equal size whose expected count is small.
    double stat = 0;
    int df = 0;
    std::map<int, std::pair<double, double>> pooled;  // size -> (obs, exp)
    for (int mask = 0; mask < (1 << kN); ++mask) {
      const int k = __builtin_popcount(mask);
      const double expected = rounds * std::pow(q, k) * std::pow(1 - q, kN - k);
      if (expected >= 20) {
        stat +=
            (counts[mask] - expected) * (counts[mask] - expected) / expected;
        ++df;
      } else {
        pooled[k].first += counts[mask];
        pooled[k].second += expected;
      }
    }
    for (const auto& [k, oe] : pooled) {
      stat += (oe.first - oe.second) * (oe.first - oe.second) / oe.second;
      ++df;
    }
    EXPECT_GT(audit::ChiSquareSurvival(stat, df - 1), 1e-6)
        << "q=" << q << " stat=" << stat << " df=" << df - 1;
  }
}

// n = 60: per-index inclusion frequencies (chi-square, 60 df) and the batch
// size against Binomial(60, q) (chi-square over sizes, tail pooled).
TEST(SkipPoissonSamplerTest, InclusionFrequenciesAndBatchSizes) {
  for (double q : {0.02, 0.1}) {
    SeededRandomForTesting rng(5);
    SkipPoissonSampler s(q, rng);
    constexpr int kN = 60;
    constexpr int64_t kRounds = 200'000;
    std::vector<int64_t> per_index(kN, 0), per_size(kN + 1, 0);
    std::vector<int64_t> rows;
    for (int64_t r = 0; r < kRounds; ++r) {
      ASSERT_OK(s.Sample(kN, &rows));
      for (int64_t i : rows) ++per_index[i];
      ++per_size[rows.size()];
    }
    double stat = 0;
    for (int64_t c : per_index) {
      stat += (c - kRounds * q) * (c - kRounds * q) / (kRounds * q * (1 - q));
    }
    EXPECT_GT(audit::ChiSquareSurvival(stat, kN), 1e-6) << q;
    // Binomial pmf by the recurrence.
    std::vector<double> pmf(kN + 1);
    pmf[0] = std::pow(1 - q, kN);
    for (int k = 1; k <= kN; ++k) {
      pmf[k] = pmf[k - 1] * (kN - k + 1) / k * q / (1 - q);
    }
    stat = 0;
    int df = 0;
    double tail_obs = 0, tail_exp = 0;
    for (int k = 0; k <= kN; ++k) {
      const double expected = kRounds * pmf[k];
      if (expected >= 20) {
        stat += (per_size[k] - expected) * (per_size[k] - expected) / expected;
        ++df;
      } else {
        tail_obs += per_size[k];
        tail_exp += expected;
      }
    }
    stat += (tail_obs - tail_exp) * (tail_obs - tail_exp) / tail_exp;
    EXPECT_GT(audit::ChiSquareSurvival(stat, df), 1e-6) << q;
  }
}

// Work grows with the batch, not with n: random words per batch stay near
// 5.3 per candidate even for n = 10^9 (q n = 100).
TEST(SkipPoissonSamplerTest, DrawsProportionalToBatch) {
  SeededRandomForTesting seeded(6);
  RecordingRandom rng(seeded);
  const int64_t n = 1'000'000'000;
  const double q = 1e-7;
  SkipPoissonSampler s(q, rng);
  std::vector<int64_t> rows;
  int64_t total_rows = 0;
  constexpr int kRounds = 50;
  for (int r = 0; r < kRounds; ++r) {
    ASSERT_OK(s.Sample(n, &rows));
    total_rows += rows.size();
  }
  const double mean = static_cast<double>(total_rows) / kRounds;
  EXPECT_LT(std::abs(mean - q * n) / std::sqrt(q * n / kRounds), 5);
  const double words_per_round =
      static_cast<double>(rng.words.size()) / kRounds;
  EXPECT_LT(words_per_round, 10 * (q * n + 1)) << words_per_round;
}

TEST(SkipPoissonSamplerTest, FailsClosed) {
  FailingRandomForTesting rng(7, 50);
  SkipPoissonSampler s(0.01, rng);
  std::vector<int64_t> rows;
  EXPECT_FALSE(s.Sample(1'000'000, &rows).ok());
}

// PoissonSampler chooses skips below kSkipBelow and the per-row comparison
// above; both give rate q on a large n.
TEST(PoissonSamplerDispatchTest, RateOnLargeN) {
  for (double q : {0.001, 0.05, 0.124, 0.125, 0.3}) {
    SeededRandomForTesting rng(8);
    PoissonSampler s(q, rng);
    std::vector<int64_t> rows;
    const int64_t n = 2'000'000;
    ASSERT_OK(s.Sample(n, &rows));
    EXPECT_LT(std::abs(rows.size() - q * n) / std::sqrt(n * q * (1 - q)), 5)
        << q;
  }
}

}  // namespace
}  // namespace dpopt::noise
