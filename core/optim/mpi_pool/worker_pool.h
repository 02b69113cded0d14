// WorkerPool: the server's side of a long-running MPI worker pool
// (docs/scale-out.md). Needs no MPI headers.
//
// The pool is `mpirun -np R [--hostfile H] [mpirun_args...] WORKER
// --store=DIR [worker_args...]`, started in its own process group; the
// server talks to rank 0 through mpirun's standard input and output
// (protocol.h), one request and its reply at a time under a mutex, so jobs
// are multiplexed on the pool a request at a time. Rank r keeps the shards
// placed on it in DIR/rank-R on its own host (files 0600 in directories
// 0700; deletion overwrites a shard with zeros, syncs, then unlinks it).
//
// Or the pool is started by an operator (`mpirun ... dpopt-mpi-pool
// --store=DIR --listen=SOCKET`), and the server connects to rank 0's
// Unix-domain socket (`connect`): the socket's file mode (0600, the
// operator's user) decides who may talk to the pool, so rank 0 runs on the
// server's host; the other ranks may be anywhere mpirun puts them.
//
// Faults: a request that gets no reply within `request_timeout`, a rank that
// dies (mpirun exits) or a malformed reply ends the pool's processes (SIGTERM
// to the group, SIGKILL after 3 s) or the connection; the request fails with
// UNAVAILABLE, and so does every later request of the jobs that were open (a
// job's ranks' state is gone). The next Place/Drop/OpenJob starts a new pool
// (or connects again), which finds the placed shards on its ranks' disks.
#ifndef DPOPT_CORE_OPTIM_MPI_POOL_WORKER_POOL_H_
#define DPOPT_CORE_OPTIM_MPI_POOL_WORKER_POOL_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "core/common/byte_channel.h"
#include "core/data/dataset.h"
#include "core/optim/mpi_pool/protocol.h"
#include "core/optim/row_sums.h"

namespace dpopt::optim::mpi_pool {

// What the production pool program prints for --identify and in its hello
// reply. A server refuses any other pool unless
// WorkerPoolOptions::allow_testing_worker (tests only).
inline constexpr char kProductionPoolIdentity[] =
    "dpopt-mpi-pool: secure generators";

struct WorkerPoolOptions {
  // An operator's pool: rank 0's Unix socket path. When set, the server
  // starts nothing and mpirun, worker, store_dir, hostfile and the args are
  // not used.
  std::string connect;
  // mpirun executable (path, or a name looked up in PATH). Required unless
  // `connect`.
  std::string mpirun;
  // The dpopt-mpi-pool executable. Required unless `connect`.
  std::string worker;
  // Ranks in the pool, in [1, 1024] (an operator's pool must have exactly
  // these).
  int ranks = 0;
  // Each rank's shard directory (created if missing; rank r uses
  // store_dir/rank-r). An absolute path valid on every host. Required unless
  // `connect`.
  std::string store_dir;
  // Optional Open MPI hostfile (--hostfile).
  std::string hostfile;
  // Extra mpirun arguments (e.g. "--oversubscribe").
  std::vector<std::string> mpirun_args;
  // Extra worker arguments (only the test pool accepts any).
  std::vector<std::string> worker_args;
  // Longest wait for one reply (a placement chunk, a sum): the pool is
  // restarted past it.
  absl::Duration request_timeout = absl::Seconds(120);
  // Longest wait for a new pool's hello.
  absl::Duration start_timeout = absl::Seconds(60);
  // Tests only: accept a pool that does not say kProductionPoolIdentity.
  bool allow_testing_worker = false;

  absl::Status Validate() const;
};

class WorkerPool {
 public:
  explicit WorkerPool(WorkerPoolOptions options);
  ~WorkerPool();  // shuts the pool down (kShutdown, then the process group)
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  const WorkerPoolOptions& options() const { return options_; }

  // Starts the pool if it is not running and checks its identity and rank
  // count. UNAVAILABLE if it cannot be started; FAILED_PRECONDITION for a
  // pool that is not the production one (unless allowed) or has the wrong
  // number of ranks.
  absl::Status EnsureStarted();

  // Writes shard r (rows ShardBegin(n, R, r) to ShardBegin(n, R, r + 1) of
  // `data`) to rank r's store as `dataset_id`, replacing an earlier
  // placement, and returns every rank's report (ok, host, rows stored).
  // The shards travel in chunks of kShardChunkBytes, encoded as they are
  // sent; placements run one at a time, and running jobs' sums go on
  // between their chunks. Errors: INVALID_ARGUMENT (id), UNAVAILABLE (pool), or
  // the first failing rank's error (then no rank keeps the new shard).
  absl::StatusOr<std::vector<RankReport>> Place(absl::string_view dataset_id,
                                                const Dataset& data);
  // Securely deletes `dataset_id`'s shard on every rank; every rank's
  // report says whether it had one. Errors: INVALID_ARGUMENT, UNAVAILABLE.
  absl::StatusOr<std::vector<RankReport>> Drop(absl::string_view dataset_id);

  // The rows of a job on a placed dataset: Open(objective) opens the job on
  // every rank (each loads its shard and makes its generator) and returns
  // its RowSums; the job is closed on every rank when that is
  // destroyed. `job_id` must be unique among open jobs.
  std::unique_ptr<RemoteRows> RowsFor(std::string dataset_id, uint64_t job_id);

  // Stops the pool's processes now (tests: what a rank's death does).
  void Stop();

 private:
  class PoolRowSums;
  class PoolRows;
  // Sends one request and returns its reply (kError replies as their
  // status). Restarts nothing: EnsureStarted does.
  absl::StatusOr<Message> Call(MessageType type, const std::string& payload)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<Message> Call(MessageType type, const std::string& payload,
                               absl::Duration timeout)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status StartLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status SpawnLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status CheckHelloLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void StopLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const WorkerPoolOptions options_;
  absl::Mutex place_mu_;  // one placement at a time (taken before mu_)
  absl::Mutex mu_;
  std::unique_ptr<ByteChannel> channel_ ABSL_GUARDED_BY(mu_);
  MessageParser parser_ ABSL_GUARDED_BY(mu_);
  // Incremented at every start: a job opened on an earlier pool fails.
  uint64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace dpopt::optim::mpi_pool

#endif  // DPOPT_CORE_OPTIM_MPI_POOL_WORKER_POOL_H_
