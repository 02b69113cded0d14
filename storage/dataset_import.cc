#include "storage/dataset_import.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <utility>

#include "absl/base/attributes.h"
#include "absl/memory/memory.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "core/common/status_macros.h"
#include "fast_float/fast_float.h"

namespace dpopt::storage {
namespace {

absl::Status LineError(int64_t line, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("line ", line, ": ", what));
}

bool IsBlank(char c) { return c == ' ' || c == '\t'; }

// Splits on runs of spaces/tabs.
void SplitWhitespace(absl::string_view line,
                     std::vector<absl::string_view>* out) {
  out->clear();
  size_t i = 0;
  const size_t n = line.size();
  while (i < n) {
    while (i < n && IsBlank(line[i])) ++i;
    if (i >= n) break;
    size_t j = i;
    while (j < n && !IsBlank(line[j])) ++j;
    out->push_back(line.substr(i, j - i));
    i = j;
  }
}

// Splits on ',' and trims ASCII whitespace around each field (as
// absl::StripAsciiWhitespace). Hand-written with memchr: this runs once per
// field of every imported CSV row.
void SplitComma(absl::string_view line, std::vector<absl::string_view>* out) {
  out->clear();
  const char* p = line.data();
  const char* const end = p + line.size();
  for (;;) {
    const void* comma = std::memchr(p, ',', end - p);
    const char* field_end =
        comma == nullptr ? end : static_cast<const char*>(comma);
    const char* b = p;
    const char* e = field_end;
    while (b < e && absl::ascii_isspace(static_cast<unsigned char>(*b))) ++b;
    while (e > b && absl::ascii_isspace(static_cast<unsigned char>(e[-1]))) {
      --e;
    }
    out->emplace_back(b, e - b);
    if (comma == nullptr) return;
    p = field_end + 1;
  }
}

// Clinger's fast path (W. D. Clinger, "How to read floating point numbers
// accurately", PLDI 1990) for the plain decimals that data exports are made
// of ("-12.3456"): a token -?[0-9]+(\.[0-9]*)? of at most 15 digits in all,
// not followed by an exponent, is m / 10^k with m < 10^15 < 2^53 and
// k <= 15, both exact doubles, so one correctly rounded division gives the
// correctly rounded value of the decimal: the value fast_float and
// SimpleAtod return (storage_staged_import_test compares all three). On the
// import benchmark's values this takes 17 ns instead of fast_float's 36,
// whose general algorithm pays for exponents and long mantissas. Returns
// the end of the token, or nullptr when the token is not of this form (the
// caller then uses fast_float).
ABSL_ATTRIBUTE_ALWAYS_INLINE inline const char* ParsePlainDecimal(
    const char* p, const char* end, double* value) {
  static constexpr double kPow10[] = {1e0,  1e1,  1e2,  1e3, 1e4,  1e5,
                                      1e6,  1e7,  1e8,  1e9, 1e10, 1e11,
                                      1e12, 1e13, 1e14, 1e15};
  const bool negative = p < end && *p == '-';
  if (negative) ++p;
  auto is_digit = [](char c) { return static_cast<unsigned>(c - '0') < 10; };
  uint64_t m = 0;
  const char* const int_begin = p;
  while (p < end && is_digit(*p)) {
    m = m * 10 + static_cast<unsigned>(*p++ - '0');
  }
  int digits = static_cast<int>(p - int_begin);
  if (digits == 0) return nullptr;
  int decimals = 0;
  if (p < end && *p == '.') {
    const char* const frac_begin = ++p;
    while (p < end && is_digit(*p)) {
      m = m * 10 + static_cast<unsigned>(*p++ - '0');
    }
    decimals = static_cast<int>(p - frac_begin);
    digits += decimals;
  }
  // Beyond 19 digits m has wrapped, but such tokens are refused here.
  if (digits > 15 || (p < end && (*p == 'e' || *p == 'E'))) return nullptr;
  // m < 10^15 < 2^53 converts exactly; -(m / 10^k) == -m / 10^k.
  const double v = static_cast<double>(m) / kPow10[decimals];
  *value = negative ? -v : v;
  return p;
}

// Parses a finite double. Returns false for malformed tokens; sets
// *non_finite for NaN/Inf (which parse but are rejected separately).
bool ParseNumber(absl::string_view token, double* value, bool* non_finite) {
  *non_finite = false;
  if (token.empty()) return false;
  // Fast path: fast_float (Debian's libfast-float-dev, the library
  // libstdc++'s std::from_chars is built on; called directly it parses the
  // import benchmark's values in 21 ns instead of 28). Correctly rounded, like
  // absl's, it accepts a subset of SimpleAtod's syntax (no '+', no
  // surrounding blanks); a finite value it parses in full is the value
  // SimpleAtod gives (storage_staged_import_test checks it on 20,000 tokens).
  // Anything else takes SimpleAtod's path.
  const char* const end = token.data() + token.size();
  if (ParsePlainDecimal(token.data(), end, value) == end) return true;
  const fast_float::from_chars_result r =
      fast_float::from_chars(token.data(), end, *value);
  if (r.ec == std::errc() && r.ptr == end && std::isfinite(*value)) {
    return true;
  }
  if (!absl::SimpleAtod(token, value)) return false;
  if (!std::isfinite(*value)) {
    *non_finite = true;
    return false;
  }
  return true;
}

// Validates and normalizes labels per the options' label kind.
class LabelChecker {
 public:
  explicit LabelChecker(const ImportOptions& options) : options_(options) {}

