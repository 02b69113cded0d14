#include "storage/backup.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "core/common/status_macros.h"
#include "storage/database.h"
#include "storage/file_util.h"
#include "storage/ledger_mark.h"
#include "storage/schema.h"
#include "storage/sqlite.h"

namespace dpopt::storage {
namespace {

bool Exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

absl::StatusOr<int64_t> FileSize(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot stat ", path, ": ", std::strerror(errno)));
  }
  return static_cast<int64_t>(st.st_size);
}

absl::StatusOr<int64_t> QueryInt(Connection& conn, absl::string_view sql) {
  ASSIGN_OR_RETURN(Statement st, conn.Prepare(sql));
  ASSIGN_OR_RETURN(bool row, st.Step());
  if (!row) return absl::InternalError(absl::StrCat("no row from ", sql));
  return st.ColumnInt64(0);
}

absl::Status CopyFile(const std::string& from, const std::string& to) {
  {
    std::ifstream in(from, std::ios::binary);
    if (!in) {
      return absl::NotFoundError(absl::StrCat("cannot read ", from));
    }
    RETURN_IF_ERROR(CreatePrivateFile(to));
    std::ofstream out(to, std::ios::binary | std::ios::trunc);
    if (!out) return absl::UnavailableError(absl::StrCat("cannot create ", to));
    out << in.rdbuf();
    out.flush();
    if (!out) return absl::UnavailableError(absl::StrCat("cannot write ", to));
  }
  return FsyncFile(to);
}

absl::Status Rename(const std::string& from, const std::string& to) {
  if (::rename(from.c_str(), to.c_str()) != 0) {
    return absl::UnavailableError(absl::StrCat("cannot rename ", from, " to ",
                                               to, ": ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<DatabaseFileInfo> InspectDatabaseFile(const std::string& path) {
  ConnectionOptions options;
  options.read_only = true;
  ASSIGN_OR_RETURN(std::unique_ptr<Connection> conn,
                   Connection::Open(path, options));
  {
    ASSIGN_OR_RETURN(Statement check, conn->Prepare("PRAGMA integrity_check"));
    ASSIGN_OR_RETURN(bool row, check.Step());
    const std::string verdict = row ? check.ColumnText(0) : "no answer";
    if (verdict != "ok") {
      return absl::DataLossError(absl::StrCat(
          path, " fails PRAGMA integrity_check: ", verdict.substr(0, 200)));
    }
  }
  DatabaseFileInfo info;
  info.path = path;
  ASSIGN_OR_RETURN(info.schema_version, ReadSchemaVersion(*conn));
  if (info.schema_version < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, " is not a dpopt database (no schema version)"));
  }
  if (info.schema_version > LatestSchemaVersion()) {
    return absl::FailedPreconditionError(absl::StrCat(
        path, " has schema version ", info.schema_version,
        ", newer than this build supports (", LatestSchemaVersion(), ")"));
  }
  ASSIGN_OR_RETURN(info.ledger_seq,
                   QueryInt(*conn, "SELECT COALESCE(MAX(seq), 0) FROM ledger"));
  ASSIGN_OR_RETURN(info.charges,
                   QueryInt(*conn, "SELECT count(*) FROM ledger"));
  ASSIGN_OR_RETURN(info.jobs, QueryInt(*conn, "SELECT count(*) FROM jobs"));
  ASSIGN_OR_RETURN(info.datasets,
                   QueryInt(*conn, "SELECT count(*) FROM datasets"));
  conn.reset();
  ASSIGN_OR_RETURN(info.bytes, FileSize(path));
  return info;
}

absl::StatusOr<DatabaseFileInfo> BackupDatabase(const std::string& db_path,
                                                const std::string& to_path) {
  if (to_path.empty()) return absl::InvalidArgumentError("--to is required");
  if (Exists(to_path)) {
    return absl::AlreadyExistsError(
        absl::StrCat(to_path, " already exists; back up to a new file name"));
  }
  ConnectionOptions options;
  options.create_if_missing = false;
  ASSIGN_OR_RETURN(std::unique_ptr<Connection> source,
                   Connection::Open(db_path, options));
  const std::string tmp = absl::StrCat(to_path, ".tmp-", ::getpid());
  std::remove(tmp.c_str());
  RETURN_IF_ERROR(source->BackupTo(tmp));
  source.reset();
  absl::StatusOr<DatabaseFileInfo> info = InspectDatabaseFile(tmp);
  if (info.ok()) {
    absl::Status s = FsyncFile(tmp);
    if (s.ok()) s = Rename(tmp, to_path);
    if (s.ok()) s = FsyncParentDirectory(to_path);
    if (!s.ok()) info = s;
  }
  if (!info.ok()) {
    std::remove(tmp.c_str());
    return info.status();
  }
  info->path = to_path;
  return info;
}

absl::Status RestoreOptions::Validate() const {
  if (from.empty()) return absl::InvalidArgumentError("--from is required");
  if (db_path.empty()) return absl::InvalidArgumentError("--db is required");
  return absl::OkStatus();
}

absl::StatusOr<RestoreReport> RestoreDatabase(const RestoreOptions& options) {
  RETURN_IF_ERROR(options.Validate());
  const std::string& from = options.from;
  const std::string& db_path = options.db_path;
  if (!Exists(from)) {
    return absl::NotFoundError(absl::StrCat("backup ", from, " not found"));
  }
  std::vector<DeletionEntry> deletions;
  if (!options.deletion_record_path.empty()) {
    ASSIGN_OR_RETURN(deletions,
                     DeletionRecord::Read(options.deletion_record_path));
  }
  // Held until the end: no server can open the database meanwhile.
  ASSIGN_OR_RETURN(std::unique_ptr<FileLock> lock,
                   FileLock::TryAcquire(DatabaseLockPath(db_path)));
  RestoreReport report;
  const std::string tmp = absl::StrCat(db_path, ".restore-tmp-", ::getpid());
  auto remove_tmp = [&tmp]() {
    for (const char* suffix : {"", "-wal", "-shm", "-journal"}) {
      std::remove((tmp + suffix).c_str());
    }
  };
  remove_tmp();
  absl::Status copied = CopyFile(from, tmp);
  absl::StatusOr<DatabaseFileInfo> info =
      copied.ok() ? InspectDatabaseFile(tmp) : copied;
  if (info.ok() && !deletions.empty()) {
    // The same code as a server's start: erases recorded datasets the
    // backup holds live (secure delete, WAL truncated, audited). Closing
    // the last connection checkpoints the copy and removes its WAL.
    DatabaseOptions db_options;
    db_options.create_if_missing = false;
    db_options.deletion_record_path = options.deletion_record_path;
    absl::StatusOr<std::unique_ptr<Database>> db =
        Database::Open(tmp, db_options);
    if (db.ok()) {
      report.reapplied_deletions = (*db)->reapplied_deletions();
      absl::StatusOr<bool> pending = (*db)->datasets().WalTruncationPending();
      absl::StatusOr<int> version = (*db)->SchemaVersion();
      db->reset();
      if (version.ok()) info->schema_version = *version;
      if (!pending.ok()) {
        info = pending.status();
      } else if (*pending || Exists(tmp + "-wal")) {
        info = absl::UnavailableError(
            "the restored copy's WAL could not be truncated after erasing "
            "deleted datasets; nothing was restored");
      }
    } else {
      info = db.status();
    }
    if (info.ok()) {
      absl::StatusOr<int64_t> bytes = FileSize(tmp);
      if (bytes.ok()) info->bytes = *bytes;
      absl::Status synced = FsyncFile(tmp);
      if (!synced.ok()) info = synced;
    }
  }
  if (!info.ok()) {
    remove_tmp();
    return info.status();
  }
  const std::string stamp =
      absl::FormatTime("%Y%m%dT%H%M%SZ", absl::Now(), absl::UTCTimeZone());
  const std::string aside = absl::StrCat(db_path, ".pre-restore-", stamp);
  // The database and its WAL move aside as a pair (SQLite finds a WAL by
  // the database's name + "-wal"), so the old state stays openable until
  // the copy is in place. The shared-memory index is derived data and must
  // not outlive its WAL.
  std::vector<std::string> old_files;
  if (Exists(db_path)) {
    RETURN_IF_ERROR(Rename(db_path, aside));
    old_files.push_back(aside);
    if (Exists(db_path + "-wal")) {
      RETURN_IF_ERROR(Rename(db_path + "-wal", aside + "-wal"));
      old_files.push_back(aside + "-wal");
    }
  }
  std::remove((db_path + "-shm").c_str());
  std::remove((db_path + "-wal").c_str());
  RETURN_IF_ERROR(Rename(tmp, db_path));
  RETURN_IF_ERROR(FsyncParentDirectory(db_path));
  if (options.keep_old) {
    report.moved_aside = std::move(old_files);
  } else {
    // The old files hold every row in plaintext: removed (unlinked) once
    // the restored copy is durably in place.
    for (const std::string& f : old_files) {
      if (::unlink(f.c_str()) != 0) {
        return absl::UnavailableError(
            absl::StrCat("restored, but the previous database file ", f,
                         " could not be removed: ", std::strerror(errno)));
      }
      report.removed.push_back(f);
    }
    if (!old_files.empty()) RETURN_IF_ERROR(FsyncParentDirectory(db_path));
  }
  report.restored = *std::move(info);
  report.restored.path = db_path;
  if (!options.ledger_mark_path.empty()) {
    absl::StatusOr<std::optional<int64_t>> mark =
        LedgerMark::Read(options.ledger_mark_path);
    if (mark.ok()) report.mark_seq = *mark;
  }
  return report;
}

}  // namespace dpopt::storage
