// Access control state (docs/architecture.md, "Security model"): principals
// with a role, bearer tokens (stored only as SHA-256 hashes of their secret
// part), dataset grants with optional per-analyst epsilon caps, and the
// append-only audit log. Obtain it from Database::access(). Thread-safe.
//
// Token strings are "<id>.<secret>": the id (16 hex digits) is public and
// names the token (for listing and revocation); only SHA-256(secret) is
// stored. Generating tokens and hashing secrets is the server's job
// (server/auth.h); this store never sees a secret.
#ifndef DPOPT_STORAGE_ACCESS_STORE_H_
#define DPOPT_STORAGE_ACCESS_STORE_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"

namespace dpopt::storage {

class Connection;
class Database;

enum class Role { kCurator = 1, kAnalyst = 2 };
std::string RoleName(Role role);  // "curator", "analyst"

// A principal's own resource limits, overriding the server's
// (server/principal_limits.h); unset = the server's, 0 = no limit.
struct PrincipalLimitOverrides {
  std::optional<int> max_active_jobs;
  std::optional<int> max_estimates_per_second;
  std::optional<int> max_watch_streams;
};

struct PrincipalRecord {
  int64_t id = 0;
  std::string name;
  Role role = Role::kAnalyst;
  int64_t created_at_micros = 0;
  int64_t revoked_at_micros = 0;  // 0 = active
  PrincipalLimitOverrides limits;
};

struct TokenRecord {
  std::string id;  // public token id
  std::string principal;
  std::string secret_sha256;  // 32 bytes
  int64_t created_at_micros = 0;
  int64_t expires_at_micros = 0;  // 0 = never
  int64_t revoked_at_micros = 0;  // 0 = active
  std::string label;
};

struct GrantRecord {
  std::string principal;
  std::string dataset;
  // Cap on the principal's total privacy loss on the dataset, priced by the
  // dataset's filter at the dataset's delta; 0 = no cap.
  double epsilon_cap = 0;
  int64_t created_at_micros = 0;
  // Jobs whose cost (epsilon) exceeds this wait for a curator's approval;
  // 0 = never.
  double approval_above_epsilon = 0;
  // How long such a job may wait, in seconds (0 = kDefaultApprovalTimeout).
  int64_t approval_timeout_seconds = 0;
};

// How long a job may wait for approval unless its grant says otherwise.
inline constexpr int64_t kDefaultApprovalTimeoutSeconds = 7 * 24 * 3600;
inline constexpr int64_t kMaxApprovalTimeoutSeconds = 10LL * 365 * 24 * 3600;

struct AuditRecord {
  int64_t seq = 0;
  int64_t at_micros = 0;
  std::string principal;  // "" when unauthenticated
  std::string method;     // e.g. "JobService.SubmitJob"
  std::string dataset;
  std::string job_id;
  std::string target;    // principal or token acted upon, if any
  int code = 0;          // gRPC status code of the outcome
  std::string detail;    // never secrets or row values
  std::string peer;      // the caller's address (bounded by the server)
  std::string token_id;  // the public id of the caller's token, never secret
  // SHA-256 chain link (AuditRecordHash); set by the store on append.
  std::string hash;
};

// The audit chain's link of `r`: SHA-256(prev_hash || each field of `r`
// except seq and hash, length-prefixed). The first record after the chain
// start has an empty prev_hash.
std::string AuditRecordHash(absl::string_view prev_hash, const AuditRecord& r);

// What VerifyAuditChain found.
struct AuditChainReport {
  int64_t records = 0;         // all rows
  int64_t legacy_records = 0;  // written before the chain existed
  int64_t chained_records = 0;
  std::string head;  // hash of the newest record (empty if none)
  // 0 if the chain holds; else the first record whose hash does not match.
  int64_t first_broken_seq = 0;
  bool ok() const { return first_broken_seq == 0; }
};

struct AuditFilter {
  std::string dataset;    // empty: any
  std::string principal;  // empty: any
  int64_t limit = 1000;   // newest first
};

class AccessStore {
 public:
  AccessStore(const AccessStore&) = delete;
  AccessStore& operator=(const AccessStore&) = delete;

