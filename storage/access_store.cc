#include "storage/access_store.h"

#include <cmath>
#include <utility>

#include "absl/base/internal/endian.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "core/common/status_macros.h"
#include "openssl/sha.h"
#include "storage/blob_codec.h"
#include "storage/database.h"
#include "storage/dataset_store.h"
#include "storage/sqlite.h"

namespace dpopt::storage {
namespace {

bool ValidName(absl::string_view name) {
  if (name.empty() || name.size() > 64) return false;
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                    (c >= '0' && c <= '9') || c == '_' || c == '.' ||
                    c == '@' || c == '-';
    if (!ok) return false;
  }
  return true;
}

constexpr char kSelectPrincipal[] =
    "SELECT id, name, role, created_at, revoked_at, max_active_jobs, "
    "max_estimates_per_second, max_watch_streams FROM principals ";

std::optional<int> OptionalInt(Statement& st, int col) {
  if (st.ColumnIsNull(col)) return std::nullopt;
  return static_cast<int>(st.ColumnInt64(col));
}

PrincipalRecord ReadPrincipal(Statement& st, int first = 0) {
  PrincipalRecord p;
  p.id = st.ColumnInt64(first);
  p.name = st.ColumnText(first + 1);
  p.role = st.ColumnInt64(first + 2) == 1 ? Role::kCurator : Role::kAnalyst;
  p.created_at_micros = st.ColumnInt64(first + 3);
  p.revoked_at_micros = st.ColumnInt64(first + 4);
  p.limits.max_active_jobs = OptionalInt(st, first + 5);
  p.limits.max_estimates_per_second = OptionalInt(st, first + 6);
  p.limits.max_watch_streams = OptionalInt(st, first + 7);
  return p;
}

absl::StatusOr<PrincipalRecord> GetPrincipalLocked(Connection& conn,
                                                   absl::string_view name) {
  ASSIGN_OR_RETURN(Statement st, conn.Prepare(absl::StrCat(kSelectPrincipal,
                                                           "WHERE name = ?")));
  RETURN_IF_ERROR(st.BindText(1, name));
  ASSIGN_OR_RETURN(bool row, st.Step());
  if (!row) {
    return absl::NotFoundError(
        absl::StrCat("principal \"", name, "\" not found"));
  }
  return ReadPrincipal(st);
}

constexpr char kSelectToken[] =
    "SELECT t.id, p.name, t.secret_sha256, t.created_at, t.expires_at, "
    "t.revoked_at, t.label FROM tokens t JOIN principals p ON p.id = "
    "t.principal_id ";

TokenRecord ReadToken(Statement& st) {
  TokenRecord t;
  t.id = st.ColumnText(0);
  t.principal = st.ColumnText(1);
  t.secret_sha256 = st.ColumnBlob(2);
  t.created_at_micros = st.ColumnInt64(3);
  t.expires_at_micros = st.ColumnInt64(4);
  t.revoked_at_micros = st.ColumnInt64(5);
  t.label = st.ColumnText(6);
  return t;
}

constexpr char kSelectGrant[] =
    "SELECT p.name, d.name, g.epsilon_cap, g.created_at, g.approval_above, "
    "g.approval_timeout FROM grants g "
    "JOIN principals p ON p.id = g.principal_id "
    "JOIN datasets d ON d.id = g.dataset_id ";

GrantRecord ReadGrant(Statement& st) {
  GrantRecord g;
  g.principal = st.ColumnText(0);
  g.dataset = st.ColumnText(1);
  g.epsilon_cap = st.ColumnDouble(2);
  g.created_at_micros = st.ColumnInt64(3);
  g.approval_above_epsilon = st.ColumnDouble(4);
  g.approval_timeout_seconds = st.ColumnInt64(5);
  return g;
}

}  // namespace

std::string RoleName(Role role) {
  return role == Role::kCurator ? "curator" : "analyst";
}

