#include "server/status_util.h"

#include <iostream>
#include <string>

#include "storage/sqlite.h"

namespace dpopt::server {

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  // absl::StatusCode and grpc::StatusCode share their numeric values.
  const auto code = static_cast<grpc::StatusCode>(status.code());
  if (status.GetPayload(storage::kSqlitePayloadUrl).has_value() ||
      status.code() == absl::StatusCode::kDataLoss) {
    std::cerr << "dpopt-server: storage error: " << status << std::endl;
    return grpc::Status(
        code, status.code() == absl::StatusCode::kUnavailable
                  ? "the server's storage is busy or unavailable; retry (the "
                    "details are in the server's log)"
                  : "the server's storage failed (the details are in the "
                    "server's log)");
  }
  return grpc::Status(code, std::string(status.message()));
}

}  // namespace dpopt::server
