// dpopt-mpi-pool: one rank of a long-running MPI worker pool
// (docs/scale-out.md). Started by the server (worker_pool.h) or by an
// operator through mpirun. Rank 0 reads requests (protocol.h) from its
// standard input (or a Unix socket, --listen) and writes one reply per
// request back;
// it broadcasts each request's type and parameters to the other ranks
// (a shard chunk goes only to the rank that stores it), every rank does its
// part on its own shards, and the answers are gathered to rank 0:
//   - a sum: each rank Poisson-samples its own shard with its own generator
//     (the secure generator in production) and computes its clipped
//     gradient sum (core/optim/row_sums.h, LocalRowSums); rank 0
//     gathers the sums and adds them in rank order (s_0 + s_1 + ... ), the
//     order ShardedRowSums uses, so the result does not depend on
//     message timing. Only that sum leaves rank 0, to the server, which adds
//     the noise before anything is released.
//   - a placement or a deletion: each rank's report (host, rows, ok).
// No rank ever prints data; errors are status messages.
#ifndef DPOPT_CORE_OPTIM_MPI_POOL_MPI_POOL_WORKER_H_
#define DPOPT_CORE_OPTIM_MPI_POOL_MPI_POOL_WORKER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "core/noise/random.h"

namespace dpopt::optim::mpi_pool {

struct PoolWorkerHooks {
  // What the pool says it is (kProductionPoolIdentity in production).
  std::string identity;
  // The generator of one job on one rank. Production:
  // noise::NewSecureRandom().
  std::function<absl::StatusOr<std::unique_ptr<noise::RandomSource>>(
      int rank, uint64_t job_id)>
      job_random;
  // Called on every rank after each sum it computed (test fault injection
  // only); may be empty.
  std::function<void(int rank, int64_t sums)> after_sum;
};

// Runs one rank. Arguments: --store=DIR (required: rank r keeps its shards
// in DIR/rank-r); --listen=SOCKET (an operator's pool: rank 0 serves the
// server on that Unix socket, mode 0600, instead of standard input and
// output). Returns the process exit code.
int PoolWorkerMain(int argc, char** argv, const PoolWorkerHooks& hooks);

}  // namespace dpopt::optim::mpi_pool

#endif  // DPOPT_CORE_OPTIM_MPI_POOL_MPI_POOL_WORKER_H_
