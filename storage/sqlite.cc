#include "storage/sqlite.h"

#include <sqlite3.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "core/common/status_macros.h"
#include "storage/file_util.h"

namespace dpopt::storage {
namespace {

std::string Message(absl::string_view context, int code,
                    absl::string_view sqlite_message) {
  std::string msg(context);
  if (!msg.empty()) msg += ": ";
  if (!sqlite_message.empty()) {
    absl::StrAppend(&msg, sqlite_message);
  } else {
    absl::StrAppend(&msg, sqlite3_errstr(code));
  }
  return msg;
}

absl::Status SqliteStatusUntagged(int code, absl::string_view context,
                                  absl::string_view sqlite_message);

}  // namespace

absl::Status SqliteStatus(int code, absl::string_view context,
                          absl::string_view sqlite_message) {
  if (code == SQLITE_OK || code == SQLITE_ROW || code == SQLITE_DONE) {
    return absl::OkStatus();
  }
  absl::Status s = SqliteStatusUntagged(code, context, sqlite_message);
  s.SetPayload(kSqlitePayloadUrl, absl::Cord("1"));
  return s;
}

namespace {
absl::Status SqliteStatusUntagged(int code, absl::string_view context,
                                  absl::string_view sqlite_message) {
  const std::string msg = Message(context, code, sqlite_message);
  switch (code & 0xff) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      return absl::UnavailableError(msg);
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB:
      return absl::DataLossError(msg);
    case SQLITE_CONSTRAINT:
      if (code == SQLITE_CONSTRAINT_UNIQUE ||
          code == SQLITE_CONSTRAINT_PRIMARYKEY) {
        return absl::AlreadyExistsError(msg);
      }
      return absl::FailedPreconditionError(msg);
    case SQLITE_FULL:
    case SQLITE_IOERR:
    case SQLITE_CANTOPEN:
      return absl::UnavailableError(msg);
    case SQLITE_READONLY:
      return absl::FailedPreconditionError(msg);
    default:
      return absl::InternalError(msg);
  }
}

}  // namespace

