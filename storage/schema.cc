#include "storage/schema.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "core/common/status_macros.h"

namespace dpopt::storage {
namespace {

constexpr char kMetaDdl[] =
    "CREATE TABLE IF NOT EXISTS meta ("
    "  key TEXT PRIMARY KEY NOT NULL,"
    "  value TEXT NOT NULL)";

// Version 1: datasets (+ row blocks, feature names), jobs (+ trace), and the
// append-only privacy ledger.
constexpr char kV1[] = R"sql(
CREATE TABLE datasets (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  name TEXT NOT NULL UNIQUE,
  num_rows INTEGER NOT NULL CHECK (num_rows > 0),
  dimension INTEGER NOT NULL CHECK (dimension > 0),
  nonzeros INTEGER NOT NULL CHECK (nonzeros >= 0),
  is_public INTEGER NOT NULL CHECK (is_public IN (0, 1)),
  sparse INTEGER NOT NULL CHECK (sparse IN (0, 1)),
  format TEXT NOT NULL,
  label_kind INTEGER NOT NULL,
  num_classes INTEGER NOT NULL,
  relation TEXT NOT NULL,
  epsilon_budget REAL NOT NULL,
  delta_budget REAL NOT NULL,
  budget_filter TEXT NOT NULL,
  lower_bounds BLOB,
  upper_bounds BLOB,
  row_norm_bound REAL,
  description TEXT NOT NULL,
  created_at INTEGER NOT NULL
);

CREATE TABLE dataset_features (
  dataset_id INTEGER NOT NULL REFERENCES datasets(id),
  idx INTEGER NOT NULL,
  name TEXT NOT NULL,
  PRIMARY KEY (dataset_id, idx)
);

CREATE TABLE dataset_blocks (
  dataset_id INTEGER NOT NULL REFERENCES datasets(id),
  block INTEGER NOT NULL,
  first_row INTEGER NOT NULL,
  num_rows INTEGER NOT NULL,
  nonzeros INTEGER NOT NULL,
  labels BLOB NOT NULL,
  row_offsets BLOB,
  col_indices BLOB,
  vals BLOB NOT NULL,
  UNIQUE (dataset_id, block)
);

CREATE TABLE jobs (
  id TEXT PRIMARY KEY NOT NULL,
  dataset_id INTEGER NOT NULL REFERENCES datasets(id),
  principal TEXT NOT NULL,
  state INTEGER NOT NULL,
  message TEXT NOT NULL,
  spec BLOB NOT NULL,
  calibration BLOB NOT NULL,
  cost BLOB NOT NULL,
  steps_done INTEGER NOT NULL,
  steps_total INTEGER NOT NULL,
  result BLOB NOT NULL,
  evaluation BLOB NOT NULL,
  created_at INTEGER NOT NULL,
  started_at INTEGER NOT NULL,
  finished_at INTEGER NOT NULL
);
CREATE INDEX jobs_by_dataset ON jobs(dataset_id, created_at);
CREATE INDEX jobs_by_state ON jobs(state);

CREATE TABLE job_trace (
  job_id TEXT NOT NULL REFERENCES jobs(id),
  step INTEGER NOT NULL,
  data BLOB NOT NULL,
  PRIMARY KEY (job_id, step)
);

CREATE TABLE ledger (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  dataset_id INTEGER NOT NULL REFERENCES datasets(id),
  job_id TEXT NOT NULL REFERENCES jobs(id),
  event_json TEXT NOT NULL,
  accountant TEXT NOT NULL,
  cost_blob TEXT NOT NULL,
  epsilon REAL NOT NULL,
  delta REAL NOT NULL,
  principal TEXT NOT NULL,
  note TEXT NOT NULL,
  created_at INTEGER NOT NULL
);
CREATE INDEX ledger_by_dataset ON ledger(dataset_id, seq);

CREATE TRIGGER ledger_no_update BEFORE UPDATE ON ledger
BEGIN
  SELECT RAISE(ABORT, 'ledger is append-only: UPDATE refused');
END;
CREATE TRIGGER ledger_no_delete BEFORE DELETE ON ledger
BEGIN
  SELECT RAISE(ABORT, 'ledger is append-only: DELETE refused');
END;
)sql";

// Version 2 (access control): principals, hashed tokens, grants with
// per-analyst caps, the append-only audit log. Jobs and charges recorded before
// access control existed (principal "anonymous") are attributed to the
// bootstrap curator "curator" (created at the next start): the ledger's UPDATE
// trigger is lifted for this one rewrite of the principal column, inside the
// migration's transaction, and restored.
constexpr char kV2[] = R"sql(
CREATE TABLE principals (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  name TEXT NOT NULL UNIQUE,
  role INTEGER NOT NULL CHECK (role IN (1, 2)),
  created_at INTEGER NOT NULL,
  revoked_at INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE tokens (
  id TEXT PRIMARY KEY NOT NULL,
  principal_id INTEGER NOT NULL REFERENCES principals(id),
  secret_sha256 BLOB NOT NULL CHECK (length(secret_sha256) = 32),
  created_at INTEGER NOT NULL,
  expires_at INTEGER NOT NULL DEFAULT 0,
  revoked_at INTEGER NOT NULL DEFAULT 0,
  label TEXT NOT NULL DEFAULT ''
);
CREATE TABLE grants (
  principal_id INTEGER NOT NULL REFERENCES principals(id),
  dataset_id INTEGER NOT NULL REFERENCES datasets(id),
  epsilon_cap REAL NOT NULL CHECK (epsilon_cap >= 0),
  created_at INTEGER NOT NULL,
  PRIMARY KEY (principal_id, dataset_id)
);
CREATE TABLE audit (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  at INTEGER NOT NULL,
  principal TEXT NOT NULL,
  method TEXT NOT NULL,
  dataset TEXT NOT NULL,
  job_id TEXT NOT NULL,
  target TEXT NOT NULL,
  code INTEGER NOT NULL,
  detail TEXT NOT NULL
);
CREATE INDEX audit_by_dataset ON audit(dataset, seq);
CREATE INDEX audit_by_principal ON audit(principal, seq);
CREATE TRIGGER audit_no_update BEFORE UPDATE ON audit
BEGIN
  SELECT RAISE(ABORT, 'audit log is append-only: UPDATE refused');
END;
CREATE TRIGGER audit_no_delete BEFORE DELETE ON audit
BEGIN
  SELECT RAISE(ABORT, 'audit log is append-only: DELETE refused');
END;
CREATE INDEX jobs_by_principal ON jobs(principal, created_at);

UPDATE jobs SET principal = 'curator' WHERE principal = 'anonymous';
DROP TRIGGER ledger_no_update;
UPDATE ledger SET principal = 'curator' WHERE principal = 'anonymous';
CREATE TRIGGER ledger_no_update BEFORE UPDATE ON ledger
BEGIN
  SELECT RAISE(ABORT, 'ledger is append-only: UPDATE refused');
END;
)sql";

// Version 3: dataset deletion keeps a tombstone (the metadata
// row, its ledger and audit history); rows, feature names and grants go.
constexpr char kV3[] = R"sql(
ALTER TABLE datasets ADD COLUMN deleted_at INTEGER NOT NULL DEFAULT 0;
)sql";

