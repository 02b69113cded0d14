// How dataset rows are written as blocks: shared by DatasetStore (one-shot
// imports) and StagedImport (streaming imports). Internal to storage/.
#ifndef DPOPT_STORAGE_DATASET_ROWS_H_
#define DPOPT_STORAGE_DATASET_ROWS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "storage/dataset_import.h"
#include "storage/sqlite.h"

namespace dpopt::storage::internal {

// The INSERT of one block into dataset_blocks (9 parameters).
extern const char kInsertBlock[];

// Stores rows [first, first + n) of `rows` as block `block` of dataset
// `dataset_id`, whose first row is row `stored_first_row` of the dataset.
// `offsets` is scratch space reused between calls.
absl::Status InsertRowRange(Statement& insert, int64_t dataset_id,
                            int64_t block, int64_t stored_first_row,
                            const ParsedRows& rows, int64_t first, int64_t n,
                            std::vector<int64_t>& offsets);

// Stores the dataset's feature names (none: nothing).
absl::Status InsertFeatureNamesLocked(Connection& conn, int64_t id,
                                      const std::vector<std::string>& names);

}  // namespace dpopt::storage::internal

#endif  // DPOPT_STORAGE_DATASET_ROWS_H_
