// Datasets in SQLite: public metadata in `datasets`, rows in `dataset_blocks`
// (BLOBs of up to Database::Options::block_rows rows each; sparse rows as CSR,
// dense rows as row-major doubles; little-endian, native layout).
//
// Obtain the store from Database::datasets(). Thread-safe.
#ifndef DPOPT_STORAGE_DATASET_STORE_H_
#define DPOPT_STORAGE_DATASET_STORE_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "core/data/dataset.h"
#include "storage/checkpointer.h"
#include "storage/dataset_import.h"
#include "storage/deletion_record.h"

namespace dpopt::storage {

class Connection;
class Database;

// Public metadata of a stored dataset. Holds no row values, so it may be
// shown to any principal allowed to see the dataset.
struct DatasetRecord {
  int64_t id = 0;
  std::string name;
  int64_t rows = 0;
  int64_t dimension = 0;
  int64_t nonzeros = 0;  // stored entries (rows * dimension when dense)
  bool is_public = false;
  bool sparse = false;
  DatasetFormat format = DatasetFormat::kLibsvm;
  LabelKind label_kind = LabelKind::kBinary;
  int num_classes = 2;        // 0 for kReal
  std::string relation;       // kRelationAddRemove, kRelationReplaceOne or
                              // kRelationLinfOffsets
  double epsilon_budget = 0;  // 0 for public datasets
  double delta_budget = 0;
  std::string budget_filter;  // kFilterRdp or kFilterBasic
  DeclaredBounds bounds;
  // Public description of a structured problem (ImportOptions); empty for
  // ordinary datasets.
  std::string problem_json;
  std::vector<std::string> feature_names;  // empty or `dimension` names
  std::string description;
  int64_t created_at_micros = 0;  // unix time
  // Non-zero for a deleted dataset: a tombstone whose rows are gone and
  // whose ledger is kept (its name stays reserved).
  int64_t deleted_at_micros = 0;
  // A public dummy dataset (ImportOptions::dummy_for_id): the id of the
  // private dataset whose dry runs use its rows; 0 otherwise.
  int64_t dummy_for_id = 0;
};

// DatasetRecord::deleted_at_micros of a dataset whose import is still in
// progress (StagedImport): every reader treats it as deleted, so staged rows
// are invisible until the import commits.
inline constexpr int64_t kImportInProgress = -1;

struct DeletedDataset {
  DatasetRecord record;
  int64_t blocks_deleted = 0;
  // The deletion committed, but the WAL could not be truncated within
  // DatabaseOptions::wal_truncate_wait (a reader was still using it), so
  // copies of erased pages may remain in the WAL until the checkpointer's
  // retry completes (storage/checkpointer.h, "Pending WAL truncation").
  bool wal_truncation_pending = false;
};

// One rank's shard of a dataset placed on the MPI worker pool.
struct PlacedShard {
  int rank = 0;
  std::string host;
  int64_t rows = 0;
};

// Where a dataset is placed on the worker pool (public: the pool's rank
// count, hosts, the shards' row counts, which follow from the dataset's row
// count).
struct DatasetPlacement {
  int64_t dataset_id = 0;
  int ranks = 0;
  std::vector<PlacedShard> shards;  // by rank, one per rank
  int64_t placed_at_micros = 0;
};

class StagedImport;

class DatasetStore {
 public:
  DatasetStore(const DatasetStore&) = delete;
  DatasetStore& operator=(const DatasetStore&) = delete;

  // Parses and validates `file_bytes` per `options` (see ParseDatasetFile),
  // then stores metadata and rows in one transaction: on any error nothing
  // is written.
  // Errors: INVALID_ARGUMENT for bad options or file contents (message names
  // the line, never row values); ALREADY_EXISTS if the name is taken;
  // UNAVAILABLE if the database is busy.
  absl::StatusOr<DatasetRecord> Import(const ImportOptions& options,
                                       absl::string_view file_bytes);
  // Starts a streaming import: reserves the name now
  // (ALREADY_EXISTS before any byte is sent) under a record every reader
  // treats as deleted, then stores the rows block by block as they are
  // parsed, each block in its own short transaction (other writers, such as
  // budget admissions, interleave), and makes the dataset visible in one
  // final transaction. Memory is bounded by one block and one line. Until
  // that commit nothing is visible; an error, a Discard() or destruction
  // removes every staged row (secure_delete, WAL truncated or its
  // truncation left pending, as by Delete) and frees the name; a crash leaves a
  // staged record that DiscardStagedImports() removes (the server calls it at
  // start, holding the database lock). INVALID_ARGUMENT for bad options;
  // ALREADY_EXISTS; UNAVAILABLE.
  absl::StatusOr<std::unique_ptr<StagedImport>> BeginImport(
      const ImportOptions& options);
  // Removes every staged import (see BeginImport); returns how many. Only
  // for a process that holds the database exclusively (no import running).
  absl::StatusOr<int64_t> DiscardStagedImports();

  // The same for rows already parsed by ParseDatasetFile(options, ...)
  // (callers that derive public metadata from the parsed rows first).
  absl::StatusOr<DatasetRecord> ImportParsed(const ImportOptions& options,
                                             const ParsedRows& rows);

