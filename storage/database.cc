#include "storage/database.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "core/common/status_macros.h"
#include "storage/schema.h"

namespace dpopt::storage {

absl::Status DatabaseOptions::Validate() const {
  if (busy_timeout_ms < 0) {
    return absl::InvalidArgumentError("busy_timeout_ms must be >= 0");
  }
  if (block_rows < 1 || block_rows > (1 << 20)) {
    return absl::InvalidArgumentError("block_rows must be in [1, 1048576]");
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Database>> Database::Open(
    const std::string& path, const Options& options) {
  RETURN_IF_ERROR(options.Validate());
  ConnectionOptions conn_options;
  conn_options.busy_timeout_ms = options.busy_timeout_ms;
  conn_options.create_if_missing = options.create_if_missing;
  ASSIGN_OR_RETURN(std::unique_ptr<Connection> conn,
                   Connection::Open(path, conn_options));
  RETURN_IF_ERROR(ApplyMigrations(*conn, SchemaMigrations()));
  return std::unique_ptr<Database>(
      new Database(path, options, std::move(conn)));
}

absl::StatusOr<int> Database::SchemaVersion() {
  return WithConnection(
      [](Connection& conn) { return ReadSchemaVersion(conn); });
}

}  // namespace dpopt::storage
