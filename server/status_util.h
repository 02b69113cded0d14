// The one place where absl::Status becomes grpc::Status
// (docs/architecture.md, convention "thin RPC handlers").
#ifndef DPOPT_SERVER_STATUS_UTIL_H_
#define DPOPT_SERVER_STATUS_UTIL_H_

#include "absl/status/status.h"
#include "grpcpp/support/status.h"

namespace dpopt::server {

grpc::Status ToGrpcStatus(const absl::Status& status);

}  // namespace dpopt::server

#endif  // DPOPT_SERVER_STATUS_UTIL_H_
