// Tests of RandomSource helpers, the seeded test generator and the secure
// generator. Statistical checks use fixed seeds of the (NOT DIFFERENTIALLY
// PRIVATE) test generator, so they are deterministic; each is set at a
// false-alarm rate of about 1e-6 for a correct implementation (chi-square
// p-value below 1e-6, or |z| > 5) and fails for the biased alternatives named
// in each test. Tests of the secure generator are not seeded and can fail
// spuriously with probability about 1e-6 per run.
#include "core/noise/random.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdint>
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

constexpr double kAlpha = 1e-6;

double ChiSquarePValue(const std::vector<int64_t>& counts,
                       const std::vector<double>& probabilities) {
  int64_t n = 0;
  for (int64_t c : counts) n += c;
  double stat = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    const double expected = n * probabilities[i];
    stat += (counts[i] - expected) * (counts[i] - expected) / expected;
  }
  return ChiSquareSurvival(stat, static_cast<double>(counts.size() - 1));
}

// z-score of k successes in n Bernoulli(p) trials.
double BinomialZ(int64_t k, int64_t n, double p) {
  return (k - n * p) / std::sqrt(n * p * (1 - p));
}

TEST(SeededRandomForTestingTest, IsDeterministicPerSeed) {
  SeededRandomForTesting a(42), b(42), c(43);
  for (int i = 0; i < 100; ++i) {
    const uint64_t x = a.NextUint64();
    EXPECT_EQ(x, b.NextUint64());
    EXPECT_NE(x, c.NextUint64());
  }
  EXPECT_OK(a.status());
}

TEST(RandomSourceTest, UniformIntSmallRangeIsUniform) {
  SeededRandomForTesting rng(1);
  constexpr int kN = 7;
  std::vector<int64_t> counts(kN, 0);
  for (int i = 0; i < 700000; ++i) {
    const uint64_t x = rng.UniformInt(kN);
    ASSERT_LT(x, kN);
    ++counts[x];
  }
  EXPECT_GT(ChiSquarePValue(counts, std::vector<double>(kN, 1.0 / kN)), kAlpha);
}

// With n = 3 * 2^62, reducing a 64-bit word modulo n would put probability
// 1/2 on [0, 2^62) instead of 1/3: the test catches modulo bias.
TEST(RandomSourceTest, UniformIntLargeRangeIsUnbiased) {
  SeededRandomForTesting rng(2);
  const uint64_t n = 3 * (uint64_t{1} << 62);
  std::vector<int64_t> counts(3, 0);
  for (int i = 0; i < 30000; ++i) {
    const uint64_t x = rng.UniformInt(n);
    ASSERT_LT(x, n);
    ++counts[x >> 62];
  }
  EXPECT_GT(ChiSquarePValue(counts, {1.0 / 3, 1.0 / 3, 1.0 / 3}), kAlpha);
}

TEST(RandomSourceTest, UniformIntEdgeCases) {
  SeededRandomForTesting rng(3);
  EXPECT_EQ(rng.UniformInt(1), 0u);
  EXPECT_EQ(rng.UniformInt(0), 0u);
  bool saw_high = false;
  for (int i = 0; i < 1000; ++i) {
    saw_high |= rng.UniformInt(~uint64_t{0}) > (uint64_t{1} << 63);
  }
  EXPECT_TRUE(saw_high);
}

TEST(RandomSourceTest, UniformDoubleIsInUnitIntervalWithMeanHalf) {
  SeededRandomForTesting rng(4);
  constexpr int kN = 200000;
  double sum = 0;
  for (int i = 0; i < kN; ++i) {
    const double u = rng.UniformDouble();
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    sum += u;
  }
  // Var(U) = 1/12.
  EXPECT_LT(std::abs(sum / kN - 0.5) / std::sqrt(1.0 / 12 / kN), 5);
}

class BernoulliTest : public ::testing::TestWithParam<double> {};

