#include "core/optim/distributed_dda/testing/dp_dda_test_peer.h"

#include "core/noise/testing/seeded_random.h"

namespace dpopt::optim::distributed_dda::testing {

std::unique_ptr<noise::RandomSource> SeededNodeRandom(uint64_t seed, int node) {
  return std::make_unique<noise::testing::SeededRandomForTesting>(
      seed * 0x9e3779b97f4a7c15ULL + static_cast<uint64_t>(node) + 1);
}

void DpDdaTestPeer::UseSeededNodes(DpDda& algorithm, uint64_t seed) {
  algorithm.node_random_for_testing_ =
      [seed](int node) -> absl::StatusOr<std::unique_ptr<noise::RandomSource>> {
    return SeededNodeRandom(seed, node);
  };
}

}  // namespace dpopt::optim::distributed_dda::testing
