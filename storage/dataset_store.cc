#include "storage/dataset_store.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "core/common/status_macros.h"
#include "storage/access_store.h"
#include "storage/blob_codec.h"
#include "storage/checkpointer.h"
#include "storage/database.h"
#include "storage/dataset_rows.h"
#include "storage/sqlite.h"
#include "storage/staged_import.h"

namespace dpopt::storage {
namespace {

using internal::InsertFeatureNamesLocked;
using internal::InsertRowRange;
using internal::kInsertBlock;

// Asks the kernel to back a freshly allocated, not yet touched buffer with
// transparent huge pages (a hint; errors are ignored). Jobs read sampled rows
// from anywhere in a decoded dataset, and a dense row touches `dimension`
// columns of column-major storage: with 4 KiB pages nearly every entry is a
// TLB miss, which inside a VM costs a two-level page walk. Measured on the
// 2-core VM (server jobs, dataset cached, batch 1000 of 1M x 100 dense
// rows): 2.4-3.1 -> 1.9 ms per DP-SGD step, 760 MiB of the dataset in huge
// pages. Debian's default THP mode is "madvise", so nothing changes without
// this call. Only buffers of 32 MiB or more; memory use is unchanged. For a
// private sparse dataset the buffer size follows its nonzero count, so this
// stays within the documented timing channel (loading and steps already
// take time in proportion to nonzeros; docs/decisions.md, "Timing").
void AdviseHugePages(void* data, size_t bytes) {
  constexpr uintptr_t kHuge = uintptr_t{2} << 20;
  if (bytes < (size_t{32} << 20)) return;
  const uintptr_t begin =
      (reinterpret_cast<uintptr_t>(data) + kHuge - 1) & ~(kHuge - 1);
  const uintptr_t end =
      (reinterpret_cast<uintptr_t>(data) + bytes) & ~(kHuge - 1);
  if (end > begin) {
    (void)madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);
  }
}

using internal::AsBytes;
using internal::PackVector;
using internal::UnpackVector;

constexpr char kSelectColumns[] =
    "SELECT id, name, num_rows, dimension, nonzeros, is_public, sparse, "
    "format, label_kind, num_classes, relation, epsilon_budget, "
    "delta_budget, budget_filter, lower_bounds, upper_bounds, "
    "row_norm_bound, description, created_at, deleted_at, problem, "
    "dummy_for FROM datasets ";

absl::Status Corrupt(absl::string_view name, absl::string_view what) {
  return absl::DataLossError(
      absl::StrCat("dataset \"", name, "\" is corrupt: ", what));
}

absl::StatusOr<DatasetRecord> ReadRecord(Connection& conn, Statement& st) {
  DatasetRecord r;
  r.id = st.ColumnInt64(0);
  r.name = st.ColumnText(1);
  r.rows = st.ColumnInt64(2);
  r.dimension = st.ColumnInt64(3);
  r.nonzeros = st.ColumnInt64(4);
  r.is_public = st.ColumnInt64(5) != 0;
  r.sparse = st.ColumnInt64(6) != 0;
  auto format = ParseDatasetFormat(st.ColumnText(7));
  if (!format.ok()) return Corrupt(r.name, "unknown format");
  r.format = *format;
  const int64_t kind = st.ColumnInt64(8);
  if (kind < 0 || kind > static_cast<int64_t>(LabelKind::kReal)) {
    return Corrupt(r.name, "unknown label kind");
  }
  r.label_kind = static_cast<LabelKind>(kind);
  r.num_classes = static_cast<int>(st.ColumnInt64(9));
  r.relation = st.ColumnText(10);
  r.epsilon_budget = st.ColumnDouble(11);
  r.delta_budget = st.ColumnDouble(12);
  r.budget_filter = st.ColumnText(13);
  if (!st.ColumnIsNull(14)) {
    if (!UnpackVector(st.ColumnBlobView(14), &r.bounds.lower) ||
        !UnpackVector(st.ColumnBlobView(15), &r.bounds.upper) ||
        static_cast<int64_t>(r.bounds.lower.size()) != r.dimension ||
        r.bounds.upper.size() != r.bounds.lower.size()) {
      return Corrupt(r.name, "declared bounds");
    }
  }
  if (!st.ColumnIsNull(16)) r.bounds.row_norm_bound = st.ColumnDouble(16);
  r.description = st.ColumnText(17);
  r.created_at_micros = st.ColumnInt64(18);
  r.deleted_at_micros = st.ColumnInt64(19);
  r.problem_json = st.ColumnText(20);
  r.dummy_for_id = st.ColumnInt64(21);

  ASSIGN_OR_RETURN(Statement names,
                   conn.Prepare("SELECT idx, name FROM dataset_features WHERE "
                                "dataset_id = ? ORDER BY idx"));
  RETURN_IF_ERROR(names.BindInt64(1, r.id));
  for (;;) {
    ASSIGN_OR_RETURN(bool row, names.Step());
    if (!row) break;
    if (names.ColumnInt64(0) != static_cast<int64_t>(r.feature_names.size())) {
      return Corrupt(r.name, "feature names");
    }
    r.feature_names.push_back(names.ColumnText(1));
  }
  if (!r.feature_names.empty() &&
      static_cast<int64_t>(r.feature_names.size()) != r.dimension) {
    return Corrupt(r.name, "feature names");
  }
  return r;
}

absl::Status InsertBlocks(Connection& conn, int64_t dataset_id,
                          const ParsedRows& rows, int block_rows) {
  ASSIGN_OR_RETURN(Statement insert, conn.Prepare(kInsertBlock));
  std::vector<int64_t> offsets;
  int64_t block = 0;
  for (int64_t first = 0; first < rows.rows; first += block_rows, ++block) {
    const int64_t n = std::min<int64_t>(block_rows, rows.rows - first);
    RETURN_IF_ERROR(InsertRowRange(insert, dataset_id, block, first, rows,
                                   first, n, offsets));
  }
  return absl::OkStatus();
}

absl::Status CheckNameFreeLocked(Connection& conn, absl::string_view name) {
  ASSIGN_OR_RETURN(Statement exists,
                   conn.Prepare("SELECT deleted_at FROM datasets WHERE name = "
                                "?"));
  RETURN_IF_ERROR(exists.BindText(1, name));
  ASSIGN_OR_RETURN(bool taken, exists.Step());
  if (!taken) return absl::OkStatus();
  if (exists.ColumnInt64(0) == kImportInProgress) {
    return absl::AlreadyExistsError(absl::StrCat(
        "a dataset named \"", name, "\" is being imported right now"));
  }
  return absl::AlreadyExistsError(absl::StrCat(
      "a dataset named \"", name,
      "\" already exists (or existed: a deleted dataset's name stays "
      "reserved with its ledger)"));
}

// Inserts the metadata row with `dimension` (options.dimension may be 0: a
// CSV file's inferred dimension); returns its id.
absl::StatusOr<int64_t> InsertDatasetRowLocked(Connection& conn,
                                               const ImportOptions& options,
                                               int64_t dimension, int64_t rows,
                                               int64_t nonzeros,
                                               int64_t deleted_at) {
  ASSIGN_OR_RETURN(
      Statement insert,
      conn.Prepare(
          "INSERT INTO datasets(name, num_rows, dimension, nonzeros, "
          "is_public, sparse, format, label_kind, num_classes, "
          "relation, epsilon_budget, delta_budget, budget_filter, "
          "lower_bounds, upper_bounds, row_norm_bound, description, "
          "created_at, problem, deleted_at, dummy_for) VALUES(?, ?, ?, "
          "?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"));
  RETURN_IF_ERROR(insert.BindText(1, options.name));
  RETURN_IF_ERROR(insert.BindInt64(2, rows));
  RETURN_IF_ERROR(insert.BindInt64(3, dimension));
  RETURN_IF_ERROR(insert.BindInt64(4, nonzeros));
  RETURN_IF_ERROR(insert.BindInt64(5, options.is_public ? 1 : 0));
  RETURN_IF_ERROR(
      insert.BindInt64(6, options.format == DatasetFormat::kLibsvm ? 1 : 0));
  RETURN_IF_ERROR(insert.BindText(7, DatasetFormatName(options.format)));
  RETURN_IF_ERROR(
      insert.BindInt64(8, static_cast<int64_t>(options.label_kind)));
  RETURN_IF_ERROR(insert.BindInt64(
      9, options.label_kind == LabelKind::kReal ? 0 : options.num_classes));
  RETURN_IF_ERROR(insert.BindText(10, options.relation));
  RETURN_IF_ERROR(insert.BindDouble(11, options.epsilon_budget));
  RETURN_IF_ERROR(insert.BindDouble(12, options.delta_budget));
  RETURN_IF_ERROR(insert.BindText(13, options.budget_filter));
  if (options.bounds.has_feature_bounds()) {
    RETURN_IF_ERROR(insert.BindBlob(14, PackVector(options.bounds.lower)));
    RETURN_IF_ERROR(insert.BindBlob(15, PackVector(options.bounds.upper)));
  } else {
    RETURN_IF_ERROR(insert.BindNull(14));
    RETURN_IF_ERROR(insert.BindNull(15));
  }
  if (options.bounds.row_norm_bound.has_value()) {
    RETURN_IF_ERROR(insert.BindDouble(16, *options.bounds.row_norm_bound));
  } else {
    RETURN_IF_ERROR(insert.BindNull(16));
  }
  RETURN_IF_ERROR(insert.BindText(17, options.description));
  RETURN_IF_ERROR(insert.BindInt64(18, internal::NowMicros()));
  RETURN_IF_ERROR(insert.BindText(19, options.problem_json));
  RETURN_IF_ERROR(insert.BindInt64(20, deleted_at));
  RETURN_IF_ERROR(insert.BindInt64(21, options.dummy_for_id));
  RETURN_IF_ERROR(insert.Run());
  return conn.LastInsertRowId();
}

}  // namespace

