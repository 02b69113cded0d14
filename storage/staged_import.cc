#include "storage/staged_import.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/common/status_macros.h"
#include "storage/blob_codec.h"
#include "storage/checkpointer.h"
#include "storage/database.h"
#include "storage/dataset_rows.h"
#include "storage/sqlite.h"

namespace dpopt::storage {

using internal::InsertFeatureNamesLocked;
using internal::InsertRowRange;
using internal::kInsertBlock;

StagedImport::StagedImport(Database& db, ImportOptions options, int64_t id)
    : db_(db),
      options_(std::move(options)),
      id_(id),
      checkpoints_paused_(
          std::make_unique<Checkpointer::ScopedPause>(db.checkpointer())) {}

StagedImport::~StagedImport() {
  (void)Discard();
  if (wal_fd_ >= 0) close(wal_fd_);
}

int64_t StagedImport::rows_stored() const {
  absl::MutexLock lock(&mu_);
  return rows_stored_;
}

absl::Status StagedImport::QueueBlock(ParsedRows& block) {
  if (!writer_.joinable()) writer_ = std::thread([this] { WriterLoop(); });
  absl::MutexLock lock(&mu_);
  auto room = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
    return !write_status_.ok() ||
           static_cast<int>(queue_.size()) < kQueuedBlocks;
  };
  mu_.Await(absl::Condition(&room));
  RETURN_IF_ERROR(write_status_);
  rows_queued_ += block.rows;
  queue_.push_back(std::move(block));
  return absl::OkStatus();
}

void StagedImport::WriterLoop() {
  for (;;) {
    ParsedRows block;
    int64_t block_no = 0, first_row = 0;
    {
      absl::MutexLock lock(&mu_);
      auto ready = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
        return stop_ || !queue_.empty();
      };
      mu_.Await(absl::Condition(&ready));
      if (stop_ || !write_status_.ok()) return;
      block = std::move(queue_.front());
      queue_.pop_front();
      writing_ = true;
      block_no = next_block_;
      first_row = rows_stored_;
    }
    absl::Status s = StoreBlock(block, block_no, first_row);
    absl::MutexLock lock(&mu_);
    writing_ = false;
    if (!s.ok()) {
      write_status_ = s;
      queue_.clear();
      return;
    }
    ++next_block_;
    rows_stored_ += block.rows;
    nonzeros_stored_ += block.nonzeros();
  }
}

absl::Status StagedImport::StoreBlock(const ParsedRows& block, int64_t block_no,
                                      int64_t first_row) {
  ScopedCommitHookSuspension staging;
  absl::Status s = db_.WithConnection([&](Connection& conn) -> absl::Status {
    Transaction txn(conn);
    RETURN_IF_ERROR(txn.Begin(Transaction::Mode::kImmediate,
                              Transaction::Durability::kRelaxed));
    ASSIGN_OR_RETURN(Statement insert, conn.Prepare(kInsertBlock));
    std::vector<int64_t> offsets;
    RETURN_IF_ERROR(InsertRowRange(insert, id_, block_no, first_row, block, 0,
                                   block.rows, offsets));
    return txn.Commit();
  });
  // Outside the connection lock: sync_file_range may wait for the device.
  if (s.ok()) StartWalWriteback();
  return s;
}

void StagedImport::StartWalWriteback() {
  // Write-behind: the block's WAL pages are in the page cache, unsynced
  // (relaxed durability); the final commit's fsync would otherwise write
  // the whole import at the end (2 s for 800 MB here). Starting their
  // writeback now overlaps it with parsing. A hint: errors are ignored
  // (Commit's fsync is what makes the rows durable).
  if (wal_fd_ < 0) {
    wal_fd_ = open((db_.path() + "-wal").c_str(), O_RDONLY | O_CLOEXEC);
    if (wal_fd_ < 0) return;
  }
  (void)sync_file_range(wal_fd_, 0, 0, SYNC_FILE_RANGE_WRITE);
}

absl::Status StagedImport::Sync() {
  RETURN_IF_ERROR(status_);
  absl::MutexLock lock(&mu_);
  auto idle = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
    return !write_status_.ok() || (queue_.empty() && !writing_);
  };
  mu_.Await(absl::Condition(&idle));
  return write_status_;
}

void StagedImport::StopWriter() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
    wrote_rows_ =
        wrote_rows_ || next_block_ > 0 || writing_ || !write_status_.ok();
  }
  if (writer_.joinable()) writer_.join();
}