  // Errors: INVALID_ARGUMENT (name not [A-Za-z0-9_.@-]{1,64}),
  // ALREADY_EXISTS.
  absl::StatusOr<PrincipalRecord> CreatePrincipal(absl::string_view name,
                                                  Role role);
  absl::StatusOr<std::vector<PrincipalRecord>> ListPrincipals();
  absl::StatusOr<PrincipalRecord> GetPrincipal(absl::string_view name);
  // Replaces the principal's own limits (each unset one falls back to the
  // server's). NOT_FOUND; INVALID_ARGUMENT for a negative limit or one over
  // 1,000,000.
  absl::StatusOr<PrincipalRecord> SetPrincipalLimits(
      absl::string_view name, const PrincipalLimitOverrides& limits);
  // Revokes the principal and every token of it (effective immediately).
  absl::StatusOr<PrincipalRecord> RevokePrincipal(absl::string_view name);
  // Number of principals (any state): 0 on a fresh database.
  absl::StatusOr<int64_t> CountPrincipals();

  // Errors: NOT_FOUND / FAILED_PRECONDITION (revoked principal),
  // ALREADY_EXISTS (id taken), INVALID_ARGUMENT.
  absl::Status InsertToken(const TokenRecord& token);
  absl::StatusOr<TokenRecord> RevokeToken(absl::string_view id);
  // The token and its principal; NOT_FOUND if the id is unknown.
  absl::StatusOr<std::pair<TokenRecord, PrincipalRecord>> LookupToken(
      absl::string_view id);
  absl::StatusOr<std::vector<TokenRecord>> ListTokens(
      absl::string_view principal);

  // Grants (or updates the cap and approval threshold of) an analyst's
  // access to a dataset.
  // Errors: NOT_FOUND (principal or dataset), FAILED_PRECONDITION (not an
  // analyst), INVALID_ARGUMENT (cap or threshold not finite or < 0, timeout
  // outside [0, kMaxApprovalTimeoutSeconds]).
  absl::StatusOr<GrantRecord> Grant(absl::string_view principal,
                                    absl::string_view dataset,
                                    double epsilon_cap,
                                    double approval_above_epsilon = 0,
                                    int64_t approval_timeout_seconds = 0);
  // NOT_FOUND if there is no such grant.
  absl::Status RevokeGrant(absl::string_view principal,
                           absl::string_view dataset);
  // Filters may be empty (= any).
  absl::StatusOr<std::vector<GrantRecord>> ListGrants(
      absl::string_view principal, absl::string_view dataset);
  absl::StatusOr<std::optional<GrantRecord>> FindGrant(
      absl::string_view principal, absl::string_view dataset);

  // Whether `dataset` exists, is not deleted, and is public or granted to
  // `principal`: one statement (kVisibilitySql) that reads only index
  // entries and one row of each table, and loads nothing else about the
  // dataset, so a dataset the principal may not see costs the same as a
  // missing one (docs/security.md).
  absl::StatusOr<bool> DatasetVisibleTo(absl::string_view principal,
                                        absl::string_view dataset);
  // The statement DatasetVisibleTo runs (?1 = dataset name, ?2 = principal),
  // for tests of its query plan.
  static const char kVisibilitySql[];

  // Appends durably (FULL sync) before returning. Group commit: records
  // appended concurrently by several threads share one transaction, with
  // the other durable writes waiting then (charges, results;
  // storage/group_commit.h), so a burst of read RPCs costs one fsync, not
  // one each. Runs no commit hook.
  absl::Status AppendAudit(const AuditRecord& record);
  // Appends on the caller's connection, inside the caller's transaction
  // (for a ScopedCommitHook: the record commits with the change).
  static absl::Status AppendAuditLocked(Connection& conn,
                                        const AuditRecord& record);
  absl::StatusOr<std::vector<AuditRecord>> ListAudit(const AuditFilter& filter);

  // Recomputes the hash chain over every record on `conn` (any connection
  // to a database at the latest schema, read-only is enough).
  static absl::StatusOr<AuditChainReport> VerifyAuditChain(Connection& conn);

  // For the ledger's admission transaction: the grant of `principal` on
  // dataset `dataset_id`, read on the caller's connection.
  static absl::StatusOr<std::optional<GrantRecord>> FindGrantLocked(
      Connection& conn, absl::string_view principal, int64_t dataset_id);

 private:
  friend class Database;
  explicit AccessStore(Database& db) : db_(db) {}

  Database& db_;
};

}  // namespace dpopt::storage

#endif  // DPOPT_STORAGE_ACCESS_STORE_H_