namespace internal {

const char kInsertBlock[] =
    "INSERT INTO dataset_blocks(dataset_id, block, first_row, num_rows, "
    "nonzeros, labels, row_offsets, col_indices, vals) VALUES(?, ?, ?, ?, ?, "
    "?, ?, ?, ?)";

// Stores rows [first, first + n) of `rows` as block `block` of dataset
// `dataset_id`, whose first row is row `stored_first_row` of the dataset.
absl::Status InsertRowRange(Statement& insert, int64_t dataset_id,
                            int64_t block, int64_t stored_first_row,
                            const ParsedRows& rows, int64_t first, int64_t n,
                            std::vector<int64_t>& offsets) {
  RETURN_IF_ERROR(insert.Reset());
  RETURN_IF_ERROR(insert.BindInt64(1, dataset_id));
  RETURN_IF_ERROR(insert.BindInt64(2, block));
  RETURN_IF_ERROR(insert.BindInt64(3, stored_first_row));
  RETURN_IF_ERROR(insert.BindInt64(4, n));
  // `rows` outlives the insert: its bytes are bound without a copy.
  RETURN_IF_ERROR(
      insert.BindBlobNoCopy(6, AsBytes(rows.labels.data() + first, n)));
  if (rows.sparse) {
    const int64_t begin = rows.row_offsets[first];
    const int64_t end = rows.row_offsets[first + n];
    offsets.resize(n + 1);
    for (int64_t i = 0; i <= n; ++i) {
      offsets[i] = rows.row_offsets[first + i] - begin;
    }
    RETURN_IF_ERROR(insert.BindInt64(5, end - begin));
    RETURN_IF_ERROR(insert.BindBlob(7, PackVector(offsets)));
    RETURN_IF_ERROR(insert.BindBlobNoCopy(
        8, AsBytes(rows.indices.data() + begin, end - begin)));
    RETURN_IF_ERROR(insert.BindBlobNoCopy(
        9, AsBytes(rows.values.data() + begin, end - begin)));
  } else {
    const int64_t d = rows.dimension;
    RETURN_IF_ERROR(insert.BindInt64(5, n * d));
    RETURN_IF_ERROR(insert.BindNull(7));
    RETURN_IF_ERROR(insert.BindNull(8));
    RETURN_IF_ERROR(insert.BindBlobNoCopy(
        9, AsBytes(rows.values.data() + first * d, n * d)));
  }
  return insert.Run();
}

absl::Status InsertFeatureNamesLocked(Connection& conn, int64_t id,
                                      const std::vector<std::string>& names) {
  if (names.empty()) return absl::OkStatus();
  ASSIGN_OR_RETURN(Statement fn,
                   conn.Prepare("INSERT INTO dataset_features(dataset_id, idx, "
                                "name) VALUES(?, ?, ?)"));
  for (size_t j = 0; j < names.size(); ++j) {
    RETURN_IF_ERROR(fn.Reset());
    RETURN_IF_ERROR(fn.BindInt64(1, id));
    RETURN_IF_ERROR(fn.BindInt64(2, static_cast<int64_t>(j)));
    RETURN_IF_ERROR(fn.BindText(3, names[j]));
    RETURN_IF_ERROR(fn.Run());
  }
  return absl::OkStatus();
}

}  // namespace internal

