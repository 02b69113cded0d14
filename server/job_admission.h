// Admission of a job: validate a spec, calibrate and price it from public
// metadata only, estimate it against the ledger, and charge it in the same
// ledger transaction that creates the job (docs/architecture.md, invariant
// "charge before data"). Nothing here reads a private row; JobManager runs
// what this admitted.
#ifndef DPOPT_SERVER_JOB_ADMISSION_H_
#define DPOPT_SERVER_JOB_ADMISSION_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "core/optim/algorithm.h"
#include "core/privacy/privacy_filter.h"
#include "dpopt/v1/dpopt.pb.h"
#include "server/dataset_manager.h"
#include "server/spec_translation.h"
#include "storage/database.h"

namespace dpopt::server {

// Everything a job needs that was decided before it was charged.
struct PreparedJob {
  v1::JobSpec spec;
  // Who submitted it (for the log).
  std::string principal;
  // The submitter is an analyst: ChargeAndCreate re-checks, inside the
  // admission transaction, that the dataset is still granted to it (the
  // check before Prepare may be stale by then).
  bool requires_grant = false;
  TranslatedJob job;
  storage::DatasetRecord dataset;
  bool has_eval = false;
  storage::DatasetRecord eval_dataset;
  optim::Calibration calibration;
  // Public upper bounds on the job's trace (server/job_limits.h): points,
  // and bytes as stored.
  int64_t trace_points_bound = 0;
  int64_t trace_bytes_bound = 0;
  v1::PrivacyCost cost;
  // Filled for private datasets only.
  std::unique_ptr<privacy::PrivacyFilter> filter;
  privacy::PricedCharge priced;
  // A dry run (spec.dry_run): cost.charged is false (cost keeps what the
  // real job would be charged), nothing touches the ledger, and the job runs
  // on `dummy` (a public dataset attached to the private one) when there is
  // one, else on rows generated from the dataset's public schema
  // (server/synthetic_dataset.h). `synthetic_source` says which.
  bool dry_run = false;
  std::optional<storage::DatasetRecord> dummy;
  std::string synthetic_source;
  // A job that reads its rows on the worker pool (spec.execution =
  // EXECUTION_MPI_POOL, not a dry run): the dataset's id on the pool
  // (DatasetManager::PoolDatasetId) and the rank count it was placed with.
  // Empty: the rows are read in this process.
  std::string pool_dataset_id;
  int pool_ranks = 0;
};

v1::Calibration CalibrationToProto(const optim::Calibration& c);

class JobAdmission {
 public:
  // The server's limits on what it admits (JobManager::Options).
  struct Limits {
    double max_job_work = 0;
    // 0 = no limit.
    int64_t max_trace_bytes_per_job = 0;
  };
  // REQUIRES: db outlives the admission; env's pointers outlive it too.
  JobAdmission(storage::Database* db, ExecutionEnvironment env,
               const Limits& limits);

  // Translates, checks and calibrates `spec` against the dataset's public
  // metadata and prices it under the dataset's filter. Charges nothing. A
  // dry run is prepared exactly like the real job, then marked uncharged
  // and given its synthetic source.
  absl::StatusOr<PreparedJob> Prepare(const v1::JobSpec& spec) const;

  // Prepare, then the admission rule on the current ledger (with the
  // principal's cap); charges nothing.
  absl::StatusOr<v1::JobEstimate> Estimate(const v1::JobSpec& spec,
                                           const std::string& principal) const;

  enum class Outcome {
    kQueued,  // created (and charged, if priced): the job may run
    // Charged durably but the ledger's high-water mark could not move: the
    // job was marked FAILED and must not run.
    kChargedNotStarted,
  };
  // Creates `record` (state QUEUED) and, for a charged job, appends its
  // charge in the same transaction after the admission rule, then advances
  // the ledger's high-water mark. RESOURCE_EXHAUSTED over the budget or cap;
  // NOT_FOUND if `prepared.requires_grant` and the grant was revoked since
  // (nothing written in either case).
  absl::StatusOr<Outcome> ChargeAndCreate(
      const PreparedJob& prepared, const storage::JobRecord& record) const;
  // The approval of job `job_id`, created PENDING_APPROVAL from `prepared`'s
  // spec: the admission rule and the charge in one transaction that also
  // moves the job to QUEUED (storage::Ledger::ChargeAndQueuePendingJob),
  // then the ledger's high-water mark. Same outcomes and errors as
  // ChargeAndCreate; FAILED_PRECONDITION if the job is no longer pending.
  absl::StatusOr<Outcome> ChargePending(const PreparedJob& prepared,
                                        const std::string& job_id) const;

 private:
  absl::StatusOr<PreparedJob> PrepareRealJob(const v1::JobSpec& spec) const;
  // For spec.execution = EXECUTION_MPI_POOL: FAILED_PRECONDITION unless this
  // server has a pool, the job type reads its rows there and the dataset is
  // placed on the pool with its current rank count; then sets
  // p.pool_dataset_id and p.pool_ranks. Reads no row.
  absl::Status CheckWorkerPool(PreparedJob& p) const;
  absl::StatusOr<v1::JobEstimate> EstimatePrepared(
      const PreparedJob& p, const std::string& principal) const;
  storage::ChargeRequest ChargeOf(const PreparedJob& p) const;
  // Advances the ledger's high-water mark past `seq`; on failure marks job
  // `job_id` FAILED (charged, not run) and returns kChargedNotStarted.
  Outcome AdvanceMark(int64_t seq, const std::string& job_id) const;

  storage::Database* db_;
  ExecutionEnvironment env_;
  Limits limits_;
};

}  // namespace dpopt::server

#endif  // DPOPT_SERVER_JOB_ADMISSION_H_
