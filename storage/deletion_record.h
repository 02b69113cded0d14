// The deletion record: which datasets were deleted, kept OUTSIDE the
// database, beside the ledger's high-water mark (storage/ledger_mark.h).
//
// Deleting a dataset erases its rows from the database file and its WAL
// (storage/dataset_store.h). A backup taken before the deletion still holds
// them, and restoring it would bring the dataset back: its rows readable by
// jobs again, against the curator's decision. So every deletion is also
// written to this file, and opening a database with it
// (DatabaseOptions::deletion_record_path; the server, and `dpopt-server
// restore` before the restored file takes the database's place) purges the
// rows of every recorded dataset that is still live in the file, with the
// deletion path's secure delete and WAL truncation, and appends an audit
// record saying so, before anything is served.
//
// A dataset is identified by its id (AUTOINCREMENT, never reused) and its
// creation time, so a database whose ids mean other datasets (a file from
// another server) is not touched; its name is kept for the audit record.
//
// File format: a line "dpopt-deletions v1", then one line per dataset,
// "dataset id=N created_at=MICROS deleted_at=MICROS name=HEX" (the name in
// lower-case hex). The file is replaced atomically and durably like the
// mark (temporary file, fsync, rename, fsync of the directory; mode 0600);
// anything malformed is DATA_LOSS.
//
// Crash ordering: a deletion is recorded here BEFORE its transaction
// commits. A crash in between leaves a recorded dataset that is still live,
// and the next open completes the deletion; the opposite order could lose
// the record of a committed deletion, and a restore would resurrect it.
//
// Thread-safe. Keep this file with the server, not with the backups
// (restoring it together with an old database would forget deletions).
#ifndef DPOPT_STORAGE_DELETION_RECORD_H_
#define DPOPT_STORAGE_DELETION_RECORD_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace dpopt::storage {

struct DeletionEntry {
  int64_t dataset_id = 0;
  int64_t created_at_micros = 0;
  int64_t deleted_at_micros = 0;
  std::string name;
};

class DeletionRecord {
 public:
  // Beside the ledger's high-water mark: `ledger_mark_path` with its
  // ".ledger-mark" suffix replaced by ".deletions" (so `<db>.deletions` for
  // the default mark), or with ".deletions" appended if it has no such
  // suffix.
  static std::string DefaultPath(const std::string& ledger_mark_path);
  // The recorded deletions, oldest first; empty if the file does not exist.
  // DATA_LOSS if it exists but is malformed.
  static absl::StatusOr<std::vector<DeletionEntry>> Read(
      const std::string& path);
  // Replaces the file with `entries` (atomically, durably, mode 0600).
  static absl::Status Write(const std::string& path,
                            const std::vector<DeletionEntry>& entries);

  // The record at `path` (Read's errors).
  static absl::StatusOr<std::unique_ptr<DeletionRecord>> Load(
      const std::string& path);

  // Durably adds `entry` (replacing an entry of the same dataset id). When
  // this returns OK the file holds it.
  absl::Status Add(const DeletionEntry& entry) ABSL_LOCKS_EXCLUDED(mu_);
  // Durably removes the entry of `dataset_id` (a deletion whose transaction
  // did not commit); OK if there is none.
  absl::Status Remove(int64_t dataset_id) ABSL_LOCKS_EXCLUDED(mu_);

  std::vector<DeletionEntry> entries() const ABSL_LOCKS_EXCLUDED(mu_);
  const std::string& path() const { return path_; }

 private:
  DeletionRecord(std::string path, std::vector<DeletionEntry> entries)
      : path_(std::move(path)), entries_(std::move(entries)) {}

  const std::string path_;
  mutable absl::Mutex mu_;
  std::vector<DeletionEntry> entries_ ABSL_GUARDED_BY(mu_);
};

}  // namespace dpopt::storage

#endif  // DPOPT_STORAGE_DELETION_RECORD_H_
