// Online backup and offline restore of a dpopt database.
//
//   dpopt-server backup --db=PATH --to=FILE     while the server runs
//   dpopt-server restore --from=FILE --db=PATH  with the server stopped
//
// A backup is a consistent snapshot taken with SQLite's online backup API
// (one read transaction; the server keeps admitting and running jobs). It is
// a single self-contained file (journal_mode=DELETE), verified with
// `PRAGMA integrity_check` before it gets its final name.
//
// A restore rolls the privacy ledger back to the backup's charges. The
// ledger high-water mark beside the database (storage/ledger_mark.h) is
// deliberately left alone, so the next start refuses a restored ledger that
// is behind it unless the curator accepts that the missing charges' budget
// may be spent again (docs/backup.md). Deletions are not rolled back: the
// deletion record beside the database (storage/deletion_record.h) erases a
// dataset deleted after the backup from the restored copy.
#ifndef DPOPT_STORAGE_BACKUP_H_
#define DPOPT_STORAGE_BACKUP_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "storage/deletion_record.h"

namespace dpopt::storage {

struct DatabaseFileInfo {
  std::string path;
  int schema_version = 0;
  int64_t ledger_seq = 0;  // the last charge's sequence number (0: none)
  int64_t charges = 0;     // number of ledger entries
  int64_t jobs = 0;
  int64_t datasets = 0;  // including deleted datasets' tombstones
  int64_t bytes = 0;     // file size
};

// Checks a dpopt database file without changing it (read-only open):
// `PRAGMA integrity_check` must say ok (else DATA_LOSS), the schema version
// must be known to this build (FAILED_PRECONDITION if newer, INVALID_ARGUMENT
// if the file is no dpopt database); returns what it holds.
// REQUIRES: the file is not in WAL mode with a separate -wal file (backups
// made by BackupDatabase are not).
absl::StatusOr<DatabaseFileInfo> InspectDatabaseFile(const std::string& path);

// Online backup of the database at `db_path` into `to_path`, which must not
// exist (ALREADY_EXISTS). Safe while a server uses the database. Writes
// `to_path`.tmp-PID, verifies it with InspectDatabaseFile, then renames it
// into place and syncs the directory: `to_path` appears complete or not at
// all. NOT_FOUND if `db_path` does not exist.
absl::StatusOr<DatabaseFileInfo> BackupDatabase(const std::string& db_path,
                                                const std::string& to_path);

struct RestoreOptions {
  // The backup file to restore (required).
  std::string from;
  // The database to replace (required).
  std::string db_path;
  // The ledger's high-water mark, read (never written) to tell whether the
  // restored ledger is behind it; empty: not checked.
  std::string ledger_mark_path;
  // The deletion record (storage/deletion_record.h); empty: none. Datasets
  // it records that are live in the backup are erased from the restored
  // copy before the copy takes the database's place.
  std::string deletion_record_path;
  // Keep the replaced database files as `db_path`.pre-restore-<UTC
  // time>[-wal]. By default they are removed once the restored copy is in
  // place: they hold every row the database held in plaintext.
  bool keep_old = false;

  // INVALID_ARGUMENT naming a missing path.
  absl::Status Validate() const;
};

struct RestoreReport {
  DatabaseFileInfo restored;  // what is now at db_path
  // With keep_old: the previous database files, renamed.
  std::vector<std::string> moved_aside;
  // Without keep_old: the previous database files, removed.
  std::vector<std::string> removed;
  // Recorded deletions the backup still held live, erased from it.
  std::vector<DeletionEntry> reapplied_deletions;
  // The high-water mark the next start compares with (nullopt: no mark).
  std::optional<int64_t> mark_seq;
};

// Offline restore of the backup options.from to options.db_path. Takes the
// database lock (FAILED_PRECONDITION while a server runs on the database),
// copies the backup beside the database (mode 0600) and verifies the copy;
// if the deletion record lists datasets the copy holds live, opens the copy
// as a Database (which migrates it to this build's schema and erases them
// with secure delete, WAL truncated, each with an audit record); then moves
// the current database files aside, removes the stale `-shm`, renames the
// copy into place (synced) and, unless keep_old, removes the files moved
// aside. Does not touch the high-water mark (see above). A crash before the
// removal can leave the `pre-restore` files behind; nothing else is left
// but the restored database.
absl::StatusOr<RestoreReport> RestoreDatabase(const RestoreOptions& options);

}  // namespace dpopt::storage

#endif  // DPOPT_STORAGE_BACKUP_H_
