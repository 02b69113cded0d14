// NOT DIFFERENTIALLY PRIVATE — TESTS ONLY.
//
// Deterministic, seeded implementations of RandomSource for reproducible tests
// (docs/architecture.md, convention "test doubles are unreachable"). Their
// output is predictable from the seed, so noise drawn from them protects
// nothing. They live in the separate target dpopt_noise_testing, which only
// test binaries link; the server binary cannot reach them.
#ifndef DPOPT_CORE_NOISE_TESTING_SEEDED_RANDOM_H_
#define DPOPT_CORE_NOISE_TESTING_SEEDED_RANDOM_H_

#include <cstdint>

#include "absl/status/status.h"
#include "core/noise/random.h"

namespace dpopt::noise::testing {

// NOT DIFFERENTIALLY PRIVATE — TESTS ONLY. xoshiro256** (Blackman and Vigna
// 2018) seeded through SplitMix64; passes BigCrush, period 2^256 - 1.
class SeededRandomForTesting final : public RandomSource {
 public:
  explicit SeededRandomForTesting(uint64_t seed);
  absl::Status status() const override { return absl::OkStatus(); }

 private:
  uint64_t Underflow() override;  // no buffer: the next word
  uint64_t s_[4];
};

// NOT DIFFERENTIALLY PRIVATE — TESTS ONLY. Behaves like
// SeededRandomForTesting for `good_draws` draws, then fails the way the
// secure generator does: status() turns UNAVAILABLE (sticky) and every later
// draw returns 0. Used to test that mechanisms fail closed and never hang.
class FailingRandomForTesting final : public RandomSource {
 public:
  FailingRandomForTesting(uint64_t seed, int64_t good_draws);
  absl::Status status() const override { return status_; }
  int64_t draws() const { return draws_; }

 private:
  uint64_t Underflow() override;  // no buffer: the next word
  SeededRandomForTesting inner_;
  int64_t good_draws_;
  int64_t draws_ = 0;
  absl::Status status_;
};

}  // namespace dpopt::noise::testing

#endif  // DPOPT_CORE_NOISE_TESTING_SEEDED_RANDOM_H_