TEST_P(BernoulliTest, MatchesProbability) {
  const double p = GetParam();
  SeededRandomForTesting rng(5);
  constexpr int64_t kN = 400000;
  int64_t k = 0;
  for (int64_t i = 0; i < kN; ++i) k += rng.Bernoulli(p);
  EXPECT_LT(std::abs(BinomialZ(k, kN, p)), 5) << "k=" << k;
}

INSTANTIATE_TEST_SUITE_P(Probabilities, BernoulliTest,
                         ::testing::Values(0.5, 0.3, 0.9999, 1e-3,
                                           0.1 + 0x1.0p-40));

TEST(RandomSourceTest, BernoulliEdgeCases) {
  SeededRandomForTesting rng(6);
  for (int i = 0; i < 1000; ++i) {
    EXPECT_FALSE(rng.Bernoulli(0));
    EXPECT_FALSE(rng.Bernoulli(-1));
    EXPECT_FALSE(rng.Bernoulli(std::nan("")));
    EXPECT_TRUE(rng.Bernoulli(1));
    // 2^-70 is exact in binary: it is never hit in 1000 trials.
    EXPECT_FALSE(rng.Bernoulli(0x1.0p-70));
  }
}

TEST(RandomSourceTest, FailedSourceDoesNotHang) {
  FailingRandomForTesting rng(7, /*good_draws=*/0);
  EXPECT_EQ(rng.UniformInt(3), 0u);  // Rejection loop must stop.
  EXPECT_FALSE(rng.Bernoulli(0.5));
  EXPECT_THAT(rng.status(), StatusIs(absl::StatusCode::kUnavailable));
}

// The inline buffer of RandomSource (what the secure sources use): words
// come from the top of the buffer down, each slot is zeroed as it is taken,
// Underflow() runs exactly when the buffer is empty, and after a failure
// every draw returns 0.
class BufferedForTesting final : public RandomSource {
 public:
  static constexpr int kSize = 4;
  explicit BufferedForTesting(int good_refills) : good_refills_(good_refills) {
    SetBuffer(words_, &left_);
  }
  absl::Status status() const override { return status_; }
  const uint64_t* words() const { return words_; }
  uint32_t left() const { return left_; }
  int refills() const { return refills_; }

 private:
  uint64_t Underflow() override {
    if (refills_ == good_refills_) {
      status_ = absl::UnavailableError("injected");
      return 0;
    }
    ++refills_;
    for (int k = 0; k < kSize; ++k) words_[k] = next_++;
    left_ = kSize;
    return NextUint64();
  }

  uint64_t words_[kSize] = {};
  uint32_t left_ = 0;
  uint64_t next_ = 100;
  int good_refills_;
  int refills_ = 0;
  absl::Status status_;
};

