// The one place where absl::Status becomes grpc::Status
// (docs/architecture.md, convention "thin RPC handlers").
#ifndef DPOPT_SERVER_STATUS_UTIL_H_
#define DPOPT_SERVER_STATUS_UTIL_H_

#include "absl/status/status.h"
#include "grpcpp/support/status.h"

namespace dpopt::server {

// Same code and message, except for storage errors: a status carrying
// storage::kSqlitePayloadUrl, or DATA_LOSS, reaches the client as the same
// code with a generic message (no SQLite text, no file path); the original
// is written to the server's log (stderr).
grpc::Status ToGrpcStatus(const absl::Status& status);

}  // namespace dpopt::server

#endif  // DPOPT_SERVER_STATUS_UTIL_H_