absl::Status StagedImport::Failed(absl::Status s) {
  status_ = s;
  (void)Discard();
  return s;
}

absl::Status StagedImport::Write(absl::string_view bytes) {
  RETURN_IF_ERROR(status_);
  if (done_) return absl::FailedPreconditionError("import already finished");
  absl::Status s = parser_->Feed(bytes);
  if (!s.ok()) return Failed(s);
  return absl::OkStatus();
}

absl::StatusOr<DatasetRecord> StagedImport::Commit() {
  RETURN_IF_ERROR(status_);
  if (done_) return absl::FailedPreconditionError("import already finished");
  absl::Status s = parser_->Finish();
  if (s.ok()) s = Sync();
  if (!s.ok()) return Failed(s);
  StopWriter();
  int64_t rows = 0, nonzeros = 0;
  {
    absl::MutexLock lock(&mu_);
    rows = rows_stored_;
    nonzeros = nonzeros_stored_;
  }
  if (rows != rows_queued_) return Failed(absl::InternalError("lost blocks"));
  std::vector<std::string> names = options_.feature_names;
  if (names.empty()) names = parser_->header_names();
  absl::StatusOr<DatasetRecord> record = db_.WithConnection(
      [&](Connection& conn) -> absl::StatusOr<DatasetRecord> {
        Transaction txn(conn);
        RETURN_IF_ERROR(txn.Begin(Transaction::Mode::kImmediate));
        ASSIGN_OR_RETURN(
            Statement up,
            conn.Prepare("UPDATE datasets SET num_rows = ?, nonzeros = ?, "
                         "dimension = ?, created_at = ?, deleted_at = 0 WHERE "
                         "id = ? AND deleted_at = ?"));
        RETURN_IF_ERROR(up.BindInt64(1, rows));
        RETURN_IF_ERROR(up.BindInt64(2, nonzeros));
        // The declared dimension, or the one inferred from the file.
        RETURN_IF_ERROR(up.BindInt64(3, parser_->dimension()));
        RETURN_IF_ERROR(up.BindInt64(4, internal::NowMicros()));
        RETURN_IF_ERROR(up.BindInt64(5, id_));
        RETURN_IF_ERROR(up.BindInt64(6, kImportInProgress));
        RETURN_IF_ERROR(up.Run());
        if (conn.Changes() != 1) {
          return absl::InternalError("the staged import was removed");
        }
        RETURN_IF_ERROR(InsertFeatureNamesLocked(conn, id_, names));
        ASSIGN_OR_RETURN(DatasetRecord r,
                         DatasetStore::GetByIdLocked(conn, id_));
        RETURN_IF_ERROR(txn.Commit());
        return r;
      });
  if (!record.ok()) return Failed(record.status());
  done_ = true;
  parser_.reset();
  // The rows are durable in the WAL; the checkpointer now copies them into
  // the database file in the background.
  checkpoints_paused_.reset();
  return record;
}

absl::Status StagedImport::Discard() {
  if (done_) return absl::OkStatus();
  done_ = true;
  StopWriter();
  parser_.reset();
  ScopedCommitHookSuspension staging;
  absl::Status s = db_.WithConnection([&](Connection& conn) -> absl::Status {
    {
      Transaction txn(conn);
      RETURN_IF_ERROR(txn.Begin(Transaction::Mode::kImmediate));
      RETURN_IF_ERROR(DatasetStore::PurgeRowsLocked(conn, id_).status());
      ASSIGN_OR_RETURN(Statement del,
                       conn.Prepare("DELETE FROM datasets WHERE id = ? AND "
                                    "deleted_at = ?"));
      RETURN_IF_ERROR(del.BindInt64(1, id_));
      RETURN_IF_ERROR(del.BindInt64(2, kImportInProgress));
      RETURN_IF_ERROR(del.Run());
      // Staged rows are private: leave no copy in the WAL either (retried
      // by the checkpointer if a reader keeps it busy).
      if (wrote_rows_) RETURN_IF_ERROR(MarkWalTruncationPending(conn));
      RETURN_IF_ERROR(txn.Commit());
    }
    if (wrote_rows_) (void)db_.datasets().TruncateWalOrDefer(conn);
    return absl::OkStatus();
  });
  checkpoints_paused_.reset();
  return s;
}

}  // namespace dpopt::storage
