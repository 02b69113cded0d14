// Small POSIX file helpers for the files that live beside the database: the
// ledger high-water mark (ledger_mark.h), backups (backup.h) and the lock
// that keeps a second server or a restore off a database in use.
#ifndef DPOPT_STORAGE_FILE_UTIL_H_
#define DPOPT_STORAGE_FILE_UTIL_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace dpopt::storage {

// Replaces `path` with `contents` atomically and durably: writes
// `path`.tmp-PID, fsyncs it, renames it over `path` and fsyncs the
// directory. After a crash `path` holds either the old or the new contents,
// never a mix. Errors: UNAVAILABLE (with errno's text).
absl::Status WriteFileDurably(const std::string& path,
                              absl::string_view contents, int mode = 0600);

// Creates `path` empty with mode 0600 (owner only) unless it exists; an
// existing file keeps its mode. Every file the server and its tools create
// beside the database (the database itself, hence its WAL and shared-memory
// index, which SQLite gives the database's mode; backups; restore copies)
// goes through this, whatever the process umask. Errors: UNAVAILABLE.
absl::Status CreatePrivateFile(const std::string& path);

// fsync of `path` (a file) / of the directory holding `path`.
absl::Status FsyncFile(const std::string& path);
absl::Status FsyncParentDirectory(const std::string& path);

// Reads a whole (small) file. NOT_FOUND if it does not exist.
absl::StatusOr<std::string> ReadSmallFile(const std::string& path,
                                          size_t max_bytes = 1 << 16);

// An exclusive advisory lock (flock) on `path`, created if missing, held
// until destruction or process death (SIGKILL included: the kernel releases
// it). Used as `<db>.lock`: one dpopt-server per database, and no restore
// under a running server.
class FileLock {
 public:
  // Non-blocking. FAILED_PRECONDITION if another holder (another process,
  // or another FileLock in this process) has it; UNAVAILABLE if the file
  // cannot be opened.
  static absl::StatusOr<std::unique_ptr<FileLock>> TryAcquire(
      const std::string& path);
  ~FileLock();
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

 private:
  explicit FileLock(int fd) : fd_(fd) {}
  int fd_;
};

// The lock file of a database: `db_path` + ".lock".
inline std::string DatabaseLockPath(const std::string& db_path) {
  return db_path + ".lock";
}

}  // namespace dpopt::storage

#endif  // DPOPT_STORAGE_FILE_UTIL_H_
