// Curator-facing dataset operations and budget views, in proto terms. The
// only server component that turns storage records into DatasetInfo /
// BudgetStatus / LedgerEntry messages: all of them public metadata.
#ifndef DPOPT_SERVER_DATASET_MANAGER_H_
#define DPOPT_SERVER_DATASET_MANAGER_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/optim/algorithm.h"
#include "core/privacy/privacy_filter.h"
#include "dpopt/v1/dpopt.pb.h"
#include "storage/database.h"
#include "storage/staged_import.h"

namespace dpopt::optim::mpi_pool {
class WorkerPool;  // core/optim/mpi_pool/worker_pool.h
}  // namespace dpopt::optim::mpi_pool

namespace dpopt::server {

class DatasetManager {
 public:
  // REQUIRES: db (and pool, if not null: the server's MPI worker pool)
  // outlive the manager.
  static absl::StatusOr<std::unique_ptr<DatasetManager>> Create(
      storage::Database* db, optim::mpi_pool::WorkerPool* pool = nullptr);

  // An import receiving the file chunk by chunk (ImportDataset). Ordinary
  // datasets stream into storage (storage::StagedImport: memory bounded by
  // one block, nothing visible until Finish, everything removed on error or
  // destruction). Piecewise-affine's max-affine problems are described from all
  // their rows before storing, so they are buffered, up to
  // kMaxBufferedImportBytes.
  class PendingImport {
   public:
    virtual ~PendingImport() = default;
    // INVALID_ARGUMENT naming the line; RESOURCE_EXHAUSTED past the buffer
    // limit. After an error the import is discarded.
    virtual absl::Status Write(absl::string_view chunk) = 0;
    virtual absl::StatusOr<v1::DatasetInfo> Finish() = 0;
  };
  static constexpr size_t kMaxBufferedImportBytes = size_t{256} << 20;

  // Validates the header and reserves the name. INVALID_ARGUMENT for bad
  // headers, ALREADY_EXISTS for a taken name.
  absl::StatusOr<std::unique_ptr<PendingImport>> BeginImport(
      const v1::ImportHeader& header);
  // The whole file at once (BeginImport, one Write, Finish).
  absl::StatusOr<v1::DatasetInfo> Import(const v1::ImportHeader& header,
                                         absl::string_view file_bytes);
  absl::StatusOr<v1::ListDatasetsResponse> List();
  // NOT_FOUND for unknown names.
  absl::StatusOr<v1::DatasetInfo> Get(const std::string& name);
  // FAILED_PRECONDITION for public datasets (they have no budget). With a
  // non-empty `caller` holding a capped grant, also its cap and own spend.
  absl::StatusOr<v1::BudgetStatus> Budget(const std::string& name,
                                          const std::string& caller = "");
  // Every charge, or only those of `only_principal` when it is non-empty
  // (the budget shown is the dataset's either way).
  absl::StatusOr<v1::ListLedgerResponse> Ledger(
      const std::string& name, const std::string& only_principal = "");

  // The worker pool (PlaceDataset). Reads the dataset's rows once (not
  // through the job manager's cache), sends rank r its shard, and records
  // the placement with every rank's host and rows. FAILED_PRECONDITION
  // without a pool, or if the dataset was placed on more ranks than the
  // pool has now (the shards of the missing ranks could not be replaced);
  // UNAVAILABLE when the pool cannot be reached; NOT_FOUND. If the dataset
  // is deleted while it is being placed, the new shards are dropped again.
  absl::StatusOr<v1::PlaceDatasetResponse> Place(const std::string& name);
  // Deletes the shards of `record` from the pool if it is placed (every
  // rank's confirmation) and forgets its placement. If it is not recorded
  // as placed and the server has a pool, asks the ranks anyway (best
  // effort) and returns their reports only if some rank held a shard;
  // otherwise an empty list. UNAVAILABLE (nothing deleted) when it is placed
  // but this server has no pool or the pool cannot be reached;
  // FAILED_PRECONDITION when it was placed on more ranks than the pool has now.
  absl::StatusOr<std::vector<v1::RankShard>> DropPlacement(
      const storage::DatasetRecord& record);
  // DropPlacement's checks without dropping anything (the pool is started
  // if needed): OK when the dataset is not placed or its shards can be
  // dropped now. DeleteDataset asks before it cancels the dataset's jobs.
  absl::Status CheckPlacementDroppable(const storage::DatasetRecord& record);
  // The dataset's name on the pool (mpi_pool::CheckDatasetId's alphabet):
  // its id and creation time, so that a dataset imported later under a
  // reused id never finds another dataset's shards.
  static std::string PoolDatasetId(const storage::DatasetRecord& record);

  // Helpers shared with the job manager.
  static absl::StatusOr<privacy::BudgetConfig> BudgetConfigOf(
      const storage::DatasetRecord& record);
  static optim::PublicDatasetInfo PublicInfoOf(
      const storage::DatasetRecord& record);
  // Budget view of `record` given its ledger entries.
  static absl::StatusOr<v1::BudgetStatus> BudgetOf(
      const storage::DatasetRecord& record,
      const std::vector<storage::LedgerEntry>& entries);
  // ... given the number of charges and their cost blobs (or their fold).
  static absl::StatusOr<v1::BudgetStatus> BudgetOf(
      const storage::DatasetRecord& record, int64_t charges,
      const std::vector<std::string>& costs);
  // The ledger's CostFolder (storage/ledger.h): the dataset's privacy
  // filter's exact Fold. Create installs it on the database's ledger.
  static absl::StatusOr<std::string> FoldCosts(
      const storage::DatasetRecord& record,
      const std::vector<std::string>& costs);

 private:
  class StreamedImport;
  class BufferedImport;
  DatasetManager(storage::Database* db, optim::mpi_pool::WorkerPool* pool)
      : db_(db), pool_(pool) {}
  absl::StatusOr<v1::DatasetInfo> Info(const storage::DatasetRecord& record);
  // A dummy's import (ImportHeader.dummy_for): the private dataset it is for,
  // once the header fits it (public, same schema, no dummy attached yet).
  absl::StatusOr<storage::DatasetRecord> DummyTarget(
      const v1::ImportHeader& header, const storage::ImportOptions& options);
  absl::StatusOr<std::string> DummyTargetName(
      const storage::DatasetRecord& dummy);

  storage::Database* db_;
  optim::mpi_pool::WorkerPool* pool_;
};

}  // namespace dpopt::server

#endif  // DPOPT_SERVER_DATASET_MANAGER_H_