// Version 4 (piecewise-affine family): the public description of a structured
// problem (max-affine problems: polytope, b_max, derived bounds; JSON), empty
// for ordinary datasets.
constexpr char kV4[] = R"sql(
ALTER TABLE datasets ADD COLUMN problem TEXT NOT NULL DEFAULT '';
)sql";

// Version 5 (hostile clients): the audit record carries the caller's peer
// address and token id (never the secret), and the log is hash-chained: each
// record stores SHA-256(predecessor's hash || its own fields)
// (storage/access_store.h, AuditRecordHash). Records written before version 5
// have an empty hash; `audit_chain_start` in meta is the last of them, so a
// verifier knows where the chain begins.
constexpr char kV5[] = R"sql(
ALTER TABLE audit ADD COLUMN peer TEXT NOT NULL DEFAULT '';
ALTER TABLE audit ADD COLUMN token_id TEXT NOT NULL DEFAULT '';
ALTER TABLE audit ADD COLUMN hash BLOB NOT NULL DEFAULT x'';
INSERT INTO meta(key, value)
  SELECT 'audit_chain_start', CAST(COALESCE(MAX(seq), 0) AS TEXT) FROM audit;
)sql";

// Version 6 (hostile clients): a principal's own resource limits, overriding
// the server's flags; NULL = the server's, 0 = no limit.
constexpr char kV6[] = R"sql(
ALTER TABLE principals ADD COLUMN max_active_jobs INTEGER;
ALTER TABLE principals ADD COLUMN max_estimates_per_second INTEGER;
ALTER TABLE principals ADD COLUMN max_watch_streams INTEGER;
)sql";