absl::StatusOr<DatasetRecord> DatasetStore::GetLocked(Connection& conn,
                                                      absl::string_view name) {
  ASSIGN_OR_RETURN(Statement st, conn.Prepare(absl::StrCat(kSelectColumns,
                                                           "WHERE name = ?")));
  RETURN_IF_ERROR(st.BindText(1, name));
  ASSIGN_OR_RETURN(bool row, st.Step());
  if (!row) {
    return absl::NotFoundError(
        absl::StrCat("dataset \"", name, "\" not found"));
  }
  return ReadRecord(conn, st);
}

absl::StatusOr<DatasetRecord> DatasetStore::GetByIdLocked(Connection& conn,
                                                          int64_t id) {
  ASSIGN_OR_RETURN(Statement st,
                   conn.Prepare(absl::StrCat(kSelectColumns, "WHERE id = ?")));
  RETURN_IF_ERROR(st.BindInt64(1, id));
  ASSIGN_OR_RETURN(bool row, st.Step());
  if (!row) {
    return absl::NotFoundError(absl::StrCat("dataset id ", id, " not found"));
  }
  return ReadRecord(conn, st);
}

absl::StatusOr<DatasetRecord> DatasetStore::Import(
    const ImportOptions& options, absl::string_view file_bytes) {
  ASSIGN_OR_RETURN(std::unique_ptr<StagedImport> import, BeginImport(options));
  RETURN_IF_ERROR(import->Write(file_bytes));
  return import->Commit();
}

absl::StatusOr<DatasetRecord> DatasetStore::ImportParsed(
    const ImportOptions& options, const ParsedRows& rows) {
  RETURN_IF_ERROR(options.Validate());
  if (options.dimension != 0 && rows.dimension != options.dimension) {
    return absl::InvalidArgumentError(
        absl::StrCat("the parsed rows have dimension ", rows.dimension,
                     ", the options declare ", options.dimension));
  }
  RETURN_IF_ERROR(options.ValidateDimension(rows.dimension));
  std::vector<std::string> feature_names = options.feature_names;
  if (feature_names.empty()) feature_names = rows.header_names;
  const int block_rows = db_.options().block_rows;

  return db_.WithConnection(
      [&](Connection& conn) -> absl::StatusOr<DatasetRecord> {
        Transaction txn(conn);
        RETURN_IF_ERROR(txn.Begin(Transaction::Mode::kImmediate));
        RETURN_IF_ERROR(CheckNameFreeLocked(conn, options.name));
        ASSIGN_OR_RETURN(
            const int64_t id,
            InsertDatasetRowLocked(conn, options, rows.dimension, rows.rows,
                                   rows.nonzeros(), /*deleted_at=*/0));
        RETURN_IF_ERROR(InsertFeatureNamesLocked(conn, id, feature_names));
        RETURN_IF_ERROR(InsertBlocks(conn, id, rows, block_rows));
        ASSIGN_OR_RETURN(DatasetRecord record, GetByIdLocked(conn, id));
        RETURN_IF_ERROR(txn.Commit());
        return record;
      });
}