absl::Status ConnectionOptions::Validate() const {
  if (busy_timeout_ms < 0) {
    return absl::InvalidArgumentError("busy_timeout_ms must be >= 0");
  }
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------
// Connection

absl::StatusOr<std::unique_ptr<Connection>> Connection::Open(
    const std::string& path, const ConnectionOptions& options) {
  RETURN_IF_ERROR(options.Validate());
  if (path.empty()) {
    return absl::InvalidArgumentError("database path is empty");
  }
  if (path.find('\0') != std::string::npos) {
    return absl::InvalidArgumentError("database path contains a NUL byte");
  }
  int flags =
      (options.read_only ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE) |
      SQLITE_OPEN_FULLMUTEX;
  if (options.create_if_missing && !options.read_only) {
    flags |= SQLITE_OPEN_CREATE;
    // Owner-only from the start: SQLite gives the WAL and the shared-memory
    // index the database file's mode.
    RETURN_IF_ERROR(CreatePrivateFile(path));
  }
  sqlite3* db = nullptr;
  const int rc = sqlite3_open_v2(path.c_str(), &db, flags, nullptr);
  if (rc != SQLITE_OK) {
    std::string errmsg = db != nullptr ? sqlite3_errmsg(db) : "";
    sqlite3_close_v2(db);
    if (rc == SQLITE_CANTOPEN &&
        (!options.create_if_missing || options.read_only)) {
      return absl::NotFoundError(
          absl::StrCat("database file does not exist: ", path));
    }
    return SqliteStatus(rc, absl::StrCat("opening ", path), errmsg);
  }
  sqlite3_extended_result_codes(db, 1);
  std::unique_ptr<Connection> conn(
      new Connection(db, path, options.busy_timeout_ms));
  sqlite3_busy_timeout(db, options.busy_timeout_ms);
  if (options.read_only) {
    // Reading the schema detects a non-database file (DATA_LOSS).
    RETURN_IF_ERROR(conn->Execute("SELECT count(*) FROM sqlite_master"));
    return conn;
  }
  // The first statement that reads the file detects a non-database file
  // (SQLITE_NOTADB -> DATA_LOSS). WAL survives across opens; the others are
  // per-connection settings.
  RETURN_IF_ERROR(conn->Execute("PRAGMA journal_mode=WAL"));
  RETURN_IF_ERROR(
      conn->Execute("PRAGMA foreign_keys=ON; PRAGMA synchronous=FULL;"));
  // Verify that WAL really took effect (it does not on e.g. :memory:, which
  // tests do not use for that reason).
  ASSIGN_OR_RETURN(Statement check, conn->Prepare("PRAGMA journal_mode"));
  ASSIGN_OR_RETURN(bool has_row, check.Step());
  if (!has_row || absl::AsciiStrToLower(check.ColumnText(0)) != "wal") {
    return absl::FailedPreconditionError(
        absl::StrCat("could not enable WAL journaling on ", path));
  }
  return conn;
}

Connection::~Connection() {
  for (auto& [sql, stmts] : cache_) {
    for (sqlite3_stmt* st : stmts) sqlite3_finalize(st);
  }
  sqlite3_close_v2(db_);
}

void Connection::SetWalCommitCallback(
    std::function<void(int64_t frames)> on_commit) {
  on_wal_commit_ = std::move(on_commit);
  if (!on_wal_commit_) {
    sqlite3_wal_autocheckpoint(db_, 1000);  // SQLite's default
    return;
  }
  // Registering a WAL hook replaces the automatic checkpoint (which SQLite
  // implements as the default hook).
  sqlite3_wal_hook(
      db_,
      [](void* self, sqlite3*, const char*, int frames) -> int {
        static_cast<Connection*>(self)->on_wal_commit_(frames);
        return SQLITE_OK;
      },
      this);
}

absl::StatusOr<Connection::CheckpointResult> Connection::CheckpointPassive() {
  int wal_frames = 0;
  int checkpointed = 0;
  const int rc = sqlite3_wal_checkpoint_v2(
      db_, nullptr, SQLITE_CHECKPOINT_PASSIVE, &wal_frames, &checkpointed);
  if (rc == SQLITE_BUSY) return CheckpointResult{-1, -1};
  if (rc != SQLITE_OK) {
    return SqliteStatus(rc, "checkpoint", sqlite3_errmsg(db_));
  }
  return CheckpointResult{wal_frames, checkpointed};
}

absl::StatusOr<Connection::CheckpointResult> Connection::CheckpointTruncate() {
  int wal_frames = 0;
  int checkpointed = 0;
  sqlite3_busy_timeout(db_, 0);
  const int rc = sqlite3_wal_checkpoint_v2(
      db_, nullptr, SQLITE_CHECKPOINT_TRUNCATE, &wal_frames, &checkpointed);
  sqlite3_busy_timeout(db_, busy_timeout_ms_);
  if ((rc & 0xff) == SQLITE_BUSY || (rc & 0xff) == SQLITE_LOCKED) {
    return CheckpointResult{-1, -1};
  }
  if (rc != SQLITE_OK) {
    return SqliteStatus(rc, "checkpoint", sqlite3_errmsg(db_));
  }
  return CheckpointResult{wal_frames, checkpointed};
}

void Connection::Release(sqlite3_stmt* stmt) {
  const char* sql = sqlite3_sql(stmt);
  if (cached_ >= kMaxCachedStatements || sql == nullptr) {
    sqlite3_finalize(stmt);
    return;
  }
  std::vector<sqlite3_stmt*>& free = cache_[sql];
  if (free.size() >= kMaxCachedPerText) {  // a text that keeps missing
    sqlite3_finalize(stmt);
    return;
  }
  sqlite3_reset(stmt);
  sqlite3_clear_bindings(stmt);
  free.push_back(stmt);
  ++cached_;
}

absl::Status Connection::Execute(absl::string_view sql) {
  const std::string owned(sql);
  char* err = nullptr;
  const int rc = sqlite3_exec(db_, owned.c_str(), nullptr, nullptr, &err);
  std::string msg = err != nullptr ? err : "";
  sqlite3_free(err);
  if (rc != SQLITE_OK) {
    return SqliteStatus(sqlite3_extended_errcode(db_), "execute", msg);
  }
  return absl::OkStatus();
}

absl::Status Connection::ExecuteCached(absl::string_view sql) {
  ASSIGN_OR_RETURN(Statement st, Prepare(sql));
  return st.Run();
}

absl::StatusOr<Statement> Connection::Prepare(absl::string_view sql) {
  if (auto it = cache_.find(sql); it != cache_.end() && !it->second.empty()) {
    sqlite3_stmt* cached = it->second.back();
    it->second.pop_back();
    --cached_;
    return Statement(db_, cached, this);
  }
  sqlite3_stmt* stmt = nullptr;
  const char* tail = nullptr;
  const int rc = sqlite3_prepare_v2(db_, sql.data(),
                                    static_cast<int>(sql.size()), &stmt, &tail);
  if (rc != SQLITE_OK) {
    sqlite3_finalize(stmt);
    return SqliteStatus(rc, "prepare", sqlite3_errmsg(db_));
  }
  // Cached under sqlite3_sql(stmt): the text of this one statement, which
  // is `sql` without a trailing ";" or blanks (checked below), so a later
  // Prepare of the same `sql` may miss the cache but never gets another
  // statement.
  Statement result(db_, stmt, this);
  if (stmt == nullptr) {
    return absl::InvalidArgumentError("prepare: no SQL statement");
  }
  if (tail != nullptr) {
    absl::string_view rest(tail, sql.data() + sql.size() - tail);
    if (!absl::StripAsciiWhitespace(rest).empty() &&
        absl::StripAsciiWhitespace(rest) != ";") {
      return absl::InvalidArgumentError("prepare: more than one SQL statement");
    }
  }
  return result;
}

int64_t Connection::LastInsertRowId() const {
  return sqlite3_last_insert_rowid(db_);
}

int64_t Connection::Changes() const { return sqlite3_changes64(db_); }

bool Connection::InTransaction() const {
  return sqlite3_get_autocommit(db_) == 0;
}

absl::Status Connection::BackupTo(const std::string& dest_path) {
  sqlite3* dest = nullptr;
  // SQLITE_OPEN_EXCLUSIVE is ignored by sqlite3_open_v2, so check first
  // (storage/backup.cc copies to a fresh temporary name anyway).
  if (::access(dest_path.c_str(), F_OK) == 0) {
    return absl::AlreadyExistsError(
        absl::StrCat("backup destination ", dest_path, " already exists"));
  }
  // Owner-only, like the database it copies.
  RETURN_IF_ERROR(CreatePrivateFile(dest_path));
  int rc = sqlite3_open_v2(dest_path.c_str(), &dest,
                           SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr);
  auto fail = [&](absl::Status s) {
    sqlite3_close_v2(dest);
    std::remove(dest_path.c_str());
    std::remove((dest_path + "-journal").c_str());
    return s;
  };
  if (rc != SQLITE_OK) {
    return fail(SqliteStatus(rc, absl::StrCat("creating ", dest_path),
                             dest != nullptr ? sqlite3_errmsg(dest) : ""));
  }
  sqlite3_extended_result_codes(dest, 1);
  sqlite3_backup* backup = sqlite3_backup_init(dest, "main", db_, "main");
  if (backup == nullptr) {
    return fail(SqliteStatus(sqlite3_extended_errcode(dest), "backup init",
                             sqlite3_errmsg(dest)));
  }
  // One step copies every page under one read transaction of the source.
  // The source connection's busy handler does not apply to the backup, so
  // retry BUSY/LOCKED (a writer mid-checkpoint) for up to ~10 s.
  for (int attempt = 0;; ++attempt) {
    rc = sqlite3_backup_step(backup, -1);
    if ((rc == SQLITE_BUSY || rc == SQLITE_LOCKED) && attempt < 1000) {
      sqlite3_sleep(10);
      continue;
    }
    break;
  }
  const int finish = sqlite3_backup_finish(backup);
  if (rc != SQLITE_DONE) {
    return fail(SqliteStatus(rc, "backup step", sqlite3_errstr(rc)));
  }
  if (finish != SQLITE_OK) {
    return fail(SqliteStatus(finish, "backup finish", sqlite3_errmsg(dest)));
  }
  char* err = nullptr;
  rc = sqlite3_exec(dest,
                    "PRAGMA journal_mode=DELETE; PRAGMA synchronous=FULL; "
                    "PRAGMA user_version",  // any statement: forces a read
                    nullptr, nullptr, &err);
  std::string msg = err != nullptr ? err : "";
  sqlite3_free(err);
  if (rc != SQLITE_OK) return fail(SqliteStatus(rc, "backup journal", msg));
  rc = sqlite3_close_v2(dest);
  dest = nullptr;
  if (rc != SQLITE_OK) {
    return fail(SqliteStatus(rc, absl::StrCat("closing ", dest_path)));
  }
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------
// Statement

Statement::Statement(Statement&& other) noexcept
    : db_(other.db_), stmt_(other.stmt_), owner_(other.owner_) {
  other.stmt_ = nullptr;
}

Statement& Statement::operator=(Statement&& other) noexcept {
  if (this != &other) {
    Finish();
    db_ = other.db_;
    stmt_ = other.stmt_;
    owner_ = other.owner_;
    other.stmt_ = nullptr;
  }
  return *this;
}

Statement::~Statement() { Finish(); }

void Statement::Finish() {
  if (stmt_ == nullptr) return;
  if (owner_ != nullptr) {
    owner_->Release(stmt_);
  } else {
    sqlite3_finalize(stmt_);
  }
  stmt_ = nullptr;
}

absl::Status Statement::BindResult(int code, int index) {
  if (code == SQLITE_OK) return absl::OkStatus();
  if (code == SQLITE_RANGE) {
    return absl::InternalError(
        absl::StrCat("bind: parameter index ", index, " out of range"));
  }
  return SqliteStatus(code, "bind", sqlite3_errmsg(db_));
}

absl::Status Statement::BindInt64(int index, int64_t value) {
  return BindResult(sqlite3_bind_int64(stmt_, index, value), index);
}

absl::Status Statement::BindDouble(int index, double value) {
  return BindResult(sqlite3_bind_double(stmt_, index, value), index);
}

absl::Status Statement::BindText(int index, absl::string_view value) {
  return BindResult(
      sqlite3_bind_text64(stmt_, index, value.data(), value.size(),
                          SQLITE_TRANSIENT, SQLITE_UTF8),
      index);
}

absl::Status Statement::BindBlob(int index, absl::string_view bytes) {
  return BindBlob(index, bytes.data(), bytes.size());
}

absl::Status Statement::BindBlob(int index, const void* data, size_t size) {
  // A zero-length blob is stored as an empty BLOB, not NULL.
  static const char kEmpty = 0;
  return BindResult(
      sqlite3_bind_blob64(stmt_, index, size == 0 ? &kEmpty : data, size,
                          SQLITE_TRANSIENT),
      index);
}

absl::Status Statement::BindBlobNoCopy(int index, absl::string_view bytes) {
  static const char kEmpty = 0;
  return BindResult(
      sqlite3_bind_blob64(stmt_, index, bytes.empty() ? &kEmpty : bytes.data(),
                          bytes.size(), SQLITE_STATIC),
      index);
}

absl::Status Statement::BindNull(int index) {
  return BindResult(sqlite3_bind_null(stmt_, index), index);
}

absl::StatusOr<bool> Statement::Step() {
  const int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  return SqliteStatus(rc, "step", sqlite3_errmsg(db_));
}

absl::Status Statement::Run() {
  ASSIGN_OR_RETURN(bool row, Step());
  while (row) {
    ASSIGN_OR_RETURN(row, Step());
  }
  return absl::OkStatus();
}

absl::Status Statement::Reset() {
  const int rc = sqlite3_reset(stmt_);
  // sqlite3_reset repeats the error of the last failed step; the statement is
  // nevertheless reset.
  if (rc != SQLITE_OK) return SqliteStatus(rc, "reset", sqlite3_errmsg(db_));
  return absl::OkStatus();
}

absl::Status Statement::ClearBindings() {
  return SqliteStatus(sqlite3_clear_bindings(stmt_), "clear bindings");
}

bool Statement::ColumnIsNull(int col) const {
  return sqlite3_column_type(stmt_, col) == SQLITE_NULL;
}

int64_t Statement::ColumnInt64(int col) const {
  return sqlite3_column_int64(stmt_, col);
}

double Statement::ColumnDouble(int col) const {
  return sqlite3_column_double(stmt_, col);
}

std::string Statement::ColumnText(int col) const {
  const unsigned char* text = sqlite3_column_text(stmt_, col);
  const int size = sqlite3_column_bytes(stmt_, col);
  if (text == nullptr) return std::string();
  return std::string(reinterpret_cast<const char*>(text), size);
}

std::string Statement::ColumnBlob(int col) const {
  return std::string(ColumnBlobView(col));
}

absl::string_view Statement::ColumnBlobView(int col) const {
  const void* data = sqlite3_column_blob(stmt_, col);
  const int size = sqlite3_column_bytes(stmt_, col);
  if (data == nullptr) return absl::string_view();
  return absl::string_view(static_cast<const char*>(data), size);
}

// ---------------------------------------------------------------------------
// Transaction

namespace {
thread_local ScopedCommitHook* current_commit_hook = nullptr;
}  // namespace

ScopedCommitHook::ScopedCommitHook(Hook hook)
    : hook_(std::move(hook)), previous_(current_commit_hook) {
  current_commit_hook = this;
}

ScopedCommitHook::~ScopedCommitHook() { current_commit_hook = previous_; }

ScopedCommitHook* ScopedCommitHook::Current() { return current_commit_hook; }

Transaction::~Transaction() {
  if (active_) (void)Rollback();
}

absl::Status Transaction::Begin(Mode mode, Durability durability) {
  if (active_ || finished_) {
    return absl::FailedPreconditionError("transaction already begun");
  }
  if (conn_.InTransaction()) {
    return absl::FailedPreconditionError(
        "connection is already in a transaction (no nesting)");
  }
  if (durability == Durability::kRelaxed) {
    // synchronous cannot change inside a transaction; set it before BEGIN
    // and restore FULL when the transaction ends.
    RETURN_IF_ERROR(conn_.ExecuteCached("PRAGMA synchronous=NORMAL"));
    relaxed_ = true;
  }
  absl::Status s = conn_.ExecuteCached(
      mode == Mode::kImmediate ? "BEGIN IMMEDIATE" : "BEGIN");
  if (!s.ok()) {
    RestoreDurability();
    return s;
  }
  active_ = true;
  immediate_ = mode == Mode::kImmediate;
  return absl::OkStatus();
}

void Transaction::RestoreDurability() {
  if (!relaxed_) return;
  relaxed_ = false;
  // Only fails on misuse; FULL is the connection's documented default.
  (void)conn_.ExecuteCached("PRAGMA synchronous=FULL");
}

absl::Status Transaction::Commit() {
  if (!active_) {
    return absl::FailedPreconditionError("transaction is not active");
  }
  ScopedCommitHook* hook = immediate_ ? current_commit_hook : nullptr;
  if (hook != nullptr && hook->running_) hook = nullptr;  // no re-entry
  if (hook != nullptr) {
    hook->running_ = true;
    absl::Status h = hook->hook_(conn_);
    hook->running_ = false;
    if (!h.ok()) {
      (void)Rollback();
      return h;
    }
  }
  absl::Status s = conn_.ExecuteCached("COMMIT");
  if (s.ok() && hook != nullptr) ++hook->commits_;
  if (!s.ok()) {
    // COMMIT can fail with BUSY and leave the transaction open; roll back so
    // the connection is usable and nothing is half-applied.
    (void)Rollback();
    return s;
  }
  active_ = false;
  finished_ = true;
  RestoreDurability();
  return absl::OkStatus();
}

absl::Status Transaction::Rollback() {
  if (!active_) return absl::OkStatus();
  active_ = false;
  finished_ = true;
  absl::Status s;
  // After some errors SQLite has already rolled back automatically.
  if (conn_.InTransaction()) s = conn_.ExecuteCached("ROLLBACK");
  RestoreDurability();
  return s;
}

}  // namespace dpopt::storage