// Version 7 (dry runs): a public dummy dataset may stand in for a private
// one in dry runs; `dummy_for` is the private dataset's id (0: not a dummy).
// A dry run records where its synthetic rows come from (empty for other
// jobs).
constexpr char kV7[] = R"sql(
ALTER TABLE datasets ADD COLUMN dummy_for INTEGER NOT NULL DEFAULT 0;
CREATE INDEX datasets_by_dummy_for ON datasets(dummy_for);
ALTER TABLE jobs ADD COLUMN synthetic_source TEXT NOT NULL DEFAULT '';
)sql";

// Version 8 (curator approval): a grant may make jobs above an epsilon wait
// for a curator's approval (0 = never), for at most a timeout in seconds
// (0 = the default); a pending job records when it expires (job states 5,
// PENDING_APPROVAL, and 6, REJECTED).
constexpr char kV8[] = R"sql(
ALTER TABLE grants ADD COLUMN approval_above REAL NOT NULL DEFAULT 0;
ALTER TABLE grants ADD COLUMN approval_timeout INTEGER NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN approval_expires_at INTEGER NOT NULL DEFAULT 0;
)sql";

// Version 9 (MPI worker pool): where a dataset is placed on the pool, one
// row per rank: the pool's rank count, the rank's host and the rows of its
// shard, when it was placed. Removed with the dataset's rows.
constexpr char kV9[] = R"sql(
CREATE TABLE dataset_placements (
  dataset_id INTEGER NOT NULL REFERENCES datasets(id),
  rank INTEGER NOT NULL CHECK (rank >= 0),
  ranks INTEGER NOT NULL CHECK (ranks > rank),
  host TEXT NOT NULL,
  num_rows INTEGER NOT NULL CHECK (num_rows >= 0),
  placed_at INTEGER NOT NULL,
  PRIMARY KEY (dataset_id, rank)
);
)sql";

}  // namespace

const std::vector<Migration>& SchemaMigrations() {
  static const auto* const kMigrations = new std::vector<Migration>{
      {1, kV1}, {2, kV2}, {3, kV3}, {4, kV4}, {5, kV5},
      {6, kV6}, {7, kV7}, {8, kV8}, {9, kV9},
  };
  return *kMigrations;
}

int LatestSchemaVersion() { return SchemaMigrations().back().version; }

absl::StatusOr<int> ReadSchemaVersion(Connection& conn) {
  ASSIGN_OR_RETURN(
      Statement exists,
      conn.Prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND "
                   "name = 'meta'"));
  ASSIGN_OR_RETURN(bool has_meta, exists.Step());
  if (!has_meta) return 0;
  ASSIGN_OR_RETURN(
      Statement read,
      conn.Prepare("SELECT value FROM meta WHERE key = 'schema_version'"));
  ASSIGN_OR_RETURN(bool has_row, read.Step());
  if (!has_row) return 0;
  int version = 0;
  if (!absl::SimpleAtoi(read.ColumnText(0), &version) || version < 0) {
    return absl::DataLossError("meta.schema_version is not a valid version");
  }
  return version;
}

absl::Status ApplyMigrations(Connection& conn,
                             const std::vector<Migration>& migrations) {
  for (size_t i = 0; i < migrations.size(); ++i) {
    if (migrations[i].version != static_cast<int>(i) + 1) {
      return absl::InvalidArgumentError(
          "migrations must be numbered 1, 2, ... in order");
    }
  }
  const int latest = static_cast<int>(migrations.size());
  for (;;) {
    // Re-read the version inside the write lock: another process may be
    // migrating the same file concurrently.
    Transaction txn(conn);
    RETURN_IF_ERROR(txn.Begin(Transaction::Mode::kImmediate));
    RETURN_IF_ERROR(conn.Execute(kMetaDdl));
    ASSIGN_OR_RETURN(int version, ReadSchemaVersion(conn));
    if (version > latest) {
      return absl::FailedPreconditionError(absl::StrCat(
          "database schema version ", version,
          " is newer than this build supports (", latest, "); upgrade dpopt"));
    }
    if (version == latest) return txn.Commit();
    const Migration& m = migrations[version];
    absl::Status s = conn.Execute(m.sql);
    if (!s.ok()) {
      return absl::Status(s.code(), absl::StrCat("migration to version ",
                                                 m.version, ": ", s.message()));
    }
    ASSIGN_OR_RETURN(
        Statement set,
        conn.Prepare("INSERT INTO meta(key, value) VALUES('schema_version', ?) "
                     "ON CONFLICT(key) DO UPDATE SET value = excluded.value"));
    RETURN_IF_ERROR(set.BindText(1, absl::StrCat(m.version)));
    RETURN_IF_ERROR(set.Run());
    RETURN_IF_ERROR(txn.Commit());
  }
}

}  // namespace dpopt::storage
