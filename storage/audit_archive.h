// Retention of the audit log that keeps its integrity story
// (docs/operations.md, "Audit log integrity"): the records older than a
// date are exported to a file, the export is read back and checked against
// the database's hash chain, and only then are the records removed, in the
// same transaction that records the archive (file name, SHA-256 of the
// file, the chain's head at the cut) in the audit log and moves the chain's
// anchor (meta: audit_chain_anchor_seq / _hash) so that
// AccessStore::VerifyAuditChain keeps verifying what remains.
#ifndef DPOPT_STORAGE_AUDIT_ARCHIVE_H_
#define DPOPT_STORAGE_AUDIT_ARCHIVE_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace dpopt::storage {

struct AuditArchiveReport {
  int64_t records = 0;  // 0: nothing older than the date; no file written
  int64_t first_seq = 0;
  int64_t last_seq = 0;
  std::string chain_head_hex;   // hash of the last archived record
  std::string file_sha256_hex;  // of the archive file
};

// `dpopt-server audit-archive --db=PATH --before=DATE --to=FILE`. Safe while
// the server runs (one IMMEDIATE transaction holds the write lock
// throughout). The file (mode 0600, JSON lines: a header, then one record
// per line with its hash) must not exist. Errors: ALREADY_EXISTS (file),
// FAILED_PRECONDITION (the chain is broken: nothing is archived), storage
// errors.
absl::StatusOr<AuditArchiveReport> ArchiveAuditLog(const std::string& db_path,
                                                   absl::Time before,
                                                   const std::string& to_path);

}  // namespace dpopt::storage

#endif  // DPOPT_STORAGE_AUDIT_ARCHIVE_H_
