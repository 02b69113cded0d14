#include "server/job_listing.h"

#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace dpopt::server {
namespace {

constexpr char kVersion[] = "v1";

absl::Status BadToken(absl::string_view why) {
  return absl::InvalidArgumentError(
      absl::StrCat("invalid page_token (", why,
                   "); pass the next_page_token of the previous page with the "
                   "same dataset and order, or none for the first page"));
}

}  // namespace

int32_t JobPageSize(const v1::ListJobsRequest& request) {
  if (request.page_size() <= 0) return kDefaultJobPageSize;
  return request.page_size() > kMaxJobPageSize ? kMaxJobPageSize
                                               : request.page_size();
}

absl::StatusOr<storage::JobFilter> JobPageFilter(
    const v1::ListJobsRequest& request, const std::string& principal) {
  if (request.page_size() < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("page_size must be >= 0 (0: ", kDefaultJobPageSize,
                     "), got ", request.page_size()));
  }
  storage::JobFilter f;
  f.dataset = request.dataset();
  f.principal = principal;
  f.limit = static_cast<int64_t>(JobPageSize(request)) + 1;
  f.newest_first = request.newest_first();
  f.without_result = true;
  if (request.page_token().empty()) return f;
  if (request.page_token().size() > 1024) return BadToken("too long");
  std::string raw;
  if (!absl::WebSafeBase64Unescape(request.page_token(), &raw)) {
    return BadToken("not a page token");
  }
  // The dataset name is last and may itself contain '|'.
  std::vector<std::string> parts = absl::StrSplit(raw, absl::MaxSplits('|', 4));
  storage::JobCursor c;
  if (parts.size() != 5 || parts[0] != kVersion ||
      (parts[1] != "asc" && parts[1] != "desc") ||
      !absl::SimpleAtoi(parts[2], &c.created_at_micros) ||
      !absl::SimpleAtoi(parts[3], &c.rowid)) {
    return BadToken("not a page token");
  }
  if ((parts[1] == "desc") != request.newest_first()) {
    return BadToken("issued for the other order");
  }
  if (parts[4] != request.dataset()) {
    return BadToken("issued for another dataset filter");
  }
  f.after = c;
  return f;
}

std::string NextJobPageToken(const v1::ListJobsRequest& request,
                             const storage::JobRecord& last) {
  return absl::WebSafeBase64Escape(absl::StrCat(
      kVersion, "|", request.newest_first() ? "desc" : "asc", "|",
      last.created_at_micros, "|", last.rowid, "|", request.dataset()));
}

}  // namespace dpopt::server
