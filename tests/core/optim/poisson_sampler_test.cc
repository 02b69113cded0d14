#include "core/optim/poisson_sampler.h"

#include <cmath>
#include <vector>

#include "core/noise/testing/seeded_random.h"
#include "gtest/gtest.h"
#include "tests/common/status_matchers.h"

namespace dpopt::optim {
namespace {

// Replays fixed 64-bit words, then zeros. Counts draws.
class ScriptedRandom : public noise::RandomSource {
 public:
  explicit ScriptedRandom(std::vector<uint64_t> words)
      : words_(std::move(words)) {}
  uint64_t Underflow() override {
    ++draws;
    return next_ < words_.size() ? words_[next_++] : 0;
  }
  absl::Status status() const override { return absl::OkStatus(); }
  int draws = 0;

 private:
  std::vector<uint64_t> words_;
  size_t next_ = 0;
};

// q = 0.25 = 0.01b. U's digits "1..." -> U > q; "00..." -> U < q;
// "01" -> all of q's digits match -> U >= q. Digits are consumed lazily:
// 1, 2 and 2 digits respectively.
TEST(PoissonSamplerTest, KnownDigits) {
  // Stream: 1 | 00 | 01 | 1 ... -> 1000 1110 ... = 0x8E00...
  ScriptedRandom rng({0x8E00000000000000ull});
  PoissonSampler s(0.25, rng);
  EXPECT_FALSE(s.Include());  // "1"
  EXPECT_TRUE(s.Include());   // "00"
  EXPECT_FALSE(s.Include());  // "01" == q's digits
  EXPECT_FALSE(s.Include());  // "1"
  EXPECT_FALSE(s.Include());  // "1"
  EXPECT_EQ(rng.draws, 1);
}

// q = 0.75 = 0.11b: "0" -> U < q; "10" -> U < q; "11" -> U >= q.
TEST(PoissonSamplerTest, KnownDigitsAboveHalf) {
  // Stream: 0 | 10 | 11 -> 0101 1000.. = 0x58...
  ScriptedRandom rng({0x5800000000000000ull});
  PoissonSampler s(0.75, rng);
  EXPECT_TRUE(s.Include());
  EXPECT_TRUE(s.Include());
  EXPECT_FALSE(s.Include());
}

// Rate and bit economy for non-dyadic q. 10^6 draws: sd = sqrt(q(1-q)/N);
// bounds at 5 sd (false alarm 5.7e-7 for a fresh seed).
TEST(PoissonSamplerTest, RateAndBitsUsed) {
  for (double q : {0.01, 0.3, 0.9, 1e-4}) {
    noise::testing::SeededRandomForTesting seeded(
        static_cast<uint64_t>(q * 1e6));
    struct Counting : noise::RandomSource {
      explicit Counting(noise::RandomSource& r) : r(r) {}
      uint64_t Underflow() override {
        ++draws;
        return r.NextUint64();
      }
      absl::Status status() const override { return r.status(); }
      noise::RandomSource& r;
      int64_t draws = 0;
    } rng(seeded);
    PoissonSampler s(q, rng);
    const int64_t n = 1'000'000;
    std::vector<int64_t> rows;
    ASSERT_OK(s.Sample(n, &rows));
    const double sd = std::sqrt(q * (1 - q) / n);
    EXPECT_NEAR(static_cast<double>(rows.size()) / n, q, 5 * sd) << q;
    // Expected digits per row: < 2 + 53 q 2^Z <= 2 + 53 (leading zeros
    // resolve in ~2 digits; the mantissa is only reached w.p. q 2^-Z... ).
    // At q = 0.01 that is ~2.8 digits: far below 64 bits per row.
    if (q == 0.01) {
      EXPECT_LT(rng.draws * 64, 4 * n);
    }
  }
  // q = 1: every row, no draws.
  noise::testing::SeededRandomForTesting seeded(1);
  PoissonSampler all(1.0, seeded);
  std::vector<int64_t> rows;
  ASSERT_OK(all.Sample(5, &rows));
  EXPECT_EQ(rows, (std::vector<int64_t>{0, 1, 2, 3, 4}));
}

TEST(PoissonSamplerTest, FailedSourceIsReported) {
  noise::testing::FailingRandomForTesting rng(1, 3);
  PoissonSampler s(0.01, rng);
  std::vector<int64_t> rows;
  EXPECT_FALSE(s.Sample(100000, &rows).ok());
}

}  // namespace
}  // namespace dpopt::optim
