// A streaming import: DatasetStore::BeginImport's handle.
#ifndef DPOPT_STORAGE_STAGED_IMPORT_H_
#define DPOPT_STORAGE_STAGED_IMPORT_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "storage/checkpointer.h"
#include "storage/dataset_import.h"
#include "storage/dataset_store.h"

namespace dpopt::storage {

class Database;

// A streaming import in progress (DatasetStore::BeginImport). The caller's
// thread parses; a writer thread stores the parsed blocks (at most
// kQueuedBlocks wait between them), so parsing and SQLite writes overlap.
// While it lives (until Commit or Discard), the database's background
// checkpoints wait (storage/checkpointer.h): the rows are written once, to
// the WAL, and copied into the database file after the commit. An import
// left open (a client that stops sending) holds checkpoints back until its
// RPC ends. Not thread-safe: one caller at a time. Staging transactions do not
// run a commit hook (storage/sqlite.h); Commit()'s transaction runs the caller
// thread's hook, so an RPC's audit record commits with the dataset becoming
// visible.
class StagedImport {
 public:
  static constexpr int kQueuedBlocks = 2;

  ~StagedImport();  // Discard()s unless committed
  StagedImport(const StagedImport&) = delete;
  StagedImport& operator=(const StagedImport&) = delete;

  // Parses `bytes` (any split of the file) and queues every completed block
  // for storing. INVALID_ARGUMENT naming the line; a storage error of an
  // earlier block (UNAVAILABLE, INTERNAL, ...). After an error the import
  // is discarded and every call fails.
  absl::Status Write(absl::string_view bytes);
  // Waits until every queued block is stored (then rows_stored() counts
  // every row of every completed block); returns the first storage error.
  absl::Status Sync();
  // Parses the last line and block, waits for the writer, then makes the
  // dataset visible with its row counts and feature names (the options' or
  // the CSV header's), on the caller's thread.
  absl::StatusOr<DatasetRecord> Commit();
  // Stops the writer and removes the staged rows and the name reservation
  // (idempotent).
  absl::Status Discard();

  int64_t rows_stored() const;

 private:
  friend class DatasetStore;
  StagedImport(Database& db, ImportOptions options, int64_t id);
  // Parser sink (caller thread): queues the block, waiting for room.
  absl::Status QueueBlock(ParsedRows& block);
  void WriterLoop();
  absl::Status StoreBlock(const ParsedRows& block, int64_t block_no,
                          int64_t first_row);
  void StopWriter();
  // Writer thread: starts writing the WAL's dirty pages back to disk.
  void StartWalWriteback();
  absl::Status Failed(absl::Status s);

  Database& db_;
  const ImportOptions options_;
  const int64_t id_;
  std::unique_ptr<DatasetParser> parser_;
  bool done_ = false;  // committed or discarded
  absl::Status status_;
  bool wrote_rows_ = false;  // a block reached storage (even if it failed)
  // Background checkpoints wait until the import commits or is discarded.
  std::unique_ptr<Checkpointer::ScopedPause> checkpoints_paused_;
  int wal_fd_ = -1;  // writer thread: the WAL, for StartWalWriteback

  mutable absl::Mutex mu_;
  std::deque<ParsedRows> queue_ ABSL_GUARDED_BY(mu_);
  bool writing_ ABSL_GUARDED_BY(mu_) = false;  // a block is being stored
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status write_status_ ABSL_GUARDED_BY(mu_);
  int64_t next_block_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t rows_stored_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t nonzeros_stored_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t rows_queued_ = 0;  // caller thread only
  std::thread writer_;
};

}  // namespace dpopt::storage

#endif  // DPOPT_STORAGE_STAGED_IMPORT_H_
