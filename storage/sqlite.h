// Thin, scoped wrappers over the SQLite C API. This header (and storage/ as a
// whole) is the only place in dpopt that knows about SQL; no sqlite3 type is
// exposed here, so callers never see or own a raw handle.
//
//   Connection  one sqlite3 connection, opened with WAL, foreign keys,
//               busy_timeout and synchronous=FULL (durable commits).
//   Statement   a prepared statement that finalizes itself; typed Bind*/
//               Column* accessors.
//   Transaction rolls back in its destructor unless Commit() succeeded;
//               kImmediate takes the write lock at BEGIN (check-and-charge).
//
// Error mapping (docs/architecture.md, "Error model"), applied to every
// SQLite result code:
//   SQLITE_BUSY / SQLITE_LOCKED         -> UNAVAILABLE (retry later)
//   SQLITE_CORRUPT / SQLITE_NOTADB      -> DATA_LOSS
//   SQLITE_CONSTRAINT_UNIQUE / _PRIMARYKEY -> ALREADY_EXISTS
//   other SQLITE_CONSTRAINT (incl. trigger RAISE, foreign key, CHECK)
//                                       -> FAILED_PRECONDITION
//   SQLITE_FULL / SQLITE_IOERR / SQLITE_CANTOPEN -> UNAVAILABLE
//   SQLITE_READONLY                     -> FAILED_PRECONDITION
//   anything else                       -> INTERNAL
// Messages carry SQLite's own text (which names tables/columns, never bound
// values).
//
// Thread safety: a Connection and its Statements must be used by one thread
// at a time; callers serialize access (storage::Database holds a mutex).
#ifndef DPOPT_STORAGE_SQLITE_H_
#define DPOPT_STORAGE_SQLITE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

struct sqlite3;
struct sqlite3_stmt;

namespace dpopt::storage {

// Maps a SQLite (extended) result code to an absl::Status (see above).
// `context` is prefixed to the message. Returns OK for SQLITE_OK/ROW/DONE.
// Statuses made by SqliteStatus carry this payload (value "1"): their
// messages hold SQLite's own text and file paths, which the server logs but
// never sends to a client (server/status_util.h).
inline constexpr char kSqlitePayloadUrl[] = "dpopt.storage/sqlite";
absl::Status SqliteStatus(int code, absl::string_view context,
                          absl::string_view sqlite_message = "");

struct ConnectionOptions {
  // How long a statement waits for another connection's lock before it
  // fails with UNAVAILABLE.
  int busy_timeout_ms = 5000;
  // Create the file if it does not exist; otherwise Open fails with
  // NOT_FOUND for a missing file.
  bool create_if_missing = true;
  // Open read-only and leave the journal mode as it is (for inspecting a
  // backup file without changing it). Implies !create_if_missing.
  bool read_only = false;

  absl::Status Validate() const;
};

class Statement;

class Connection {
 public:
  // Opens (or creates) the database file at `path` and configures it:
  // journal_mode=WAL, foreign_keys=ON, synchronous=FULL, busy_timeout.
  // Errors: INVALID_ARGUMENT for bad options or empty path; NOT_FOUND if the
  // file is missing and !create_if_missing; DATA_LOSS if the file is not a
  // SQLite database; UNAVAILABLE if it cannot be opened.
  static absl::StatusOr<std::unique_ptr<Connection>> Open(
      const std::string& path, const ConnectionOptions& options);

  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // Runs one or more SQL statements that take no parameters and whose rows,
  // if any, are discarded.
  absl::Status Execute(absl::string_view sql);

  // Runs exactly one SQL statement that takes no parameters (rows, if any,
  // discarded) through the statement cache below: for the statements a
  // connection runs over and over (BEGIN, COMMIT, PRAGMA synchronous),
  // which Execute would compile every time.
  absl::Status ExecuteCached(absl::string_view sql);

  // Compiles exactly one SQL statement. INVALID_ARGUMENT if `sql` holds more
  // than one statement or none; the mapped SQLite error if it does not
  // compile. Compiled statements are cached per connection by SQL text: a
  // Statement's destructor resets it, clears its bindings and returns it to
  // the cache (at most kMaxCachedStatements; the rest are finalized), and
  // the next Prepare of the same text reuses it (compiling was a third of a
  // budget query's server time). A Statement must not outlive its
  // Connection.
  absl::StatusOr<Statement> Prepare(absl::string_view sql);
  static constexpr size_t kMaxCachedStatements = 256;
  static constexpr size_t kMaxCachedPerText = 8;