  absl::Status Check(int64_t line, absl::string_view token, double* label) {
    bool non_finite = false;
    if (!ParseNumber(token, label, &non_finite)) {
      return LineError(
          line, non_finite ? "label is NaN or Inf" : "label is not a number");
    }
    return CheckValue(line, label);
  }

  // The same for a label already parsed (finite). Calling it again after an
  // error gives the same error.
  absl::Status CheckValue(int64_t line, double* label) {
    switch (options_.label_kind) {
      case LabelKind::kBinary:
        if (*label == 1.0) return absl::OkStatus();
        if (*label == -1.0) {
          saw_minus_one_ = true;
        } else if (*label == 0.0) {
          saw_zero_ = true;
          *label = -1.0;
        } else {
          return LineError(line, "binary label must be +1/-1 or 0/1");
        }
        if (saw_zero_ && saw_minus_one_) {
          return LineError(line,
                           "binary labels mix 0 and -1 (use +1/-1 or 0/1)");
        }
        return absl::OkStatus();
      case LabelKind::kMulticlass:
        if (*label != std::floor(*label) || *label < 0 ||
            *label >= options_.num_classes) {
          return LineError(line,
                           absl::StrCat("class label must be an integer in "
                                        "[0, ",
                                        options_.num_classes, ")"));
        }
        return absl::OkStatus();
      case LabelKind::kReal:
        return absl::OkStatus();
    }
    return absl::InternalError("unknown label kind");
  }

 private:
  const ImportOptions& options_;
  bool saw_zero_ = false;
  bool saw_minus_one_ = false;
};

// Checks feature values against the declared bounds.
class BoundsChecker {
 public:
  explicit BoundsChecker(const DeclaredBounds& bounds, bool sparse)
      : bounds_(bounds) {
    if (sparse && bounds.has_feature_bounds()) {
      for (size_t j = 0; j < bounds.lower.size(); ++j) {
        if (bounds.lower[j] > 0 || bounds.upper[j] < 0) {
          zero_excluded_.push_back(static_cast<int32_t>(j));
        }
      }
    }
  }

  // `feature` is 0-based; messages report it 1-based.
  absl::Status CheckValue(int64_t line, int64_t feature, double v) const {
    if (bounds_.has_feature_bounds() &&
        (v < bounds_.lower[feature] || v > bounds_.upper[feature])) {
      // The declared bounds are public; the offending value is not echoed.
      return LineError(line, absl::StrCat("feature ", feature + 1,
                                          " is outside its declared bounds [",
                                          bounds_.lower[feature], ", ",
                                          bounds_.upper[feature], "]"));
    }
    return absl::OkStatus();
  }

  // For sparse rows: features whose bounds exclude 0 must be present.
  // `indices` is the row's sorted 0-based index list.
  absl::Status CheckAbsent(int64_t line, const int32_t* indices,
                           size_t count) const {
    for (int32_t j : zero_excluded_) {
      if (!std::binary_search(indices, indices + count, j)) {
        return LineError(line,
                         absl::StrCat("feature ", j + 1,
                                      " is absent (0), outside its declared "
                                      "bounds"));
      }
    }
    return absl::OkStatus();
  }