TEST(RandomSourceTest, InlineBufferServesZeroesAndRefills) {
  BufferedForTesting rng(/*good_refills=*/2);
  EXPECT_EQ(rng.NextUint64(), 103u);  // first draw: a refill, then the top
  EXPECT_EQ(rng.refills(), 1);
  EXPECT_EQ(rng.left(), 3u);
  EXPECT_EQ(rng.words()[3], 0u);  // taken words do not linger
  EXPECT_EQ(rng.NextUint64(), 102u);
  EXPECT_EQ(rng.NextUint64(), 101u);
  EXPECT_EQ(rng.NextUint64(), 100u);
  EXPECT_EQ(rng.refills(), 1);
  for (int k = 0; k < BufferedForTesting::kSize; ++k) {
    EXPECT_EQ(rng.words()[k], 0u);
  }
  EXPECT_EQ(rng.NextUint64(), 107u);  // empty: the second refill
  EXPECT_EQ(rng.refills(), 2);
  for (uint64_t expected : {106u, 105u, 104u}) {
    EXPECT_EQ(rng.NextUint64(), expected);
  }
  EXPECT_OK(rng.status());
  // The third refill fails: 0 from now on, the status sticks.
  for (int i = 0; i < 10; ++i) EXPECT_EQ(rng.NextUint64(), 0u);
  EXPECT_THAT(rng.status(), StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_EQ(rng.left(), 0u);
  EXPECT_EQ(rng.UniformInt(3), 0u);  // and nothing spins
}

// Both production sources: the DRBG-backed secure generator and its kernel
// fallback.
using Factory = absl::StatusOr<std::unique_ptr<RandomSource>> (*)();
class SecureSourceTest : public ::testing::TestWithParam<Factory> {};

TEST_P(SecureSourceTest, ProducesDistinctWords) {
  ASSERT_OK_AND_ASSIGN(auto a, GetParam()());
  ASSERT_OK_AND_ASSIGN(auto b, GetParam()());
  EXPECT_NE(a->NextUint64(), b->NextUint64());
  EXPECT_OK(a->status());
}

// Monobit frequency test (NIST SP 800-22, 2.1) over 2^22 bits and a byte
// frequency chi-square test (255 degrees of freedom) over 2^20 bytes; both
// span many refills of the buffers (4 KiB kernel, 64 KiB DRBG).
TEST_P(SecureSourceTest, PassesFrequencyTests) {
  ASSERT_OK_AND_ASSIGN(auto rng, GetParam()());
  constexpr int kWords = 1 << 16;
  int64_t ones = 0;
  std::vector<int64_t> byte_counts(256, 0);
  for (int i = 0; i < kWords; ++i) {
    uint64_t w = rng->NextUint64();
    ones += __builtin_popcountll(w);
    for (int j = 0; j < 8; ++j) {
      ++byte_counts[w & 0xff];
      w >>= 8;
    }
  }
  ASSERT_OK(rng->status());
  const double n_bits = 64.0 * kWords;
  EXPECT_LT(std::abs(ones - n_bits / 2) / std::sqrt(n_bits / 4), 5);
  EXPECT_GT(ChiSquarePValue(byte_counts, std::vector<double>(256, 1.0 / 256)),
            kAlpha);
}

INSTANTIATE_TEST_SUITE_P(Sources, SecureSourceTest,
                         ::testing::Values(&NewSecureRandom, &NewKernelRandom));

// Fork safety: a child forked while the parent's buffer is full must not
// replay the parent's words (the buffer is wiped in the child and refilled
// from OpenSSL's DRBG, which reseeds after fork). Without MADV_WIPEONFORK
// both would print the same 16 buffered words.
TEST(SecureRandomTest, ForkedChildDoesNotReplayParentWords) {
  ASSERT_OK_AND_ASSIGN(auto rng, NewSecureRandom());
  (void)rng->NextUint64();  // the buffer is now full
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  constexpr int kWords = 16;
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    uint64_t words[kWords];
    for (uint64_t& w : words) w = rng->NextUint64();
    const bool ok = rng->status().ok();
    ssize_t unused = write(fds[1], words, sizeof(words));
    (void)unused;
    _exit(ok ? 0 : 1);
  }
  close(fds[1]);
  uint64_t child[kWords];
  size_t got = 0;
  while (got < sizeof(child)) {
    const ssize_t r =
        read(fds[0], reinterpret_cast<char*>(child) + got, sizeof(child) - got);
    if (r <= 0) break;
    got += static_cast<size_t>(r);
  }
  close(fds[0]);
  int wstatus = 0;
  ASSERT_EQ(waitpid(pid, &wstatus, 0), pid);
  ASSERT_TRUE(WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0);
  ASSERT_EQ(got, sizeof(child));
  int equal = 0, zero = 0;
  for (int i = 0; i < kWords; ++i) {
    equal += rng->NextUint64() == child[i];
    zero += child[i] == 0;
  }
  EXPECT_EQ(equal, 0);
  // Nor read the wiped (zeroed) words as randomness: the fill count is wiped
  // with them, so the child refills.
  EXPECT_EQ(zero, 0);
  ASSERT_OK(rng->status());
}

}  // namespace
}  // namespace dpopt::noise
