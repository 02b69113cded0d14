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
  if (checkpoint_request_frames < 1) {
    return absl::InvalidArgumentError("checkpoint_request_frames must be >= 1");
  }
  if (wal_truncate_wait < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("wal_truncate_wait must be >= 0");
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
  // A WAL that an import grew past this is truncated back to it once a
  // checkpoint has copied it into the database file and it restarts.
  RETURN_IF_ERROR(conn->Execute("PRAGMA journal_size_limit=67108864"));
  std::unique_ptr<Database> db(new Database(path, options, std::move(conn)));
  // The ledger's folds may hold charges of a shared transaction that then
  // rolled back (storage/ledger.h, SetCostFolder).
  db->group_commit_.SetOnRollback(
      [ledger = &db->ledger_]() { ledger->ForgetFolds(); });
  if (!options.ledger_mark_path.empty()) {
    RETURN_IF_ERROR(db->CheckLedgerMark());
  }
  if (!options.deletion_record_path.empty()) {
    ASSIGN_OR_RETURN(db->deletion_record_,
                     DeletionRecord::Load(options.deletion_record_path));
    ASSIGN_OR_RETURN(
        db->reapplied_deletions_,
        db->datasets_.ReapplyDeletions(db->deletion_record_->entries()));
  }
  CheckpointerOptions cp_options;
  cp_options.request_frames = options.checkpoint_request_frames;
  cp_options.connection = conn_options;
  ASSIGN_OR_RETURN(db->checkpointer_, Checkpointer::Start(path, cp_options));
  db->WithConnection([cp = db->checkpointer_.get()](Connection& c) {
    c.SetWalCommitCallback([cp](int64_t frames) { cp->OnCommit(frames); });
  });
  // A deletion whose WAL truncation did not finish (busy, or a crash):
  // the checkpointer retries it until it completes.
  ASSIGN_OR_RETURN(bool pending, db->datasets_.WalTruncationPending());
  if (pending) db->checkpointer_->RequestTruncate();
  return db;
}

Database::~Database() {
  if (checkpointer_ != nullptr) {
    WithConnection([](Connection& c) { c.SetWalCommitCallback(nullptr); });
  }
}

absl::Status Database::CheckLedgerMark() {
  const std::string& mark_path = options_.ledger_mark_path;
  LedgerMarkCheck& check = mark_check_;
  check.checked = true;
  absl::StatusOr<std::optional<int64_t>> mark = LedgerMark::Read(mark_path);
  if (!mark.ok()) {
    if (!absl::IsDataLoss(mark.status()) || !options_.allow_ledger_rollback) {
      return absl::Status(
          mark.status().code(),
          absl::StrCat(mark.status().message(),
                       ". Without a valid mark the server cannot tell "
                       "whether this database's ledger was rolled back"));
    }
    check.mark_unreadable = true;
  } else {
    check.mark_seq = *mark;
  }
  ASSIGN_OR_RETURN(check.ledger_seq, ledger_.LastSeq());
  const bool behind =
      check.mark_unreadable ||
      (check.mark_seq.has_value() && check.ledger_seq < *check.mark_seq);
  if (behind && !options_.allow_ledger_rollback) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the privacy ledger of ", path_, " ends at charge #", check.ledger_seq,
        ", but its high-water mark ", mark_path, " records charge #",
        *check.mark_seq,
        ": this database is older than the ledger it "
        "replaced (a restored backup, or a copied or recreated file). Starting "
        "on it would forget ",
        *check.mark_seq - check.ledger_seq,
        " charge(s) and let their privacy budget be spent again. Restore a "
        "newer backup, or accept that with "
        "--allow-ledger-rollback-respending-budget (recorded in the audit "
        "log)"));
  }
  if (behind) {
    // Forced. The audit record commits (durably) before the mark is reset:
    // a crash in between leaves the mark ahead, so the next start refuses
    // again instead of forgetting the rollback.
    check.rolled_back = true;
    AuditRecord r;
    r.principal = "dpopt-server";
    r.method = "Server/AllowLedgerRollback";
    r.detail =
        check.mark_unreadable
            ? absl::StrCat(
                  "started with an unreadable ledger high-water mark; "
                  "reset to the ledger's charge #",
                  check.ledger_seq,
                  ": earlier charges may be missing and their budget "
                  "may be spent again")
            : absl::StrCat("ledger rolled back from charge #", *check.mark_seq,
                           " to #", check.ledger_seq, ": ",
                           *check.mark_seq - check.ledger_seq,
                           " charge(s) forgotten, their budget may be spent "
                           "again");
    RETURN_IF_ERROR(access_.AppendAudit(r));
  }
  if (!check.mark_seq.has_value() || *check.mark_seq != check.ledger_seq) {
    RETURN_IF_ERROR(LedgerMark::Write(mark_path, check.ledger_seq));
  }
  ledger_mark_ = std::make_unique<LedgerMark>(mark_path, check.ledger_seq);
  return absl::OkStatus();
}

absl::StatusOr<int> Database::SchemaVersion() {
  return WithConnection(
      [](Connection& conn) { return ReadSchemaVersion(conn); });
}

}  // namespace dpopt::storage