  absl::Status CheckNorm(int64_t line, double squared_norm) const {
    if (bounds_.row_norm_bound.has_value() &&
        !(std::sqrt(squared_norm) <= *bounds_.row_norm_bound)) {
      return LineError(line, absl::StrCat("row L2 norm exceeds the declared "
                                          "row_norm_bound ",
                                          *bounds_.row_norm_bound));
    }
    return absl::OkStatus();
  }

 private:
  const DeclaredBounds& bounds_;
  std::vector<int32_t> zero_excluded_;
};

absl::Status CheckNoNul(absl::string_view bytes) {
  if (bytes.find('\0') != absl::string_view::npos) {
    return absl::InvalidArgumentError("file contains NUL bytes (binary data?)");
  }
  return absl::OkStatus();
}

bool IsBlankLine(absl::string_view line) {
  for (char c : line) {
    if (!IsBlank(c)) return false;
  }
  return true;
}

}  // namespace

// Parses one non-blank line at a time into a block (the format-specific
// half of DatasetParser).
class DatasetParser::RowParser {
 public:
  explicit RowParser(const ImportOptions& options)
      : options_(options),
        dimension_(options.dimension),
        labels_(options_),
        bounds_(options_.bounds, options_.format == DatasetFormat::kLibsvm),
        header_pending_(options_.format == DatasetFormat::kCsv &&
                        options_.csv_has_header) {}

  // Appends the row on `line` to `block` (or reads the CSV header).
  absl::Status Parse(int64_t line_no, absl::string_view line, ParsedRows& block,
                     std::vector<std::string>& header) {
    return options_.format == DatasetFormat::kLibsvm
               ? ParseLibsvm(line_no, line, block)
               : ParseCsv(line_no, line, block, header);
  }

  // The declared dimension, or the inferred one (0 until the first CSV line).
  int64_t dimension() const { return dimension_; }

 private:
  absl::Status ParseLibsvm(int64_t line_no, absl::string_view line,
                           ParsedRows& out) {
    SplitWhitespace(line, &tokens_);
    double label = 0;
    RETURN_IF_ERROR(labels_.Check(line_no, tokens_[0], &label));
    const size_t row_start = out.indices.size();
    int64_t prev = 0;
    double sq = 0;
    for (size_t t = 1; t < tokens_.size(); ++t) {
      const absl::string_view tok = tokens_[t];
      const size_t colon = tok.find(':');
      if (colon == absl::string_view::npos) {
        return LineError(line_no, absl::StrCat("token ", t + 1,
                                               " is not of the form "
                                               "index:value"));
      }
      int64_t index = 0;
      if (!absl::SimpleAtoi(tok.substr(0, colon), &index)) {
        return LineError(line_no, absl::StrCat("token ", t + 1,
                                               ": feature index is not an "
                                               "integer"));
      }
      if (index < 1) {
        return LineError(line_no,
                         absl::StrCat("feature index ", index,
                                      " is below 1 (indices are 1-based)"));
      }
      if (index > options_.dimension) {
        return LineError(
            line_no, absl::StrCat("feature index ", index,
                                  " exceeds dimension ", options_.dimension));
      }
      if (index <= prev) {
        return LineError(line_no,
                         absl::StrCat("feature index ", index,
                                      " is not greater than the previous "
                                      "index ",
                                      prev));
      }
      prev = index;
      double v = 0;
      bool non_finite = false;
      if (!ParseNumber(tok.substr(colon + 1), &v, &non_finite)) {
        return LineError(
            line_no,
            non_finite
                ? absl::StrCat("value of feature ", index, " is NaN or Inf")
                : absl::StrCat("value of feature ", index, " is not a number"));
      }
      RETURN_IF_ERROR(bounds_.CheckValue(line_no, index - 1, v));
      sq += v * v;
      out.indices.push_back(static_cast<int32_t>(index - 1));
      out.values.push_back(v);
    }
    RETURN_IF_ERROR(bounds_.CheckAbsent(line_no, out.indices.data() + row_start,
                                        out.indices.size() - row_start));
    RETURN_IF_ERROR(bounds_.CheckNorm(line_no, sq));
    out.labels.push_back(label);
    out.row_offsets.push_back(static_cast<int64_t>(out.indices.size()));
    ++out.rows;
    return absl::OkStatus();
  }

