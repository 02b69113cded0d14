#include "storage/audit_archive.h"

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>
#include <utility>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "core/common/status_macros.h"
#include "nlohmann/json.hpp"
#include "openssl/sha.h"
#include "storage/access_store.h"
#include "storage/file_util.h"
#include "storage/sqlite.h"

namespace dpopt::storage {
namespace {

// Same text as the schema's trigger (storage/schema.cc, version 2).
constexpr char kNoDeleteTrigger[] =
    "CREATE TRIGGER audit_no_delete BEFORE DELETE ON audit BEGIN SELECT "
    "RAISE(ABORT, 'audit log is append-only: DELETE refused'); END";

absl::StatusOr<std::string> MetaValue(Connection& conn, const char* key) {
  ASSIGN_OR_RETURN(Statement st,
                   conn.Prepare("SELECT value FROM meta WHERE key = ?"));
  RETURN_IF_ERROR(st.BindText(1, key));
  ASSIGN_OR_RETURN(bool row, st.Step());
  return row ? st.ColumnText(0) : std::string();
}

absl::Status SetMeta(Connection& conn, const char* key,
                     const std::string& value) {
  ASSIGN_OR_RETURN(
      Statement st,
      conn.Prepare("INSERT INTO meta(key, value) VALUES(?, ?) ON "
                   "CONFLICT(key) DO UPDATE SET value = excluded.value"));
  RETURN_IF_ERROR(st.BindText(1, key));
  RETURN_IF_ERROR(st.BindText(2, value));
  return st.Run();
}

std::string Sha256Hex(const std::string& data) {
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(data.data()), data.size(),
         digest);
  return absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(digest), sizeof(digest)));
}

nlohmann::json ToJson(const AuditRecord& r) {
  return {{"seq", r.seq},
          {"at_micros", r.at_micros},
          {"principal", r.principal},
          {"token_id", r.token_id},
          {"peer", r.peer},
          {"method", r.method},
          {"dataset", r.dataset},
          {"job_id", r.job_id},
          {"target", r.target},
          {"code", r.code},
          {"detail", r.detail},
          {"hash", absl::BytesToHexString(r.hash)}};
}

AuditRecord FromJson(const nlohmann::json& j) {
  AuditRecord r;
  r.seq = j.at("seq").get<int64_t>();
  r.at_micros = j.at("at_micros").get<int64_t>();
  r.principal = j.at("principal").get<std::string>();
  r.token_id = j.at("token_id").get<std::string>();
  r.peer = j.at("peer").get<std::string>();
  r.method = j.at("method").get<std::string>();
  r.dataset = j.at("dataset").get<std::string>();
  r.job_id = j.at("job_id").get<std::string>();
  r.target = j.at("target").get<std::string>();
  r.code = j.at("code").get<int>();
  r.detail = j.at("detail").get<std::string>();
  r.hash = absl::HexStringToBytes(j.at("hash").get<std::string>());
  return r;
}

