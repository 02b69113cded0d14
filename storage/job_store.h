// Jobs and their traces. Spec, calibration, cost, result, evaluation and
// trace payloads are opaque bytes to storage (serialized protos, owned by the
// layers above).
//
// State machine (anything else is FAILED_PRECONDITION):
//   PENDING_APPROVAL -> QUEUED (approved: Ledger::ChargeAndQueuePendingJob)
//                     | REJECTED | CANCELLED
//   QUEUED  -> RUNNING | CANCELLED | FAILED
//   RUNNING -> SUCCEEDED | FAILED | CANCELLED
// SUCCEEDED, FAILED, CANCELLED and REJECTED are terminal.
//
// Obtain the store from Database::jobs(). Thread-safe.
#ifndef DPOPT_STORAGE_JOB_STORE_H_
#define DPOPT_STORAGE_JOB_STORE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace dpopt::storage {

class Connection;
class Database;
struct DatasetRecord;

enum class JobState {
  kQueued = 0,
  kRunning = 1,
  kSucceeded = 2,
  kFailed = 3,
  kCancelled = 4,
  // Waiting for a curator's approval; not charged, never runs unless
  // approved.
  kPendingApproval = 5,
  // Rejected by a curator or expired while pending; nothing charged.
  kRejected = 6,
};

// "QUEUED", "RUNNING", "SUCCEEDED", "FAILED", "CANCELLED",
// "PENDING_APPROVAL", "REJECTED".
absl::string_view JobStateName(JobState state);
bool IsTerminal(JobState state);
bool IsLegalTransition(JobState from, JobState to);

struct JobRecord {
  // [A-Za-z0-9._-]{1,64}. Leave empty on creation to get a random id.
  std::string id;
  std::string dataset;    // dataset name
  std::string principal;  // who submitted the job
  JobState state = JobState::kQueued;
  std::string message;      // human-readable status (e.g. why it failed)
  std::string spec;         // opaque
  std::string calibration;  // opaque
  std::string cost;         // opaque
  int64_t steps_done = 0;
  int64_t steps_total = 0;
  std::string result;              // opaque; set by SetResult
  std::string evaluation;          // opaque; set by SetResult
  int64_t created_at_micros = 0;   // set by storage
  int64_t started_at_micros = 0;   // set on -> RUNNING; 0 before
  int64_t finished_at_micros = 0;  // set on -> terminal; 0 before
  int64_t rowid =
      0;  // set by storage; the listing order's tie
          // breaker (see JobCursor)  // A dry run (JobSpec.dry_run): where its
          // synthetic rows come from, as
  // shown to the analyst; empty for every other job.
  std::string synthetic_source;
  // A job created PENDING_APPROVAL: when it expires (unix micros); 0 for
  // every other job.
  int64_t approval_expires_at_micros = 0;
};

struct TraceEntry {
  int64_t step = 0;
  std::string data;  // opaque
};

// A position in the listing order (created_at_micros, rowid): List returns
// the jobs strictly after it (before it with newest_first).
struct JobCursor {
  int64_t created_at_micros = 0;
  int64_t rowid = 0;
};

struct JobFilter {
  std::string dataset;            // empty: any dataset
  std::string principal;          // empty: any principal
  std::optional<JobState> state;  // unset: any state
  // Paging (keyset, so a page costs O(limit log n) whatever its position):
  // at most `limit` jobs (0: all), after `after` in the listing order.
  int64_t limit = 0;
  std::optional<JobCursor> after;
  // Newest first (created_at descending) instead of oldest first.
  bool newest_first = false;
  // Leave JobRecord::result empty (listings do not need the model).
  bool without_result = false;
};

// True iff `id` matches [A-Za-z0-9._-]{1,64}.
bool IsValidJobId(absl::string_view id);

class JobStore {
 public:
  JobStore(const JobStore&) = delete;
  JobStore& operator=(const JobStore&) = delete;

  // Creates a job that needs no charge: on a PUBLIC dataset; a dry run
  // (synthetic_source non-empty: it reads no row of the dataset); or a job
  // PENDING_APPROVAL (charged when approved, by
  // Ledger::ChargeAndQueuePendingJob). Any other job on a private dataset can
  // only be created by Ledger::ChargeAndCreateJob, together with its charge.
  // Returns the stored record (id filled in if it was empty, created_at
  // set).
  // REQUIRES: job.state == kQueued (or kPendingApproval), steps_done == 0,
  // steps_total >= 0.
  // Errors: INVALID_ARGUMENT (bad id or fields); NOT_FOUND (dataset);
  // FAILED_PRECONDITION (private dataset); ALREADY_EXISTS (id taken).
  absl::StatusOr<JobRecord> Create(const JobRecord& job);

  // NOT_FOUND if there is no such job.
  absl::StatusOr<JobRecord> Get(absl::string_view id);

  // Jobs matching `filter`, oldest first (or newest first), paged as the
  // filter says. INVALID_ARGUMENT if limit < 0.
  absl::StatusOr<std::vector<JobRecord>> List(const JobFilter& filter = {});