  // The common CSV row in one pass: comma-separated fields, each a number
  // fast_float parses in full (optionally with blanks around it), a valid
  // label, values within the declared bounds. Returns false, with `out`
  // unchanged, for anything else; ParseCsv's general path then parses the
  // line again and reports its error exactly (or accepts what only
  // SimpleAtod parses, such as "+1"). Splitting first and parsing each token
  // took 40% of the import's parsing time.
  bool ParseCsvFast(int64_t line_no, absl::string_view line, ParsedRows& out) {
    const int64_t columns = dimension_ + 1;
    const int64_t label_col =
        options_.csv_label_column < 0 ? columns - 1 : options_.csv_label_column;
    const size_t start = out.values.size();
    auto fail = [&out, start] {
      out.values.resize(start);
      return false;
    };
    const char* p = line.data();
    const char* const end = p + line.size();
    auto is_space = [](char c) {
      return absl::ascii_isspace(static_cast<unsigned char>(c));
    };
    const bool check_values = options_.bounds.has_feature_bounds();
    const bool check_norm = options_.bounds.row_norm_bound.has_value();
    double label = 0;
    double sq = 0;
    int64_t feature = 0;
    for (int64_t c = 0; c < columns; ++c) {
      while (p < end && is_space(*p)) ++p;
      double v = 0;
      if (const char* q = ParsePlainDecimal(p, end, &v); q != nullptr) {
        p = q;
      } else {
        const fast_float::from_chars_result r =
            fast_float::from_chars(p, end, v);
        if (r.ec != std::errc() || !std::isfinite(v)) return fail();
        p = r.ptr;
      }
      while (p < end && is_space(*p)) ++p;
      if (c + 1 < columns) {
        if (p == end || *p != ',') return fail();
        ++p;
      } else if (p != end) {
        return fail();
      }
      if (c == label_col) {
        label = v;
        continue;
      }
      if (check_values && !bounds_.CheckValue(line_no, feature, v).ok()) {
        return fail();
      }
      sq += v * v;
      out.values.push_back(v);
      ++feature;
    }
    if ((check_norm && !bounds_.CheckNorm(line_no, sq).ok()) ||
        !labels_.CheckValue(line_no, &label).ok()) {
      return fail();
    }
    out.labels.push_back(label);
    ++out.rows;
    return true;
  }

  absl::Status ParseCsv(int64_t line_no, absl::string_view line,
                        ParsedRows& out, std::vector<std::string>& header) {
    if (options_.csv_delimiter == CsvDelimiter::kComma && !header_pending_ &&
        dimension_ > 0 && ParseCsvFast(line_no, line, out)) {
      first_line_ = std::min(first_line_, line_no);
      return absl::OkStatus();
    }
    if (options_.csv_delimiter == CsvDelimiter::kComma) {
      SplitComma(line, &tokens_);
    } else {
      SplitWhitespace(line, &tokens_);
    }
    const int64_t found = static_cast<int64_t>(tokens_.size());
    if (dimension_ == 0) RETURN_IF_ERROR(InferDimension(line_no, found));
    const int64_t columns = dimension_ + 1;
    const int64_t label_col =
        options_.csv_label_column < 0 ? columns - 1 : options_.csv_label_column;
    if (found != columns) return ColumnCountError(line_no, found);
    first_line_ = std::min(first_line_, line_no);
    if (header_pending_) {
      header_pending_ = false;
      for (int64_t c = 0; c < columns; ++c) {
        if (c == label_col) continue;
        if (tokens_[c].size() > ImportOptions::kMaxFeatureNameBytes) {
          return absl::InvalidArgumentError(
              absl::StrCat("CSV header: feature names are limited to ",
                           ImportOptions::kMaxFeatureNameBytes, " bytes"));
        }
        header.emplace_back(tokens_[c]);
      }
      return absl::OkStatus();
    }
    double label = 0;
    RETURN_IF_ERROR(labels_.Check(line_no, tokens_[label_col], &label));
    double sq = 0;
    int64_t feature = 0;
    for (int64_t c = 0; c < columns; ++c) {
      if (c == label_col) continue;
      double v = 0;
      bool non_finite = false;
      if (!ParseNumber(tokens_[c], &v, &non_finite)) {
        return LineError(
            line_no, non_finite
                         ? absl::StrCat("column ", c + 1, " is NaN or Inf")
                         : absl::StrCat("column ", c + 1, " is not a number"));
      }
      RETURN_IF_ERROR(bounds_.CheckValue(line_no, feature, v));
      sq += v * v;
      out.values.push_back(v);
      ++feature;
    }
    RETURN_IF_ERROR(bounds_.CheckNorm(line_no, sq));
    out.labels.push_back(label);
    ++out.rows;
    return absl::OkStatus();
  }