  // NOT_FOUND if no dataset has this name or it was deleted.
  absl::StatusOr<DatasetRecord> Get(absl::string_view name);

  // Deletes the dataset's rows (blocks), feature names and grants in one
  // transaction, with SQLite's secure_delete on (freed content is
  // overwritten with zeros), keeps its metadata row as a tombstone so that
  // its ledger, jobs and audit history stay and its name stays reserved
  // (re-importing under the same name would otherwise restart the budget of
  // the same people's data), clears the statistics of its rows (nonzeros),
  // and marks the WAL's truncation pending in the same transaction. Before
  // that transaction commits the deletion is written to the database's
  // deletion record (storage/deletion_record.h), if it has one. Then it
  // checkpoints and truncates the WAL, so no copy of the rows remains in
  // either file; if a reader keeps the WAL busy for longer than
  // DatabaseOptions::wal_truncate_wait, the result says
  // wal_truncation_pending and the checkpointer retries until it completes.
  // Errors: NOT_FOUND (no such dataset, or already deleted); UNAVAILABLE
  // (database busy, or the deletion record cannot be written: nothing was
  // deleted).
  absl::StatusOr<DeletedDataset> Delete(absl::string_view name);

  // Completes recorded deletions in a database that does not reflect them
  // (a restored backup taken before the deletion, or a deletion whose
  // transaction a crash interrupted): every dataset of `entries` that is
  // here with the same id and creation time and still has rows (or is not
  // deleted, or has statistics) is purged and tombstoned as Delete does,
  // in one transaction per dataset together with an audit record
  // ("Server/ReapplyDeletion"); and the statistics of every tombstone
  // written before deletions cleared them are cleared. Returns the entries
  // it purged. Afterwards
  // the WAL truncation is attempted as by Delete; if it stays busy the flag
  // stays pending (Database::Open hands it to the checkpointer).
  absl::StatusOr<std::vector<DeletionEntry>> ReapplyDeletions(
      const std::vector<DeletionEntry>& entries);

  // Whether a deletion's WAL truncation is still pending.
  absl::StatusOr<bool> WalTruncationPending();

  // The live public dummy attached to dataset `id` (the newest, if several),
  // or nullopt.
  absl::StatusOr<std::optional<DatasetRecord>> FindDummyFor(int64_t id);

  // The PUBLIC slopes of a max-affine problem (problem_json non-empty): the
  // stored features, m x d, read without the offsets (the labels column is
  // never read). FAILED_PRECONDITION for any other dataset, whose features
  // are private; NOT_FOUND; DATA_LOSS if the stored blocks are inconsistent.
  absl::StatusOr<Eigen::MatrixXd> LoadPublicSlopes(absl::string_view name);

  // Records that live dataset `dataset_id`, as created at
  // `created_at_micros`, is placed on a pool of `ranks` ranks with these
  // shards (one per rank), replacing an earlier placement, in one
  // transaction. NOT_FOUND if the dataset was deleted (or replaced) since;
  // INVALID_ARGUMENT unless the shards are ranks 0..ranks-1.
  absl::StatusOr<DatasetPlacement> RecordPlacement(
      int64_t dataset_id, int64_t created_at_micros, int ranks,
      const std::vector<PlacedShard>& shards);
  // The placement of dataset `dataset_id`, or nullopt.
  absl::StatusOr<std::optional<DatasetPlacement>> FindPlacement(
      int64_t dataset_id);
  // Forgets the placement of `dataset_id` (its shards were dropped from the
  // pool). Deleting the dataset's rows removes it too.
  absl::Status RemovePlacement(int64_t dataset_id);

  // All datasets that are not deleted, ordered by name.
  absl::StatusOr<std::vector<DatasetRecord>> List();

  // Loads the rows into memory: Eigen CSR for sparse datasets, a dense
  // matrix otherwise. Labels are as stored (binary in {-1, +1}).
  // Errors: NOT_FOUND; DATA_LOSS if the stored blocks are inconsistent.
  absl::StatusOr<Dataset> Load(absl::string_view name);

 private:
  friend class Database;
  friend class Ledger;
  friend class AccessStore;
  friend class JobStore;
  explicit DatasetStore(Database& db) : db_(db) {}

  friend class StagedImport;
  // Removes dataset `id`'s rows, feature names and grants (secure_delete).
  static absl::StatusOr<int64_t> PurgeRowsLocked(Connection& conn, int64_t id);
  // PurgeRowsLocked, then makes `id` a tombstone deleted at `deleted_at`
  // with its statistics cleared, and marks the WAL truncation pending.
  static absl::StatusOr<int64_t> EraseLocked(Connection& conn, int64_t id,
                                             int64_t deleted_at);
  // CompletePendingWalTruncation within DatabaseOptions::wal_truncate_wait;
  // hands what is left to the checkpointer. Returns whether it completed.
  bool TruncateWalOrDefer(Connection& conn);
  // The record named `name`, read on `conn` (caller holds the lock).
  static absl::StatusOr<DatasetRecord> GetLocked(Connection& conn,
                                                 absl::string_view name);
  static absl::StatusOr<DatasetRecord> GetByIdLocked(Connection& conn,
                                                     int64_t id);

  Database& db_;
};

}  // namespace dpopt::storage

#endif  // DPOPT_STORAGE_DATASET_STORE_H_
