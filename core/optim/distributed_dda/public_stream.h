// Public, deterministic randomness for distributed-DDA family's
// data-independent choices: the random base graphs, the active sets S_t and the
// gossip matrices W^(t) (all nodes derive the same active set from a
// counter-based PRNG keyed by (public_seed, t)). Every rank recomputes the same
// values without communication, and the public seed is released with the job.
// NEVER use it for noise or sample indices: those come from each node's secret
// generator (noise::RandomSource).
//
// SplitMix64 (Steele, Lea & Flood 2014) keyed by (seed, domain, index): a
// well-mixed 64-bit stream per key, reproducible across platforms.
#ifndef DPOPT_CORE_OPTIM_DISTRIBUTED_DDA_PUBLIC_STREAM_H_
#define DPOPT_CORE_OPTIM_DISTRIBUTED_DDA_PUBLIC_STREAM_H_

#include <cstdint>

namespace dpopt::optim::distributed_dda {

// Key domains (so graph and gossip streams never overlap).
inline constexpr uint64_t kGraphDomain = 1;
inline constexpr uint64_t kGossipDomain = 2;

class PublicStream {
 public:
  PublicStream(uint64_t seed, uint64_t domain, uint64_t index);
  uint64_t Next();
  // Uniform in [0, n) (rejection, unbiased). REQUIRES: n > 0.
  uint64_t UniformInt(uint64_t n);
  // Uniform in [0, 1) with 53 bits.
  double UniformDouble();

 private:
  uint64_t state_;
};

}  // namespace dpopt::optim::distributed_dda

#endif  // DPOPT_CORE_OPTIM_DISTRIBUTED_DDA_PUBLIC_STREAM_H_