absl::StatusOr<PrincipalRecord> AccessStore::CreatePrincipal(
    absl::string_view name, Role role) {
  if (!ValidName(name)) {
    return absl::InvalidArgumentError(
        "principal names are 1-64 characters of [A-Za-z0-9_.@-]");
  }
  return db_.WithConnection(
      [&](Connection& conn) -> absl::StatusOr<PrincipalRecord> {
        Transaction txn(conn);
        RETURN_IF_ERROR(txn.Begin(Transaction::Mode::kImmediate));
        if (GetPrincipalLocked(conn, name).ok()) {
          return absl::AlreadyExistsError(
              absl::StrCat("principal \"", name, "\" already exists"));
        }
        ASSIGN_OR_RETURN(Statement st,
                         conn.Prepare("INSERT INTO principals(name, role, "
                                      "created_at) VALUES(?, ?, ?)"));
        RETURN_IF_ERROR(st.BindText(1, name));
        RETURN_IF_ERROR(st.BindInt64(2, static_cast<int64_t>(role)));
        RETURN_IF_ERROR(st.BindInt64(3, internal::NowMicros()));
        RETURN_IF_ERROR(st.Run());
        ASSIGN_OR_RETURN(PrincipalRecord p, GetPrincipalLocked(conn, name));
        RETURN_IF_ERROR(txn.Commit());
        return p;
      });
}

absl::StatusOr<std::vector<PrincipalRecord>> AccessStore::ListPrincipals() {
  return db_.WithConnection(
      [&](Connection& conn) -> absl::StatusOr<std::vector<PrincipalRecord>> {
        ASSIGN_OR_RETURN(Statement st, conn.Prepare(absl::StrCat(
                                           kSelectPrincipal, "ORDER BY id")));
        std::vector<PrincipalRecord> out;
        for (;;) {
          ASSIGN_OR_RETURN(bool row, st.Step());
          if (!row) break;
          out.push_back(ReadPrincipal(st));
        }
        return out;
      });
}

absl::StatusOr<PrincipalRecord> AccessStore::GetPrincipal(
    absl::string_view name) {
  return db_.WithConnection(
      [&](Connection& conn) { return GetPrincipalLocked(conn, name); });
}

absl::StatusOr<PrincipalRecord> AccessStore::SetPrincipalLimits(
    absl::string_view name, const PrincipalLimitOverrides& limits) {
  for (const std::optional<int>& l :
       {limits.max_active_jobs, limits.max_estimates_per_second,
        limits.max_watch_streams}) {
    if (l.has_value() && (*l < 0 || *l > 1000000)) {
      return absl::InvalidArgumentError(
          "a principal's limit must be in [0, 1000000] (0 = no limit)");
    }
  }
  return db_.WithConnection(
      [&](Connection& conn) -> absl::StatusOr<PrincipalRecord> {
        Transaction txn(conn);
        RETURN_IF_ERROR(txn.Begin(Transaction::Mode::kImmediate));
        ASSIGN_OR_RETURN(PrincipalRecord p, GetPrincipalLocked(conn, name));
        ASSIGN_OR_RETURN(
            Statement st,
            conn.Prepare("UPDATE principals SET max_active_jobs = ?, "
                         "max_estimates_per_second = ?, "
                         "max_watch_streams = ? WHERE id = ?"));
        int index = 1;
        for (const std::optional<int>& l :
             {limits.max_active_jobs, limits.max_estimates_per_second,
              limits.max_watch_streams}) {
          RETURN_IF_ERROR(l.has_value() ? st.BindInt64(index, *l)
                                        : st.BindNull(index));
          ++index;
        }
        RETURN_IF_ERROR(st.BindInt64(4, p.id));
        RETURN_IF_ERROR(st.Run());
        RETURN_IF_ERROR(txn.Commit());
        p.limits = limits;
        return p;
      });
}