  // Rowid of the most recent successful INSERT on this connection.
  int64_t LastInsertRowId() const;
  // Rows modified by the most recent INSERT/UPDATE/DELETE.
  int64_t Changes() const;
  // True while an explicit transaction is open.
  bool InTransaction() const;

  // Copies this connection's main database into a new file `dest_path`
  // (which must not exist) with SQLite's online backup API, in a single
  // backup step: the copy is the snapshot of one read transaction, and in
  // WAL mode writers on other connections and processes continue meanwhile.
  // The copy is switched to journal_mode=DELETE, so it is one
  // self-contained file, and synced. Errors: ALREADY_EXISTS (dest exists);
  // the mapped SQLite error otherwise (UNAVAILABLE when busy for longer than
  // the busy timeout). On error `dest_path` is removed.
  absl::Status BackupTo(const std::string& dest_path);

  const std::string& path() const { return path_; }

  // Replaces SQLite's automatic checkpoint, which the committing connection
  // runs inside its commit once the WAL holds 1000 frames, with
  // `on_commit(frames)`: called after each write transaction commits (on
  // the committing thread, before Commit() returns) with the WAL's size in
  // frames. It must not use this connection. An empty function restores
  // the automatic checkpoint. (storage/checkpointer.h runs checkpoints on a
  // thread of their own instead.)
  void SetWalCommitCallback(std::function<void(int64_t frames)> on_commit);

  // "PRAGMA wal_checkpoint(PASSIVE)": copies as many WAL frames into the
  // database file as possible without waiting for readers or writers, and
  // syncs it. Returns the WAL's frames and the frames checkpointed
  // (both -1 if another checkpoint was running).
  struct CheckpointResult {
    int64_t wal_frames = 0;
    int64_t checkpointed_frames = 0;
  };
  absl::StatusOr<CheckpointResult> CheckpointPassive();
  // "PRAGMA wal_checkpoint(TRUNCATE)" without waiting: copies every WAL
  // frame into the database file and truncates the WAL to zero bytes, or,
  // if a reader still uses the WAL or another checkpoint or writer is in
  // the way, gives up at once (both -1) instead of blocking writers for the
  // busy timeout. On success wal_frames is 0.
  absl::StatusOr<CheckpointResult> CheckpointTruncate();

 private:
  friend class Statement;
  Connection(sqlite3* db, std::string path, int busy_timeout_ms)
      : db_(db), path_(std::move(path)), busy_timeout_ms_(busy_timeout_ms) {}
  // Takes back a reset statement (Statement's destructor).
  void Release(sqlite3_stmt* stmt);

  sqlite3* db_;
  std::string path_;
  int busy_timeout_ms_;
  std::function<void(int64_t)> on_wal_commit_;
  absl::flat_hash_map<std::string, std::vector<sqlite3_stmt*>> cache_;
  size_t cached_ = 0;
};

// A prepared statement; its destructor returns it to its connection's cache
// (Connection::Prepare) or finalizes it. Movable, not copyable.
// Parameter indices are 1-based (SQLite's convention); column indices are
// 0-based. Bound text/blobs are copied by SQLite, so arguments may be
// temporaries.
class Statement {
 public:
  Statement(Statement&& other) noexcept;
  Statement& operator=(Statement&& other) noexcept;
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;
  ~Statement();

  absl::Status BindInt64(int index, int64_t value);
  absl::Status BindDouble(int index, double value);
  absl::Status BindText(int index, absl::string_view value);
  absl::Status BindBlob(int index, absl::string_view bytes);
  absl::Status BindBlob(int index, const void* data, size_t size);
  // Binds `bytes` without copying them (SQLITE_STATIC): they must stay
  // valid and unchanged until the statement is reset, rebound or destroyed.
  // For large blobs (an import's blocks: one copy of every value less).
  absl::Status BindBlobNoCopy(int index, absl::string_view bytes);
  absl::Status BindNull(int index);

  // Advances the statement. Returns true if a row is available, false when
  // the statement has finished; an error status otherwise (after which the
  // statement must be Reset before reuse).
  absl::StatusOr<bool> Step();
  // Steps a statement that returns no rows to completion.
  absl::Status Run();
  // Resets the statement so it can run again; bindings are kept.
  absl::Status Reset();
  // Clears all bindings to NULL.
  absl::Status ClearBindings();

