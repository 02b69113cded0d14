// Shared by the LIBSVM and CSV parser fuzz targets: the first input bytes
// choose the import options, the rest is the file.
#ifndef DPOPT_TESTS_FUZZ_DATASET_FUZZ_COMMON_H_
#define DPOPT_TESTS_FUZZ_DATASET_FUZZ_COMMON_H_

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "absl/strings/string_view.h"
#include "storage/dataset_import.h"

namespace dpopt::fuzz {

// Parses `data` as (4 option bytes, file) and checks the parser's output
// contract on success. Aborts (a fuzzer finding) on a violated contract.
inline void FuzzDatasetParser(storage::DatasetFormat format,
                              const uint8_t* data, size_t size) {
  if (size < 4) return;
  storage::ImportOptions o;
  o.name = "fuzz";
  o.format = format;
  o.dimension = 1 + data[0] % 16;
  if (data[1] & 0x80) o.dimension = 1 + (int64_t{data[0]} << 12);  // wide
  o.is_public = true;
  switch (data[1] % 3) {
    case 0:
      o.label_kind = LabelKind::kBinary;
      break;
    case 1:
      o.label_kind = LabelKind::kMulticlass;
      o.num_classes = 2 + data[2] % 5;
      break;
    default:
      o.label_kind = LabelKind::kReal;
  }
  o.csv_delimiter = (data[2] & 0x80) ? storage::CsvDelimiter::kWhitespace
                                     : storage::CsvDelimiter::kComma;
  o.csv_has_header = data[2] & 0x40;
  o.csv_label_column = (data[3] & 0x80) ? -1 : data[3] % (o.dimension + 1);
  if (data[3] & 0x40) o.bounds.row_norm_bound = 1 + data[3] % 8;
  if ((data[3] & 0x20) && o.dimension <= 16) {
    o.bounds.lower.assign(o.dimension, -2.0);
    o.bounds.upper.assign(o.dimension, 2.0);
  }
  if (!o.Validate().ok()) return;
  const absl::string_view file(reinterpret_cast<const char*>(data + 4),
                               size - 4);
  absl::StatusOr<storage::ParsedRows> rows = storage::ParseDatasetFile(o, file);
  if (!rows.ok()) {
    // Every refusal is INVALID_ARGUMENT with a message.
    if (rows.status().code() != absl::StatusCode::kInvalidArgument ||
        rows.status().message().empty()) {
      std::abort();
    }
    return;
  }
  // Output contract: shapes agree, values finite, indices in range and
  // strictly increasing, labels valid for the kind.
  const storage::ParsedRows& r = *rows;
  if (r.rows < 1 || r.dimension != o.dimension ||
      r.labels.size() != static_cast<size_t>(r.rows)) {
    std::abort();
  }
  for (double y : r.labels) {
    if (!std::isfinite(y)) std::abort();
    if (o.label_kind == LabelKind::kBinary && y != 1 && y != -1) std::abort();
    if (o.label_kind == LabelKind::kMulticlass &&
        (y < 0 || y >= o.num_classes || y != std::floor(y))) {
      std::abort();
    }
  }
  for (double v : r.values) {
    if (!std::isfinite(v)) std::abort();
  }
  if (r.sparse) {
    if (r.row_offsets.size() != static_cast<size_t>(r.rows) + 1 ||
        r.indices.size() != r.values.size()) {
      std::abort();
    }
    for (int64_t i = 0; i < r.rows; ++i) {
      for (int64_t k = r.row_offsets[i]; k < r.row_offsets[i + 1]; ++k) {
        if (r.indices[k] < 0 || r.indices[k] >= r.dimension) std::abort();
        if (k > r.row_offsets[i] && r.indices[k] <= r.indices[k - 1]) {
          std::abort();
        }
      }
    }
  } else if (r.values.size() != static_cast<size_t>(r.rows * r.dimension)) {
    std::abort();
  }
}

}  // namespace dpopt::fuzz

#endif  // DPOPT_TESTS_FUZZ_DATASET_FUZZ_COMMON_H_