absl::StatusOr<std::unique_ptr<StagedImport>> DatasetStore::BeginImport(
    const ImportOptions& options) {
  RETURN_IF_ERROR(options.Validate());
  ScopedCommitHookSuspension staging;
  ASSIGN_OR_RETURN(
      const int64_t id,
      db_.WithConnection([&](Connection& conn) -> absl::StatusOr<int64_t> {
        Transaction txn(conn);
        RETURN_IF_ERROR(txn.Begin(Transaction::Mode::kImmediate,
                                  Transaction::Durability::kRelaxed));
        RETURN_IF_ERROR(CheckNameFreeLocked(conn, options.name));
        // num_rows, and an inferred dimension, are placeholders (the schema
        // requires > 0) until Commit. The placeholder dimension agrees with
        // declared per-feature bounds (which the inferred one must match), so
        // reading the staged row meanwhile (a Get by name) finds it
        // consistent.
        const int64_t dimension =
            options.dimension > 0 ? options.dimension
            : options.bounds.has_feature_bounds()
                ? static_cast<int64_t>(options.bounds.lower.size())
                : 1;
        ASSIGN_OR_RETURN(int64_t id, InsertDatasetRowLocked(
                                         conn, options, dimension, /*rows=*/1,
                                         /*nonzeros=*/0, kImportInProgress));
        RETURN_IF_ERROR(txn.Commit());
        return id;
      }));
  std::unique_ptr<StagedImport> import(new StagedImport(db_, options, id));
  DatasetParser::BlockLimits limits;
  limits.max_rows = db_.options().block_rows;
  StagedImport* raw = import.get();
  ASSIGN_OR_RETURN(
      import->parser_,
      DatasetParser::Create(options, limits, [raw](ParsedRows& block) {
        return raw->QueueBlock(block);
      }));
  return import;
}

absl::StatusOr<int64_t> DatasetStore::DiscardStagedImports() {
  ScopedCommitHookSuspension staging;
  return db_.WithConnection([&](Connection& conn) -> absl::StatusOr<int64_t> {
    int64_t discarded = 0;
    {
      Transaction txn(conn);
      RETURN_IF_ERROR(txn.Begin(Transaction::Mode::kImmediate));
      ASSIGN_OR_RETURN(Statement st,
                       conn.Prepare("SELECT id FROM datasets WHERE deleted_at "
                                    "= ?"));
      RETURN_IF_ERROR(st.BindInt64(1, kImportInProgress));
      std::vector<int64_t> ids;
      for (;;) {
        ASSIGN_OR_RETURN(bool row, st.Step());
        if (!row) break;
        ids.push_back(st.ColumnInt64(0));
      }
      for (int64_t id : ids) {
        RETURN_IF_ERROR(PurgeRowsLocked(conn, id).status());
        ASSIGN_OR_RETURN(Statement del,
                         conn.Prepare("DELETE FROM datasets WHERE id = ?"));
        RETURN_IF_ERROR(del.BindInt64(1, id));
        RETURN_IF_ERROR(del.Run());
      }
      if (!ids.empty()) RETURN_IF_ERROR(MarkWalTruncationPending(conn));
      RETURN_IF_ERROR(txn.Commit());
      discarded = static_cast<int64_t>(ids.size());
    }
    if (discarded > 0) (void)TruncateWalOrDefer(conn);
    return discarded;
  });
}

absl::StatusOr<int64_t> DatasetStore::PurgeRowsLocked(Connection& conn,
                                                      int64_t id) {
  RETURN_IF_ERROR(conn.Execute("PRAGMA secure_delete=ON"));
  int64_t blocks = -1;
  for (const char* sql :
       {"DELETE FROM dataset_blocks WHERE dataset_id = ?",
        "DELETE FROM dataset_features WHERE dataset_id = ?",
        "DELETE FROM grants WHERE dataset_id = ?",
        "DELETE FROM dataset_placements WHERE dataset_id = ?"}) {
    ASSIGN_OR_RETURN(Statement st, conn.Prepare(sql));
    RETURN_IF_ERROR(st.BindInt64(1, id));
    RETURN_IF_ERROR(st.Run());
    if (blocks < 0) blocks = conn.Changes();
  }
  return blocks;
}

absl::StatusOr<DatasetRecord> DatasetStore::Get(absl::string_view name) {
  return db_.WithConnection(
      [&](Connection& conn) -> absl::StatusOr<DatasetRecord> {
        ASSIGN_OR_RETURN(DatasetRecord r, GetLocked(conn, name));
        if (r.deleted_at_micros != 0) {
          return absl::NotFoundError(
              absl::StrCat("dataset \"", name, "\" not found"));
        }
        return r;
      });
}

