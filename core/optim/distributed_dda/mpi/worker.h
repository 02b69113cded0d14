// dpopt-dda-worker: one MPI rank of a dp_dda job (distributed-DDA family).
// Started by the server through mpirun (mpi_launcher.h). Rank 0 reads the
// job stream (wire.h) from its standard input, broadcasts the public
// parameters and forwards every other rank the shards of its nodes chunk by
// chunk (MPI messages of at most kMaxChunkBytes); then every
// rank runs the shared engine (engine.h) over its nodes with MpiTransport,
// each node drawing its noise and samples from its own generator (the
// secure generator in production). Rank 0 writes trace frames and the
// result to its standard output; no rank prints data. Any error aborts the
// whole MPI job (MPI_Abort), after rank 0 reports it as an error frame when
// it is the one that failed.
#ifndef DPOPT_CORE_OPTIM_DISTRIBUTED_DDA_MPI_WORKER_H_
#define DPOPT_CORE_OPTIM_DISTRIBUTED_DDA_MPI_WORKER_H_

#include <cstdint>
#include <functional>
#include <memory>

#include "absl/status/statusor.h"
#include "core/noise/random.h"

namespace dpopt::optim::distributed_dda {

struct WorkerHooks {
  // A node's secret generator. Production: noise::NewSecureRandom().
  std::function<absl::StatusOr<std::unique_ptr<noise::RandomSource>>(int node)>
      node_random;
  // Called on every rank after every gradient pass (test fault injection
  // only); may be empty.
  std::function<void(int rank, int64_t pass)> after_pass;
};

// Runs one rank; `argv` may hold only --job-tag=... (which marks the job's
// processes). Returns the process exit code.
int WorkerMain(int argc, char** argv, const WorkerHooks& hooks);

}  // namespace dpopt::optim::distributed_dda

#endif  // DPOPT_CORE_OPTIM_DISTRIBUTED_DDA_MPI_WORKER_H_