  // The dimension of a CSV file without a declared one: its first non-blank
  // line's column count minus the label column.
  absl::Status InferDimension(int64_t line_no, int64_t columns) {
    const int64_t d = columns - 1;
    if (d < 1) {
      return LineError(line_no,
                       "found 1 column: a CSV row needs at least one feature "
                       "column and the label column");
    }
    if (d > ImportOptions::kMaxDimension) {
      return LineError(line_no,
                       absl::StrCat("found ", columns, " columns: at most ",
                                    ImportOptions::kMaxDimension,
                                    " features (+ 1 label) are allowed"));
    }
    if (absl::Status s = options_.ValidateDimension(d); !s.ok()) {
      return LineError(line_no, absl::StrCat(columns,
                                             " columns make the "
                                             "dimension ",
                                             d, ", but ", s.message()));
    }
    dimension_ = d;
    inferred_from_ = line_no;
    return absl::OkStatus();
  }

  absl::Status ColumnCountError(int64_t line_no, int64_t found) const {
    const int64_t columns = dimension_ + 1;
    if (inferred_from_ > 0) {
      return LineError(
          line_no, absl::StrCat("expected ", columns, " columns (dimension ",
                                dimension_, " + 1 label, as on line ",
                                inferred_from_, "), found ", found));
    }
    if (line_no <= first_line_) {
      // The file's first line disagrees with the declared dimension.
      return LineError(
          line_no, absl::StrCat("the file has ", found, " columns (dimension ",
                                found - 1,
                                " + 1 label) but the declared "
                                "dimension is ",
                                dimension_, "; declare ", found - 1,
                                " or leave the dimension out to infer it"));
    }
    return LineError(line_no,
                     absl::StrCat("expected ", columns, " columns (dimension ",
                                  dimension_, " + 1 label), found ", found));
  }

  const ImportOptions options_;
  int64_t dimension_;          // declared, or inferred (0 until then)
  int64_t inferred_from_ = 0;  // the line the dimension was inferred from
  // The first non-blank line parsed without error (the header or a row).
  int64_t first_line_ = std::numeric_limits<int64_t>::max();
  LabelChecker labels_;
  BoundsChecker bounds_;
  bool header_pending_;
  std::vector<absl::string_view> tokens_;
};

DatasetParser::DatasetParser(const ImportOptions& options, BlockLimits limits,
                             BlockSink sink)
    : limits_(limits),
      sink_(std::move(sink)),
      rows_(std::make_unique<RowParser>(options)),
      sparse_(options.format == DatasetFormat::kLibsvm),
      dimension_(options.dimension) {
  ResetBlock();
}

DatasetParser::~DatasetParser() = default;

absl::StatusOr<std::unique_ptr<DatasetParser>> DatasetParser::Create(
    const ImportOptions& options, BlockLimits limits, BlockSink sink) {
  RETURN_IF_ERROR(options.Validate());
  if (limits.max_rows < 1 || limits.max_values < 1 ||
      limits.max_line_bytes < 1) {
    return absl::InvalidArgumentError("block limits must be positive");
  }
  return absl::WrapUnique(new DatasetParser(options, limits, std::move(sink)));
}

void DatasetParser::ResetBlock() {
  block_ = ParsedRows();
  block_.sparse = sparse_;
  block_.dimension = dimension_;
  if (sparse_) {
    block_.row_offsets.push_back(0);
  } else {
    ReserveBlock();
  }
}

