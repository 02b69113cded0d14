// The privacy ledger: an append-only list of charges per dataset.
//
// There is no API to change or remove a charge, and SQLite triggers refuse
// UPDATE and DELETE on ledger rows (FAILED_PRECONDITION), so a charge stays
// charged whatever happens to its job. Cost blobs are opaque to storage: the
// privacy filter (core/privacy) produces and interprets them.
//
// Obtain the ledger from Database::ledger(). Thread-safe.
#ifndef DPOPT_STORAGE_LEDGER_H_
#define DPOPT_STORAGE_LEDGER_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "storage/access_store.h"
#include "storage/dataset_store.h"
#include "storage/job_store.h"

namespace dpopt::storage {

class Connection;
class Database;

struct ChargeRequest {
  std::string dataset;     // dataset name
  std::string event_json;  // the DP event charged (non-empty)
  std::string accountant;  // which accountant priced it (non-empty)
  std::string cost_blob;   // opaque, from the privacy filter (non-empty)
  double epsilon = 0;      // display values; finite, >= 0
  double delta = 0;        // in [0, 1]
  std::string principal;
  std::string note;
  // `principal` is an analyst: the dataset must still be granted to it,
  // re-checked inside the admission transaction (a grant revoked after the
  // job was prepared admits nothing); NOT_FOUND, like a dataset it cannot
  // see, if it is not.
  bool require_grant = false;

  // INVALID_ARGUMENT naming the offending field.
  absl::Status Validate() const;
};

struct LedgerEntry {
  int64_t seq = 0;  // global, increasing in charge order
  std::string dataset;
  std::string job_id;
  std::string event_json;
  std::string accountant;
  std::string cost_blob;
  double epsilon = 0;
  double delta = 0;
  std::string principal;
  std::string note;
  int64_t created_at_micros = 0;
};

// Decides whether the new charge may be appended, given the dataset and the
// cost blobs of its existing charges: every blob in seq order, or, once a
// CostFolder is installed, their folded sum (one blob; none if there is no
// charge yet). Return OK to admit; any other status (RESOURCE_EXHAUSTED for
// "over budget", ...) refuses the charge and is returned to the caller
// unchanged.
// REQUIRES: must not call back into the Database (it runs under its lock).
using AdmitFn = std::function<absl::Status(
    const DatasetRecord& dataset, const std::vector<std::string>& prior_costs)>;

// Folds cost blobs of `dataset` into one blob holding their exact sum, such
// that any admission rule gives the same answer on the fold as on the blobs
// (privacy::PrivacyFilter::Fold). Must be deterministic and must not call
// back into the Database. Errors (DATA_LOSS for corrupt blobs) are returned
// to the caller.
using CostFolder = std::function<absl::StatusOr<std::string>(
    const DatasetRecord& dataset, const std::vector<std::string>& costs)>;

struct LedgerSnapshot {
  DatasetRecord dataset;
  std::vector<LedgerEntry> entries;  // seq order
};

// What a budget display needs, without the charges themselves.
struct LedgerTotals {
  DatasetRecord dataset;
  int64_t charges = 0;             // number of charges of the dataset
  std::vector<std::string> costs;  // their cost blobs, or their fold
  int64_t principal_charges = 0;   // ... of those, `principal`'s
  std::vector<std::string> principal_costs;
};

// The admission rule, the one place it is written: `admit` over every
// charge of the dataset (prior.costs) under the dataset's budget; then, if
// `grant` caps the principal's epsilon, `admit` over the principal's own
// charges (prior.principal_costs) with the dataset's epsilon budget replaced
// by the cap (a refusal then names the cap). The admission transaction
// (ChargeAndCreateJob) and the estimate both call it, so they agree.
absl::Status ApplyAdmissionRule(const AdmitFn& admit,
                                const DatasetRecord& dataset,
                                const LedgerTotals& prior,
                                const std::optional<GrantRecord>& grant,
                                absl::string_view principal);

class Ledger {
 public:
  Ledger(const Ledger&) = delete;
  Ledger& operator=(const Ledger&) = delete;

  // Admission and charge in ONE `BEGIN IMMEDIATE` transaction: loads the
  // dataset and the costs of all its charges (their fold, see
  // SetCostFolder) and applies ApplyAdmissionRule (the dataset's budget,
  // then the principal's cap if its grant sets one); if it admits, inserts
  // `job` (state QUEUED) and appends the charge referencing it, then commits
  // with synchronous=FULL, so the charge is durable before this returns.
  // Concurrent calls, from this or other Database handles on the same file,
  // are serialized, so an admit rule over `existing` cannot be overspent.
  // Concurrent calls on one handle share that transaction and its commit
  // (storage/group_commit.h), each under a savepoint of its own, admitted
  // one after the other over the charges before it, and return only once
  // it has committed.
  // Returns the appended entry (its job_id is the created job's id,
  // generated if job.id was empty).
  // Errors: INVALID_ARGUMENT (bad charge or job; charge.dataset !=
  // job.dataset); NOT_FOUND (dataset; or charge.require_grant and the
  // principal holds no grant on it); FAILED_PRECONDITION (public dataset:
  // it has no budget); ALREADY_EXISTS (job id taken); UNAVAILABLE (database
  // busy); DATA_LOSS (a stored charge is corrupt); `admit`'s own status.
  // On any error nothing is written.
  absl::StatusOr<LedgerEntry> ChargeAndCreateJob(const ChargeRequest& charge,
                                                 const JobRecord& job,
                                                 const AdmitFn& admit);

