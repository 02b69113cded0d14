// dpopt-server as a library: storage, managers, gRPC services, health and
// reflection. Used by main.cc and by the in-process integration tests.
#ifndef DPOPT_SERVER_SERVER_H_
#define DPOPT_SERVER_SERVER_H_

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/optim/mpi_settings.h"
#include "grpcpp/grpcpp.h"
#include "server/job_limits.h"
#include "server/metrics.h"
#include "server/principal_limits.h"
#include "server/token_lifetime.h"
#include "storage/deletion_record.h"
#include "storage/ledger_mark.h"

namespace dpopt::storage {
class Database;
class FileLock;
}  // namespace dpopt::storage

namespace dpopt::optim::mpi_pool {
struct WorkerPoolOptions;  // core/optim/mpi_pool/worker_pool.h
class WorkerPool;
}  // namespace dpopt::optim::mpi_pool

namespace dpopt::server {

class DatasetManager;
class JobManager;
class TraceHub;
class DatasetServiceImpl;
class BudgetServiceImpl;
class JobServiceImpl;
class AdminServiceImpl;
class Authenticator;
class AuthFailureLog;
class StreamRegistry;
class ConcurrencyLimiter;
class RateLimiter;
namespace console {
class Console;
}

struct ServerOptions {
  // SQLite database file; created and migrated on first start.
  std::string db_path = "dpopt.db";
  // Listen address. Port 0 picks a free port (see DpoptServer::port()).
  std::string listen = "127.0.0.1:50051";
  // Job worker threads and bounded queue length.
  int workers = 2;
  int queue_capacity = 64;
  // Memory cap of the decoded datasets kept between jobs
  // (server/dataset_cache.h), in MiB; 0 turns the cache off.
  int64_t dataset_cache_mb = 512;
  // Largest public work bound of an admitted job (JobManager::Options::
  // max_job_work), in [1, 1e18].
  double max_job_work = kDefaultMaxJobWork;
  // Largest public bound on a job's stored trace, in bytes
  // (JobManager::Options::max_trace_bytes_per_job); 0 = no limit.
  int64_t max_trace_bytes_per_job = kDefaultMaxTraceBytesPerJob;
  // Bytes of events the trace hub holds for one WatchJob stream before it
  // drops that watcher (TraceHub::Options).
  int64_t max_watch_buffer_bytes = kDefaultMaxWatchBufferBytes;
  // Memory gRPC may use for its buffers (connections, messages in flight),
  // in MiB (grpc::ResourceQuota); past it gRPC refuses new work instead of
  // growing. In [16, 2^20].
  int64_t grpc_memory_mb = 512;
  // Concurrent calls (streams) on one client connection
  // (GRPC_ARG_MAX_CONCURRENT_STREAMS); further calls wait for a free one.
  // In [1, 100000].
  int max_concurrent_streams = 100;
  // Threads one large kernel call may use (full-batch gradients, evaluation
  // on large sets; core/optim/parallel.h); 0 = hardware threads, at most 4.
  // Results never depend on it (fixed chunks, fixed-order sums).
  int kernel_threads = 0;
  // Largest gRPC message accepted: ImportDataset's header and chunks (the
  // CLI and the Python client send 1 MiB chunks). Every other request is
  // held to server/request_limits.h's kMaxRequestBytes.
  int max_message_bytes = 4 << 20;
  // Per-principal limits (server/principal_limits.h has the defaults).
  PrincipalLimits limits;
  // Token lifetimes (--max-token-ttl-days).
  TokenLifetimeOptions tokens;
  // gRPC server reflection (lets any client list the services): off unless
  // --reflection.
  bool reflection = false;
  // Where the first start on a fresh database writes the curator's bearer
  // token (mode 0600). Empty: db_path + ".curator-token".
  std::string curator_token_file;
  // TLS (PEM files). With tls_client_ca, clients must present a certificate
  // signed by it (mutual TLS). Without TLS the server listens only on a
  // loopback address unless `insecure` is set (logged loudly).
  std::string tls_cert;
  std::string tls_key;
  std::string tls_client_ca;
  bool insecure = false;
  // Web console: HOST:PORT of its HTTP listener; empty = off
  // (the default). Uses the TLS files above when they are set, and the same
  // loopback-only rule without TLS. Port 0 picks a free port.
  std::string console_listen;
  // The console on a non-loopback address without TLS (its own flag:
  // --insecure covers only the gRPC listener).
  bool console_insecure = false;
  // Prometheus metrics (server/metrics.h); listen empty = off.
  MetricsOptions metrics;
  // The Open MPI launcher (--mpirun and friends); unset = MPI jobs are
  // refused before charging.
  std::optional<optim::MpiSettings> mpi;
  // The MPI worker pool (--mpi-pool=N and friends): started with the server
  // (a pool that does not start stops the start), used by PlaceDataset and
  // by jobs with JobSpec.execution = EXECUTION_MPI_POOL; null = no pool.
  // An empty store_dir is PoolStoreDir()'s default. The server's flags
  // never set allow_testing_worker (tests set it here). (A pointer so that
  // this header needs no Eigen: the console includes it after cpp-httplib.)
  std::shared_ptr<const optim::mpi_pool::WorkerPoolOptions> mpi_pool;
  // The ledger's high-water mark (storage/ledger_mark.h). Empty: db_path +
  // ".ledger-mark". The server refuses a database whose ledger is behind it.
  std::string ledger_mark_file;
  // DANGER: start even if the ledger is behind its mark (a restored old
  // backup): the forgotten charges' budget may be spent again. Recorded in
  // the audit log; the mark is reset to the restored ledger.
  bool allow_ledger_rollback = false;
  // Tests only: called with the port while the server starts (health
  // NOT_SERVING), before the database is opened.
  std::function<void(int port)> before_open_for_testing;
  // The deletion record (storage/deletion_record.h). Empty: beside the
  // ledger mark (DeletionRecord::DefaultPath of LedgerMarkFile(), db_path +
  // ".deletions" by default). Datasets it records are erased again at start
  // if the database holds them live (a restored older backup).
  std::string deletion_record_file;
  absl::Status Validate() const;
  std::string LedgerMarkFile() const {
    return ledger_mark_file.empty() ? db_path + ".ledger-mark"
                                    : ledger_mark_file;
  }
  std::string DeletionRecordFile() const {
    return deletion_record_file.empty()
               ? storage::DeletionRecord::DefaultPath(LedgerMarkFile())
               : deletion_record_file;
  }
  // The pool ranks' shard directory: mpi_pool->store_dir, or db_path +
  // ".pool-shards" made absolute.
  std::string PoolStoreDir() const;
  std::string TokenFile() const {
    return curator_token_file.empty() ? db_path + ".curator-token"
                                      : curator_token_file;
  }
};

// True only for literal loopback addresses (127.0.0.0/8, ::1) and Unix
// sockets (core/common/address.h); "localhost" and other names are not.
bool IsLoopbackAddress(absl::string_view listen);

// A warning when the directory holding `db_path` can be read or searched by
// users other than its owner (the database files are 0600, but their names
// and the backups an operator may copy there are visible); empty if not.
std::string DatabaseDirectoryWarning(const std::string& db_path);

class DpoptServer {
 public:
  // Takes the database lock (`<db>.lock`; FAILED_PRECONDITION if another
  // server or a restore holds it), opens (and migrates) the database, checks
  // its ledger against the high-water mark (FAILED_PRECONDITION if behind,
  // unless allow_ledger_rollback), marks jobs interrupted by a previous
  // crash as FAILED (they stay charged), removes the staged rows of imports
  // a crash interrupted, and starts listening.
  static absl::StatusOr<std::unique_ptr<DpoptServer>> Start(
      const ServerOptions& options);
  ~DpoptServer();