absl::StatusOr<int64_t> DatasetStore::EraseLocked(Connection& conn, int64_t id,
                                                  int64_t deleted_at) {
  ASSIGN_OR_RETURN(int64_t blocks, PurgeRowsLocked(conn, id));
  // The tombstone keeps public metadata only: the number of stored nonzeros
  // is a statistic of the erased rows.
  ASSIGN_OR_RETURN(Statement tomb,
                   conn.Prepare("UPDATE datasets SET deleted_at = ?, "
                                "nonzeros = 0 WHERE id = ?"));
  RETURN_IF_ERROR(tomb.BindInt64(1, deleted_at));
  RETURN_IF_ERROR(tomb.BindInt64(2, id));
  RETURN_IF_ERROR(tomb.Run());
  RETURN_IF_ERROR(MarkWalTruncationPending(conn));
  return blocks;
}

bool DatasetStore::TruncateWalOrDefer(Connection& conn) {
  absl::StatusOr<bool> done =
      CompletePendingWalTruncation(conn, db_.options().wal_truncate_wait);
  if (done.ok() && *done) return true;
  // Database::Open hands a pending flag to the checkpointer once it runs.
  if (db_.checkpointer_ != nullptr) db_.checkpointer_->RequestTruncate();
  return false;
}

absl::StatusOr<DeletedDataset> DatasetStore::Delete(absl::string_view name) {
  return db_.WithConnection(
      [&](Connection& conn) -> absl::StatusOr<DeletedDataset> {
        DeletedDataset out;
        {
          Transaction txn(conn);
          RETURN_IF_ERROR(txn.Begin(Transaction::Mode::kImmediate));
          ASSIGN_OR_RETURN(out.record, GetLocked(conn, name));
          if (out.record.deleted_at_micros != 0) {
            return absl::NotFoundError(
                absl::StrCat("dataset \"", name, "\" not found"));
          }
          const int64_t id = out.record.id;
          out.record.deleted_at_micros = internal::NowMicros();
          ASSIGN_OR_RETURN(out.blocks_deleted,
                           EraseLocked(conn, id, out.record.deleted_at_micros));
          out.record.nonzeros = 0;
          out.record.feature_names.clear();
          // Recorded outside the database before the commit: a crash in
          // between leaves a recorded, still live dataset, which the next
          // open erases (storage/deletion_record.h, "Crash ordering").
          DeletionRecord* record = db_.deletion_record();
          if (record != nullptr) {
            DeletionEntry entry;
            entry.dataset_id = id;
            entry.created_at_micros = out.record.created_at_micros;
            entry.deleted_at_micros = out.record.deleted_at_micros;
            entry.name = out.record.name;
            absl::Status recorded = record->Add(entry);
            if (!recorded.ok()) {
              return absl::UnavailableError(absl::StrCat(
                  "the deletion could not be recorded beside the database (",
                  recorded.message(), "); nothing was deleted"));
            }
          }
          absl::Status committed = txn.Commit();
          if (!committed.ok()) {
            if (record != nullptr) (void)record->Remove(id);
            return committed;
          }
        }
        // Copy every page back into the main file and truncate the WAL, so
        // the old row pages survive in neither file.
        out.wal_truncation_pending = !TruncateWalOrDefer(conn);
        return out;
      });
}

absl::StatusOr<std::vector<DeletionEntry>> DatasetStore::ReapplyDeletions(
    const std::vector<DeletionEntry>& entries) {
  return db_.WithConnection(
      [&](Connection& conn) -> absl::StatusOr<std::vector<DeletionEntry>> {
        // Tombstones written before deletions cleared their statistics.
        RETURN_IF_ERROR(conn.Execute(
            "UPDATE datasets SET nonzeros = 0 WHERE deleted_at > 0 AND "
            "nonzeros != 0"));
        std::vector<DeletionEntry> purged;
        for (const DeletionEntry& e : entries) {
          Transaction txn(conn);
          RETURN_IF_ERROR(txn.Begin(Transaction::Mode::kImmediate));
          int64_t deleted_at = 0;
          bool live = false;
          {
            ASSIGN_OR_RETURN(
                Statement st,
                conn.Prepare(
                    "SELECT d.deleted_at, d.nonzeros, EXISTS(SELECT 1 "
                    "FROM dataset_blocks b WHERE b.dataset_id = d.id) "
                    "FROM datasets d WHERE d.id = ? AND d.created_at = "
                    "?"));
            RETURN_IF_ERROR(st.BindInt64(1, e.dataset_id));
            RETURN_IF_ERROR(st.BindInt64(2, e.created_at_micros));
            ASSIGN_OR_RETURN(bool row, st.Step());
            // No row: not in this database (or the id is another dataset's).
            if (row) {
              deleted_at = st.ColumnInt64(0);
              live = deleted_at == 0 || st.ColumnInt64(1) != 0 ||
                     st.ColumnInt64(2) != 0;
            }
          }
          if (!live) continue;
          ASSIGN_OR_RETURN(
              int64_t blocks,
              EraseLocked(conn, e.dataset_id,
                          deleted_at > 0 ? deleted_at : e.deleted_at_micros));
          AuditRecord audit;
          audit.principal = "dpopt-server";
          audit.method = "Server/ReapplyDeletion";
          audit.dataset = e.name;
          audit.detail = absl::StrCat(
              "dataset \"", e.name, "\" (id ", e.dataset_id, "), deleted at ",
              absl::FormatTime("%Y-%m-%dT%H:%M:%SZ",
                               absl::FromUnixMicros(e.deleted_at_micros),
                               absl::UTCTimeZone()),
              ", was live in this database (a backup restored from before the "
              "deletion, or an interrupted deletion): ",
              blocks, " row block(s) erased again");
          RETURN_IF_ERROR(AccessStore::AppendAuditLocked(conn, audit));
          RETURN_IF_ERROR(txn.Commit());
          purged.push_back(e);
        }
        ASSIGN_OR_RETURN(bool pending, storage::WalTruncationPending(conn));
        if (pending) (void)TruncateWalOrDefer(conn);
        return purged;
      });
}

