// NOT DIFFERENTIALLY PRIVATE — TESTS ONLY.
#include "core/noise/testing/seeded_random.h"

#include <cstdint>

namespace dpopt::noise::testing {
namespace {

uint64_t SplitMix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

inline uint64_t Rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

}  // namespace

SeededRandomForTesting::SeededRandomForTesting(uint64_t seed) {
  for (uint64_t& word : s_) word = SplitMix64(seed);
}

uint64_t SeededRandomForTesting::Underflow() {
  const uint64_t result = Rotl(s_[1] * 5, 7) * 9;
  const uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = Rotl(s_[3], 45);
  return result;
}

FailingRandomForTesting::FailingRandomForTesting(uint64_t seed,
                                                 int64_t good_draws)
    : inner_(seed), good_draws_(good_draws) {}

uint64_t FailingRandomForTesting::Underflow() {
  if (draws_ >= good_draws_) {
    status_ = absl::UnavailableError("injected random source failure");
  }
  ++draws_;
  if (!status_.ok()) return 0;
  return inner_.NextUint64();
}

}  // namespace dpopt::noise::testing
