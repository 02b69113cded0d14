// dpopt CLI: dataset import, list, show and place.
#include <malloc.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/common.h"
#include "client/flags.h"
#include "client/max_affine.h"
#include "dpopt/v1/dpopt.grpc.pb.h"
#include "google/protobuf/util/json_util.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/grpcpp.h"

namespace dpopt::client {
namespace {

// ---------------------------------------------------------------- datasets

std::string UtcTime(const google::protobuf::Timestamp& t) {
  return absl::FormatTime("%Y-%m-%d %H:%M:%S UTC",
                          absl::FromUnixSeconds(t.seconds()),
                          absl::UTCTimeZone());
}

// The dimension the server infers from a CSV file: the column count of its
// first non-blank line minus the label column (for --feature-bounds, which
// needs one bound per feature). The server checks every row.
absl::StatusOr<int64_t> CsvFileDimension(const std::string& path,
                                         bool whitespace) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::InvalidArgumentError(absl::StrCat("cannot open ", path));
  }
  std::string line;
  int64_t line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    int64_t columns = 0;
    if (whitespace) {
      columns = static_cast<int64_t>(
          std::vector<std::string>(
              absl::StrSplit(line, absl::ByAnyChar(" \t"), absl::SkipEmpty()))
              .size());
    } else {
      columns =
          1 + static_cast<int64_t>(std::count(line.begin(), line.end(), ','));
    }
    if (columns < 2) {
      return absl::InvalidArgumentError(absl::StrCat(
          path, " line ", line_no,
          ": found 1 column: a CSV row needs at least one feature column and "
          "the label column"));
    }
    return columns - 1;
  }
  return absl::InvalidArgumentError(absl::StrCat(path, " has no data rows"));
}

