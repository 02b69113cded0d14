// Parsing and validation of curator-supplied dataset files (LIBSVM, CSV).
//
// Everything here is pure (no SQL): DatasetStore's imports feed the file to a
// DatasetParser and store the blocks it produces.
//
// Error messages are addressed to the curator who owns the file: they may
// name line numbers, column numbers and feature indices, but never echo a
// row's values (labels, feature values, or raw tokens).
#ifndef DPOPT_STORAGE_DATASET_IMPORT_H_
#define DPOPT_STORAGE_DATASET_IMPORT_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/data/dataset.h"

namespace dpopt::storage {

enum class DatasetFormat {
  kLibsvm = 0,  // "label idx:val idx:val ..." with 1-based, increasing
                // indices; stored sparse
  kCsv = 1,     // dense, one label column + `dimension` feature columns
                // (the dimension may be inferred from the file); stored
                // dense
};

enum class CsvDelimiter {
  kComma = 0,       // fields separated by ',' (surrounding blanks trimmed)
  kWhitespace = 1,  // fields separated by runs of spaces/tabs
};

// "libsvm" / "csv".
absl::string_view DatasetFormatName(DatasetFormat format);
absl::StatusOr<DatasetFormat> ParseDatasetFormat(absl::string_view name);
// "comma" / "whitespace". ParseCsvDelimiter also accepts ",".
absl::string_view CsvDelimiterName(CsvDelimiter delimiter);
absl::StatusOr<CsvDelimiter> ParseCsvDelimiter(absl::string_view name);

// Allowed values of ImportOptions::budget_filter and ::relation.
inline constexpr absl::string_view kFilterRdp = "rdp";
inline constexpr absl::string_view kFilterBasic = "basic";
inline constexpr absl::string_view kRelationAddRemove = "add_remove";
inline constexpr absl::string_view kRelationReplaceOne = "replace_one";
// Piecewise-affine's l-infinity relation on the offsets of a max-affine
// problem (Han, Topcu & Pappas 2014, eq. (4)): only datasets with a problem
// description.
inline constexpr absl::string_view kRelationLinfOffsets = "linf_offsets";

// Curator-declared public bounds on the data. Every imported row is checked
// against them (INVALID_ARGUMENT on violation); they are stored with the
// dataset as public metadata.
struct DeclaredBounds {
  // Per-feature bounds: either both empty (no per-feature bounds) or both of
  // size `dimension` with lower[j] <= upper[j], all finite. For sparse data an
  // absent feature counts as 0, so 0 must then lie in [lower[j], upper[j]]
  // unless every row lists feature j.
  std::vector<double> lower;
  std::vector<double> upper;
  // If set: every row's L2 norm must be <= *row_norm_bound (checked exactly,
  // no tolerance; declare some slack for normalized rows). Must be > 0.
  std::optional<double> row_norm_bound;

  bool has_feature_bounds() const { return !lower.empty(); }
};

struct ImportOptions {
  // [A-Za-z0-9._-]{1,64}; unique in the database.
  std::string name;
  DatasetFormat format = DatasetFormat::kLibsvm;
  // Number of features. LIBSVM: declared by the curator, required; rows
  // never define it (a file whose largest index is below `dimension` is
  // fine). CSV: 0 means "infer it from the first non-blank line" (its column
  // count minus the label column; every later row must have as many
  // columns); a declared dimension must match the file. Otherwise
  // 1 <= dimension <= kMaxDimension.
  int64_t dimension = 0;

  // A public dataset has no budget (epsilon_budget and delta_budget must be
  // 0); private ones need 0 < epsilon_budget < inf and 0 <= delta_budget < 1.
  bool is_public = false;
  double epsilon_budget = 0;
  double delta_budget = 0;
  std::string budget_filter = std::string(kFilterRdp);     // or "basic"
  std::string relation = std::string(kRelationAddRemove);  // or
                                                           // "replace_one"

  // kBinary: labels +1/-1 or 0/1 (0 is mapped to -1; a file may not mix 0
  // and -1); num_classes must be 2. kMulticlass: integer labels in
  // [0, num_classes), 2 <= num_classes <= kMaxClasses. kReal: any finite
  // label; num_classes is ignored and stored as 0.
  LabelKind label_kind = LabelKind::kBinary;
  int num_classes = 2;

  // CSV only.
  CsvDelimiter csv_delimiter = CsvDelimiter::kComma;
  // The first non-blank line is a header. Its feature-column names become
  // the feature names when `feature_names` is empty.
  bool csv_has_header = false;
  // 0-based column holding the label, or -1 for the last column. Each row
  // has exactly dimension + 1 columns (with an inferred dimension the column
  // must exist in the first line).
  int64_t csv_label_column = -1;

  DeclaredBounds bounds;
  // Public description of a structured problem stored with the rows (seed
  // 001's max-affine problems: JSON written by the server, stored and
  // returned as is). Non-empty iff relation == "linf_offsets"; such datasets
  // are dense CSV with real labels.
  std::string problem_json;
  std::string description;  // at most kMaxDescriptionBytes
  // Empty, or exactly `dimension` names of at most kMaxFeatureNameBytes each.
  std::vector<std::string> feature_names;
  // A public dummy for dry runs on the private dataset with this id (the
  // server checks that the schemas match); 0 = not a dummy.
  int64_t dummy_for_id = 0;

  static constexpr int64_t kMaxDimension = 1 << 24;
  static constexpr int kMaxClasses = 1 << 16;
  static constexpr size_t kMaxDescriptionBytes = 4096;
  static constexpr size_t kMaxFeatureNameBytes = 256;