// Reads the archive back and checks every record against the rows it was
// made from and the chained ones against their predecessors.
absl::Status VerifyArchiveFile(const std::string& path,
                               const std::vector<AuditRecord>& rows,
                               int64_t chain_start, std::string prev) {
  std::ifstream in(path);
  if (!in) return absl::UnavailableError("cannot read the archive back");
  std::string line;
  if (!std::getline(in, line)) {
    return absl::DataLossError("the archive has no header");
  }
  size_t i = 0;
  while (std::getline(in, line)) {
    nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded() || i >= rows.size()) {
      return absl::DataLossError("the archive does not read back");
    }
    AuditRecord r;
    try {
      r = FromJson(j);
    } catch (const nlohmann::json::exception&) {
      return absl::DataLossError("the archive does not read back");
    }
    const AuditRecord& want = rows[i++];
    if (r.seq != want.seq || r.hash != want.hash ||
        AuditRecordHash(prev, r) != AuditRecordHash(prev, want)) {
      return absl::DataLossError(
          absl::StrCat("archived record #", r.seq, " differs"));
    }
    if (r.seq > chain_start) {
      if (AuditRecordHash(prev, r) != r.hash) {
        return absl::DataLossError(
            absl::StrCat("archived record #", r.seq, " breaks the chain"));
      }
      prev = r.hash;
    }
  }
  if (i != rows.size()) return absl::DataLossError("the archive is short");
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<AuditArchiveReport> ArchiveAuditLog(const std::string& db_path,
                                                   absl::Time before,
                                                   const std::string& to_path) {
  if (to_path.empty()) return absl::InvalidArgumentError("--to is required");
  if (::access(to_path.c_str(), F_OK) == 0) {
    return absl::AlreadyExistsError(
        absl::StrCat(to_path, " already exists; archive to a new file"));
  }
  ConnectionOptions options;
  options.create_if_missing = false;
  ASSIGN_OR_RETURN(std::unique_ptr<Connection> conn,
                   Connection::Open(db_path, options));
  Transaction txn(*conn);
  RETURN_IF_ERROR(txn.Begin(Transaction::Mode::kImmediate));
  ASSIGN_OR_RETURN(AuditChainReport chain,
                   AccessStore::VerifyAuditChain(*conn));
  if (!chain.ok()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the audit chain is broken at record #", chain.first_broken_seq,
        " (dpopt-server audit-verify); nothing archived"));
  }
  int64_t chain_start = 0;
  {
    ASSIGN_OR_RETURN(std::string v, MetaValue(*conn, "audit_chain_start"));
    (void)absl::SimpleAtoi(v, &chain_start);
  }
  ASSIGN_OR_RETURN(std::string anchor_hex,
                   MetaValue(*conn, "audit_chain_anchor_hash"));
  // A prefix of the log: every record before the first one at or after
  // `before`.
  std::vector<AuditRecord> rows;
  {
    ASSIGN_OR_RETURN(
        Statement st,
        conn->Prepare(
            "SELECT seq, at, principal, method, dataset, job_id, target, "
            "code, detail, peer, token_id, hash FROM audit WHERE seq < "
            "COALESCE((SELECT MIN(seq) FROM audit WHERE at >= ?1), "
            "(SELECT MAX(seq) + 1 FROM audit)) ORDER BY seq"));
    RETURN_IF_ERROR(st.BindInt64(1, absl::ToUnixMicros(before)));
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
      r.hash = st.ColumnBlob(11);
      rows.push_back(std::move(r));
    }
  }
  AuditArchiveReport report;
  if (rows.empty()) return report;
  report.records = static_cast<int64_t>(rows.size());
  report.first_seq = rows.front().seq;
  report.last_seq = rows.back().seq;
  std::string head = absl::HexStringToBytes(anchor_hex);
  for (const AuditRecord& r : rows) {
    if (r.seq > chain_start) head = r.hash;
  }
  report.chain_head_hex = absl::BytesToHexString(head);

  std::string contents = nlohmann::json{{"dpopt_audit_archive", 1},
                                        {"database", db_path},
                                        {"first_seq", report.first_seq},
                                        {"last_seq", report.last_seq},
                                        {"records", report.records},
                                        {"chain_start", chain_start},
                                        {"prev_hash", anchor_hex},
                                        {"chain_head", report.chain_head_hex}}
                             .dump();
  contents += "\n";
  for (const AuditRecord& r : rows) {
    contents += ToJson(r).dump();
    contents += "\n";
  }
  report.file_sha256_hex = Sha256Hex(contents);
  RETURN_IF_ERROR(WriteFileDurably(to_path, contents, 0600));
  auto fail = [&](absl::Status s) {
    std::remove(to_path.c_str());
    return s;
  };
  if (absl::Status s = VerifyArchiveFile(to_path, rows, chain_start,
                                         absl::HexStringToBytes(anchor_hex));
      !s.ok()) {
    return fail(s);
  }
  // The records go, the anchor moves, and the archive is recorded (as a
  // chained record), in one transaction.
  absl::Status s = conn->Execute("DROP TRIGGER audit_no_delete");
  if (s.ok()) {
    absl::StatusOr<Statement> del =
        conn->Prepare("DELETE FROM audit WHERE seq <= ?");
    s = del.status();
    if (s.ok()) s = del->BindInt64(1, report.last_seq);
    if (s.ok()) s = del->Run();
  }
  if (s.ok()) s = conn->Execute(kNoDeleteTrigger);
  if (s.ok()) {
    s = SetMeta(*conn, "audit_chain_anchor_seq", absl::StrCat(report.last_seq));
  }
  if (s.ok()) {
    s = SetMeta(*conn, "audit_chain_anchor_hash", report.chain_head_hex);
  }
  if (s.ok()) {
    AuditRecord r;
    r.principal = "dpopt-server";
    r.method = "Server/AuditArchive";
    r.detail = absl::StrCat("archived audit records #", report.first_seq, "-#",
                            report.last_seq, " (", report.records, ") to ",
                            to_path, ", sha256 ", report.file_sha256_hex,
                            ", chain head ", report.chain_head_hex);
    s = AccessStore::AppendAuditLocked(*conn, r);
  }
  if (s.ok()) s = txn.Commit();
  if (!s.ok()) return fail(s);
  return report;
}

}  // namespace dpopt::storage
