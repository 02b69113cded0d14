// storage::Database: one SQLite file holding datasets, the privacy ledger and
// jobs. Opening creates and migrates the file as needed.
//
//   ASSIGN_OR_RETURN(std::unique_ptr<Database> db,
//                    Database::Open("/var/lib/dpopt/dpopt.db"));
//   ASSIGN_OR_RETURN(DatasetRecord rec, db->datasets().Import(opts, bytes));
//   ASSIGN_OR_RETURN(LedgerEntry e,
//                    db->ledger().ChargeAndCreateJob(charge, job, admit));
//
// Thread safety: all methods (of Database and of its stores) may be called
// concurrently; one connection is shared under a mutex. Several Database
// objects (or processes) may open the same file; writes that must not
// interleave use BEGIN IMMEDIATE and wait up to Options::busy_timeout_ms.
#ifndef DPOPT_STORAGE_DATABASE_H_
#define DPOPT_STORAGE_DATABASE_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "storage/access_store.h"
#include "storage/checkpointer.h"
#include "storage/dataset_store.h"
#include "storage/deletion_record.h"
#include "storage/group_commit.h"
#include "storage/job_store.h"
#include "storage/ledger.h"
#include "storage/ledger_mark.h"
#include "storage/sqlite.h"

namespace dpopt::storage {

struct DatabaseOptions {
  // How long a write waits for another connection's write lock before
  // failing with UNAVAILABLE.
  int busy_timeout_ms = 5000;
  // Create the file if missing (else NOT_FOUND).
  bool create_if_missing = true;
  // Rows per stored block at import; 1 <= block_rows <= 1 << 20.
  int block_rows = 4096;
  // A commit that leaves at least this many frames in the WAL wakes the
  // background checkpointer (CheckpointerOptions::request_frames). >= 1.
  int64_t checkpoint_request_frames = 1000;
  // The ledger's high-water mark file (storage/ledger_mark.h); empty (the
  // default): none, for tools and tests that do not charge. When set, Open
  // refuses (FAILED_PRECONDITION) a database whose ledger ends below the
  // mark, creates the mark if the file is missing, catches it up if it lags,
  // and Database::ledger_mark() is the mark to advance after each charge.
  std::string ledger_mark_path;
  // DANGER. Open a database whose ledger is behind its mark (or whose mark
  // is unreadable) anyway: the charges missing from the ledger are
  // forgotten, so their privacy budget may be spent again. The rollback is
  // appended to the audit log first, then the mark is reset to the ledger.
  bool allow_ledger_rollback = false;
  // The deletion record (storage/deletion_record.h); empty (the default):
  // none. When set, Open erases every recorded dataset that is still live
  // in the file (a restored older backup) before it returns, with an audit
  // record each, and DatasetStore::Delete records each deletion there.
  std::string deletion_record_path;
  // How long a deletion retries truncating a WAL that a reader keeps busy
  // before it returns with the truncation pending (the checkpointer then
  // retries in the background). >= 0.
  absl::Duration wal_truncate_wait = absl::Seconds(5);

  absl::Status Validate() const;
};

class Database {
 public:
  using Options = DatabaseOptions;

  // Opens `path` (created if missing and allowed), enables WAL, foreign keys
  // and synchronous=FULL, applies pending schema migrations, checks the
  // ledger against options.ledger_mark_path (if set), completes the
  // deletions of options.deletion_record_path (if set;
  // DatasetStore::ReapplyDeletions) and starts the background checkpointer
  // (a second connection and thread; commits no longer checkpoint inline),
  // handing it a WAL truncation left pending.
  // Errors: INVALID_ARGUMENT (options); NOT_FOUND (missing file with
  // !create_if_missing); FAILED_PRECONDITION (the file has a newer schema
  // than this build; or its ledger is behind the high-water mark);
  // DATA_LOSS (not a database / corrupt; malformed mark); UNAVAILABLE.
  static absl::StatusOr<std::unique_ptr<Database>> Open(
      const std::string& path, const Options& options = Options());

  Database(const Database&) = delete;
  Database& operator=(const Database&) = delete;
  ~Database();

  DatasetStore& datasets() { return datasets_; }
  Ledger& ledger() { return ledger_; }
  JobStore& jobs() { return jobs_; }
  AccessStore& access() { return access_; }
  // Shares one durable commit among concurrent writes (charges, results,
  // audit records); storage/group_commit.h.
  GroupCommit& group_commit() { return group_commit_; }

  const std::string& path() const { return path_; }
  const Options& options() const { return options_; }

  // The schema version recorded in the file.
  absl::StatusOr<int> SchemaVersion();

  // The high-water mark to advance after each committed charge; nullptr
  // when options.ledger_mark_path is empty.
  LedgerMark* ledger_mark() { return ledger_mark_.get(); }
  const LedgerMarkCheck& ledger_mark_check() const { return mark_check_; }

  // The deletion record; nullptr when options.deletion_record_path is
  // empty.
  DeletionRecord* deletion_record() { return deletion_record_.get(); }
  // The recorded deletions Open found live in the file and erased.
  const std::vector<DeletionEntry>& reapplied_deletions() const {
    return reapplied_deletions_;
  }

  // Runs this database's WAL checkpoints in the background
  // (storage/checkpointer.h); StagedImport pauses it.
  Checkpointer& checkpointer() { return *checkpointer_; }

 private:
  friend class DatasetStore;
  friend class StagedImport;
  friend class Ledger;
  friend class JobStore;
  friend class AccessStore;
  friend class GroupCommit;
  friend class DatabaseTestPeer;  // tests only: raw SQL access

  Database(std::string path, const Options& options,
           std::unique_ptr<Connection> conn)
      : path_(std::move(path)),
        options_(options),
        conn_(std::move(conn)),
        datasets_(*this),
        ledger_(*this),
        jobs_(*this),
        access_(*this),
        group_commit_(*this) {}

  // Open's comparison of the ledger with options_.ledger_mark_path.
  absl::Status CheckLedgerMark();

  // Runs fn(Connection&) with the connection lock held; returns its result.
  template <typename Fn>
  auto WithConnection(Fn&& fn) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    return fn(*conn_);
  }

  const std::string path_;
  const Options options_;
  absl::Mutex mu_;
  std::unique_ptr<Connection> conn_ ABSL_GUARDED_BY(mu_);
  DatasetStore datasets_;
  Ledger ledger_;
  JobStore jobs_;
  AccessStore access_;
  GroupCommit group_commit_;
  std::unique_ptr<LedgerMark> ledger_mark_;
  LedgerMarkCheck mark_check_;
  std::unique_ptr<DeletionRecord> deletion_record_;
  std::vector<DeletionEntry> reapplied_deletions_;
  // Declared after conn_: destroyed (its thread stopped) before conn_ closes.
  std::unique_ptr<Checkpointer> checkpointer_;
};

}  // namespace dpopt::storage

#endif  // DPOPT_STORAGE_DATABASE_H_