  // INVALID_ARGUMENT naming the offending field. With an inferred CSV
  // dimension (0), the checks that need the dimension wait for
  // ValidateDimension.
  absl::Status Validate() const;
  // The checks that depend on the dimension (csv_label_column, the per-
  // feature bounds' and feature_names' lengths) for dimension `d` in
  // [1, kMaxDimension]; Validate() runs them when `dimension` is declared,
  // DatasetParser once it has inferred it.
  absl::Status ValidateDimension(int64_t d) const;
};

// True iff `name` matches [A-Za-z0-9._-]{1,64}.
bool IsValidDatasetName(absl::string_view name);

// A parsed, validated file, in storage layout.
struct ParsedRows {
  bool sparse = false;
  int64_t rows = 0;
  int64_t dimension = 0;
  std::vector<double> labels;  // size rows; binary labels already in {-1,+1}
  // Sparse (CSR): row_offsets has rows + 1 entries, indices are 0-based and
  // strictly increasing within a row. Explicit zeros in the file are kept.
  std::vector<int64_t> row_offsets;
  std::vector<int32_t> indices;
  std::vector<double> values;  // sparse: one per index; dense: rows *
                               // dimension, row-major
  // Feature names from a CSV header (empty otherwise).
  std::vector<std::string> header_names;

  int64_t nonzeros() const {
    return sparse ? static_cast<int64_t>(values.size()) : rows * dimension;
  }
};

// Streaming parser: bytes arrive in chunks of any size (a line may
// span chunks) and rows leave in blocks, so memory is bounded by one block
// plus one line, whatever the file size. Validation is exactly that of
// ParseDatasetFile (which is this parser fed the whole file at once), with
// errors reported as soon as the offending line is complete.
//
//   ASSIGN_OR_RETURN(auto parser, DatasetParser::Create(options, {}, sink));
//   for (chunk : file) RETURN_IF_ERROR(parser->Feed(chunk));
//   RETURN_IF_ERROR(parser->Finish());
//
// After the first error every call returns that error. Not thread-safe.
class DatasetParser {
 public:
  struct BlockLimits {
    // A block is handed to the sink as soon as it holds max_rows rows or
    // max_values stored values (whichever comes first); the last block may
    // be smaller.
    int64_t max_rows = 4096;
    int64_t max_values = int64_t{1} << 22;  // 32 MiB of doubles
    // Longest accepted line (INVALID_ARGUMENT "line is too long" beyond).
    int64_t max_line_bytes = int64_t{256} << 20;
  };
  // Receives each block (row_offsets relative to the block; labels already
  // normalized). It may move from the block. An error stops the parse.
  using BlockSink = std::function<absl::Status(ParsedRows& block)>;

  // INVALID_ARGUMENT for invalid options or non-positive limits.
  static absl::StatusOr<std::unique_ptr<DatasetParser>> Create(
      const ImportOptions& options, BlockLimits limits, BlockSink sink);
  ~DatasetParser();
  DatasetParser(const DatasetParser&) = delete;
  DatasetParser& operator=(const DatasetParser&) = delete;

  // Parses every line completed by `bytes`; keeps a trailing partial line.
  absl::Status Feed(absl::string_view bytes);
  // Parses the last line (a file need not end in a newline), hands over the
  // last block; INVALID_ARGUMENT "file has no data rows" if there were none.
  absl::Status Finish();

  // The declared dimension, or the one inferred from a CSV file's first
  // non-blank line (0 until that line is parsed).
  int64_t dimension() const { return dimension_; }
  // Rows and stored values handed to the sink so far.
  int64_t rows() const { return rows_total_; }
  int64_t nonzeros() const { return nonzeros_total_; }
  // Feature names from a CSV header line (empty otherwise).
  const std::vector<std::string>& header_names() const { return header_names_; }

 private:
  class RowParser;
  DatasetParser(const ImportOptions& options, BlockLimits limits,
                BlockSink sink);
  absl::Status Line(absl::string_view line);
  absl::Status Flush();
  absl::Status Fail(absl::Status s);
  void ResetBlock();
  void ReserveBlock();

  const BlockLimits limits_;
  BlockSink sink_;
  std::unique_ptr<RowParser> rows_;
  const bool sparse_;
  int64_t dimension_;  // 0 until inferred (CSV without a declared dimension)
  ParsedRows block_;
  std::string carry_;  // the current line's bytes from earlier chunks
  int64_t line_no_ = 0;
  int64_t rows_total_ = 0;
  int64_t nonzeros_total_ = 0;
  std::vector<std::string> header_names_;
  absl::Status status_;
  bool finished_ = false;
};

// Parses and validates `file_bytes` per `options` (which must be valid; the
// function calls options.Validate() first). Blank lines (and a trailing '\r'
// on each line) are ignored.
// Errors (all INVALID_ARGUMENT, naming the 1-based line): no data rows;
// malformed token; NaN or Inf; LIBSVM index < 1, > dimension, or not strictly
// increasing; CSV row with a column count other than dimension + 1 (the
// declared dimension, or the one inferred from the first line; a declared
// dimension that disagrees with the first line is named with the file's);
// bad label for the label kind; value outside the declared bounds.
absl::StatusOr<ParsedRows> ParseDatasetFile(const ImportOptions& options,
                                            absl::string_view file_bytes);

}  // namespace dpopt::storage

#endif  // DPOPT_STORAGE_DATASET_IMPORT_H_