int DatasetImport(const ParsedArgs& a, const Globals& g) {
  if (a.positional().size() != 2) {
    return UsageError("usage: dpopt dataset import NAME FILE [flags]");
  }
  pb::ImportHeader h;
  h.set_name(a.positional()[0]);
  const std::string format = absl::AsciiStrToLower(a.Get("format", "libsvm"));
  if (format == "libsvm") {
    h.set_format(pb::DATASET_FORMAT_LIBSVM);
  } else if (format == "csv") {
    h.set_format(pb::DATASET_FORMAT_CSV);
  } else {
    return UsageError("--format must be libsvm or csv");
  }
  // LIBSVM rows do not define the dimension; a CSV file's first line does
  // (the server infers it, and refuses a --dimension that disagrees).
  auto dim = a.GetInt("dimension", 0);
  if (!dim.ok()) return UsageError(dim.status());
  if (a.Has("dimension") && *dim < 1) {
    return UsageError("--dimension must be >= 1");
  }
  if (format == "libsvm" && !a.Has("dimension")) {
    return UsageError(
        "a LIBSVM file needs --dimension (the number of features; its rows "
        "do not define it). CSV files give it by their first line");
  }
  h.set_dimension(*dim);
  h.set_public_(a.GetBool("public"));
  if (!h.public_()) {
    if (!a.Has("epsilon-budget")) {
      return UsageError(
          "a private dataset needs --epsilon-budget (and --delta-budget); "
          "use --public for public data");
    }
    auto eps = a.GetDouble("epsilon-budget");
    if (!eps.ok()) return UsageError(eps.status());
    auto delta = a.GetDouble("delta-budget", 0.0);
    if (!delta.ok()) return UsageError(delta.status());
    h.set_epsilon_budget(*eps);
    h.set_delta_budget(*delta);
  } else if (a.Has("epsilon-budget") || a.Has("delta-budget")) {
    return UsageError("a --public dataset has no budget");
  }
  const std::string filter = a.Get("budget-filter", "rdp");
  if (filter == "rdp") {
    h.set_budget_filter(pb::BUDGET_FILTER_RDP);
  } else if (filter == "basic") {
    h.set_budget_filter(pb::BUDGET_FILTER_BASIC);
  } else {
    return UsageError("--budget-filter must be rdp or basic");
  }
  const std::string rel = a.Get("relation", "add-remove");
  if (rel == "add-remove") {
    h.set_relation(pb::ADD_REMOVE);
  } else if (rel == "replace-one") {
    h.set_relation(pb::REPLACE_ONE);
  } else {
    return UsageError("--relation must be add-remove or replace-one");
  }
  if (a.Has("polytope") && a.Has("relation")) {
    return UsageError(
        "a max-affine problem has its own relation (l-infinity on the "
        "offsets): drop --relation");
  }
  const std::string labels = a.Get("labels", "binary");
  if (labels == "binary") {
    h.set_label_type(pb::LABEL_TYPE_BINARY);
  } else if (labels == "multiclass") {
    h.set_label_type(pb::LABEL_TYPE_MULTICLASS);
  } else if (labels == "real") {
    h.set_label_type(pb::LABEL_TYPE_REAL);
  } else {
    return UsageError("--labels must be binary, multiclass or real");
  }
  auto k = a.GetInt("num-classes", 0);
  if (!k.ok()) return UsageError(k.status());
  h.set_num_classes(static_cast<int32_t>(*k));
  h.set_delimiter(a.Get("delimiter", ","));
  h.set_has_header(a.GetBool("header"));
  auto label_col = a.GetInt("label-column", -1);
  if (!label_col.ok()) return UsageError(label_col.status());
  h.set_label_column(static_cast<int32_t>(*label_col));
  h.set_label_last(*label_col < 0);
  auto norm = a.GetDouble("row-norm-bound", 0.0);
  if (!norm.ok()) return UsageError(norm.status());
  h.mutable_bounds()->set_row_norm_bound(*norm);
  if (a.Has("feature-bounds")) {
    std::vector<std::string> lh = absl::StrSplit(a.Get("feature-bounds"), ':');
    double lo, hi;
    if (lh.size() != 2 || !absl::SimpleAtod(lh[0], &lo) ||
        !absl::SimpleAtod(lh[1], &hi)) {
      return UsageError("--feature-bounds=LO:HI needs two numbers");
    }
    int64_t features = *dim;
    if (features == 0) {
      // CSV without --dimension: one bound per column of the first line.
      const std::string delim = absl::AsciiStrToLower(h.delimiter());
      auto inferred = CsvFileDimension(
          a.positional()[1],
          delim == "whitespace" || delim == " " || delim == "\\t");
      if (!inferred.ok()) return UsageError(inferred.status());
      features = *inferred;
    }
    for (int64_t j = 0; j < features; ++j) {
      h.mutable_bounds()->add_lower(lo);
      h.mutable_bounds()->add_upper(hi);
    }
  }
  h.set_description(a.Get("description"));
  h.set_dummy_for(a.Get("dummy-for"));
  if (!h.dummy_for().empty() && !h.public_()) {
    return UsageError("--dummy-for needs --public (a dummy dataset is public)");
  }
  if (absl::Status s = ApplyMaxAffineFlags(a, &h); !s.ok()) {
    return UsageError(s);
  }

  // Streamed from disk in 1 MiB chunks: the CLI's memory does not grow with
  // the file. glibc would serve each chunk's message buffers (above its 128
  // KiB mmap threshold) from fresh mappings and unmap or trim them after
  // each Write, so every chunk faulted in newly zeroed pages: 3.2 s of
  // system time for an 875 MB file (scripts/bench.sh), 0.5 s with the
  // buffers kept. Peak RSS stays about 21 MB.
  mallopt(M_MMAP_THRESHOLD, 64 << 20);
  mallopt(M_TRIM_THRESHOLD, 256 << 20);
  const std::string& path = a.positional()[1];
  std::ifstream in(path, std::ios::binary);
  if (!in) return UsageError(absl::StrCat("cannot open ", path));
  in.seekg(0, std::ios::end);
  const std::streamoff total = in.tellg();
  in.seekg(0, std::ios::beg);
  if (total < 0 || !in) return UsageError(absl::StrCat("cannot read ", path));

  Client c(g);
  auto ctx = c.Context();
  pb::DatasetInfo info;
  auto writer = c.datasets().ImportDataset(ctx.get(), &info);
  pb::ImportDatasetRequest req;
  *req.mutable_header() = h;
  bool ok = writer->Write(req);
  constexpr size_t kChunk = 1 << 20;
  const bool tty = isatty(STDERR_FILENO) && !g.json;
  // Read straight into the message's buffer (reused: no copy per chunk).
  pb::ImportDatasetRequest chunk;
  std::string* buf = chunk.mutable_chunk();
  std::streamoff sent = 0;
  while (ok && in) {
    buf->resize(kChunk);
    in.read(buf->data(), static_cast<std::streamsize>(kChunk));
    const std::streamsize got = in.gcount();
    if (got <= 0) break;
    buf->resize(static_cast<size_t>(got));
    ok = writer->Write(chunk);
    sent += got;
    if (tty && total > 0) {
      std::cerr << absl::StrFormat(
          "\ruploading %s: %3.0f%%", path,
          100.0 * static_cast<double>(sent) / static_cast<double>(total));
    }
  }
  if (in.bad()) {
    ctx->TryCancel();  // the server then imports nothing
    (void)writer->Finish();
    if (tty) std::cerr << "\n";
    return UsageError(
        absl::StrCat("error reading ", path, "; nothing was imported"));
  }
  if (tty) std::cerr << "\n";
  writer->WritesDone();
  grpc::Status s = writer->Finish();
  if (!s.ok()) return ReportRpcError(s, g);
  if (g.json) {
    std::cout << ToJson(info) << std::endl;
  } else {
    std::cout << absl::StrFormat("imported %s: %d rows x %d features (%s%s)\n",
                                 info.name(), info.rows(), info.dimension(),
                                 info.public_() ? "public" : "private",
                                 info.sparse() ? ", sparse" : "");
    if (!info.dummy_for().empty()) {
      std::cout << "  dummy for  " << info.dummy_for()
                << " (its dry runs read these rows)\n";
    }
    if (info.has_budget()) PrintBudget(info.budget());
  }
  return 0;
}