absl::StatusOr<bool> DatasetStore::WalTruncationPending() {
  return db_.WithConnection([](Connection& conn) -> absl::StatusOr<bool> {
    return storage::WalTruncationPending(conn);
  });
}

absl::StatusOr<std::vector<DatasetRecord>> DatasetStore::List() {
  return db_.WithConnection(
      [&](Connection& conn) -> absl::StatusOr<std::vector<DatasetRecord>> {
        Transaction txn(conn);
        RETURN_IF_ERROR(txn.Begin(Transaction::Mode::kDeferred));
        ASSIGN_OR_RETURN(Statement st,
                         conn.Prepare(absl::StrCat(kSelectColumns,
                                                   "WHERE deleted_at = 0 "
                                                   "ORDER BY name")));
        std::vector<DatasetRecord> out;
        for (;;) {
          ASSIGN_OR_RETURN(bool row, st.Step());
          if (!row) break;
          ASSIGN_OR_RETURN(DatasetRecord r, ReadRecord(conn, st));
          out.push_back(std::move(r));
        }
        RETURN_IF_ERROR(txn.Commit());
        return out;
      });
}

absl::StatusOr<std::optional<DatasetRecord>> DatasetStore::FindDummyFor(
    int64_t id) {
  return db_.WithConnection(
      [&](Connection& conn) -> absl::StatusOr<std::optional<DatasetRecord>> {
        Transaction txn(conn);
        RETURN_IF_ERROR(txn.Begin(Transaction::Mode::kDeferred));
        ASSIGN_OR_RETURN(
            Statement st,
            conn.Prepare(absl::StrCat(kSelectColumns,
                                      "WHERE dummy_for = ? AND deleted_at = 0 "
                                      "AND is_public = 1 ORDER BY id DESC "
                                      "LIMIT 1")));
        RETURN_IF_ERROR(st.BindInt64(1, id));
        ASSIGN_OR_RETURN(bool row, st.Step());
        std::optional<DatasetRecord> out;
        if (row) {
          ASSIGN_OR_RETURN(DatasetRecord r, ReadRecord(conn, st));
          out = std::move(r);
        }
        RETURN_IF_ERROR(txn.Commit());
        return out;
      });
}

absl::StatusOr<DatasetPlacement> DatasetStore::RecordPlacement(
    int64_t dataset_id, int64_t created_at_micros, int ranks,
    const std::vector<PlacedShard>& shards) {
  if (ranks < 1 || shards.size() != static_cast<size_t>(ranks)) {
    return absl::InvalidArgumentError("a placement needs one shard per rank");
  }
  for (int r = 0; r < ranks; ++r) {
    if (shards[r].rank != r || shards[r].rows < 0) {
      return absl::InvalidArgumentError(
          "a placement's shards must be ranks 0, 1, ... in order");
    }
  }
  return db_.WithConnection([&](Connection& conn)
                                -> absl::StatusOr<DatasetPlacement> {
    Transaction txn(conn);
    RETURN_IF_ERROR(txn.Begin(Transaction::Mode::kImmediate));
    absl::StatusOr<DatasetRecord> live = GetByIdLocked(conn, dataset_id);
    if (!live.ok() || live->deleted_at_micros != 0 ||
        live->created_at_micros != created_at_micros) {
      return absl::NotFoundError(absl::StrCat(
          "dataset id ", dataset_id, " was deleted during its placement"));
    }
    ASSIGN_OR_RETURN(
        Statement clear,
        conn.Prepare("DELETE FROM dataset_placements WHERE dataset_id = ?"));
    RETURN_IF_ERROR(clear.BindInt64(1, dataset_id));
    RETURN_IF_ERROR(clear.Run());
    DatasetPlacement out;
    out.dataset_id = dataset_id;
    out.ranks = ranks;
    out.shards = shards;
    out.placed_at_micros = internal::NowMicros();
    for (const PlacedShard& shard : shards) {
      ASSIGN_OR_RETURN(
          Statement insert,
          conn.Prepare("INSERT INTO dataset_placements(dataset_id, rank, "
                       "ranks, host, num_rows, placed_at) VALUES(?, ?, "
                       "?, ?, ?, ?)"));
      RETURN_IF_ERROR(insert.BindInt64(1, dataset_id));
      RETURN_IF_ERROR(insert.BindInt64(2, shard.rank));
      RETURN_IF_ERROR(insert.BindInt64(3, ranks));
      RETURN_IF_ERROR(insert.BindText(4, shard.host));
      RETURN_IF_ERROR(insert.BindInt64(5, shard.rows));
      RETURN_IF_ERROR(insert.BindInt64(6, out.placed_at_micros));
      RETURN_IF_ERROR(insert.Run());
    }
    RETURN_IF_ERROR(txn.Commit());
    return out;
  });
}

