// Starts a dp_dda job on MPI ranks with `mpirun` and talks to it
// (distributed-DDA family). Server side; needs no MPI headers.
//
//   mpirun -np R [--hostfile H] [mpirun_args...] WORKER --job-tag=T
//          [worker_args...]
//
// in its own process group. The job stream (wire.h: public parameters and
// the nodes' shards, in chunks of at most kMaxChunkBytes) goes to
// mpirun's standard input as it is encoded, a chunk at a time, so the server
// never holds a serialised copy of the dataset; Open MPI forwards it to
// rank 0 only, which forwards each chunk over MPI to the owner of its shard,
// so no other rank ever opens the database. Rank 0's standard output carries
// the trace frames and the result. Faults: if the sink asks to stop
// (cancellation) the whole process group is terminated (SIGTERM, then SIGKILL
// after 3 s) and the result says `stopped`; past `timeout` the same happens and
// the call returns DEADLINE_EXCEEDED; a rank that dies makes mpirun exit
// non-zero and the call returns ABORTED. mpirun's and the ranks' standard error
// (which never holds data: the worker prints only status messages) goes to the
// server's log. As root, OMPI_ALLOW_RUN_AS_ROOT(_CONFIRM)=1 is set for mpirun.
#ifndef DPOPT_CORE_OPTIM_DISTRIBUTED_DDA_MPI_LAUNCHER_H_
#define DPOPT_CORE_OPTIM_DISTRIBUTED_DDA_MPI_LAUNCHER_H_

#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "core/optim/distributed_dda/engine.h"
#include "core/optim/mpi_settings.h"

namespace dpopt::optim::distributed_dda {

// Runs the job; `sink` receives rank 0's trace frames in order;
// `stop_requested` (may be empty) is asked at least every 50 ms while the
// job runs. Returns the engine result from rank 0's final frame (stopped =
// true if the sink or stop_requested asked to stop; the process group is
// then ended). Errors: DEADLINE_EXCEEDED, ABORTED (a rank or mpirun failed),
// DATA_LOSS (malformed worker output), INTERNAL (the worker reported an
// error; its message), UNAVAILABLE (mpirun could not be started).
// Start-up check: runs `settings.worker --identify` (no MPI, at most 10 s)
// and returns OK iff it exits 0 printing kProductionWorkerIdentity.
// FAILED_PRECONDITION otherwise (e.g. the test-only worker, which prints
// that it is not differentially private), unless
// settings.allows_testing_worker() (tests only).
absl::Status CheckProductionWorker(const MpiSettings& settings);

// The job stream (wire.h), produced as mpirun reads it: replaces *piece
// with the next bytes and returns true, or returns false at the end
// (JobStreamWriter::Next). The launcher holds one piece at a time.
using JobStreamSource = std::function<bool(std::string* piece)>;

absl::StatusOr<EngineResult> RunOnMpi(
    const MpiSettings& settings, int ranks, const JobStreamSource& job_stream,
    const TraceSink& sink, const std::function<bool()>& stop_requested);

}  // namespace dpopt::optim::distributed_dda

#endif  // DPOPT_CORE_OPTIM_DISTRIBUTED_DDA_MPI_LAUNCHER_H_