absl::StatusOr<PrincipalRecord> AccessStore::RevokePrincipal(
    absl::string_view name) {
  return db_.WithConnection([&](Connection& conn)
                                -> absl::StatusOr<PrincipalRecord> {
    Transaction txn(conn);
    RETURN_IF_ERROR(txn.Begin(Transaction::Mode::kImmediate));
    ASSIGN_OR_RETURN(PrincipalRecord p, GetPrincipalLocked(conn, name));
    const int64_t now = internal::NowMicros();
    if (p.revoked_at_micros == 0) {
      ASSIGN_OR_RETURN(
          Statement st,
          conn.Prepare("UPDATE principals SET revoked_at = ? WHERE id = ?"));
      RETURN_IF_ERROR(st.BindInt64(1, now));
      RETURN_IF_ERROR(st.BindInt64(2, p.id));
      RETURN_IF_ERROR(st.Run());
      p.revoked_at_micros = now;
    }
    ASSIGN_OR_RETURN(Statement tok,
                     conn.Prepare("UPDATE tokens SET revoked_at = ? WHERE "
                                  "principal_id = ? AND revoked_at = 0"));
    RETURN_IF_ERROR(tok.BindInt64(1, now));
    RETURN_IF_ERROR(tok.BindInt64(2, p.id));
    RETURN_IF_ERROR(tok.Run());
    RETURN_IF_ERROR(txn.Commit());
    return p;
  });
}

absl::StatusOr<int64_t> AccessStore::CountPrincipals() {
  return db_.WithConnection([&](Connection& conn) -> absl::StatusOr<int64_t> {
    ASSIGN_OR_RETURN(Statement st,
                     conn.Prepare("SELECT COUNT(*) FROM principals"));
    ASSIGN_OR_RETURN(bool row, st.Step());
    return row ? st.ColumnInt64(0) : 0;
  });
}

absl::Status AccessStore::InsertToken(const TokenRecord& token) {
  if (token.id.empty() || token.secret_sha256.size() != 32) {
    return absl::InvalidArgumentError("token id and 32-byte hash required");
  }
  return db_.WithConnection([&](Connection& conn) -> absl::Status {
    Transaction txn(conn);
    RETURN_IF_ERROR(txn.Begin(Transaction::Mode::kImmediate));
    ASSIGN_OR_RETURN(PrincipalRecord p,
                     GetPrincipalLocked(conn, token.principal));
    if (p.revoked_at_micros != 0) {
      return absl::FailedPreconditionError(
          absl::StrCat("principal \"", p.name, "\" is revoked"));
    }
    ASSIGN_OR_RETURN(Statement st,
                     conn.Prepare("INSERT INTO tokens(id, principal_id, "
                                  "secret_sha256, created_at, expires_at, "
                                  "label) VALUES(?, ?, ?, ?, ?, ?)"));
    RETURN_IF_ERROR(st.BindText(1, token.id));
    RETURN_IF_ERROR(st.BindInt64(2, p.id));
    RETURN_IF_ERROR(st.BindBlob(3, token.secret_sha256));
    RETURN_IF_ERROR(st.BindInt64(4, internal::NowMicros()));
    RETURN_IF_ERROR(st.BindInt64(5, token.expires_at_micros));
    RETURN_IF_ERROR(st.BindText(6, token.label));
    absl::Status s = st.Run();
    if (!s.ok()) {
      return absl::AlreadyExistsError("token id already exists");
    }
    return txn.Commit();
  });
}

absl::StatusOr<TokenRecord> AccessStore::RevokeToken(absl::string_view id) {
  return db_.WithConnection(
      [&](Connection& conn) -> absl::StatusOr<TokenRecord> {
        Transaction txn(conn);
        RETURN_IF_ERROR(txn.Begin(Transaction::Mode::kImmediate));
        ASSIGN_OR_RETURN(Statement up,
                         conn.Prepare("UPDATE tokens SET revoked_at = ? WHERE "
                                      "id = ? AND revoked_at = 0"));
        RETURN_IF_ERROR(up.BindInt64(1, internal::NowMicros()));
        RETURN_IF_ERROR(up.BindText(2, id));
        RETURN_IF_ERROR(up.Run());
        ASSIGN_OR_RETURN(Statement st, conn.Prepare(absl::StrCat(
                                           kSelectToken, "WHERE t.id = ?")));
        RETURN_IF_ERROR(st.BindText(1, id));
        ASSIGN_OR_RETURN(bool row, st.Step());
        if (!row) {
          return absl::NotFoundError(absl::StrCat("token ", id, " not found"));
        }
        TokenRecord t = ReadToken(st);
        RETURN_IF_ERROR(txn.Commit());
        return t;
      });
}

