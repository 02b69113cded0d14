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

absl::StatusOr<RestoreReport> RestoreDatabase(const std::string& from,
                                              const std::string& db_path,
                                              const std::string& mark_path) {
  if (from.empty()) return absl::InvalidArgumentError("--from is required");
  if (db_path.empty()) return absl::InvalidArgumentError("--db is required");
  if (!Exists(from)) {
    return absl::NotFoundError(absl::StrCat("backup ", from, " not found"));
  }
  // Held until the end: no server can open the database meanwhile.
  ASSIGN_OR_RETURN(std::unique_ptr<FileLock> lock,
                   FileLock::TryAcquire(DatabaseLockPath(db_path)));
  RestoreReport report;
  const std::string tmp = absl::StrCat(db_path, ".restore-tmp-", ::getpid());
  std::remove(tmp.c_str());
  absl::Status copied = CopyFile(from, tmp);
  absl::StatusOr<DatabaseFileInfo> info =
      copied.ok() ? InspectDatabaseFile(tmp) : copied;
  if (!info.ok()) {
    std::remove(tmp.c_str());
    return info.status();
  }
  const std::string stamp =
      absl::FormatTime("%Y%m%dT%H%M%SZ", absl::Now(), absl::UTCTimeZone());
  const std::string aside = absl::StrCat(db_path, ".pre-restore-", stamp);
  // The database and its WAL move aside as a pair (SQLite finds a WAL by
  // the database's name + "-wal"), so the old state stays openable. The
  // shared-memory index is derived data and must not outlive its WAL.
  if (Exists(db_path)) {
    RETURN_IF_ERROR(Rename(db_path, aside));
    report.moved_aside.push_back(aside);
    if (Exists(db_path + "-wal")) {
      RETURN_IF_ERROR(Rename(db_path + "-wal", aside + "-wal"));
      report.moved_aside.push_back(aside + "-wal");
    }
  }
  std::remove((db_path + "-shm").c_str());
  std::remove((db_path + "-wal").c_str());
  RETURN_IF_ERROR(Rename(tmp, db_path));
  RETURN_IF_ERROR(FsyncParentDirectory(db_path));
  report.restored = *std::move(info);
  report.restored.path = db_path;
  if (!mark_path.empty()) {
    absl::StatusOr<std::optional<int64_t>> mark = LedgerMark::Read(mark_path);
    if (mark.ok()) report.mark_seq = *mark;
  }
  return report;
}

}  // namespace dpopt::storage