void DatasetParser::ReserveBlock() {
  if (dimension_ > 0) {
    // A dense block's size is known: reserving it spares the copies of a
    // growing vector (6% of the import's parsing time). The block ends at
    // max_rows rows or once it holds max_values values (one row more at
    // most). Only for blocks of at most 32 MiB of values: ParseDatasetFile's
    // single unlimited block grows with its file instead (reserving 64 MiB
    // per call made the sanitizer run of a 40,000-call test time out).
    constexpr int64_t kMaxReserve = int64_t{1} << 22;  // values
    if (limits_.max_rows <= kMaxReserve &&
        limits_.max_rows * dimension_ <= kMaxReserve + dimension_) {
      block_.values.reserve(static_cast<size_t>(limits_.max_rows * dimension_));
      block_.labels.reserve(static_cast<size_t>(limits_.max_rows));
    } else if (limits_.max_values <= kMaxReserve) {
      block_.values.reserve(
          static_cast<size_t>(limits_.max_values + dimension_));
    }
  }
}

absl::Status DatasetParser::Fail(absl::Status s) {
  status_ = s;
  return s;
}

absl::Status DatasetParser::Line(absl::string_view line) {
  ++line_no_;
  if (line.size() > static_cast<size_t>(limits_.max_line_bytes)) {
    return LineError(line_no_, "line is too long");
  }
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  if (IsBlankLine(line)) return absl::OkStatus();
  const int64_t before = block_.rows;
  RETURN_IF_ERROR(rows_->Parse(line_no_, line, block_, header_names_));
  if (dimension_ != rows_->dimension()) {
    // Inferred from this, the file's first line: the block is still empty
    // or holds this line's row.
    dimension_ = rows_->dimension();
    block_.dimension = dimension_;
    if (!sparse_) ReserveBlock();
  }
  if (block_.rows == before) return absl::OkStatus();  // the CSV header
  if (rows_total_ + block_.rows > std::numeric_limits<int32_t>::max()) {
    return absl::InvalidArgumentError("file has too many rows");
  }
  if (block_.rows >= limits_.max_rows ||
      static_cast<int64_t>(block_.values.size()) >= limits_.max_values) {
    return Flush();
  }
  return absl::OkStatus();
}

absl::Status DatasetParser::Flush() {
  if (block_.rows == 0) return absl::OkStatus();
  rows_total_ += block_.rows;
  nonzeros_total_ += block_.nonzeros();
  RETURN_IF_ERROR(sink_(block_));
  ResetBlock();
  return absl::OkStatus();
}

absl::Status DatasetParser::Feed(absl::string_view bytes) {
  RETURN_IF_ERROR(status_);
  if (finished_) return Fail(absl::FailedPreconditionError("parser finished"));
  absl::Status nul = CheckNoNul(bytes);
  if (!nul.ok()) return Fail(nul);
  size_t pos = 0;
  if (!carry_.empty()) {
    const size_t nl = bytes.find('\n');
    const size_t take = nl == absl::string_view::npos ? bytes.size() : nl;
    if (carry_.size() + take > static_cast<size_t>(limits_.max_line_bytes)) {
      return Fail(LineError(line_no_ + 1, "line is too long"));
    }
    carry_.append(bytes.data(), take);
    if (nl == absl::string_view::npos) return absl::OkStatus();
    absl::Status s = Line(carry_);
    if (!s.ok()) return Fail(s);
    carry_.clear();
    pos = nl + 1;
  }
  for (;;) {
    const size_t nl = bytes.find('\n', pos);
    if (nl == absl::string_view::npos) break;
    absl::Status s = Line(bytes.substr(pos, nl - pos));
    if (!s.ok()) return Fail(s);
    pos = nl + 1;
  }
  if (bytes.size() - pos > static_cast<size_t>(limits_.max_line_bytes)) {
    return Fail(LineError(line_no_ + 1, "line is too long"));
  }
  carry_.assign(bytes.data() + pos, bytes.size() - pos);
  return absl::OkStatus();
}

absl::Status DatasetParser::Finish() {
  RETURN_IF_ERROR(status_);
  if (finished_) return Fail(absl::FailedPreconditionError("parser finished"));
  finished_ = true;
  if (!carry_.empty()) {
    absl::Status s = Line(carry_);
    if (!s.ok()) return Fail(s);
    carry_.clear();
    carry_.shrink_to_fit();
  }
  absl::Status s = Flush();
  if (!s.ok()) return Fail(s);
  if (rows_total_ == 0) {
    return Fail(absl::InvalidArgumentError("file has no data rows"));
  }
  return absl::OkStatus();
}

