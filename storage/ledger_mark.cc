#include "storage/ledger_mark.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "core/common/status_macros.h"
#include "storage/file_util.h"

namespace dpopt::storage {
namespace {
constexpr char kPrefix[] = "dpopt-ledger-mark v1 seq=";
}  // namespace

absl::StatusOr<std::optional<int64_t>> LedgerMark::Read(
    const std::string& path) {
  absl::StatusOr<std::string> text = ReadSmallFile(path, 256);
  if (absl::IsNotFound(text.status())) return std::optional<int64_t>();
  RETURN_IF_ERROR(text.status());
  absl::string_view v = *text;
  int64_t seq = -1;
  if (!absl::ConsumePrefix(&v, kPrefix) || !absl::ConsumeSuffix(&v, "\n") ||
      v.empty() || v.size() > 19 ||
      v.find_first_not_of("0123456789") != absl::string_view::npos ||
      !absl::SimpleAtoi(v, &seq) || seq < 0) {
    return absl::DataLossError(
        absl::StrCat("the ledger high-water mark ", path,
                     " is malformed (expected one line \"", kPrefix, "N\")"));
  }
  return std::optional<int64_t>(seq);
}

absl::Status LedgerMark::Write(const std::string& path, int64_t seq) {
  if (seq < 0) return absl::InvalidArgumentError("ledger mark must be >= 0");
  return WriteFileDurably(path, absl::StrCat(kPrefix, seq, "\n"), 0600);
}

absl::Status LedgerMark::Advance(int64_t seq) {
  absl::MutexLock lock(&mu_);
  if (seq <= current_) return absl::OkStatus();
  RETURN_IF_ERROR(Write(path_, seq));
  current_ = seq;
  return absl::OkStatus();
}

int64_t LedgerMark::current() const {
  absl::MutexLock lock(&mu_);
  return current_;
}

}  // namespace dpopt::storage
