// Sources of randomness for differentially private mechanisms.
//
// Contract: every noise draw in the server comes from NewSecureRandom(). It
// reads the kernel CSPRNG (getrandom(2)), buffered per instance, and fails
// closed: if the kernel cannot deliver bytes, the source enters a sticky
// error state, `status()` reports it and every later draw must be treated as
// unusable by the caller (mechanisms check `status()` after drawing and
// return the error; a job then FAILS rather than publish weak noise).
// Clients can never seed it.
//
// Deterministic generators for tests live in core/noise/testing/ (target
// dpopt_noise_testing), are labelled "not differentially private", and are
// not linked into the server binary.
#ifndef DPOPT_CORE_NOISE_RANDOM_H_
#define DPOPT_CORE_NOISE_RANDOM_H_

#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace dpopt::noise {

class RandomSource {
 public:
  virtual ~RandomSource() = default;
  // 64 uniformly random bits. After a failure returns 0 and status() is
  // non-OK.
  virtual uint64_t NextUint64() = 0;
  // OK unless the source has failed (sticky).
  virtual absl::Status status() const = 0;

  // Uniform integer in [0, n). REQUIRES: n > 0. Unbiased (rejection).
  uint64_t UniformInt(uint64_t n);
  // Uniform double in [0, 1) with 53 random bits.
  double UniformDouble();
  // Bernoulli(p) for a double p in [0, 1].
  bool Bernoulli(double p);
};

// The secure generator (getrandom). Not thread-safe: use one per thread/job.
absl::StatusOr<std::unique_ptr<RandomSource>> NewSecureRandom();

}  // namespace dpopt::noise

#endif  // DPOPT_CORE_NOISE_RANDOM_H_