namespace {

bool IsFiniteVector(const std::vector<double>& v) {
  for (double x : v) {
    if (!std::isfinite(x)) return false;
  }
  return true;
}

}  // namespace

absl::string_view DatasetFormatName(DatasetFormat format) {
  switch (format) {
    case DatasetFormat::kLibsvm:
      return "libsvm";
    case DatasetFormat::kCsv:
      return "csv";
  }
  return "unknown";
}

absl::StatusOr<DatasetFormat> ParseDatasetFormat(absl::string_view name) {
  if (name == "libsvm") return DatasetFormat::kLibsvm;
  if (name == "csv") return DatasetFormat::kCsv;
  return absl::InvalidArgumentError(
      "dataset format must be \"libsvm\" or \"csv\"");
}

absl::string_view CsvDelimiterName(CsvDelimiter delimiter) {
  switch (delimiter) {
    case CsvDelimiter::kComma:
      return "comma";
    case CsvDelimiter::kWhitespace:
      return "whitespace";
  }
  return "unknown";
}

absl::StatusOr<CsvDelimiter> ParseCsvDelimiter(absl::string_view name) {
  if (name == "," || name == "comma") return CsvDelimiter::kComma;
  if (name == "whitespace") return CsvDelimiter::kWhitespace;
  return absl::InvalidArgumentError(
      "CSV delimiter must be \",\" or \"whitespace\"");
}

bool IsValidDatasetName(absl::string_view name) {
  if (name.empty() || name.size() > 64) return false;
  for (char c : name) {
    if (!(absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '.' ||
          c == '_' || c == '-')) {
      return false;
    }
  }
  return true;
}