  // Column accessors; valid after Step() returned true.
  bool ColumnIsNull(int col) const;
  int64_t ColumnInt64(int col) const;
  double ColumnDouble(int col) const;
  std::string ColumnText(int col) const;
  std::string ColumnBlob(int col) const;
  // Zero-copy view of a BLOB column; valid until the next Step/Reset or
  // destruction of the statement.
  absl::string_view ColumnBlobView(int col) const;

 private:
  friend class Connection;
  Statement(sqlite3* db, sqlite3_stmt* stmt, Connection* owner)
      : db_(db), stmt_(stmt), owner_(owner) {}
  absl::Status BindResult(int code, int index);
  // Returns stmt_ to its connection's cache (or finalizes it).
  void Finish();

  sqlite3* db_ = nullptr;
  sqlite3_stmt* stmt_ = nullptr;
  Connection* owner_ = nullptr;
};

// A scoped transaction. Usage:
//   Transaction txn(conn);
//   RETURN_IF_ERROR(txn.Begin(Transaction::Mode::kImmediate));
//   ... statements ...
//   RETURN_IF_ERROR(txn.Commit());
// If Commit() is not reached (early return on error), the destructor rolls
// the transaction back. Transactions do not nest.
class Transaction {
 public:
  enum class Mode {
    kDeferred,   // BEGIN: locks are taken lazily (read-mostly work)
    kImmediate,  // BEGIN IMMEDIATE: write lock now; waits up to busy_timeout
                 // for other writers, then UNAVAILABLE
  };

  enum class Durability {
    kFull,     // synchronous=FULL: durable (fsync) before Commit() returns
    kRelaxed,  // synchronous=NORMAL for this transaction: atomic and
               // survives a process crash, but the last commits may be lost
               // on power failure (WAL is synced at the next FULL commit or
               // checkpoint). For high-rate, non-critical writes (progress,
               // trace); never for the ledger.
  };

  explicit Transaction(Connection& conn) : conn_(conn) {}
  ~Transaction();
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;

  // FAILED_PRECONDITION if already begun or the connection is already in a
  // transaction.
  absl::Status Begin(Mode mode, Durability durability = Durability::kFull);
  // Commits; on failure the transaction is rolled back and the error is
  // returned. FAILED_PRECONDITION if not begun or already finished.
  absl::Status Commit();
  // Explicit rollback (idempotent once finished).
  absl::Status Rollback();

  bool active() const { return active_; }

 private:
  void RestoreDurability();

  Connection& conn_;
  bool active_ = false;
  bool finished_ = false;
  bool relaxed_ = false;
  bool immediate_ = false;
};

// A per-thread commit hook. While a ScopedCommitHook lives on a thread,
// every kImmediate (write) transaction committed on that thread runs the
// hook inside the transaction, just before COMMIT, on the transaction's
// connection; if the hook fails, the transaction is rolled back and Commit()
// returns the hook's error, so the change and whatever the hook writes
// commit together or not at all. kDeferred (read) transactions never run
// it. The server uses it to write an RPC's audit record in the same
// transaction as the change it records. Hooks do not nest: a
// second ScopedCommitHook on the same thread replaces the first until it
// is destroyed.
class ScopedCommitHook {
 public:
  using Hook = std::function<absl::Status(Connection&)>;
  explicit ScopedCommitHook(Hook hook);
  ~ScopedCommitHook();
  ScopedCommitHook(const ScopedCommitHook&) = delete;
  ScopedCommitHook& operator=(const ScopedCommitHook&) = delete;

  // Write transactions committed (with the hook run) since construction.
  int64_t commits() const { return commits_; }

 private:
  friend class Transaction;
  friend class GroupCommit;  // runs a waiting caller's hook on its behalf
  // The innermost hook on the calling thread; nullptr if none.
  static ScopedCommitHook* Current();
  Hook hook_;
  ScopedCommitHook* previous_;
  int64_t commits_ = 0;
  bool running_ = false;
};

// While one lives, write transactions on this thread run no commit hook
// (storage work that is not the change an RPC audits: staged import blocks,
// batched audit records).
class ScopedCommitHookSuspension {
 public:
  ScopedCommitHookSuspension()
      : none_([](Connection&) -> absl::Status { return absl::OkStatus(); }) {}

 private:
  ScopedCommitHook none_;
};

}  // namespace dpopt::storage

#endif  // DPOPT_STORAGE_SQLITE_H_