  // Approval of a job created PENDING_APPROVAL: in ONE `BEGIN IMMEDIATE`
  // transaction, checks that job `job_id` (of charge.dataset) is still
  // pending and not expired, applies the admission rule exactly as
  // ChargeAndCreateJob, appends the charge referencing the job and moves it
  // to QUEUED; durable before this returns. Errors: those of
  // ChargeAndCreateJob; NOT_FOUND (no such job); FAILED_PRECONDITION (not
  // pending, or expired: nothing written).
  absl::StatusOr<LedgerEntry> ChargeAndQueuePendingJob(
      const ChargeRequest& charge, absl::string_view job_id,
      const AdmitFn& admit);

  // All charges of `dataset` in seq order. NOT_FOUND for an unknown dataset.
  absl::StatusOr<std::vector<LedgerEntry>> List(absl::string_view dataset);

  // The dataset record and its charges, read in one transaction (a
  // consistent view for budget displays and estimates).
  absl::StatusOr<LedgerSnapshot> Snapshot(absl::string_view dataset);

  // The dataset record, its number of charges and their costs (folded once
  // a CostFolder is installed), and the same for `principal`'s own charges
  // (empty principal: none), read in one transaction.
  absl::StatusOr<LedgerTotals> Totals(absl::string_view dataset,
                                      absl::string_view principal = "");

  // The sequence number of the last charge of any dataset (0 if none): the
  // value the high-water mark (ledger_mark.h) tracks.
  absl::StatusOr<int64_t> LastSeq();

  // Installs the folder used by ChargeAndCreateJob and Totals. With it, the
  // ledger keeps, per dataset, the fold of the charges up to a sequence
  // number (and one per principal), and extends it inside each transaction
  // with the rows after that number only: admission then costs time in the
  // number of charges since the last look, not in the length of the ledger.
  // Sound because the ledger is append-only (triggers), sequence numbers
  // are AUTOINCREMENT and writers are serialized, so the rows any
  // transaction sees are exactly those up to some seq; only rows read from
  // the database (committed by someone, or read under the write lock) ever
  // enter the fold, and every handle (process) keeps its own. Call once,
  // before concurrent use. (A fold may also hold the charges of earlier
  // units of a shared transaction, read under its write lock; should that
  // transaction roll back, ForgetFolds drops every fold before anyone else
  // can read them.)
  void SetCostFolder(CostFolder folder);

  // Drops every cached fold (the next admission folds from the ledger
  // again). Called with the connection lock held.
  void ForgetFolds();

 private:
  friend class Database;
  explicit Ledger(Database& db) : db_(db) {}

  struct Folded {
    int64_t charges = 0;
    std::string cost;  // empty while there is no charge
  };
  struct DatasetFold {
    int64_t through_seq = 0;  // covers every charge with seq <= this
    Folded all;
    absl::flat_hash_map<std::string, Folded> by_principal;
  };

  // The charges of `dataset` with seq > after_seq, in seq order; DATA_LOSS
  // for a corrupt row.
  static absl::StatusOr<std::vector<LedgerEntry>> ListLocked(
      Connection& conn, const DatasetRecord& dataset, int64_t after_seq);
  static absl::StatusOr<int64_t> LastSeqLocked(Connection& conn);
  // Appends `charge` against `dataset` for job `job_id` (caller holds the
  // write transaction and has applied the admission rule).
  // The admission check both charging paths run inside their transaction:
  // the dataset is live and private, the grant (when required), the prior
  // costs and `admit`. Returns the dataset to charge.
  absl::StatusOr<DatasetRecord> AdmitLocked(Connection& conn,
                                            const ChargeRequest& charge,
                                            const AdmitFn& admit);
  static absl::StatusOr<LedgerEntry> AppendChargeLocked(
      Connection& conn, const DatasetRecord& dataset,
      const ChargeRequest& charge, absl::string_view job_id);
  // The fold of every charge of `dataset` visible in `conn`'s transaction.
  absl::StatusOr<DatasetFold> FoldLocked(Connection& conn,
                                         const DatasetRecord& dataset);
  // Totals of `dataset` (every blob, or the fold) without its `dataset`
  // field, which the caller already holds.
  absl::StatusOr<LedgerTotals> CostsLocked(Connection& conn,
                                           const DatasetRecord& dataset,
                                           absl::string_view principal);

  Database& db_;
  CostFolder folder_;
  absl::Mutex mu_;
  absl::flat_hash_map<int64_t, DatasetFold> folds_ ABSL_GUARDED_BY(mu_);
};

}  // namespace dpopt::storage

#endif  // DPOPT_STORAGE_LEDGER_H_
