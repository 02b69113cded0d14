#include "storage/deletion_record.h"

#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "core/common/status_macros.h"
#include "storage/file_util.h"

namespace dpopt::storage {
namespace {

constexpr char kHeader[] = "dpopt-deletions v1";
// A deleted dataset's line is under 400 bytes (names are at most 128 bytes
// in requests); 64 MiB holds far more deletions than a server ever makes.
constexpr size_t kMaxFileBytes = size_t{64} << 20;

absl::Status Malformed(const std::string& path, size_t line) {
  return absl::DataLossError(absl::StrCat(
      "the deletion record ", path, " is malformed at line ", line,
      " (expected \"", kHeader,
      "\", then lines \"dataset id=N created_at=N deleted_at=N name=HEX\")"));
}

bool ParseField(absl::string_view field, absl::string_view key, int64_t* out) {
  return absl::ConsumePrefix(&field, key) && absl::ConsumePrefix(&field, "=") &&
         !field.empty() &&
         field.find_first_not_of("0123456789") == absl::string_view::npos &&
         field.size() <= 19 && absl::SimpleAtoi(field, out);
}

}  // namespace

std::string DeletionRecord::DefaultPath(const std::string& ledger_mark_path) {
  absl::string_view base = ledger_mark_path;
  absl::ConsumeSuffix(&base, ".ledger-mark");
  return absl::StrCat(base, ".deletions");
}

absl::StatusOr<std::vector<DeletionEntry>> DeletionRecord::Read(
    const std::string& path) {
  absl::StatusOr<std::string> text = ReadSmallFile(path, kMaxFileBytes);
  if (absl::IsNotFound(text.status())) return std::vector<DeletionEntry>();
  RETURN_IF_ERROR(text.status());
  absl::string_view v = *text;
  if (!absl::ConsumeSuffix(&v, "\n")) return Malformed(path, 1);
  std::vector<absl::string_view> lines = absl::StrSplit(v, '\n');
  if (lines.empty() || lines[0] != kHeader) return Malformed(path, 1);
  std::vector<DeletionEntry> out;
  for (size_t i = 1; i < lines.size(); ++i) {
    std::vector<absl::string_view> f = absl::StrSplit(lines[i], ' ');
    DeletionEntry e;
    if (f.size() != 5 || f[0] != "dataset" ||
        !ParseField(f[1], "id", &e.dataset_id) ||
        !ParseField(f[2], "created_at", &e.created_at_micros) ||
        !ParseField(f[3], "deleted_at", &e.deleted_at_micros) ||
        !absl::StartsWith(f[4], "name=")) {
      return Malformed(path, i + 1);
    }
    const absl::string_view hex = f[4].substr(5);
    if (hex.size() % 2 != 0 ||
        hex.find_first_not_of("0123456789abcdef") != absl::string_view::npos) {
      return Malformed(path, i + 1);
    }
    e.name = absl::HexStringToBytes(hex);
    out.push_back(std::move(e));
  }
  return out;
}

absl::Status DeletionRecord::Write(const std::string& path,
                                   const std::vector<DeletionEntry>& entries) {
  std::string text = absl::StrCat(kHeader, "\n");
  for (const DeletionEntry& e : entries) {
    if (e.dataset_id < 0 || e.created_at_micros < 0 ||
        e.deleted_at_micros < 0) {
      return absl::InvalidArgumentError(
          "a deletion entry's id and times must be >= 0");
    }
    absl::StrAppend(&text, "dataset id=", e.dataset_id,
                    " created_at=", e.created_at_micros,
                    " deleted_at=", e.deleted_at_micros,
                    " name=", absl::BytesToHexString(e.name), "\n");
  }
  return WriteFileDurably(path, text, 0600);
}

absl::StatusOr<std::unique_ptr<DeletionRecord>> DeletionRecord::Load(
    const std::string& path) {
  ASSIGN_OR_RETURN(std::vector<DeletionEntry> entries, Read(path));
  return std::unique_ptr<DeletionRecord>(
      new DeletionRecord(path, std::move(entries)));
}

absl::Status DeletionRecord::Add(const DeletionEntry& entry) {
  absl::MutexLock lock(&mu_);
  std::vector<DeletionEntry> next;
  next.reserve(entries_.size() + 1);
  for (const DeletionEntry& e : entries_) {
    if (e.dataset_id != entry.dataset_id) next.push_back(e);
  }
  next.push_back(entry);
  RETURN_IF_ERROR(Write(path_, next));
  entries_ = std::move(next);
  return absl::OkStatus();
}

absl::Status DeletionRecord::Remove(int64_t dataset_id) {
  absl::MutexLock lock(&mu_);
  std::vector<DeletionEntry> next;
  for (const DeletionEntry& e : entries_) {
    if (e.dataset_id != dataset_id) next.push_back(e);
  }
  if (next.size() == entries_.size()) return absl::OkStatus();
  RETURN_IF_ERROR(Write(path_, next));
  entries_ = std::move(next);
  return absl::OkStatus();
}

std::vector<DeletionEntry> DeletionRecord::entries() const {
  absl::MutexLock lock(&mu_);
  return entries_;
}

}  // namespace dpopt::storage