absl::StatusOr<std::optional<DatasetPlacement>> DatasetStore::FindPlacement(
    int64_t dataset_id) {
  return db_.WithConnection(
      [&](Connection& conn) -> absl::StatusOr<std::optional<DatasetPlacement>> {
        ASSIGN_OR_RETURN(
            Statement st,
            conn.Prepare("SELECT rank, ranks, host, num_rows, placed_at FROM "
                         "dataset_placements WHERE dataset_id = ? ORDER BY "
                         "rank"));
        RETURN_IF_ERROR(st.BindInt64(1, dataset_id));
        DatasetPlacement p;
        p.dataset_id = dataset_id;
        for (;;) {
          ASSIGN_OR_RETURN(bool row, st.Step());
          if (!row) break;
          PlacedShard shard;
          shard.rank = static_cast<int>(st.ColumnInt64(0));
          p.ranks = static_cast<int>(st.ColumnInt64(1));
          shard.host = st.ColumnText(2);
          shard.rows = st.ColumnInt64(3);
          p.placed_at_micros = st.ColumnInt64(4);
          p.shards.push_back(std::move(shard));
        }
        if (p.shards.empty()) return std::optional<DatasetPlacement>();
        if (p.shards.size() != static_cast<size_t>(p.ranks)) {
          return absl::DataLossError(
              absl::StrCat("dataset id ", dataset_id, "'s placement has ",
                           p.shards.size(), " shards for ", p.ranks, " ranks"));
        }
        return std::optional<DatasetPlacement>(std::move(p));
      });
}

absl::Status DatasetStore::RemovePlacement(int64_t dataset_id) {
  return db_.WithConnection([&](Connection& conn) -> absl::Status {
    ASSIGN_OR_RETURN(
        Statement st,
        conn.Prepare("DELETE FROM dataset_placements WHERE dataset_id = ?"));
    RETURN_IF_ERROR(st.BindInt64(1, dataset_id));
    return st.Run();
  });
}

absl::StatusOr<Eigen::MatrixXd> DatasetStore::LoadPublicSlopes(
    absl::string_view name) {
  return db_.WithConnection(
      [&](Connection& conn) -> absl::StatusOr<Eigen::MatrixXd> {
        Transaction txn(conn);
        RETURN_IF_ERROR(txn.Begin(Transaction::Mode::kDeferred));
        ASSIGN_OR_RETURN(DatasetRecord rec, GetLocked(conn, name));
        if (rec.deleted_at_micros != 0) {
          return absl::NotFoundError(
              absl::StrCat("dataset \"", name, "\" not found"));
        }
        if (rec.problem_json.empty()) {
          return absl::FailedPreconditionError(absl::StrCat(
              "dataset \"", name,
              "\" is not a max-affine problem: its features are not public"));
        }
        const int64_t n = rec.rows;
        const int64_t d = rec.dimension;
        if (n <= 0 || d <= 0 || rec.sparse)
          return Corrupt(rec.name, "row counts");
        Eigen::MatrixXd slopes(n, d);
        // Only the features: the labels column (the private offsets) is not
        // selected.
        ASSIGN_OR_RETURN(Statement st,
                         conn.Prepare("SELECT block, first_row, num_rows, "
                                      "nonzeros, vals FROM dataset_blocks "
                                      "WHERE dataset_id = ? ORDER BY block"));
        RETURN_IF_ERROR(st.BindInt64(1, rec.id));
        int64_t next_row = 0;
        int64_t expected_block = 0;
        for (;;) {
          ASSIGN_OR_RETURN(bool has_row, st.Step());
          if (!has_row) break;
          const int64_t block = st.ColumnInt64(0);
          const int64_t first = st.ColumnInt64(1);
          const int64_t rows = st.ColumnInt64(2);
          const int64_t nnz = st.ColumnInt64(3);
          if (block != expected_block++ || first != next_row || rows <= 0 ||
              first + rows > n || nnz != rows * d) {
            return Corrupt(rec.name, "block layout");
          }
          const absl::string_view vals = st.ColumnBlobView(4);
          if (vals.size() != static_cast<size_t>(nnz) * sizeof(double)) {
            return Corrupt(rec.name, "block sizes");
          }
          std::vector<double> buf;
          UnpackVector(vals, &buf);
          slopes.middleRows(first, rows) =
              Eigen::Map<const Eigen::Matrix<double, Eigen::Dynamic,
                                             Eigen::Dynamic, Eigen::RowMajor>>(
                  buf.data(), rows, d);
          next_row += rows;
        }
        if (next_row != n) return Corrupt(rec.name, "missing blocks");
        if (!slopes.allFinite()) return Corrupt(rec.name, "slopes");
        RETURN_IF_ERROR(txn.Commit());
        return slopes;
      });
}

