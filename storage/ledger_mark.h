// The ledger's high-water mark, kept OUTSIDE the database.
//
// Restoring an old backup (or copying, recreating or swapping the database
// file) rolls the append-only ledger back: the charges committed after the
// backup disappear, and with them the budget they spent, which could then be
// spent a second time on the same people's data. To notice, the server
// records the highest ledger sequence number it has committed in a sidecar
// file beside the database (default `<db>.ledger-mark`), and refuses to open
// a database whose ledger ends below it (storage::Database, option
// `ledger_mark_path`), unless the curator explicitly accepts the rollback.
//
// File format: one line, "dpopt-ledger-mark v1 seq=N\n". It is replaced
// atomically and durably (write a temporary file, fsync, rename, fsync the
// directory), so after any crash it holds an old or a new value, never a
// torn one; anything else in the file is DATA_LOSS.
//
// Crash ordering (why the mark may lag the ledger but never lead it): the
// admission path advances the mark AFTER the charge's transaction commits
// and BEFORE the job is queued (server/job_manager.cc). A crash between the
// two leaves the mark one charge behind a ledger that contains the charge;
// the next start finds ledger >= mark (fine) and catches the mark up before
// serving. A mark written before the commit could instead end up ahead of a
// ledger that never got the charge, and the server would refuse its own,
// unrestored database. Since a job reads no row before its charge is in the
// mark, every charge behind a released result is covered by the mark.
//
// Thread-safe. Several processes on one database are kept out by the
// database lock (storage/file_util.h), not by this class.
#ifndef DPOPT_STORAGE_LEDGER_MARK_H_
#define DPOPT_STORAGE_LEDGER_MARK_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace dpopt::storage {

// What Open found when it compared the ledger with its high-water mark.
struct LedgerMarkCheck {
  bool checked = false;    // a mark path was configured
  int64_t ledger_seq = 0;  // the ledger's last sequence number (0: empty)
  std::optional<int64_t> mark_seq;  // the file's value; nullopt: no file
  bool mark_unreadable = false;     // the file was malformed (and forced)
  bool rolled_back = false;  // ledger < mark, opened by allow_ledger_rollback
};

class LedgerMark {
 public:
  // `db_path` + ".ledger-mark".
  static std::string DefaultPath(const std::string& db_path) {
    return db_path + ".ledger-mark";
  }
  // The recorded sequence number; nullopt if the file does not exist.
  // DATA_LOSS if it exists but is not a well-formed mark.
  static absl::StatusOr<std::optional<int64_t>> Read(const std::string& path);
  // Replaces the file with `seq` (atomically, durably). REQUIRES: seq >= 0.
  static absl::Status Write(const std::string& path, int64_t seq);

  // A mark whose file currently records `current`.
  LedgerMark(std::string path, int64_t current)
      : path_(std::move(path)), current_(current) {}

  // Durably records `seq` if it is above the current mark; a no-op
  // otherwise (concurrent charges may advance it out of order). When this
  // returns OK the file records at least `seq`. Group commit: while one
  // thread writes the file, the others wait, and the next write records
  // the highest seq asked for meanwhile, so concurrent charges share one
  // durable replacement instead of queueing for one each.
  absl::Status Advance(int64_t seq) ABSL_LOCKS_EXCLUDED(mu_);

  int64_t current() const ABSL_LOCKS_EXCLUDED(mu_);
  const std::string& path() const { return path_; }

 private:
  const std::string path_;
  mutable absl::Mutex mu_;
  int64_t current_ ABSL_GUARDED_BY(mu_);
  // The highest seq any Advance has asked for.
  int64_t wanted_ ABSL_GUARDED_BY(mu_) = 0;
  // A thread is replacing the file (without holding mu_).
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace dpopt::storage

#endif  // DPOPT_STORAGE_LEDGER_MARK_H_
