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
// may be spent again (docs/backup.md).
#ifndef DPOPT_STORAGE_BACKUP_H_
#define DPOPT_STORAGE_BACKUP_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

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

struct RestoreReport {
  DatabaseFileInfo restored;  // what is now at db_path
  // The previous database files, renamed (not deleted) so nothing is lost:
  // `db_path`.pre-restore-<UTC time>[-wal].
  std::vector<std::string> moved_aside;
  // The high-water mark the next start compares with (nullopt: no mark).
  std::optional<int64_t> mark_seq;
};

// Offline restore of the backup `from` to `db_path`. Takes the database lock
// (FAILED_PRECONDITION while a server runs on `db_path`), verifies a copy of
// `from` made beside `db_path`, moves the current database files aside,
// removes the stale `-shm`, and renames the copy into place (synced).
// Does not touch the high-water mark at `mark_path` (see above).
absl::StatusOr<RestoreReport> RestoreDatabase(const std::string& from,
                                              const std::string& db_path,
                                              const std::string& mark_path);

}  // namespace dpopt::storage

#endif  // DPOPT_STORAGE_BACKUP_H_
