// Job lifecycle: estimate, admission + charge, queueing, execution,
// cancellation, trace and results. Privacy-critical order
// (docs/architecture.md, invariant "charge before data"):
//   validate spec -> calibrate from public metadata -> reserve a queue slot
//   -> price + admit + charge + create the job in ONE BEGIN IMMEDIATE
//   transaction (durable) -> only then does a worker load the private rows.
// A job that was charged stays charged whatever happens next.
#ifndef DPOPT_SERVER_JOB_MANAGER_H_
#define DPOPT_SERVER_JOB_MANAGER_H_

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/jobs/job_runner.h"
#include "core/optim/mpi_settings.h"
#include "dpopt/v1/dpopt.pb.h"
#include "server/dataset_cache.h"
#include "server/dataset_manager.h"
#include "server/job_admission.h"
#include "server/job_limits.h"
#include "server/metrics.h"
#include "server/principal_limits.h"
#include "server/trace_hub.h"
#include "storage/database.h"

namespace dpopt::optim::mpi_pool {
class WorkerPool;  // core/optim/mpi_pool/worker_pool.h
}  // namespace dpopt::optim::mpi_pool

namespace dpopt::server {

class JobManager {
 public:
  struct Options {
    int workers = 2;
    int queue_capacity = 64;
    // The Open MPI launcher for job types that can run on MPI ranks; unset =
    // MPI jobs are refused with FAILED_PRECONDITION before anything is
    // charged.
    std::optional<optim::MpiSettings> mpi;
    // The MPI worker pool for jobs with JobSpec.execution =
    // EXECUTION_MPI_POOL (not owned; must outlive the manager); null = such
    // jobs are refused with FAILED_PRECONDITION before anything is charged.
    optim::mpi_pool::WorkerPool* pool = nullptr;
    // Decoded datasets kept between jobs (server/dataset_cache.h).
    DatasetCache::Options dataset_cache;
    // Job metrics (server/metrics.h); null = none. Not owned; must outlive
    // the manager.
    Metrics* metrics = nullptr;
    // Queued + running jobs of one principal, public-dataset jobs included
    // (server/principal_limits.h); 0 = no limit.
    int max_active_jobs_per_principal = 0;
    // Largest public work bound (optim::Calibration::work_units, in
    // row-coordinate operations) of a job this server admits; larger jobs
    // are refused with INVALID_ARGUMENT before anything is charged. In
    // [1, 1e18]; default server/job_limits.h.
    double max_job_work = kDefaultMaxJobWork;
    // Largest public bound on a job's stored trace, in bytes
    // (TraceBytesBound); larger jobs are refused with INVALID_ARGUMENT
    // before anything is charged, and no job stores more. In [0, 2^40];
    // 0 = no limit; default server/job_limits.h.
    int64_t max_trace_bytes_per_job = kDefaultMaxTraceBytesPerJob;
    absl::Status Validate() const;
  };

  // REQUIRES: db, datasets and hub outlive the manager.
  static absl::StatusOr<std::unique_ptr<JobManager>> Create(
      const Options& options, storage::Database* db, DatasetManager* datasets,
      TraceHub* hub);
  ~JobManager();

  // Restart recovery: jobs left RUNNING or QUEUED by a crash become FAILED
  // (and stay charged).
  absl::Status RecoverInterruptedJobs();

