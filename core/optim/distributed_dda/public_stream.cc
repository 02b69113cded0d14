#include "core/optim/distributed_dda/public_stream.h"

namespace dpopt::optim::distributed_dda {
namespace {

uint64_t Mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

}  // namespace

PublicStream::PublicStream(uint64_t seed, uint64_t domain, uint64_t index) {
  uint64_t h = Mix(seed + 0x9e3779b97f4a7c15ULL);
  h = Mix(h ^ (domain * 0xd1b54a32d192ed03ULL + 0x632be59bd9b4e019ULL));
  h = Mix(h ^ (index * 0x8cb92ba72f3d8dd7ULL + 0x9e3779b97f4a7c15ULL));
  state_ = h;
}

uint64_t PublicStream::Next() {
  state_ += 0x9e3779b97f4a7c15ULL;
  return Mix(state_);
}

uint64_t PublicStream::UniformInt(uint64_t n) {
  // Lemire-free rejection: accept below the largest multiple of n.
  const uint64_t limit = ~uint64_t{0} - (~uint64_t{0} % n);
  for (;;) {
    const uint64_t v = Next();
    if (v < limit) return v % n;
  }
}

double PublicStream::UniformDouble() {
  return static_cast<double>(Next() >> 11) * 0x1.0p-53;
}

}  // namespace dpopt::optim::distributed_dda