absl::StatusOr<std::pair<TokenRecord, PrincipalRecord>>
AccessStore::LookupToken(absl::string_view id) {
  return db_.WithConnection(
      [&](Connection& conn)
          -> absl::StatusOr<std::pair<TokenRecord, PrincipalRecord>> {
        ASSIGN_OR_RETURN(
            Statement st,
            conn.Prepare(absl::StrCat(
                "SELECT t.id, p.name, t.secret_sha256, t.created_at, "
                "t.expires_at, t.revoked_at, t.label, p.id, p.name, p.role, "
                "p.created_at, p.revoked_at, p.max_active_jobs, "
                "p.max_estimates_per_second, p.max_watch_streams "
                "FROM tokens t JOIN principals p "
                "ON p.id = t.principal_id WHERE t.id = ?")));
        RETURN_IF_ERROR(st.BindText(1, id));
        ASSIGN_OR_RETURN(bool row, st.Step());
        if (!row) return absl::NotFoundError("unknown token");
        return std::make_pair(ReadToken(st), ReadPrincipal(st, 7));
      });
}

absl::StatusOr<std::vector<TokenRecord>> AccessStore::ListTokens(
    absl::string_view principal) {
  return db_.WithConnection(
      [&](Connection& conn) -> absl::StatusOr<std::vector<TokenRecord>> {
        ASSIGN_OR_RETURN(Statement st, conn.Prepare(absl::StrCat(
                                           kSelectToken,
                                           "WHERE ?1 = '' OR p.name = ?1 "
                                           "ORDER BY t.created_at")));
        RETURN_IF_ERROR(st.BindText(1, principal));
        std::vector<TokenRecord> out;
        for (;;) {
          ASSIGN_OR_RETURN(bool row, st.Step());
          if (!row) break;
          out.push_back(ReadToken(st));
          out.back().secret_sha256.clear();  // never leaves the store
        }
        return out;
      });
}

absl::StatusOr<GrantRecord> AccessStore::Grant(
    absl::string_view principal, absl::string_view dataset, double epsilon_cap,
    double approval_above_epsilon, int64_t approval_timeout_seconds) {
  if (!std::isfinite(epsilon_cap) || epsilon_cap < 0) {
    return absl::InvalidArgumentError(
        "epsilon cap must be a finite number >= 0 (0 = no cap)");
  }
  if (!std::isfinite(approval_above_epsilon) || approval_above_epsilon < 0) {
    return absl::InvalidArgumentError(
        "approval threshold must be a finite epsilon >= 0 (0 = no approval "
        "needed)");
  }
  if (approval_timeout_seconds < 0 ||
      approval_timeout_seconds > kMaxApprovalTimeoutSeconds) {
    return absl::InvalidArgumentError(
        "approval timeout must be between 0 (the default, 7 days) and 10 "
        "years, in seconds");
  }
  return db_.WithConnection([&](Connection& conn)
                                -> absl::StatusOr<GrantRecord> {
    Transaction txn(conn);
    RETURN_IF_ERROR(txn.Begin(Transaction::Mode::kImmediate));
    ASSIGN_OR_RETURN(PrincipalRecord p, GetPrincipalLocked(conn, principal));
    if (p.role != Role::kAnalyst) {
      return absl::FailedPreconditionError(
          "grants are for analysts (curators see every dataset)");
    }
    ASSIGN_OR_RETURN(DatasetRecord d, DatasetStore::GetLocked(conn, dataset));
    ASSIGN_OR_RETURN(
        Statement st,
        conn.Prepare("INSERT INTO grants(principal_id, dataset_id, "
                     "epsilon_cap, created_at, approval_above, "
                     "approval_timeout) VALUES(?, ?, ?, ?, ?, ?) ON "
                     "CONFLICT(principal_id, dataset_id) DO UPDATE SET "
                     "epsilon_cap = excluded.epsilon_cap, approval_above = "
                     "excluded.approval_above, approval_timeout = "
                     "excluded.approval_timeout"));
    RETURN_IF_ERROR(st.BindInt64(1, p.id));
    RETURN_IF_ERROR(st.BindInt64(2, d.id));
    RETURN_IF_ERROR(st.BindDouble(3, epsilon_cap));
    RETURN_IF_ERROR(st.BindInt64(4, internal::NowMicros()));
    RETURN_IF_ERROR(st.BindDouble(5, approval_above_epsilon));
    RETURN_IF_ERROR(st.BindInt64(6, approval_timeout_seconds));
    RETURN_IF_ERROR(st.Run());
    ASSIGN_OR_RETURN(std::optional<GrantRecord> g,
                     FindGrantLocked(conn, principal, d.id));
    RETURN_IF_ERROR(txn.Commit());
    return *g;
  });
}