  // Calibrates and prices a job; charges nothing.
  // `principal` (may be empty) decides whether a per-analyst cap applies to
  // the admissibility shown.
  absl::StatusOr<v1::JobEstimate> Estimate(const v1::JobSpec& spec,
                                           const std::string& principal = "");
  // Charges and queues a job. RESOURCE_EXHAUSTED if the budget, the queue
  // or the principal's job limit cannot take it (then nothing is charged).
  // For an analyst (`role`), the admission transaction re-checks its grant
  // on a private dataset (NOT_FOUND, nothing charged, if it was revoked).
  // `on_id` (optional) learns the new job's id before the admission transaction
  // commits (the RPC's audit record, written in that transaction, names the
  // job).
  // `own_max_active_jobs` is the principal's own job limit, if a curator set
  // one (else the server's).
  // A job whose cost exceeds the analyst's grant's approval threshold is
  // created PENDING_APPROVAL instead, uncharged (`on_note`, optional, then
  // learns "pending approval" before it is created, for the audit record);
  // at most the principal's job limit of its jobs may be pending at once.
  absl::StatusOr<v1::Job> Submit(
      const v1::JobSpec& spec, const std::string& principal, storage::Role role,
      const std::function<void(const std::string&)>& on_id = nullptr,
      std::optional<int> own_max_active_jobs = std::nullopt,
      const std::function<void(const std::string&)>& on_note = nullptr);
  absl::StatusOr<v1::Job> Get(const std::string& id);
  // Every job of `dataset` (empty: all), oldest first (internal use).
  absl::StatusOr<v1::ListJobsResponse> List(const std::string& dataset);
  // One page of a ListJobs request (server/job_listing.h); `principal`
  // restricts it to that principal's jobs (empty: every job).
  absl::StatusOr<v1::ListJobsResponse> ListPage(
      const v1::ListJobsRequest& request, const std::string& principal);
  // FAILED_PRECONDITION if the job already ended.
  absl::StatusOr<v1::Job> Cancel(const std::string& id);

  // Curator approval (Grant.approval_above_epsilon). Pending jobs past their
  // expiry are moved to REJECTED (nothing charged) by each of these first.
  // The pending jobs of `dataset` (empty: all), oldest first.
  absl::StatusOr<v1::ListJobsResponse> ListPending(const std::string& dataset);
  // Re-prepares the pending job's stored spec and runs the normal admission
  // (price, filter, cap and charge in one transaction, which also moves the
  // job to QUEUED), then queues it. RESOURCE_EXHAUSTED (nothing charged, the
  // job stays pending) when the budget, cap or the submitter's job limit has
  // no room; FAILED_PRECONDITION unless pending.
  absl::StatusOr<v1::Job> Approve(const std::string& id);
  // PENDING_APPROVAL -> REJECTED with `reason`; nothing charged.
  // FAILED_PRECONDITION unless pending.
  absl::StatusOr<v1::Job> Reject(const std::string& id,
                                 const std::string& reason);
  // Cancels every queued or running job of `dataset` and waits (up to
  // `wait`) until they have ended. Returns how many were cancelled.
  // DEADLINE_EXCEEDED if some job has not stopped in time.
  absl::StatusOr<int64_t> CancelDatasetJobs(const std::string& dataset,
                                            absl::Duration wait);
  // Drops a deleted dataset's decoded rows from the cache.
  void ForgetDataset(int64_t dataset_id) { cache_->Evict(dataset_id); }
  DatasetCache::Stats dataset_cache_stats() const { return cache_->stats(); }
  // FAILED_PRECONDITION unless the job SUCCEEDED. The reply carries one page
  // of the trace: from point `trace_offset` (0-based), at most
  // `max_trace_points` (0: kMaxTracePointsPerReply; larger values are
  // treated as that) and at most kMaxTraceBytesPerReply bytes of points (at
  // least one), with trace_points_total and next_trace_offset set.
  // INVALID_ARGUMENT for a negative offset or count.
  absl::StatusOr<v1::JobResult> Result(const std::string& id,
                                       int64_t trace_offset = 0,
                                       int64_t max_trace_points = 0);
  // One page of the privatized trace points recorded so far (any state),
  // oldest first: those after step `after_step`, at most
  // kMaxTracePointsPerReply of them and kMaxTraceBytesPerReply bytes (at
  // least one point). Empty when there are no more.
  absl::StatusOr<std::vector<v1::TracePoint>> TracePage(const std::string& id,
                                                        int64_t after_step);

