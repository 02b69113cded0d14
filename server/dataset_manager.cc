#include "server/dataset_manager.h"

#include <cmath>
#include <optional>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "core/common/status_macros.h"
#include "core/optim/mpi_pool/worker_pool.h"
#include "server/proto_util.h"
#include "server/synthetic_dataset.h"
#include "server/translation/piecewise_affine.h"

namespace dpopt::server {
namespace {

v1::LabelType ToProto(LabelKind k) {
  switch (k) {
    case LabelKind::kBinary:
      return v1::LABEL_TYPE_BINARY;
    case LabelKind::kMulticlass:
      return v1::LABEL_TYPE_MULTICLASS;
    case LabelKind::kReal:
      return v1::LABEL_TYPE_REAL;
  }
  return v1::LABEL_TYPE_UNSPECIFIED;
}

absl::StatusOr<storage::ImportOptions> ToImportOptions(
    const v1::ImportHeader& h) {
  storage::ImportOptions o;
  o.name = h.name();
  switch (h.format()) {
    case v1::DATASET_FORMAT_LIBSVM:
      o.format = storage::DatasetFormat::kLibsvm;
      break;
    case v1::DATASET_FORMAT_CSV:
      o.format = storage::DatasetFormat::kCsv;
      break;
    default:
      return absl::InvalidArgumentError("format must be LIBSVM or CSV");
  }
  o.dimension = h.dimension();
  o.is_public = h.public_();
  o.epsilon_budget = h.epsilon_budget();
  o.delta_budget = h.delta_budget();
  o.budget_filter = h.budget_filter() == v1::BUDGET_FILTER_BASIC
                        ? std::string(storage::kFilterBasic)
                        : std::string(storage::kFilterRdp);
  o.relation = h.relation() == v1::REPLACE_ONE
                   ? std::string(storage::kRelationReplaceOne)
                   : std::string(storage::kRelationAddRemove);
  switch (h.label_type()) {
    case v1::LABEL_TYPE_UNSPECIFIED:
    case v1::LABEL_TYPE_BINARY:
      o.label_kind = LabelKind::kBinary;
      o.num_classes = 2;
      break;
    case v1::LABEL_TYPE_MULTICLASS:
      o.label_kind = LabelKind::kMulticlass;
      o.num_classes = h.num_classes();
      break;
    case v1::LABEL_TYPE_REAL:
      o.label_kind = LabelKind::kReal;
      o.num_classes = 0;
      break;
    default:
      return absl::InvalidArgumentError("unknown label_type");
  }
  const std::string delim = absl::AsciiStrToLower(h.delimiter());
  if (delim.empty() || delim == ",") {
    o.csv_delimiter = storage::CsvDelimiter::kComma;
  } else if (delim == "whitespace" || delim == " " || delim == "\\t") {
    o.csv_delimiter = storage::CsvDelimiter::kWhitespace;
  } else {
    return absl::InvalidArgumentError("delimiter must be ',' or 'whitespace'");
  }
  o.csv_has_header = h.has_header();
  o.csv_label_column = h.label_last() ? -1 : h.label_column();
  o.bounds.lower.assign(h.bounds().lower().begin(), h.bounds().lower().end());
  o.bounds.upper.assign(h.bounds().upper().begin(), h.bounds().upper().end());
  if (h.bounds().row_norm_bound() != 0) {
    o.bounds.row_norm_bound = h.bounds().row_norm_bound();
  }
  o.description = h.description();
  o.feature_names.assign(h.feature_names().begin(), h.feature_names().end());
  RETURN_IF_ERROR(ApplyMaxAffineHeader(h, &o));  // piecewise-affine family
  return o;
}

privacy::Relation RelationOf(const storage::DatasetRecord& r) {
  if (r.relation == storage::kRelationReplaceOne) {
    return privacy::Relation::kReplaceOne;
  }
  if (r.relation == storage::kRelationLinfOffsets) {
    return privacy::Relation::kLinfOffsets;
  }
  return privacy::Relation::kAddRemove;
}

v1::NeighbouringRelation RelationProto(const storage::DatasetRecord& r) {
  switch (RelationOf(r)) {
    case privacy::Relation::kReplaceOne:
      return v1::REPLACE_ONE;
    case privacy::Relation::kLinfOffsets:
      return v1::LINF_OFFSETS;
    case privacy::Relation::kAddRemove:
      break;
  }
  return v1::ADD_REMOVE;
}

}  // namespace

absl::StatusOr<std::unique_ptr<DatasetManager>> DatasetManager::Create(
    storage::Database* db, optim::mpi_pool::WorkerPool* pool) {
  if (db == nullptr) return absl::InvalidArgumentError("database is null");
  db->ledger().SetCostFolder(&DatasetManager::FoldCosts);
  return std::unique_ptr<DatasetManager>(new DatasetManager(db, pool));
}

std::string DatasetManager::PoolDatasetId(const storage::DatasetRecord& r) {
  return absl::StrCat("dataset-", r.id, "-", r.created_at_micros);
}

namespace {

v1::RankShard RankShardOf(const optim::mpi_pool::RankReport& report) {
  v1::RankShard out;
  out.set_rank(report.rank);
  out.set_host(report.host);
  out.set_rows(report.count);
  out.set_ok(report.ok);
  return out;
}

// The first failing rank's report as a status (its message names no data).
absl::Status CheckReports(
    const std::vector<optim::mpi_pool::RankReport>& reports, int ranks,
    absl::string_view what) {
  if (reports.size() != static_cast<size_t>(ranks)) {
    return absl::UnavailableError(
        absl::StrCat("the worker pool answered ", what, " with ",
                     reports.size(), " rank reports for ", ranks, " ranks"));
  }
  for (size_t r = 0; r < reports.size(); ++r) {
    if (reports[r].rank != static_cast<int>(r)) {
      return absl::UnavailableError(absl::StrCat(
          "the worker pool's reports for ", what, " are not in rank order"));
    }
    if (!reports[r].ok) {
      return absl::UnavailableError(absl::StrCat(what, " failed on rank ", r,
                                                 " (", reports[r].host,
                                                 "): ", reports[r].message));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<v1::PlaceDatasetResponse> DatasetManager::Place(
    const std::string& name) {
  if (pool_ == nullptr) {
    return absl::FailedPreconditionError(
        "this server has no worker pool (start it with --mpi-pool=N)");
  }
  ASSIGN_OR_RETURN(storage::DatasetRecord record, db_->datasets().Get(name));
  if (!record.problem_json.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "dataset ", name,
        " is a max-affine problem; no job type on it reads its rows on the "
        "worker pool"));
  }
  const int ranks = pool_->options().ranks;
  ASSIGN_OR_RETURN(std::optional<storage::DatasetPlacement> earlier,
                   db_->datasets().FindPlacement(record.id));
  if (earlier.has_value() && earlier->ranks > ranks) {
    return absl::FailedPreconditionError(absl::StrCat(
        "dataset ", name, " is placed on ", earlier->ranks,
        " ranks and the worker pool has ", ranks, " now: the shards of ranks ",
        ranks, "..", earlier->ranks - 1,
        " cannot be replaced or deleted; restart the server with --mpi-pool=",
        earlier->ranks, " and delete or place it there"));
  }
  RETURN_IF_ERROR(pool_->EnsureStarted());
  const std::string pool_id = PoolDatasetId(record);
  std::vector<optim::mpi_pool::RankReport> reports;
  {
    // The one time the server reads a placed dataset's rows: freed when the
    // shards have been sent.
    ASSIGN_OR_RETURN(Dataset rows, db_->datasets().Load(record.name));
    ASSIGN_OR_RETURN(reports, pool_->Place(pool_id, rows));
  }
  RETURN_IF_ERROR(CheckReports(reports, ranks, "placing the dataset"));
  std::vector<storage::PlacedShard> shards;
  for (const optim::mpi_pool::RankReport& report : reports) {
    storage::PlacedShard shard;
    shard.rank = report.rank;
    shard.host = report.host;
    shard.rows = report.count;
    shards.push_back(std::move(shard));
  }
  absl::StatusOr<storage::DatasetPlacement> placed =
      db_->datasets().RecordPlacement(record.id, record.created_at_micros,
                                      ranks, shards);
  if (absl::IsNotFound(placed.status())) {
    // Deleted while its shards travelled: they go again.
    (void)pool_->Drop(pool_id);
    return absl::NotFoundError(
        absl::StrCat("dataset ", name,
                     " was deleted while it was being placed; its "
                     "shards were dropped from the worker pool"));
  }
  if (!placed.ok()) return placed.status();
  v1::PlaceDatasetResponse out;
  out.set_name(record.name);
  for (const auto& report : reports) *out.add_shards() = RankShardOf(report);
  *out.mutable_placed_at() = ToTimestamp(placed->placed_at_micros);
  return out;
}

absl::Status DatasetManager::CheckPlacementDroppable(
    const storage::DatasetRecord& record) {
  ASSIGN_OR_RETURN(std::optional<storage::DatasetPlacement> placement,
                   db_->datasets().FindPlacement(record.id));
  if (!placement.has_value()) return absl::OkStatus();
  if (pool_ == nullptr) {
    return absl::UnavailableError(absl::StrCat(
        "dataset ", record.name, " is placed on a worker pool of ",
        placement->ranks,
        " ranks, and this server was started without one: restart it with "
        "--mpi-pool=",
        placement->ranks,
        " so that the shards are deleted too; nothing was deleted"));
  }
  const int ranks = pool_->options().ranks;
  if (placement->ranks > ranks) {
    return absl::FailedPreconditionError(absl::StrCat(
        "dataset ", record.name, " is placed on ", placement->ranks,
        " ranks and the worker pool has ", ranks,
        " now: restart the server with --mpi-pool=", placement->ranks,
        " so that every shard is deleted; nothing was deleted"));
  }
  absl::Status started = pool_->EnsureStarted();
  if (!started.ok()) {
    return absl::UnavailableError(absl::StrCat(
        "dataset ", record.name,
        " is placed on the worker pool, which is unavailable (",
        started.message(),
        "): its shards could not be deleted, so nothing was deleted; retry "
        "when the pool is back"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<v1::RankShard>> DatasetManager::DropPlacement(
    const storage::DatasetRecord& record) {
  ASSIGN_OR_RETURN(std::optional<storage::DatasetPlacement> placement,
                   db_->datasets().FindPlacement(record.id));
  if (!placement.has_value()) {
    // Not placed as far as this database knows. A pool may still hold its
    // shards (a backup restored from before the placement forgot it): with
    // a pool, ask every rank anyway, and report the shards found; a pool
    // that is unavailable does not hold up the deletion of a dataset that
    // is not recorded as placed.
    std::vector<v1::RankShard> found;
    if (pool_ == nullptr || !pool_->EnsureStarted().ok()) return found;
    absl::StatusOr<std::vector<optim::mpi_pool::RankReport>> reports =
        pool_->Drop(PoolDatasetId(record));
    if (!reports.ok()) return found;
    bool any = false;
    for (const auto& report : *reports) any = any || report.count > 0;
    if (any) {
      for (const auto& report : *reports) found.push_back(RankShardOf(report));
    }
    return found;
  }
  RETURN_IF_ERROR(CheckPlacementDroppable(record));
  const int ranks = pool_->options().ranks;
  absl::StatusOr<std::vector<optim::mpi_pool::RankReport>> reports =
      pool_->Drop(PoolDatasetId(record));
  if (!reports.ok()) {
    return absl::UnavailableError(absl::StrCat(
        "dataset ", record.name,
        " is placed on the worker pool, which is unavailable (",
        reports.status().message(),
        "): its shards could not be deleted, so nothing was deleted; retry "
        "when the pool is back"));
  }
  absl::Status all_ok = CheckReports(*reports, ranks, "deleting the shards");
  if (!all_ok.ok()) {
    return absl::UnavailableError(
        absl::StrCat(all_ok.message(),
                     "; the dataset was not deleted (retry the deletion)"));
  }
  RETURN_IF_ERROR(db_->datasets().RemovePlacement(record.id));
  std::vector<v1::RankShard> out;
  for (const auto& report : *reports) out.push_back(RankShardOf(report));
  return out;
}

absl::StatusOr<privacy::BudgetConfig> DatasetManager::BudgetConfigOf(
    const storage::DatasetRecord& r) {
  privacy::BudgetConfig c;
  c.epsilon = r.epsilon_budget;
  c.delta = r.delta_budget;
  c.filter = r.budget_filter == storage::kFilterBasic
                 ? privacy::FilterKind::kBasic
                 : privacy::FilterKind::kRdp;
  c.relation = RelationOf(r);
  RETURN_IF_ERROR(c.Validate());
  return c;
}

optim::PublicDatasetInfo DatasetManager::PublicInfoOf(
    const storage::DatasetRecord& r) {
  optim::PublicDatasetInfo info;
  info.rows = r.rows;
  info.dimension = r.dimension;
  info.label_kind = r.label_kind;
  info.num_classes = r.num_classes;
  info.row_norm_bound = r.bounds.row_norm_bound.value_or(0.0);
  info.relation = RelationOf(r);
  info.problem_json = r.problem_json;
  return info;
}

absl::StatusOr<std::string> DatasetManager::FoldCosts(
    const storage::DatasetRecord& r, const std::vector<std::string>& costs) {
  ASSIGN_OR_RETURN(auto config, BudgetConfigOf(r));
  ASSIGN_OR_RETURN(auto filter, privacy::PrivacyFilter::Create(config));
  return filter->Fold(costs);
}

absl::StatusOr<v1::BudgetStatus> DatasetManager::BudgetOf(
    const storage::DatasetRecord& r,
    const std::vector<storage::LedgerEntry>& entries) {
  std::vector<std::string> blobs;
  blobs.reserve(entries.size());
  for (const auto& e : entries) blobs.push_back(e.cost_blob);
  return BudgetOf(r, static_cast<int64_t>(entries.size()), blobs);
}

absl::StatusOr<v1::BudgetStatus> DatasetManager::BudgetOf(
    const storage::DatasetRecord& r, int64_t charges,
    const std::vector<std::string>& costs) {
  ASSIGN_OR_RETURN(auto config, BudgetConfigOf(r));
  ASSIGN_OR_RETURN(auto filter, privacy::PrivacyFilter::Create(config));
  ASSIGN_OR_RETURN(auto view, filter->View(costs));
  v1::BudgetStatus b;
  b.set_dataset(r.name);
  b.set_epsilon_total(view.epsilon_total);
  b.set_delta_total(view.delta_total);
  b.set_epsilon_spent(view.epsilon_spent);
  b.set_epsilon_remaining(view.epsilon_remaining);
  b.set_filter(config.filter == privacy::FilterKind::kBasic
                   ? v1::BUDGET_FILTER_BASIC
                   : v1::BUDGET_FILTER_RDP);
  b.set_accounting(view.accounting);
  b.set_charges(charges);
  return b;
}

absl::StatusOr<v1::DatasetInfo> DatasetManager::Info(
    const storage::DatasetRecord& r) {
  v1::DatasetInfo d;
  d.set_name(r.name);
  d.set_rows(r.rows);
  d.set_dimension(r.dimension);
  d.set_public_(r.is_public);
  d.set_sparse(r.sparse);
  // The number of stored nonzeros is a statistic of the rows, not metadata
  // the curator declared public: only public datasets report it.
  if (r.is_public) d.set_nonzeros(r.nonzeros);
  d.set_source_format(r.format == storage::DatasetFormat::kCsv
                          ? v1::DATASET_FORMAT_CSV
                          : v1::DATASET_FORMAT_LIBSVM);
  d.set_label_type(ToProto(r.label_kind));
  d.set_num_classes(r.num_classes);
  d.set_relation(RelationProto(r));
  if (!r.problem_json.empty()) {
    ASSIGN_OR_RETURN(*d.mutable_max_affine(), MaxAffineInfoOf(r.problem_json));
  }
  for (double v : r.bounds.lower) d.mutable_bounds()->add_lower(v);
  for (double v : r.bounds.upper) d.mutable_bounds()->add_upper(v);
  d.mutable_bounds()->set_row_norm_bound(r.bounds.row_norm_bound.value_or(0));
  for (const auto& n : r.feature_names) d.add_feature_names(n);
  d.set_description(r.description);
  *d.mutable_created_at() = ToTimestamp(r.created_at_micros);
  if (r.dummy_for_id != 0) {
    // The private dataset it stands in for (shown by name; a deleted one's
    // tombstone keeps its name).
    absl::StatusOr<std::string> target = DummyTargetName(r);
    if (target.ok()) d.set_dummy_for(*target);
  }
  if (!r.is_public) {
    ASSIGN_OR_RETURN(std::optional<storage::DatasetRecord> dummy,
                     db_->datasets().FindDummyFor(r.id));
    if (dummy.has_value()) d.set_dummy_dataset(dummy->name);
  }
  ASSIGN_OR_RETURN(std::optional<storage::DatasetPlacement> placement,
                   db_->datasets().FindPlacement(r.id));
  if (placement.has_value()) {
    v1::PoolPlacement* p = d.mutable_placement();
    p->set_ranks(placement->ranks);
    for (const storage::PlacedShard& shard : placement->shards) {
      v1::RankShard* s = p->add_shards();
      s->set_rank(shard.rank);
      s->set_host(shard.host);
      s->set_rows(shard.rows);
      s->set_ok(true);
    }
    *p->mutable_placed_at() = ToTimestamp(placement->placed_at_micros);
    p->set_current(pool_ != nullptr &&
                   pool_->options().ranks == placement->ranks);
  }
  if (!r.is_public) {
    ASSIGN_OR_RETURN(storage::LedgerTotals t, db_->ledger().Totals(r.name));
    ASSIGN_OR_RETURN(*d.mutable_budget(), BudgetOf(r, t.charges, t.costs));
  }
  return d;
}

namespace {

absl::StatusOr<storage::ImportOptions> ValidImportOptions(
    const v1::ImportHeader& header) {
  ASSIGN_OR_RETURN(storage::ImportOptions options, ToImportOptions(header));
  RETURN_IF_ERROR(options.Validate());
  if (!options.is_public) {
    // The budget must be one the privacy filter can enforce.
    privacy::BudgetConfig c;
    c.epsilon = options.epsilon_budget;
    c.delta = options.delta_budget;
    c.filter = options.budget_filter == storage::kFilterBasic
                   ? privacy::FilterKind::kBasic
                   : privacy::FilterKind::kRdp;
    RETURN_IF_ERROR(c.Validate());
  }
  return options;
}

}  // namespace

absl::StatusOr<std::string> DatasetManager::DummyTargetName(
    const storage::DatasetRecord& dummy) {
  ASSIGN_OR_RETURN(std::vector<storage::DatasetRecord> all,
                   db_->datasets().List());
  for (const storage::DatasetRecord& r : all) {
    if (r.id == dummy.dummy_for_id) return r.name;
  }
  return absl::NotFoundError("the dummy's dataset is gone");
}

absl::StatusOr<storage::DatasetRecord> DatasetManager::DummyTarget(
    const v1::ImportHeader& header, const storage::ImportOptions& options) {
  if (!options.is_public) {
    return absl::InvalidArgumentError(
        "dummy_for: a dummy dataset must be public (it is read by dry runs "
        "as is)");
  }
  ASSIGN_OR_RETURN(storage::DatasetRecord target,
                   db_->datasets().Get(header.dummy_for()));
  storage::DatasetRecord as_dummy;
  as_dummy.name = options.name;
  as_dummy.is_public = true;
  as_dummy.dimension = options.dimension;
  as_dummy.label_kind = options.label_kind;
  as_dummy.num_classes = options.num_classes;
  as_dummy.problem_json = options.problem_json;
  // The pieces of a max-affine dummy are checked once its file is parsed.
  RETURN_IF_ERROR(CheckDummyFits(target, as_dummy, /*check_pieces=*/false));
  ASSIGN_OR_RETURN(std::optional<storage::DatasetRecord> existing,
                   db_->datasets().FindDummyFor(target.id));
  if (existing.has_value()) {
    return absl::AlreadyExistsError(
        absl::StrCat("dataset ", target.name, " already has the dummy ",
                     existing->name, "; delete it to attach another"));
  }
  return target;
}

class DatasetManager::StreamedImport : public PendingImport {
 public:
  StreamedImport(DatasetManager& manager,
                 std::unique_ptr<storage::StagedImport> staged)
      : manager_(manager), staged_(std::move(staged)) {}
  absl::Status Write(absl::string_view chunk) override {
    return staged_->Write(chunk);
  }
  absl::StatusOr<v1::DatasetInfo> Finish() override {
    ASSIGN_OR_RETURN(storage::DatasetRecord r, staged_->Commit());
    return manager_.Info(r);
  }

 private:
  DatasetManager& manager_;
  std::unique_ptr<storage::StagedImport> staged_;
};

class DatasetManager::BufferedImport : public PendingImport {
 public:
  BufferedImport(DatasetManager& manager, storage::ImportOptions options,
                 v1::MaxAffineProblem max_affine,
                 std::optional<storage::DatasetRecord> dummy_for)
      : manager_(manager),
        options_(std::move(options)),
        max_affine_(std::move(max_affine)),
        dummy_for_(std::move(dummy_for)) {}
  absl::Status Write(absl::string_view chunk) override {
    if (bytes_.size() + chunk.size() > kMaxBufferedImportBytes) {
      bytes_.clear();
      bytes_.shrink_to_fit();
      return absl::ResourceExhaustedError(
          absl::StrCat("max-affine problem files are limited to ",
                       kMaxBufferedImportBytes >> 20, " MiB"));
    }
    bytes_.append(chunk.data(), chunk.size());
    return absl::OkStatus();
  }
  absl::StatusOr<v1::DatasetInfo> Finish() override {
    // Piecewise-affine: describe the problem from the parsed slopes (public),
    // then store rows and description in one transaction.
    ASSIGN_OR_RETURN(storage::ParsedRows rows,
                     storage::ParseDatasetFile(options_, bytes_));
    bytes_.clear();
    bytes_.shrink_to_fit();
    ASSIGN_OR_RETURN(options_.problem_json,
                     DescribeMaxAffine(max_affine_, rows));
    if (dummy_for_.has_value() && rows.rows != dummy_for_->rows) {
      return absl::FailedPreconditionError(
          absl::StrCat("dummy dataset ", options_.name,
                       " does not fit dataset ", dummy_for_->name, ": ",
                       rows.rows, " pieces instead of ", dummy_for_->rows));
    }
    ASSIGN_OR_RETURN(storage::DatasetRecord r,
                     manager_.db_->datasets().ImportParsed(options_, rows));
    return manager_.Info(r);
  }

 private:
  DatasetManager& manager_;
  storage::ImportOptions options_;
  const v1::MaxAffineProblem max_affine_;
  const std::optional<storage::DatasetRecord> dummy_for_;
  std::string bytes_;
};

absl::StatusOr<std::unique_ptr<DatasetManager::PendingImport>>
DatasetManager::BeginImport(const v1::ImportHeader& header) {
  ASSIGN_OR_RETURN(storage::ImportOptions options, ValidImportOptions(header));
  std::optional<storage::DatasetRecord> dummy_for;
  if (!header.dummy_for().empty()) {
    ASSIGN_OR_RETURN(dummy_for, DummyTarget(header, options));
    options.dummy_for_id = dummy_for->id;
  }
  if (header.has_max_affine()) {
    // Refuse a taken name before the upload (ImportParsed checks again).
    absl::StatusOr<storage::DatasetRecord> existing =
        db_->datasets().Get(options.name);
    if (existing.ok()) {
      return absl::AlreadyExistsError(absl::StrCat(
          "a dataset named \"", options.name, "\" already exists"));
    }
    return std::make_unique<BufferedImport>(
        *this, std::move(options), header.max_affine(), std::move(dummy_for));
  }
  ASSIGN_OR_RETURN(std::unique_ptr<storage::StagedImport> staged,
                   db_->datasets().BeginImport(options));
  return std::make_unique<StreamedImport>(*this, std::move(staged));
}

absl::StatusOr<v1::DatasetInfo> DatasetManager::Import(
    const v1::ImportHeader& header, absl::string_view file_bytes) {
  ASSIGN_OR_RETURN(std::unique_ptr<PendingImport> import, BeginImport(header));
  RETURN_IF_ERROR(import->Write(file_bytes));
  return import->Finish();
}

absl::StatusOr<v1::ListDatasetsResponse> DatasetManager::List() {
  ASSIGN_OR_RETURN(auto records, db_->datasets().List());
  v1::ListDatasetsResponse out;
  for (const auto& r : records) {
    ASSIGN_OR_RETURN(*out.add_datasets(), Info(r));
  }
  return out;
}

absl::StatusOr<v1::DatasetInfo> DatasetManager::Get(const std::string& name) {
  ASSIGN_OR_RETURN(auto r, db_->datasets().Get(name));
  return Info(r);
}

absl::StatusOr<v1::BudgetStatus> DatasetManager::Budget(
    const std::string& name, const std::string& caller) {
  ASSIGN_OR_RETURN(storage::LedgerTotals t, db_->ledger().Totals(name, caller));
  if (t.dataset.is_public) {
    return absl::FailedPreconditionError(
        absl::StrCat("dataset ", name, " is public: it has no privacy budget"));
  }
  ASSIGN_OR_RETURN(v1::BudgetStatus b, BudgetOf(t.dataset, t.charges, t.costs));
  if (caller.empty()) return b;
  // The caller's cap view: the same filter over its own charges, with the
  // cap as the budget (exactly what admission enforces, storage/ledger.h).
  ASSIGN_OR_RETURN(std::optional<storage::GrantRecord> grant,
                   db_->access().FindGrant(caller, name));
  if (!grant.has_value() || grant->epsilon_cap <= 0) return b;
  storage::DatasetRecord capped = t.dataset;
  capped.epsilon_budget = grant->epsilon_cap;
  ASSIGN_OR_RETURN(v1::BudgetStatus mine,
                   BudgetOf(capped, t.principal_charges, t.principal_costs));
  b.set_caller_epsilon_cap(grant->epsilon_cap);
  b.set_caller_epsilon_spent(mine.epsilon_spent());
  return b;
}

absl::StatusOr<v1::ListLedgerResponse> DatasetManager::Ledger(
    const std::string& name, const std::string& only_principal) {
  ASSIGN_OR_RETURN(auto snap, db_->ledger().Snapshot(name));
  if (snap.dataset.is_public) {
    return absl::FailedPreconditionError(
        absl::StrCat("dataset ", name, " is public: it has no ledger"));
  }
  v1::ListLedgerResponse out;
  for (const auto& e : snap.entries) {
    if (!only_principal.empty() && e.principal != only_principal) continue;
    v1::LedgerEntry* p = out.add_entries();
    p->set_sequence(e.seq);
    p->set_dataset(e.dataset);
    p->set_job_id(e.job_id);
    p->set_event_json(e.event_json);
    p->set_accountant(e.accountant);
    p->set_epsilon(e.epsilon);
    p->set_delta(e.delta);
    p->set_principal(e.principal);
    p->set_note(e.note);
    *p->mutable_created_at() = ToTimestamp(e.created_at_micros);
  }
  ASSIGN_OR_RETURN(*out.mutable_budget(), BudgetOf(snap.dataset, snap.entries));
  return out;
}

}  // namespace dpopt::server