  int port() const { return port_; }
  // The metrics listener's port (0 when metrics are off).
  int metrics_port() const;
  // The console's port (0 when the console is off).
  int console_port() const;
  // Whether this start created the bootstrap curator and wrote its token.
  bool bootstrapped() const { return bootstrapped_; }
  // Imports interrupted by a previous crash and removed by this start.
  int64_t discarded_imports() const { return discarded_imports_; }
  // Recorded deletions this start found live in the database and erased.
  const std::vector<storage::DeletionEntry>& reapplied_deletions() const;
  // What the start found when it compared the ledger with its mark.
  const storage::LedgerMarkCheck& ledger_mark_check() const {
    return mark_check_;
  }
  // Graceful stop: grpc.health.v1 reports NOT_SERVING, new jobs are refused
  // with UNAVAILABLE (nothing charged), admitted jobs may finish for up to
  // `timeout`; then Shutdown() cancels the rest (they stay charged). Returns
  // whether every job finished in time.
  bool Drain(absl::Duration timeout);
  // Blocks until Shutdown() is called from another thread.
  void Wait();
  // Deterministic shutdown: stop accepting RPCs, cancel and join jobs, close
  // watchers and storage. Idempotent.
  void Shutdown();

 private:
  DpoptServer() = default;
  // What the metrics read at scrape time.
  ScrapeSample Sample() const;

  ServerOptions options_;
  int port_ = 0;
  std::unique_ptr<storage::FileLock> lock_;  // released after db_ closes
  std::unique_ptr<storage::Database> db_;
  // Declared before the managers that use it (destroyed after them).
  std::unique_ptr<optim::mpi_pool::WorkerPool> pool_;
  std::unique_ptr<TraceHub> hub_;
  std::unique_ptr<DatasetManager> datasets_;
  std::unique_ptr<JobManager> jobs_;
  std::unique_ptr<DatasetServiceImpl> dataset_service_;
  std::unique_ptr<BudgetServiceImpl> budget_service_;
  std::unique_ptr<JobServiceImpl> job_service_;
  std::unique_ptr<AdminServiceImpl> admin_service_;
  std::unique_ptr<Authenticator> auth_;
  std::unique_ptr<AuthFailureLog> auth_failures_;
  std::unique_ptr<StreamRegistry> streams_;
  std::unique_ptr<ConcurrencyLimiter> watches_;
  std::unique_ptr<RateLimiter> estimates_;
  bool bootstrapped_ = false;
  int64_t discarded_imports_ = 0;
  storage::LedgerMarkCheck mark_check_;
  std::unique_ptr<grpc::Server> grpc_server_;
  std::unique_ptr<console::Console> console_;
  std::unique_ptr<Metrics> metrics_;
  bool shut_down_ = false;
};

}  // namespace dpopt::server

#endif  // DPOPT_SERVER_SERVER_H_