  // Drain: from now on Submit is refused with UNAVAILABLE (nothing is
  // charged); jobs already admitted keep running.
  void BeginDrain();
  // Waits until no admitted job is queued or running, at most `timeout`.
  // Returns whether that happened.
  bool WaitIdle(absl::Duration timeout);

  // Stops accepting jobs, cancels running ones and joins the workers.
  void Shutdown();

 private:
  class TraceRecorder;

  JobManager(storage::Database* db, TraceHub* hub) : db_(db), hub_(hub) {}
  // Submit without the metrics.
  absl::StatusOr<v1::Job> Admit(
      const v1::JobSpec& spec, const std::string& principal, storage::Role role,
      const std::function<void(const std::string&)>& on_id,
      std::optional<int> own_max_active_jobs,
      const std::function<void(const std::string&)>& on_note);
  // Creates `record` PENDING_APPROVAL if `p`'s cost is above the analyst's
  // grant's approval threshold; returns whether it did.
  absl::StatusOr<bool> MaybeCreatePending(
      const PreparedJob& p, storage::JobRecord& record,
      std::optional<int> own_max_active_jobs,
      const std::function<void(const std::string&)>& on_note);
  void Execute(const std::string& job_id, std::shared_ptr<PreparedJob> prepared,
               const jobs::CancellationToken& token);
  absl::Status RunJob(const std::string& job_id, const PreparedJob& prepared,
                      const jobs::CancellationToken& token);
  absl::StatusOr<v1::Job> ToProto(const storage::JobRecord& record);
  // The rows of a live dataset, from the cache or the database. NOT_FOUND
  // once the dataset is deleted, cached or not.
  absl::StatusOr<std::shared_ptr<const Dataset>> LoadRows(
      const storage::DatasetRecord& record);
  // A pool job's dataset for Run(): no rows, the dataset's public
  // dimension, label kind and classes (the rows are read on the pool
  // through SolveContext::remote_rows). NOT_FOUND once the dataset is
  // deleted; FAILED_PRECONDITION if its placement changed since admission.
  absl::StatusOr<std::shared_ptr<const Dataset>> PoolJobRows(
      const PreparedJob& prepared);
  // A dry run's rows: the public dummy's, or synthetic ones drawn from the
  // dataset's public schema (server/synthetic_dataset.h). Never the
  // dataset's own rows.
  absl::StatusOr<std::shared_ptr<const Dataset>> DryRunRows(
      const PreparedJob& prepared);
  void PublishJob(const std::string& job_id);
  // Moves pending jobs past their expiry to REJECTED.
  void ExpirePendingJobs();
  // Hands an admitted (charged or free) job to the runner; on failure (only
  // at shutdown) marks it FAILED.
  absl::Status Enqueue(jobs::JobRunner::Ticket ticket,
                       std::shared_ptr<ConcurrencyLimiter::Slot> slot,
                       std::shared_ptr<PreparedJob> prepared,
                       const std::string& id);
  static absl::StatusOr<std::vector<v1::TracePoint>> ParseTrace(
      const std::string& id, std::vector<storage::TraceEntry> entries);

  Options options_;
  std::atomic<bool> draining_{false};
  // Jobs handed to the runner and not yet ended.
  std::atomic<int64_t> active_{0};
  // The last job handle given to the worker pool (unique among its open
  // jobs).
  std::atomic<uint64_t> pool_jobs_{0};
  storage::Database* db_;
  TraceHub* hub_;
  std::unique_ptr<JobAdmission> admission_;
  std::unique_ptr<DatasetCache> cache_;
  std::unique_ptr<jobs::JobRunner> runner_;
  std::unique_ptr<ConcurrencyLimiter> active_jobs_;
};

}  // namespace dpopt::server

#endif  // DPOPT_SERVER_JOB_MANAGER_H_
