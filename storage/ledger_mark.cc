#include "storage/ledger_mark.h"

#include <algorithm>

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
  wanted_ = std::max(wanted_, seq);
  while (current_ < seq) {
    if (writing_) {
      // Another thread's write may cover `seq`; else write after it.
      auto done = [this, seq]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
        return !writing_ || current_ >= seq;
      };
      mu_.Await(absl::Condition(&done));
      continue;
    }
    // Every seq asked for so far has committed in the ledger (Advance is
    // called after the charge's commit), so the highest may be written.
    const int64_t target = wanted_;
    writing_ = true;
    mu_.Unlock();
    absl::Status written = Write(path_, target);
    mu_.Lock();
    writing_ = false;
    if (!written.ok()) return written;
    current_ = std::max(current_, target);
  }
  return absl::OkStatus();
}

int64_t LedgerMark::current() const {
  absl::MutexLock lock(&mu_);
  return current_;
}

}  // namespace dpopt::storage