absl::Status AccessStore::RevokeGrant(absl::string_view principal,
                                      absl::string_view dataset) {
  return db_.WithConnection([&](Connection& conn) -> absl::Status {
    Transaction txn(conn);
    RETURN_IF_ERROR(txn.Begin(Transaction::Mode::kImmediate));
    ASSIGN_OR_RETURN(PrincipalRecord p, GetPrincipalLocked(conn, principal));
    ASSIGN_OR_RETURN(DatasetRecord d, DatasetStore::GetLocked(conn, dataset));
    ASSIGN_OR_RETURN(Statement st,
                     conn.Prepare("DELETE FROM grants WHERE principal_id = ? "
                                  "AND dataset_id = ?"));
    RETURN_IF_ERROR(st.BindInt64(1, p.id));
    RETURN_IF_ERROR(st.BindInt64(2, d.id));
    RETURN_IF_ERROR(st.Run());
    if (conn.Changes() == 0) {
      return absl::NotFoundError(absl::StrCat(
          "\"", principal, "\" has no grant on \"", dataset, "\""));
    }
    return txn.Commit();
  });
}

absl::StatusOr<std::vector<GrantRecord>> AccessStore::ListGrants(
    absl::string_view principal, absl::string_view dataset) {
  return db_.WithConnection(
      [&](Connection& conn) -> absl::StatusOr<std::vector<GrantRecord>> {
        ASSIGN_OR_RETURN(Statement st, conn.Prepare(absl::StrCat(
                                           kSelectGrant,
                                           "WHERE (?1 = '' OR p.name = ?1) AND "
                                           "(?2 = '' OR d.name = ?2) "
                                           "ORDER BY p.name, d.name")));
        RETURN_IF_ERROR(st.BindText(1, principal));
        RETURN_IF_ERROR(st.BindText(2, dataset));
        std::vector<GrantRecord> out;
        for (;;) {
          ASSIGN_OR_RETURN(bool row, st.Step());
          if (!row) break;
          out.push_back(ReadGrant(st));
        }
        return out;
      });
}

absl::StatusOr<std::optional<GrantRecord>> AccessStore::FindGrant(
    absl::string_view principal, absl::string_view dataset) {
  ASSIGN_OR_RETURN(std::vector<GrantRecord> g, ListGrants(principal, dataset));
  if (g.empty() || principal.empty() || dataset.empty()) return std::nullopt;
  return g.front();
}

// datasets.name and principals.name are UNIQUE (indexed) and grants' key
// is (principal_id, dataset_id): three index lookups, no scan.
const char AccessStore::kVisibilitySql[] =
    "SELECT EXISTS(SELECT 1 FROM datasets d WHERE d.name = ?1 AND "
    "d.deleted_at = 0 AND (d.is_public = 1 OR EXISTS(SELECT 1 FROM "
    "principals p JOIN grants g ON g.principal_id = p.id AND g.dataset_id = "
    "d.id WHERE p.name = ?2)))";