absl::StatusOr<Dataset> DatasetStore::Load(absl::string_view name) {
  return db_.WithConnection([&](Connection& conn) -> absl::StatusOr<Dataset> {
    Transaction txn(conn);
    RETURN_IF_ERROR(txn.Begin(Transaction::Mode::kDeferred));
    ASSIGN_OR_RETURN(DatasetRecord rec, GetLocked(conn, name));
    if (rec.deleted_at_micros != 0) {
      return absl::FailedPreconditionError(
          absl::StrCat("dataset \"", name, "\" was deleted"));
    }
    const int64_t n = rec.rows;
    const int64_t d = rec.dimension;
    if (n <= 0 || d <= 0 || rec.nonzeros < 0 ||
        (!rec.sparse && rec.nonzeros != n * d)) {
      return Corrupt(rec.name, "row counts");
    }
    Eigen::VectorXd labels(n);
    SparseRows sparse;
    DenseRows dense;
    if (rec.sparse) {
      sparse.resize(n, d);
      sparse.resizeNonZeros(rec.nonzeros);
      sparse.outerIndexPtr()[0] = 0;
      AdviseHugePages(sparse.valuePtr(), rec.nonzeros * sizeof(double));
      AdviseHugePages(sparse.innerIndexPtr(), rec.nonzeros * sizeof(int64_t));
    } else {
      dense.resize(n, d);  // not yet touched: the advice applies to faults
      AdviseHugePages(dense.data(),
                      static_cast<size_t>(n * d) * sizeof(double));
    }

    ASSIGN_OR_RETURN(
        Statement st,
        conn.Prepare("SELECT block, first_row, num_rows, nonzeros, labels, "
                     "row_offsets, col_indices, vals FROM dataset_blocks "
                     "WHERE dataset_id = ? ORDER BY block"));
    RETURN_IF_ERROR(st.BindInt64(1, rec.id));
    int64_t next_row = 0;
    int64_t next_nz = 0;
    int64_t expected_block = 0;
    for (;;) {
      ASSIGN_OR_RETURN(bool has_row, st.Step());
      if (!has_row) break;
      const int64_t block = st.ColumnInt64(0);
      const int64_t first = st.ColumnInt64(1);
      const int64_t rows = st.ColumnInt64(2);
      const int64_t nnz = st.ColumnInt64(3);
      if (block != expected_block++ || first != next_row || rows <= 0 ||
          first + rows > n || nnz < 0 || next_nz + nnz > rec.nonzeros) {
        return Corrupt(rec.name, "block layout");
      }
      const absl::string_view label_bytes = st.ColumnBlobView(4);
      const absl::string_view vals = st.ColumnBlobView(7);
      if (label_bytes.size() != static_cast<size_t>(rows) * sizeof(double) ||
          vals.size() != static_cast<size_t>(nnz) * sizeof(double)) {
        return Corrupt(rec.name, "block sizes");
      }
      std::memcpy(labels.data() + first, label_bytes.data(),
                  label_bytes.size());
      if (rec.sparse) {
        const absl::string_view offsets_bytes = st.ColumnBlobView(5);
        const absl::string_view index_bytes = st.ColumnBlobView(6);
        if (offsets_bytes.size() !=
                static_cast<size_t>(rows + 1) * sizeof(int64_t) ||
            index_bytes.size() != static_cast<size_t>(nnz) * sizeof(int32_t)) {
          return Corrupt(rec.name, "block sizes");
        }
        std::vector<int64_t> offsets(rows + 1);
        std::memcpy(offsets.data(), offsets_bytes.data(), offsets_bytes.size());
        if (offsets[0] != 0 || offsets[rows] != nnz) {
          return Corrupt(rec.name, "row offsets");
        }
        int64_t* outer = sparse.outerIndexPtr();
        for (int64_t i = 0; i < rows; ++i) {
          if (offsets[i + 1] < offsets[i]) {
            return Corrupt(rec.name, "row offsets");
          }
          outer[first + i + 1] = next_nz + offsets[i + 1];
        }
        std::vector<int32_t> idx_copy(nnz);
        std::memcpy(idx_copy.data(), index_bytes.data(), index_bytes.size());
        int64_t* inner = sparse.innerIndexPtr() + next_nz;
        for (int64_t i = 0; i < rows; ++i) {
          int64_t prev = -1;
          for (int64_t k = offsets[i]; k < offsets[i + 1]; ++k) {
            const int64_t j = idx_copy[k];
            if (j <= prev || j >= d) return Corrupt(rec.name, "indices");
            inner[k] = j;
            prev = j;
          }
        }
        std::memcpy(sparse.valuePtr() + next_nz, vals.data(), vals.size());
      } else {
        if (nnz != rows * d) return Corrupt(rec.name, "block sizes");
        const double* v = reinterpret_cast<const double*>(vals.data());
        std::vector<double> buf;
        if (reinterpret_cast<uintptr_t>(v) % alignof(double) != 0) {
          UnpackVector(vals, &buf);
          v = buf.data();
        }
        // Blocks are row-major, as Dataset keeps dense rows: one copy.
        dense.middleRows(first, rows) =
            Eigen::Map<const Eigen::Matrix<double, Eigen::Dynamic,
                                           Eigen::Dynamic, Eigen::RowMajor>>(
                v, rows, d);
      }
      next_row += rows;
      next_nz += nnz;
    }
    if (next_row != n || next_nz != rec.nonzeros) {
      return Corrupt(rec.name, "missing blocks");
    }
    RETURN_IF_ERROR(txn.Commit());
    Dataset data =
        rec.sparse ? Dataset::Sparse(std::move(sparse), std::move(labels),
                                     rec.label_kind, rec.num_classes)
                   : Dataset::DenseRowMajor(std::move(dense), std::move(labels),
                                            rec.label_kind, rec.num_classes);
    absl::Status valid = data.Validate();
    if (!valid.ok()) return Corrupt(rec.name, valid.message());
    return data;
  });
}

}  // namespace dpopt::storage
