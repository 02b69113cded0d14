#include "storage/ledger.h"

#include <cmath>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/common/status_macros.h"
#include "storage/access_store.h"
#include "storage/blob_codec.h"
#include "storage/database.h"
#include "storage/sqlite.h"

namespace dpopt::storage {

absl::Status ChargeRequest::Validate() const {
  if (dataset.empty()) {
    return absl::InvalidArgumentError("charge: dataset is empty");
  }
  if (event_json.empty()) {
    return absl::InvalidArgumentError("charge: event_json is empty");
  }
  if (accountant.empty()) {
    return absl::InvalidArgumentError("charge: accountant is empty");
  }
  if (cost_blob.empty()) {
    return absl::InvalidArgumentError("charge: cost_blob is empty");
  }
  if (!(std::isfinite(epsilon) && epsilon >= 0)) {
    return absl::InvalidArgumentError(
        "charge: epsilon must be finite and >= 0");
  }
  if (!(delta >= 0 && delta <= 1)) {
    return absl::InvalidArgumentError("charge: delta must be in [0, 1]");
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<LedgerEntry>> Ledger::ListLocked(
    Connection& conn, const DatasetRecord& dataset, int64_t after_seq) {
  ASSIGN_OR_RETURN(
      Statement st,
      conn.Prepare("SELECT seq, job_id, event_json, accountant, cost_blob, "
                   "epsilon, delta, principal, note, created_at FROM ledger "
                   "WHERE dataset_id = ? AND seq > ? ORDER BY seq"));
  RETURN_IF_ERROR(st.BindInt64(1, dataset.id));
  RETURN_IF_ERROR(st.BindInt64(2, after_seq));
  std::vector<LedgerEntry> out;
  for (;;) {
    ASSIGN_OR_RETURN(bool row, st.Step());
    if (!row) break;
    LedgerEntry e;
    e.seq = st.ColumnInt64(0);
    e.dataset = dataset.name;
    e.job_id = st.ColumnText(1);
    e.event_json = st.ColumnText(2);
    e.accountant = st.ColumnText(3);
    e.cost_blob = st.ColumnText(4);
    e.epsilon = st.ColumnDouble(5);
    e.delta = st.ColumnDouble(6);
    e.principal = st.ColumnText(7);
    e.note = st.ColumnText(8);
    e.created_at_micros = st.ColumnInt64(9);
    if (e.cost_blob.empty() || !std::isfinite(e.epsilon) || e.epsilon < 0 ||
        !(e.delta >= 0 && e.delta <= 1)) {
      return absl::DataLossError(absl::StrCat("ledger of dataset \"",
                                              dataset.name,
                                              "\" is corrupt at seq ", e.seq));
    }
    out.push_back(std::move(e));
  }
  return out;
}

absl::Status ApplyAdmissionRule(const AdmitFn& admit,
                                const DatasetRecord& dataset,
                                const LedgerTotals& prior,
                                const std::optional<GrantRecord>& grant,
                                absl::string_view principal) {
  RETURN_IF_ERROR(admit(dataset, prior.costs));
  if (!grant.has_value() || grant->epsilon_cap <= 0) return absl::OkStatus();
  DatasetRecord capped = dataset;
  capped.epsilon_budget = grant->epsilon_cap;
  absl::Status cap = admit(capped, prior.principal_costs);
  if (cap.ok()) return cap;
  return absl::Status(
      cap.code(),
      absl::StrCat("over the cap of ", grant->epsilon_cap,
                   " epsilon that the curator set for \"", principal,
                   "\" on this dataset: ", cap.message()));
}

absl::StatusOr<LedgerEntry> Ledger::ChargeAndCreateJob(
    const ChargeRequest& charge, const JobRecord& job, const AdmitFn& admit) {
  RETURN_IF_ERROR(charge.Validate());
  if (job.dataset != charge.dataset) {
    return absl::InvalidArgumentError("charge and job name different datasets");
  }
  if (!admit) return absl::InvalidArgumentError("admit function is empty");
  // One unit of a shared BEGIN IMMEDIATE transaction (group commit): the
  // write lock is held before the existing charges are read, so nothing
  // can append between admission and charge but the units before this one
  // in the same transaction, whose charges the admission sees.
  LedgerEntry entry;
  RETURN_IF_ERROR(db_.group_commit().Run([&](Connection& conn) -> absl::Status {
    ASSIGN_OR_RETURN(DatasetRecord dataset, AdmitLocked(conn, charge, admit));
    JobRecord stored = job;
    RETURN_IF_ERROR(JobStore::InsertLocked(conn, dataset, stored));
    ASSIGN_OR_RETURN(entry,
                     AppendChargeLocked(conn, dataset, charge, stored.id));
    return absl::OkStatus();
  }));
  // synchronous=FULL: durable once the shared COMMIT returned.
  return entry;
}

void Ledger::ForgetFolds() {
  absl::MutexLock lock(&mu_);
  folds_.clear();
}

absl::StatusOr<LedgerEntry> Ledger::ChargeAndQueuePendingJob(
    const ChargeRequest& charge, absl::string_view job_id,
    const AdmitFn& admit) {
  RETURN_IF_ERROR(charge.Validate());
  if (!admit) return absl::InvalidArgumentError("admit function is empty");
  return db_.WithConnection(
      [&](Connection& conn) -> absl::StatusOr<LedgerEntry> {
        Transaction txn(conn);
        RETURN_IF_ERROR(txn.Begin(Transaction::Mode::kImmediate));
        ASSIGN_OR_RETURN(JobRecord job, JobStore::GetLocked(conn, job_id));
        if (job.dataset != charge.dataset) {
          return absl::InvalidArgumentError(
              "charge and job name different datasets");
        }
        if (job.state != JobState::kPendingApproval) {
          return absl::FailedPreconditionError(
              absl::StrCat("job \"", job.id, "\" is ", JobStateName(job.state),
                           ", not waiting for approval"));
        }
        if (internal::NowMicros() >= job.approval_expires_at_micros) {
          return absl::FailedPreconditionError(absl::StrCat(
              "job \"", job.id, "\" waited too long for approval: expired"));
        }
        ASSIGN_OR_RETURN(DatasetRecord dataset,
                         AdmitLocked(conn, charge, admit));
        RETURN_IF_ERROR(JobStore::TransitionLocked(conn, job, JobState::kQueued,
                                                   "approved by a curator"));
        ASSIGN_OR_RETURN(LedgerEntry entry,
                         AppendChargeLocked(conn, dataset, charge, job.id));
        RETURN_IF_ERROR(txn.Commit());
        return entry;
      });
}

absl::StatusOr<DatasetRecord> Ledger::AdmitLocked(Connection& conn,
                                                  const ChargeRequest& charge,
                                                  const AdmitFn& admit) {
  ASSIGN_OR_RETURN(DatasetRecord dataset,
                   DatasetStore::GetLocked(conn, charge.dataset));
  if (dataset.deleted_at_micros != 0) {
    return absl::NotFoundError(
        absl::StrCat("dataset \"", dataset.name, "\" not found"));
  }
  if (dataset.is_public) {
    return absl::FailedPreconditionError(
        absl::StrCat("dataset \"", dataset.name,
                     "\" is public: it has no privacy budget to charge"));
  }
  ASSIGN_OR_RETURN(
      std::optional<GrantRecord> grant,
      AccessStore::FindGrantLocked(conn, charge.principal, dataset.id));
  if (charge.require_grant && !grant.has_value()) {
    // The message of a missing dataset (no existence leak).
    return absl::NotFoundError(
        absl::StrCat("dataset \"", dataset.name, "\" not found"));
  }
  ASSIGN_OR_RETURN(LedgerTotals prior,
                   CostsLocked(conn, dataset, charge.principal));
  RETURN_IF_ERROR(
      ApplyAdmissionRule(admit, dataset, prior, grant, charge.principal));
  return dataset;
}

absl::StatusOr<LedgerEntry> Ledger::AppendChargeLocked(
    Connection& conn, const DatasetRecord& dataset, const ChargeRequest& charge,
    absl::string_view job_id) {
  LedgerEntry entry;
  entry.dataset = dataset.name;
  entry.job_id = std::string(job_id);
  entry.event_json = charge.event_json;
  entry.accountant = charge.accountant;
  entry.cost_blob = charge.cost_blob;
  entry.epsilon = charge.epsilon;
  entry.delta = charge.delta;
  entry.principal = charge.principal;
  entry.note = charge.note;
  entry.created_at_micros = internal::NowMicros();
  ASSIGN_OR_RETURN(
      Statement st,
      conn.Prepare("INSERT INTO ledger(dataset_id, job_id, event_json, "
                   "accountant, cost_blob, epsilon, delta, principal, "
                   "note, created_at) VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?, "
                   "?)"));
  RETURN_IF_ERROR(st.BindInt64(1, dataset.id));
  RETURN_IF_ERROR(st.BindText(2, entry.job_id));
  RETURN_IF_ERROR(st.BindText(3, entry.event_json));
  RETURN_IF_ERROR(st.BindText(4, entry.accountant));
  RETURN_IF_ERROR(st.BindText(5, entry.cost_blob));
  RETURN_IF_ERROR(st.BindDouble(6, entry.epsilon));
  RETURN_IF_ERROR(st.BindDouble(7, entry.delta));
  RETURN_IF_ERROR(st.BindText(8, entry.principal));
  RETURN_IF_ERROR(st.BindText(9, entry.note));
  RETURN_IF_ERROR(st.BindInt64(10, entry.created_at_micros));
  RETURN_IF_ERROR(st.Run());
  entry.seq = conn.LastInsertRowId();
  return entry;
}

absl::StatusOr<std::vector<LedgerEntry>> Ledger::List(
    absl::string_view dataset) {
  ASSIGN_OR_RETURN(LedgerSnapshot snapshot, Snapshot(dataset));
  return std::move(snapshot.entries);
}

absl::StatusOr<LedgerSnapshot> Ledger::Snapshot(absl::string_view dataset) {
  return db_.WithConnection([&](Connection& conn)
                                -> absl::StatusOr<LedgerSnapshot> {
    Transaction txn(conn);
    RETURN_IF_ERROR(txn.Begin(Transaction::Mode::kDeferred));
    LedgerSnapshot snapshot;
    ASSIGN_OR_RETURN(snapshot.dataset, DatasetStore::GetLocked(conn, dataset));
    ASSIGN_OR_RETURN(snapshot.entries, ListLocked(conn, snapshot.dataset, 0));
    RETURN_IF_ERROR(txn.Commit());
    return snapshot;
  });
}

void Ledger::SetCostFolder(CostFolder folder) { folder_ = std::move(folder); }

absl::StatusOr<Ledger::DatasetFold> Ledger::FoldLocked(
    Connection& conn, const DatasetRecord& dataset) {
  DatasetFold fold;
  {
    absl::MutexLock lock(&mu_);
    auto it = folds_.find(dataset.id);
    if (it != folds_.end()) fold = it->second;
  }
  // Only the charges after the fold's last seq (all of them the first time).
  ASSIGN_OR_RETURN(std::vector<LedgerEntry> rows,
                   ListLocked(conn, dataset, fold.through_seq));
  if (rows.empty()) return fold;
  std::vector<std::string> all;
  all.reserve(rows.size() + 1);
  if (!fold.all.cost.empty()) all.push_back(fold.all.cost);
  absl::flat_hash_map<std::string, std::vector<std::string>> own;
  for (LedgerEntry& e : rows) {
    all.push_back(e.cost_blob);
    own[e.principal].push_back(std::move(e.cost_blob));
  }
  ASSIGN_OR_RETURN(fold.all.cost, folder_(dataset, all));
  fold.all.charges += static_cast<int64_t>(rows.size());
  for (auto& [principal, costs] : own) {
    Folded& f = fold.by_principal[principal];
    const int64_t n = static_cast<int64_t>(costs.size());
    if (!f.cost.empty()) costs.insert(costs.begin(), f.cost);
    ASSIGN_OR_RETURN(f.cost, folder_(dataset, costs));
    f.charges += n;
  }
  fold.through_seq = rows.back().seq;
  absl::MutexLock lock(&mu_);
  DatasetFold& kept = folds_[dataset.id];
  if (kept.through_seq < fold.through_seq) kept = fold;
  return fold;
}

absl::StatusOr<LedgerTotals> Ledger::CostsLocked(Connection& conn,
                                                 const DatasetRecord& dataset,
                                                 absl::string_view principal) {
  LedgerTotals out;
  if (folder_) {
    ASSIGN_OR_RETURN(DatasetFold fold, FoldLocked(conn, dataset));
    out.charges = fold.all.charges;
    if (!fold.all.cost.empty()) out.costs.push_back(fold.all.cost);
    auto it = fold.by_principal.find(principal);
    if (!principal.empty() && it != fold.by_principal.end()) {
      out.principal_charges = it->second.charges;
      out.principal_costs.push_back(it->second.cost);
    }
    return out;
  }
  ASSIGN_OR_RETURN(std::vector<LedgerEntry> entries,
                   ListLocked(conn, dataset, 0));
  out.charges = static_cast<int64_t>(entries.size());
  for (LedgerEntry& e : entries) {
    if (!principal.empty() && e.principal == principal) {
      ++out.principal_charges;
      out.principal_costs.push_back(e.cost_blob);
    }
    out.costs.push_back(std::move(e.cost_blob));
  }
  return out;
}

absl::StatusOr<LedgerTotals> Ledger::Totals(absl::string_view dataset,
                                            absl::string_view principal) {
  return db_.WithConnection(
      [&](Connection& conn) -> absl::StatusOr<LedgerTotals> {
        Transaction txn(conn);
        RETURN_IF_ERROR(txn.Begin(Transaction::Mode::kDeferred));
        ASSIGN_OR_RETURN(DatasetRecord record,
                         DatasetStore::GetLocked(conn, dataset));
        ASSIGN_OR_RETURN(LedgerTotals totals,
                         CostsLocked(conn, record, principal));
        RETURN_IF_ERROR(txn.Commit());
        totals.dataset = std::move(record);
        return totals;
      });
}

absl::StatusOr<int64_t> Ledger::LastSeqLocked(Connection& conn) {
  ASSIGN_OR_RETURN(Statement st,
                   conn.Prepare("SELECT COALESCE(MAX(seq), 0) FROM ledger"));
  ASSIGN_OR_RETURN(bool row, st.Step());
  if (!row) return absl::InternalError("MAX(seq) returned no row");
  return st.ColumnInt64(0);
}

absl::StatusOr<int64_t> Ledger::LastSeq() {
  return db_.WithConnection(
      [](Connection& conn) { return LastSeqLocked(conn); });
}

}  // namespace dpopt::storage