int DatasetList(const ParsedArgs& a, const Globals& g) {
  Client c(g);
  auto ctx = c.Context();
  pb::ListDatasetsResponse resp;
  grpc::Status s =
      c.datasets().ListDatasets(ctx.get(), pb::ListDatasetsRequest(), &resp);
  if (!s.ok()) return ReportRpcError(s, g);
  if (g.json) {
    std::cout << ToJson(resp) << std::endl;
    return 0;
  }
  std::cout << absl::StrFormat("%-20s %-8s %10s %10s %12s %12s  %s\n", "NAME",
                               "ACCESS", "ROWS", "DIMENSION", "EPS_TOTAL",
                               "EPS_LEFT", "POOL");
  for (const auto& d : resp.datasets()) {
    // The worker-pool placement: its ranks, "(stale)" when the server's
    // pool has another rank count now.
    const std::string pool =
        !d.has_placement()
            ? "-"
            : absl::StrCat(d.placement().ranks(), " ranks",
                           d.placement().current() ? "" : " (stale)");
    std::cout << absl::StrFormat(
        "%-20s %-8s %10d %10d %12s %12s  %s\n", d.name(),
        d.public_() ? "public" : "private", d.rows(), d.dimension(),
        d.public_() ? "-" : Num(d.budget().epsilon_total()),
        d.public_() ? "-" : Num(d.budget().epsilon_remaining()), pool);
  }
  return 0;
}

int DatasetShow(const ParsedArgs& a, const Globals& g) {
  if (a.positional().size() != 1) {
    return UsageError("usage: dpopt dataset show NAME");
  }
  Client c(g);
  auto ctx = c.Context();
  pb::GetDatasetRequest req;
  req.set_name(a.positional()[0]);
  pb::DatasetInfo d;
  grpc::Status s = c.datasets().GetDataset(ctx.get(), req, &d);
  if (!s.ok()) return ReportRpcError(s, g);
  if (g.json) {
    std::cout << ToJson(d) << std::endl;
    return 0;
  }
  std::string labels = d.label_type() == pb::LABEL_TYPE_MULTICLASS
                           ? absl::StrCat("multiclass (", d.num_classes(), ")")
                       : d.label_type() == pb::LABEL_TYPE_REAL
                           ? "real"
                           : "binary (-1/+1)";
  std::cout << absl::StrFormat(
      "dataset %s\n  access     %s\n  rows       %d\n  dimension  %d\n"
      "  storage    %s%s\n  labels     %s\n  relation   %s\n",
      d.name(), d.public_() ? "public" : "private", d.rows(), d.dimension(),
      d.sparse() ? "sparse" : "dense",
      d.nonzeros() > 0 ? absl::StrCat(" (", d.nonzeros(), " nonzeros)") : "",
      labels,
      d.relation() == pb::REPLACE_ONE    ? "replace-one"
      : d.relation() == pb::LINF_OFFSETS ? "l-infinity on the offsets"
                                         : "add/remove one row");
  PrintMaxAffine(d);
  if (d.bounds().row_norm_bound() > 0) {
    std::cout << "  row norm   <= " << Num(d.bounds().row_norm_bound()) << "\n";
  }
  if (d.bounds().lower_size() > 0) {
    std::cout << "  bounds     declared per feature ("
              << d.bounds().lower_size() << " features)\n";
  }
  if (!d.description().empty()) {
    std::cout << "  about      " << d.description() << "\n";
  }
  if (!d.dummy_for().empty()) {
    std::cout << "  dummy for  " << d.dummy_for()
              << " (its dry runs read these rows)\n";
  }
  if (!d.dummy_dataset().empty()) {
    std::cout << "  dummy      " << d.dummy_dataset()
              << " (dry runs read its public rows)\n";
  }
  if (d.has_placement()) {
    const pb::PoolPlacement& p = d.placement();
    std::cout << "  pool       placed on " << p.ranks() << " rank(s) at "
              << UtcTime(p.placed_at())
              << (p.current() ? ""
                              : " (NOT usable now: the server's pool has "
                                "another rank count or none; place it again)")
              << "\n";
    for (const pb::RankShard& shard : p.shards()) {
      std::cout << "    rank " << shard.rank() << "  " << shard.host() << "  "
                << shard.rows() << " rows\n";
    }
  }
  if (d.has_budget()) PrintBudget(d.budget());
  return 0;
}