absl::Status ImportOptions::Validate() const {
  if (!IsValidDatasetName(name)) {
    return absl::InvalidArgumentError(
        "dataset name must match [A-Za-z0-9._-]{1,64}");
  }
  if (format != DatasetFormat::kLibsvm && format != DatasetFormat::kCsv) {
    return absl::InvalidArgumentError("unknown dataset format");
  }
  const bool inferred = format == DatasetFormat::kCsv && dimension == 0;
  if (!inferred && (dimension < 1 || dimension > kMaxDimension)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "dimension must be in [1, ", kMaxDimension, "]",
        format == DatasetFormat::kCsv
            ? " (or 0: inferred from the CSV file's first line)"
            : " (a LIBSVM file does not define it: declare the number of "
              "features)"));
  }
  if (is_public) {
    if (epsilon_budget != 0 || delta_budget != 0) {
      return absl::InvalidArgumentError(
          "a public dataset has no privacy budget: epsilon_budget and "
          "delta_budget must be 0");
    }
  } else {
    if (!(std::isfinite(epsilon_budget) && epsilon_budget > 0)) {
      return absl::InvalidArgumentError(
          "a private dataset needs a finite epsilon_budget > 0");
    }
    if (!(delta_budget >= 0 && delta_budget < 1)) {
      return absl::InvalidArgumentError("delta_budget must be in [0, 1)");
    }
  }
  if (budget_filter != kFilterRdp && budget_filter != kFilterBasic) {
    return absl::InvalidArgumentError(
        "budget_filter must be \"rdp\" or \"basic\"");
  }
  if (relation != kRelationAddRemove && relation != kRelationReplaceOne &&
      relation != kRelationLinfOffsets) {
    return absl::InvalidArgumentError(
        "relation must be \"add_remove\", \"replace_one\" or "
        "\"linf_offsets\"");
  }
  if ((relation == kRelationLinfOffsets) != !problem_json.empty()) {
    return absl::InvalidArgumentError(
        "the linf_offsets relation belongs to max-affine problems (and they "
        "have no other relation)");
  }
  if (!problem_json.empty() &&
      (format != DatasetFormat::kCsv || label_kind != LabelKind::kReal)) {
    return absl::InvalidArgumentError(
        "a max-affine problem is a CSV file with a real offset column");
  }
  switch (label_kind) {
    case LabelKind::kBinary:
      if (num_classes != 2) {
        return absl::InvalidArgumentError(
            "binary labels require num_classes == 2");
      }
      break;
    case LabelKind::kMulticlass:
      if (num_classes < 2 || num_classes > kMaxClasses) {
        return absl::InvalidArgumentError(absl::StrCat(
            "multiclass labels require num_classes in [2, ", kMaxClasses, "]"));
      }
      break;
    case LabelKind::kReal:
      break;
    default:
      return absl::InvalidArgumentError("unknown label kind");
  }
  if (format == DatasetFormat::kCsv) {
    if (csv_delimiter != CsvDelimiter::kComma &&
        csv_delimiter != CsvDelimiter::kWhitespace) {
      return absl::InvalidArgumentError("unknown CSV delimiter");
    }
    if (csv_label_column < -1) {
      return absl::InvalidArgumentError(
          "csv_label_column must be -1 (last) or a 0-based column");
    }
  }
  if (bounds.lower.size() != bounds.upper.size()) {
    return absl::InvalidArgumentError(
        "declared lower and upper bounds must have the same length");
  }
  if (bounds.has_feature_bounds()) {
    if (!IsFiniteVector(bounds.lower) || !IsFiniteVector(bounds.upper)) {
      return absl::InvalidArgumentError(
          "declared feature bounds must be finite");
    }
    for (size_t j = 0; j < bounds.lower.size(); ++j) {
      if (bounds.lower[j] > bounds.upper[j]) {
        return absl::InvalidArgumentError(absl::StrCat(
            "declared bounds of feature ", j + 1, ": lower > upper"));
      }
    }
  }
  if (bounds.row_norm_bound.has_value() &&
      !(std::isfinite(*bounds.row_norm_bound) && *bounds.row_norm_bound > 0)) {
    return absl::InvalidArgumentError("row_norm_bound must be finite and > 0");
  }
  if (description.size() > kMaxDescriptionBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "description is longer than ", kMaxDescriptionBytes, " bytes"));
  }
  if (!feature_names.empty()) {
    for (const std::string& n : feature_names) {
      if (n.size() > kMaxFeatureNameBytes) {
        return absl::InvalidArgumentError(absl::StrCat(
            "feature names are limited to ", kMaxFeatureNameBytes, " bytes"));
      }
      if (n.find('\0') != std::string::npos) {
        return absl::InvalidArgumentError("feature names may not contain NUL");
      }
    }
  }
  if (!inferred) RETURN_IF_ERROR(ValidateDimension(dimension));
  return absl::OkStatus();
}

absl::Status ImportOptions::ValidateDimension(int64_t d) const {
  if (format == DatasetFormat::kCsv && csv_label_column > d) {
    return absl::InvalidArgumentError(
        absl::StrCat("csv_label_column must be -1 (last) or in [0, ", d, "]"));
  }
  if (bounds.has_feature_bounds() &&
      static_cast<int64_t>(bounds.lower.size()) != d) {
    return absl::InvalidArgumentError(absl::StrCat(
        "declared feature bounds must have one entry per feature (", d,
        "), got ", bounds.lower.size()));
  }
  if (!feature_names.empty() &&
      static_cast<int64_t>(feature_names.size()) != d) {
    return absl::InvalidArgumentError(
        absl::StrCat("feature_names must have one name per feature (", d,
                     "), got ", feature_names.size()));
  }
  return absl::OkStatus();
}

absl::StatusOr<ParsedRows> ParseDatasetFile(const ImportOptions& options,
                                            absl::string_view file_bytes) {
  // One block holding every row: the streaming parser with no block limits.
  ParsedRows rows;
  DatasetParser::BlockLimits unlimited;
  unlimited.max_rows = std::numeric_limits<int64_t>::max();
  unlimited.max_values = std::numeric_limits<int64_t>::max();
  unlimited.max_line_bytes = std::numeric_limits<int64_t>::max();
  ASSIGN_OR_RETURN(
      std::unique_ptr<DatasetParser> parser,
      DatasetParser::Create(options, unlimited, [&rows](ParsedRows& block) {
        rows = std::move(block);
        return absl::OkStatus();
      }));
  RETURN_IF_ERROR(parser->Feed(file_bytes));
  RETURN_IF_ERROR(parser->Finish());
  rows.header_names = parser->header_names();
  return rows;
}

}  // namespace dpopt::storage
