// Versioned schema: a `meta` table records the schema version; migrations are
// applied in order, each in its own BEGIN IMMEDIATE transaction together with
// the version bump, so a crash mid-migration leaves the previous version.
#ifndef DPOPT_STORAGE_SCHEMA_H_
#define DPOPT_STORAGE_SCHEMA_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "storage/sqlite.h"

namespace dpopt::storage {

struct Migration {
  int version;      // the schema version after this migration; 1, 2, 3, ...
  std::string sql;  // statements that take version - 1 to version
};

// The migrations of the dpopt schema, ordered by version.
const std::vector<Migration>& SchemaMigrations();

// The version a fully migrated dpopt database has.
int LatestSchemaVersion();

// Reads the version recorded in `meta` (0 for a fresh file).
absl::StatusOr<int> ReadSchemaVersion(Connection& conn);

// Brings the database to the last version in `migrations`.
// REQUIRES: `migrations` versions are 1, 2, ..., N in order
// (INVALID_ARGUMENT otherwise).
// Errors: FAILED_PRECONDITION if the file records a version newer than N (it
// was written by a newer dpopt); the SQLite error of a failing migration, in
// which case versions applied before it stay applied and the failing one is
// rolled back entirely.
absl::Status ApplyMigrations(Connection& conn,
                             const std::vector<Migration>& migrations);

}  // namespace dpopt::storage

#endif  // DPOPT_STORAGE_SCHEMA_H_