int DatasetPlace(const ParsedArgs& a, const Globals& g) {
  if (a.positional().size() != 1) {
    return UsageError("usage: dpopt dataset place NAME");
  }
  Client c(g);
  // No deadline: the shards of a large dataset take a while to travel.
  auto ctx = c.Context(/*deadline=*/false);
  pb::PlaceDatasetRequest req;
  req.set_name(a.positional()[0]);
  if (!g.json) {
    std::cerr << "placing " << req.name()
              << " on the server's worker pool (the server sends each rank "
                 "its shard)...\n";
  }
  pb::PlaceDatasetResponse out;
  grpc::Status s = c.datasets().PlaceDataset(ctx.get(), req, &out);
  if (!s.ok()) return ReportRpcError(s, g);
  if (g.json) {
    std::cout << ToJson(out) << std::endl;
    return 0;
  }
  int64_t rows = 0;
  for (const pb::RankShard& shard : out.shards()) rows += shard.rows();
  std::cout << "placed " << out.name() << " on " << out.shards_size()
            << " rank(s), " << rows << " rows, at " << UtcTime(out.placed_at())
            << ":\n";
  for (const pb::RankShard& shard : out.shards()) {
    std::cout << "  rank " << shard.rank() << "  " << shard.host() << "  "
              << shard.rows() << " rows" << (shard.ok() ? "" : "  FAILED")
              << "\n";
  }
  std::cout << "jobs with \"execution\": \"EXECUTION_MPI_POOL\" on "
            << out.name() << " now read their rows on these ranks.\n";
  return 0;
}

}  // namespace

std::vector<Command> DatasetCommands() {
  return {
      {"dataset import",
       "NAME FILE",
       "import a dataset file (curator); one transaction, nothing "
       "half-imported",
       {{"format", false, "libsvm (default) or csv", "FORMAT"},
        {"dimension", false,
         "number of features: required for libsvm; csv infers it from the "
         "first line (if given, it must match)",
         "D"},
        {"public", true, "public dataset: no budget; for evaluation/baselines"},
        {"epsilon-budget", false, "total epsilon of a private dataset", "E"},
        {"delta-budget", false, "total delta of a private dataset", "D"},
        {"budget-filter", false, "rdp (default) or basic composition", "NAME"},
        {"relation", false, "add-remove (default) or replace-one", "REL"},
        {"labels", false, "binary (default), multiclass or real", "KIND"},
        {"num-classes", false, "classes of a multiclass dataset", "K"},
        {"delimiter", false, "CSV delimiter: ',' (default) or whitespace", "D"},
        {"header", true, "CSV has a header line of column names"},
        {"label-column", false, "0-based label column of a CSV (default last)",
         "N"},
        {"row-norm-bound", false, "declared public bound on row L2 norms", "B"},
        {"feature-bounds", false,
         "declared bounds LO:HI for every feature (of --dimension, or of the "
         "CSV file's first line)",
         "LO:HI"},
        {"description", false, "free-text description", "TEXT"},
        {"polytope", false,
         "piecewise-affine family: import the CSV as a max-affine problem "
         "(feature columns "
         "= public slopes, label column = private offsets) over the polytope "
         "in FILE (JSON {\"lower\": [...], \"upper\": [...]}, optional "
         "\"hMatrix\", \"hVector\"); needs --b-max",
         "FILE"},
        {"b-max", false,
         "piecewise-affine family: public bound on how far any offset may move "
         "(the "
         "l-infinity relation's radius)",
         "B"},
        {"dummy-for", false,
         "a public dummy for the private dataset NAME: its dry runs read this "
         "dataset instead of generated rows (same dimension, labels and kind)",
         "NAME"}},
       DatasetImport},
      {"dataset list",
       "",
       "list datasets with their remaining budget",
       {},
       DatasetList},
      {"dataset show",
       "NAME",
       "public metadata of a dataset (never rows)",
       {},
       DatasetShow},
      {"dataset place",
       "NAME",
       "place a dataset on the server's MPI worker pool (curator): each rank "
       "keeps one shard on its host for jobs with \"execution\": "
       "\"EXECUTION_MPI_POOL\"; prints every rank's host and rows (placing "
       "again replaces the shards, deleting the dataset deletes them)",
       {},
       DatasetPlace},
  };
}

}  // namespace dpopt::client
