// Paged job listings: ListJobsRequest.page_size / page_token.
//
// Pages are keyset pages over the listing order (created_at, rowid), so a
// page costs the same at any depth and jobs created meanwhile neither shift
// nor repeat entries. The page token is opaque to clients: web-safe base64 of
// "v1|<order>|<created_at>|<rowid>|<dataset filter>", checked against the
// request it is used with.
#ifndef DPOPT_SERVER_JOB_LISTING_H_
#define DPOPT_SERVER_JOB_LISTING_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "dpopt/v1/dpopt.pb.h"
#include "storage/job_store.h"

namespace dpopt::server {

inline constexpr int32_t kDefaultJobPageSize = 100;
inline constexpr int32_t kMaxJobPageSize = 1000;

// The storage filter of one page of `request`: dataset, principal (empty for
// a curator, who sees every job), limit = page size + 1 (the extra job only
// tells whether another page follows), cursor from the token, order, and no
// result blobs. INVALID_ARGUMENT: negative page_size; a malformed token or
// one issued for another dataset or order.
absl::StatusOr<storage::JobFilter> JobPageFilter(
    const v1::ListJobsRequest& request, const std::string& principal);

// The page size `request` asks for, after defaulting and clamping.
int32_t JobPageSize(const v1::ListJobsRequest& request);

// The token of the page after `last` (the last job of this page).
std::string NextJobPageToken(const v1::ListJobsRequest& request,
                             const storage::JobRecord& last);

}  // namespace dpopt::server

#endif  // DPOPT_SERVER_JOB_LISTING_H_
