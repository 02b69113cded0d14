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

namespace dpopt::server {

class DatasetManager {
 public:
  // REQUIRES: db outlives the manager.
  static absl::StatusOr<std::unique_ptr<DatasetManager>> Create(
      storage::Database* db);

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
  explicit DatasetManager(storage::Database* db) : db_(db) {}
  absl::StatusOr<v1::DatasetInfo> Info(const storage::DatasetRecord& record);
  // A dummy's import (ImportHeader.dummy_for): the private dataset it is for,
  // once the header fits it (public, same schema, no dummy attached yet).
  absl::StatusOr<storage::DatasetRecord> DummyTarget(
      const v1::ImportHeader& header, const storage::ImportOptions& options);
  absl::StatusOr<std::string> DummyTargetName(
      const storage::DatasetRecord& dummy);

  storage::Database* db_;
};

}  // namespace dpopt::server

#endif  // DPOPT_SERVER_DATASET_MANAGER_H_