absl::StatusOr<bool> AccessStore::DatasetVisibleTo(absl::string_view principal,
                                                   absl::string_view dataset) {
  return db_.WithConnection([&](Connection& conn) -> absl::StatusOr<bool> {
    ASSIGN_OR_RETURN(Statement st, conn.Prepare(kVisibilitySql));
    RETURN_IF_ERROR(st.BindText(1, dataset));
    RETURN_IF_ERROR(st.BindText(2, principal));
    ASSIGN_OR_RETURN(bool row, st.Step());
    return row && st.ColumnInt64(0) != 0;
  });
}

absl::StatusOr<std::optional<GrantRecord>> AccessStore::FindGrantLocked(
    Connection& conn, absl::string_view principal, int64_t dataset_id) {
  ASSIGN_OR_RETURN(Statement st,
                   conn.Prepare(absl::StrCat(kSelectGrant,
                                             "WHERE p.name = ? AND d.id = ?")));
  RETURN_IF_ERROR(st.BindText(1, principal));
  RETURN_IF_ERROR(st.BindInt64(2, dataset_id));
  ASSIGN_OR_RETURN(bool row, st.Step());
  if (!row) return std::nullopt;
  return ReadGrant(st);
}

std::string AuditRecordHash(absl::string_view prev_hash, const AuditRecord& r) {
  std::string buf;
  auto add = [&buf](absl::string_view field) {
    char len[8];
    absl::little_endian::Store64(len, field.size());
    buf.append(len, sizeof(len));
    buf.append(field.data(), field.size());
  };
  add(prev_hash);
  add(absl::StrCat(r.at_micros));
  add(r.principal);
  add(r.method);
  add(r.dataset);
  add(r.job_id);
  add(r.target);
  add(absl::StrCat(r.code));
  add(r.detail);
  add(r.peer);
  add(r.token_id);
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(buf.data()), buf.size(),
         digest);
  return std::string(reinterpret_cast<const char*>(digest), sizeof(digest));
}

absl::Status AccessStore::AppendAuditLocked(Connection& conn,
                                            const AuditRecord& record) {
  // The caller holds the write lock (an IMMEDIATE transaction), so the
  // newest record cannot change between this read and the insert.
  std::string prev;
  {
    ASSIGN_OR_RETURN(
        Statement last,
        conn.Prepare("SELECT hash FROM audit ORDER BY seq DESC LIMIT 1"));
    ASSIGN_OR_RETURN(bool has_last, last.Step());
    if (has_last) prev = last.ColumnBlob(0);
  }
  AuditRecord r = record;
  r.at_micros = internal::NowMicros();
  r.hash = AuditRecordHash(prev, r);
  ASSIGN_OR_RETURN(
      Statement st,
      conn.Prepare("INSERT INTO audit(at, principal, method, dataset, "
                   "job_id, target, code, detail, peer, token_id, hash) "
                   "VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"));
  RETURN_IF_ERROR(st.BindInt64(1, r.at_micros));
  RETURN_IF_ERROR(st.BindText(2, r.principal));
  RETURN_IF_ERROR(st.BindText(3, r.method));
  RETURN_IF_ERROR(st.BindText(4, r.dataset));
  RETURN_IF_ERROR(st.BindText(5, r.job_id));
  RETURN_IF_ERROR(st.BindText(6, r.target));
  RETURN_IF_ERROR(st.BindInt64(7, r.code));
  RETURN_IF_ERROR(st.BindText(8, r.detail));
  RETURN_IF_ERROR(st.BindText(9, r.peer));
  RETURN_IF_ERROR(st.BindText(10, r.token_id));
  RETURN_IF_ERROR(st.BindBlob(11, r.hash));
  return st.Run();
}