  // Moves the job to `to`, recording `message`; sets started_at on RUNNING
  // and finished_at on terminal states.
  // Errors: NOT_FOUND; FAILED_PRECONDITION for an illegal transition
  // (including any transition out of a terminal state).
  absl::Status UpdateState(absl::string_view id, JobState to,
                           absl::string_view message = "");
  // UpdateState only if the job is still in `from` when the transaction
  // reads it (a move that races another one, e.g. cancelling a job while a
  // curator approves it). ABORTED, and nothing written, if it is not.
  absl::Status UpdateStateFrom(absl::string_view id, JobState from, JobState to,
                               absl::string_view message = "");

  // Progress and trace writes use relaxed durability (see
  // Transaction::Durability::kRelaxed): atomic and crash-safe, but not
  // fsynced per call, so a runner can record every step cheaply. The last
  // records may be lost on power failure; charges and state changes are
  // always fully durable.

  // QUEUED -> RUNNING (sets started_at), with relaxed durability: a RUNNING
  // state lost to a power failure leaves the job QUEUED, which restart
  // recovery (FailInterruptedJobs) ends exactly as it ends a RUNNING one, so
  // the job's start costs no fsync. Errors: those of UpdateState.
  absl::Status MarkRunning(absl::string_view id);

  // Records progress of a RUNNING job.
  // Errors: NOT_FOUND; FAILED_PRECONDITION if the job is not RUNNING;
  // INVALID_ARGUMENT if steps_done < 0.
  absl::Status UpdateProgress(absl::string_view id, int64_t steps_done);

  // UpdateProgress plus AppendTrace of every entry in `trace`, in one
  // transaction (all or nothing). Same errors as both.
  absl::Status RecordProgress(absl::string_view id, int64_t steps_done,
                              const std::vector<TraceEntry>& trace);

  // Atomically stores the result and evaluation and moves RUNNING ->
  // SUCCEEDED, fully durable (in a commit it may share with concurrent
  // durable writes, storage/group_commit.h); with `steps_done` >= 0 also
  // records it, and appends `trace` (the job's last trace records), in the
  // same transaction. Errors: NOT_FOUND; FAILED_PRECONDITION if not
  // RUNNING; those of RecordProgress for `trace` (nothing written on any
  // error).
  absl::Status SetResult(absl::string_view id, absl::string_view result,
                         absl::string_view evaluation, int64_t steps_done = -1,
                         const std::vector<TraceEntry>& trace = {});

  // Appends one trace record. Errors: NOT_FOUND; ALREADY_EXISTS if `step`
  // was already recorded for the job; INVALID_ARGUMENT if step < 0.
  absl::Status AppendTrace(absl::string_view id, int64_t step,
                           absl::string_view data);

  // Trace records with step > after_step, in step order. NOT_FOUND if there
  // is no such job.
  absl::StatusOr<std::vector<TraceEntry>> ListTrace(absl::string_view id,
                                                    int64_t after_step = -1);

  // One page of a job's trace records, in step order: those with step >
  // `after_step`, skipping the first `offset` of them, at most `max_entries`
  // (0: no count limit), and no more than fit in `max_bytes` of data (0: no
  // byte limit; the page's first record is returned even when larger).
  // `total` is the job's number of records. NOT_FOUND if there is no such
  // job; INVALID_ARGUMENT for negative offset, max_entries or max_bytes.
  struct TracePageQuery {
    int64_t after_step = -1;
    int64_t offset = 0;
    int64_t max_entries = 0;
    int64_t max_bytes = 0;
  };
  struct TracePage {
    std::vector<TraceEntry> entries;
    int64_t total = 0;
  };
  absl::StatusOr<TracePage> ListTracePage(absl::string_view id,
                                          const TracePageQuery& query);

  // Restart recovery: every QUEUED or RUNNING job becomes FAILED with
  // `message` (its charge, if any, stays in the ledger). Returns how many
  // jobs were failed. Call once at server start, before accepting work.
  absl::StatusOr<int> FailInterruptedJobs(absl::string_view message);

 private:
  friend class Database;
  friend class Ledger;
  explicit JobStore(Database& db) : db_(db) {}

  // Inserts `job` for `dataset` on `conn` (caller holds the lock and, for
  // charged jobs, the write transaction). Fills id and created_at.
  static absl::Status InsertLocked(Connection& conn,
                                   const DatasetRecord& dataset,
                                   JobRecord& job);
  static absl::StatusOr<JobRecord> GetLocked(Connection& conn,
                                             absl::string_view id);
  // The job's id and state only (the other fields empty): what the state
  // checks of progress, trace and result writes need, without reading the
  // spec and result blobs. NOT_FOUND if there is no such job.
  static absl::StatusOr<JobRecord> GetStateLocked(Connection& conn,
                                                  absl::string_view id);
  // Checks and writes `job`'s move to `to` (caller holds the write
  // transaction).
  static absl::Status TransitionLocked(Connection& conn, const JobRecord& job,
                                       JobState to, absl::string_view message);

  Database& db_;
};

}  // namespace dpopt::storage

#endif  // DPOPT_STORAGE_JOB_STORE_H_
