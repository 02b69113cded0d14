// Background WAL checkpoints.
//
// In WAL mode every commit appends pages to the write-ahead log, and a
// checkpoint later copies them into the database file and syncs it.
// SQLite's default runs that checkpoint inside whichever commit finds the
// WAL past 1000 frames, on the committing connection: the request that
// happens to commit then copies every pending page while it holds
// Database's only connection, and a streaming import wrote each block twice
// (WAL, then database file, each synced) on its critical path (10 s for
// 1,000,000 x 100 values, of which 4.7 s parsing).
//
// A Checkpointer runs checkpoints on a thread and connection of its own:
// Database's connection reports each commit's WAL size (OnCommit, through
// Connection::SetWalCommitCallback), a commit that finds the WAL at or past
// Options::request_frames wakes the thread, and the thread runs a PASSIVE
// checkpoint (which never waits for readers or writers; they proceed
// meanwhile). While a pause is held (a streaming import in progress),
// requested checkpoints wait (up to Options::max_pause): the import's rows
// reach the WAL once, durably, and are copied into the database file after
// the import has committed, in the background, instead of block by block
// during it.
//
// Durability is unchanged (a commit is durable once its WAL frames are
// synced; checkpoints only move data). Explicit checkpoints on Database's
// connection (DatasetStore's TRUNCATE after a deletion) still run where
// they are called; one that meets a running background checkpoint retries.
//
// Pending WAL truncation. A dataset deletion must leave no copy of the
// erased rows in the WAL, so it ends with a truncating checkpoint; that
// cannot finish while a reader still uses the WAL (a long query, a backup
// in progress). The deleting transaction therefore records
// `wal_truncation_pending` in the `meta` table (MarkWalTruncationPending),
// and the flag is cleared only after a truncating checkpoint completed
// (CompletePendingWalTruncation). While it is set, the checkpointer
// retries that checkpoint every Options::truncate_retry (RequestTruncate;
// Database requests it at open when a crash left the flag set).
//
// Thread-safe.
#ifndef DPOPT_STORAGE_CHECKPOINTER_H_
#define DPOPT_STORAGE_CHECKPOINTER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "storage/sqlite.h"

namespace dpopt::storage {

struct CheckpointerOptions {
  // A commit that leaves at least this many frames in the WAL requests a
  // checkpoint (SQLite's automatic checkpoint uses 1000). >= 1.
  int64_t request_frames = 1000;
  // How long to wait before retrying a checkpoint that found another one
  // (an explicit TRUNCATE, or another process's) running. > 0.
  absl::Duration busy_retry = absl::Milliseconds(50);
  // A requested checkpoint waits for pauses at most this long: an import
  // left open (a client that stops sending) must not let the WAL grow with
  // everyone else's commits indefinitely. Imports longer than this get
  // checkpoints while they run. > 0.
  absl::Duration max_pause = absl::Seconds(60);
  // How often a pending WAL truncation is retried (RequestTruncate). > 0.
  absl::Duration truncate_retry = absl::Seconds(1);
  // For the checkpointer's own connection (read_only must be false).
  ConnectionOptions connection;

  absl::Status Validate() const;
};

class Checkpointer {
 public:
  using Options = CheckpointerOptions;

  // Opens a connection to `path` (which must exist) and starts the thread.
  // INVALID_ARGUMENT for bad options; Connection::Open's errors.
  static absl::StatusOr<std::unique_ptr<Checkpointer>> Start(
      const std::string& path, const Options& options = Options());
  // Stops the thread; a checkpoint already running completes first.
  ~Checkpointer();
  Checkpointer(const Checkpointer&) = delete;
  Checkpointer& operator=(const Checkpointer&) = delete;

  // A commit left `wal_frames` frames in the WAL: requests a checkpoint if
  // that is at least Options::request_frames. Never blocks on a checkpoint.
  void OnCommit(int64_t wal_frames);
  // Requests a checkpoint (it runs once no pause is held).
  void Request();
  // A deletion's WAL truncation is pending (the `meta` flag is set): retry
  // CompletePendingWalTruncation on this thread's connection every
  // Options::truncate_retry (pauses are not waited for) until it reports
  // that nothing is pending any more.
  void RequestTruncate();
  // Whether a requested truncation has not completed yet.
  bool truncate_pending() const;

  // Holds requested checkpoints back while it lives (pauses nest), at most
  // Options::max_pause per request.
  class ScopedPause {
   public:
    explicit ScopedPause(Checkpointer& checkpointer);
    ~ScopedPause();
    ScopedPause(const ScopedPause&) = delete;
    ScopedPause& operator=(const ScopedPause&) = delete;

   private:
    Checkpointer& checkpointer_;
  };

  struct Stats {
    int64_t checkpoints = 0;          // completed (not busy) checkpoints
    int64_t frames_checkpointed = 0;  // reported by the last of them
    int64_t wal_frames = 0;           // the WAL's size then, in frames
    int64_t truncations = 0;          // pending truncations completed
    int64_t truncate_attempts = 0;    // tries of those (busy ones included)
    absl::Status last_error;          // of the last failed checkpoint
    absl::Duration total_duration;    // of the completed checkpoints
    absl::Duration last_duration;     // of the last completed one
  };
  Stats stats() const;

  // Waits until no checkpoint is requested or running (a requested one
  // held back by a pause counts as pending), at most `timeout`. Returns
  // whether that happened.
  bool WaitIdle(absl::Duration timeout);

 private:
  Checkpointer(const Options& options, std::unique_ptr<Connection> conn);
  void Loop();
  // Request() with mu_ held; a new request starts its max_pause clock.
  void RequestLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const Options options_;
  std::unique_ptr<Connection> conn_;  // the thread's only

  mutable absl::Mutex mu_;
  bool requested_ ABSL_GUARDED_BY(mu_) = false;
  bool truncate_pending_ ABSL_GUARDED_BY(mu_) = false;
  absl::Time truncate_due_ ABSL_GUARDED_BY(mu_);
  absl::Time requested_at_ ABSL_GUARDED_BY(mu_);
  bool running_ ABSL_GUARDED_BY(mu_) = false;
  int pauses_ ABSL_GUARDED_BY(mu_) = 0;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  Stats stats_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

// The `meta` key of the pending-truncation flag.
inline constexpr char kWalTruncationPendingKey[] = "wal_truncation_pending";

// Sets the flag, inside the caller's write transaction, to a new value
// (each deletion writes its own, so a truncation that completed before a
// later deletion committed cannot clear that deletion's flag).
absl::Status MarkWalTruncationPending(Connection& conn);

// Whether the flag is set (read on `conn`).
absl::StatusOr<bool> WalTruncationPending(Connection& conn);

// If the flag is set: tries a truncating checkpoint (Connection::
// CheckpointTruncate) until it completes, retrying every 100 ms for at most
// `wait` (zero: one try), and then clears the flag unless a deletion set it
// again meanwhile. Returns whether nothing is pending any more.
// REQUIRES: no transaction open on `conn`.
absl::StatusOr<bool> CompletePendingWalTruncation(Connection& conn,
                                                  absl::Duration wait);

}  // namespace dpopt::storage

#endif  // DPOPT_STORAGE_CHECKPOINTER_H_