absl::StatusOr<AuditChainReport> AccessStore::VerifyAuditChain(
    Connection& conn) {
  AuditChainReport report;
  int64_t chain_start = 0;
  {
    ASSIGN_OR_RETURN(Statement meta,
                     conn.Prepare("SELECT value FROM meta WHERE key = "
                                  "'audit_chain_start'"));
    ASSIGN_OR_RETURN(bool row, meta.Step());
    if (!row || !absl::SimpleAtoi(meta.ColumnText(0), &chain_start)) {
      return absl::FailedPreconditionError(
          "the database has no audit chain (schema older than version 5)");
    }
  }
  ASSIGN_OR_RETURN(
      Statement st,
      conn.Prepare("SELECT seq, at, principal, method, dataset, job_id, "
                   "target, code, detail, peer, token_id, hash FROM audit "
                   "ORDER BY seq"));
  // After an archive (storage/audit_archive.h) the chain continues from the
  // last archived record's hash.
  std::string prev;
  {
    ASSIGN_OR_RETURN(Statement anchor,
                     conn.Prepare("SELECT value FROM meta WHERE key = "
                                  "'audit_chain_anchor_hash'"));
    ASSIGN_OR_RETURN(bool row, anchor.Step());
    if (row) prev = absl::HexStringToBytes(anchor.ColumnText(0));
  }
  for (;;) {
    ASSIGN_OR_RETURN(bool row, st.Step());
    if (!row) break;
    ++report.records;
    AuditRecord r;
    r.seq = st.ColumnInt64(0);
    r.at_micros = st.ColumnInt64(1);
    r.principal = st.ColumnText(2);
    r.method = st.ColumnText(3);
    r.dataset = st.ColumnText(4);
    r.job_id = st.ColumnText(5);
    r.target = st.ColumnText(6);
    r.code = static_cast<int>(st.ColumnInt64(7));
    r.detail = st.ColumnText(8);
    r.peer = st.ColumnText(9);
    r.token_id = st.ColumnText(10);
    r.hash = st.ColumnBlob(11);
    if (r.seq <= chain_start) {
      ++report.legacy_records;
      continue;
    }
    ++report.chained_records;
    if (report.first_broken_seq == 0 && AuditRecordHash(prev, r) != r.hash) {
      report.first_broken_seq = r.seq;
    }
    prev = r.hash;
  }
  report.head = prev;
  return report;
}

absl::Status AccessStore::AppendAudit(const AuditRecord& r) {
  // Not the change of an RPC: no commit hook runs with the record.
  ScopedCommitHookSuspension not_an_rpc_change;
  return db_.group_commit().Run(
      [&r](Connection& conn) { return AppendAuditLocked(conn, r); });
}

absl::StatusOr<std::vector<AuditRecord>> AccessStore::ListAudit(
    const AuditFilter& filter) {
  return db_.WithConnection(
      [&](Connection& conn) -> absl::StatusOr<std::vector<AuditRecord>> {
        ASSIGN_OR_RETURN(
            Statement st,
            conn.Prepare("SELECT seq, at, principal, method, dataset, job_id, "
                         "target, code, detail, peer, token_id FROM audit "
                         "WHERE (?1 = '' OR "
                         "dataset = ?1) AND (?2 = '' OR principal = ?2) "
                         "ORDER BY seq DESC LIMIT ?3"));
        RETURN_IF_ERROR(st.BindText(1, filter.dataset));
        RETURN_IF_ERROR(st.BindText(2, filter.principal));
        RETURN_IF_ERROR(
            st.BindInt64(3, filter.limit > 0 ? filter.limit : 1000));
        std::vector<AuditRecord> out;
        for (;;) {
          ASSIGN_OR_RETURN(bool row, st.Step());
          if (!row) break;
          AuditRecord r;
          r.seq = st.ColumnInt64(0);
          r.at_micros = st.ColumnInt64(1);
          r.principal = st.ColumnText(2);
          r.method = st.ColumnText(3);
          r.dataset = st.ColumnText(4);
          r.job_id = st.ColumnText(5);
          r.target = st.ColumnText(6);
          r.code = static_cast<int>(st.ColumnInt64(7));
          r.detail = st.ColumnText(8);
          r.peer = st.ColumnText(9);
          r.token_id = st.ColumnText(10);
          out.push_back(std::move(r));
        }
        return out;
      });
}

}  // namespace dpopt::storage
