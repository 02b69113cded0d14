// TEST ONLY. NOT DIFFERENTIALLY PRIVATE.
//
// Gives dp_dda's nodes seeded generators (core/noise/testing) instead of the
// secure one, so that runs are reproducible and the simulation and the MPI
// execution can be compared bit for bit. Lives in the
// test-only target dpopt_optim_distributed_dda_testing, which the server never
// links.
#ifndef DPOPT_CORE_OPTIM_DISTRIBUTED_DDA_TESTING_DP_DDA_TEST_PEER_H_
#define DPOPT_CORE_OPTIM_DISTRIBUTED_DDA_TESTING_DP_DDA_TEST_PEER_H_

#include <cstdint>
#include <memory>

#include "core/noise/random.h"
#include "core/optim/distributed_dda/dp_dda.h"
#include "core/optim/mpi_settings.h"

namespace dpopt::optim::distributed_dda::testing {

// The seeded generator of node `node` for run seed `seed` (the same in the
// simulation and in every MPI rank). NOT DP.
std::unique_ptr<noise::RandomSource> SeededNodeRandom(uint64_t seed, int node);

class DpDdaTestPeer {
 public:
  // Node i draws from SeededNodeRandom(seed, i). NOT DP.
  static void UseSeededNodes(DpDda& algorithm, uint64_t seed);
  // Under MPI, the job stream travels in chunks of `bytes` (in wire.h's
  // [kMinChunkBytes, kMaxChunkBytes]) instead of kMaxChunkBytes.
  static void SetMpiChunkBytes(DpDda& algorithm, int64_t bytes) {
    algorithm.mpi_chunk_bytes_ = bytes;
  }
};

class MpiSettingsTestPeer {
 public:
  // Lets `settings` name the test-only dpopt-dda-worker-testing as the
  // worker (the server's start-up check accepts it). NOT DP.
  static void AllowTestingWorker(MpiSettings& settings) {
    settings.allow_testing_worker_ = true;
  }
};

}  // namespace dpopt::optim::distributed_dda::testing

#endif  // DPOPT_CORE_OPTIM_DISTRIBUTED_DDA_TESTING_DP_DDA_TEST_PEER_H_
