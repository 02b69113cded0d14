#include "storage/job_store.h"

#include <utility>

#include "absl/random/random.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/common/status_macros.h"
#include "storage/blob_codec.h"
#include "storage/database.h"
#include "storage/dataset_store.h"
#include "storage/sqlite.h"

namespace dpopt::storage {
namespace {

constexpr char kSelectJob[] =
    "SELECT j.id, d.name, j.principal, j.state, j.message, j.spec, "
    "j.calibration, j.cost, j.steps_done, j.steps_total, j.result, "
    "j.evaluation, j.created_at, j.started_at, j.finished_at, j.rowid, "
    "j.synthetic_source, j.approval_expires_at FROM jobs j JOIN datasets d ON "
    "d.id = j.dataset_id ";
// The same without the result blob (listings).
constexpr char kSelectJobWithoutResult[] =
    "SELECT j.id, d.name, j.principal, j.state, j.message, j.spec, "
    "j.calibration, j.cost, j.steps_done, j.steps_total, x'', "
    "j.evaluation, j.created_at, j.started_at, j.finished_at, j.rowid, "
    "j.synthetic_source, j.approval_expires_at FROM jobs j JOIN datasets d ON "
    "d.id = j.dataset_id ";

absl::StatusOr<JobRecord> ReadJob(Statement& st) {
  JobRecord j;
  j.id = st.ColumnText(0);
  j.dataset = st.ColumnText(1);
  j.principal = st.ColumnText(2);
  const int64_t state = st.ColumnInt64(3);
  if (state < 0 || state > static_cast<int64_t>(JobState::kRejected)) {
    return absl::DataLossError(
        absl::StrCat("job \"", j.id, "\" has an unknown state"));
  }
  j.state = static_cast<JobState>(state);
  j.message = st.ColumnText(4);
  j.spec = st.ColumnBlob(5);
  j.calibration = st.ColumnBlob(6);
  j.cost = st.ColumnBlob(7);
  j.steps_done = st.ColumnInt64(8);
  j.steps_total = st.ColumnInt64(9);
  j.result = st.ColumnBlob(10);
  j.evaluation = st.ColumnBlob(11);
  j.created_at_micros = st.ColumnInt64(12);
  j.started_at_micros = st.ColumnInt64(13);
  j.finished_at_micros = st.ColumnInt64(14);
  j.rowid = st.ColumnInt64(15);
  j.synthetic_source = st.ColumnText(16);
  j.approval_expires_at_micros = st.ColumnInt64(17);
  return j;
}

std::string RandomJobId() {
  // Unpredictable enough that ids do not reveal how many jobs exist; not a
  // security token (access is checked by the server).
  thread_local absl::BitGen gen;
  return absl::StrFormat("job-%016x%08x", absl::Uniform<uint64_t>(gen),
                         absl::Uniform<uint32_t>(gen));
}

absl::Status NotFound(absl::string_view id) {
  return absl::NotFoundError(absl::StrCat("job \"", id, "\" not found"));
}

// Writes state (+ message and timestamps) of `job` after checking the
// transition. Caller holds the write transaction.
absl::Status WriteTransition(Connection& conn, const JobRecord& job,
                             JobState to, absl::string_view message) {
  if (!IsLegalTransition(job.state, to)) {
    return absl::FailedPreconditionError(
        absl::StrCat("job \"", job.id, "\" is ", JobStateName(job.state),
                     "; cannot move to ", JobStateName(to)));
  }
  const int64_t now = internal::NowMicros();
  ASSIGN_OR_RETURN(
      Statement st,
      conn.Prepare("UPDATE jobs SET state = ?, message = ?, "
                   "started_at = CASE WHEN ? THEN ? ELSE started_at END, "
                   "finished_at = CASE WHEN ? THEN ? ELSE finished_at END "
                   "WHERE id = ?"));
  RETURN_IF_ERROR(st.BindInt64(1, static_cast<int64_t>(to)));
  RETURN_IF_ERROR(st.BindText(2, message));
  RETURN_IF_ERROR(st.BindInt64(3, to == JobState::kRunning ? 1 : 0));
  RETURN_IF_ERROR(st.BindInt64(4, now));
  RETURN_IF_ERROR(st.BindInt64(5, IsTerminal(to) ? 1 : 0));
  RETURN_IF_ERROR(st.BindInt64(6, now));
  RETURN_IF_ERROR(st.BindText(7, job.id));
  return st.Run();
}

absl::Status InsertTraceLocked(Connection& conn, absl::string_view job_id,
                               const std::vector<TraceEntry>& trace) {
  if (trace.empty()) return absl::OkStatus();
  ASSIGN_OR_RETURN(Statement st,
                   conn.Prepare("INSERT INTO job_trace(job_id, step, data) "
                                "VALUES(?, ?, ?)"));
  for (const TraceEntry& e : trace) {
    if (e.step < 0) {
      return absl::InvalidArgumentError("trace step must be >= 0");
    }
    RETURN_IF_ERROR(st.Reset());
    RETURN_IF_ERROR(st.BindText(1, job_id));
    RETURN_IF_ERROR(st.BindInt64(2, e.step));
    RETURN_IF_ERROR(st.BindBlob(3, e.data));
    absl::Status s = st.Run();
    if (absl::IsAlreadyExists(s)) {
      return absl::AlreadyExistsError(absl::StrCat(
          "job \"", job_id, "\" already has a trace record for step ", e.step));
    }
    RETURN_IF_ERROR(s);
  }
  return absl::OkStatus();
}

}  // namespace

absl::string_view JobStateName(JobState state) {
  switch (state) {
    case JobState::kQueued:
      return "QUEUED";
    case JobState::kRunning:
      return "RUNNING";
    case JobState::kSucceeded:
      return "SUCCEEDED";
    case JobState::kFailed:
      return "FAILED";
    case JobState::kCancelled:
      return "CANCELLED";
    case JobState::kPendingApproval:
      return "PENDING_APPROVAL";
    case JobState::kRejected:
      return "REJECTED";
  }
  return "UNKNOWN";
}

bool IsTerminal(JobState state) {
  return state == JobState::kSucceeded || state == JobState::kFailed ||
         state == JobState::kCancelled || state == JobState::kRejected;
}

bool IsLegalTransition(JobState from, JobState to) {
  switch (from) {
    case JobState::kQueued:
      return to == JobState::kRunning || to == JobState::kCancelled ||
             to == JobState::kFailed;
    case JobState::kRunning:
      return to == JobState::kSucceeded || to == JobState::kFailed ||
             to == JobState::kCancelled;
    case JobState::kPendingApproval:
      return to == JobState::kQueued || to == JobState::kRejected ||
             to == JobState::kCancelled;
    default:
      return false;
  }
}

bool IsValidJobId(absl::string_view id) {
  if (id.empty() || id.size() > 64) return false;
  for (char c : id) {
    if (!(absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '.' ||
          c == '_' || c == '-')) {
      return false;
    }
  }
  return true;
}

absl::Status JobStore::InsertLocked(Connection& conn,
                                    const DatasetRecord& dataset,
                                    JobRecord& job) {
  if (job.id.empty()) job.id = RandomJobId();
  if (!IsValidJobId(job.id)) {
    return absl::InvalidArgumentError("job id must match [A-Za-z0-9._-]{1,64}");
  }
  if (job.dataset != dataset.name) {
    return absl::InvalidArgumentError("job dataset does not match");
  }
  if (job.state != JobState::kQueued &&
      job.state != JobState::kPendingApproval) {
    return absl::InvalidArgumentError(
        "a new job must be QUEUED or PENDING_APPROVAL");
  }
  if ((job.state == JobState::kPendingApproval) !=
      (job.approval_expires_at_micros > 0)) {
    return absl::InvalidArgumentError(
        "a job is PENDING_APPROVAL exactly when it has an approval expiry");
  }
  if (job.steps_done != 0 || job.steps_total < 0) {
    return absl::InvalidArgumentError(
        "a new job needs steps_done == 0 and steps_total >= 0");
  }
  if (!job.result.empty() || !job.evaluation.empty()) {
    return absl::InvalidArgumentError("a new job cannot have a result");
  }
  job.created_at_micros = internal::NowMicros();
  job.started_at_micros = 0;
  job.finished_at_micros = 0;
  ASSIGN_OR_RETURN(
      Statement st,
      conn.Prepare(
          "INSERT INTO jobs(id, dataset_id, principal, state, "
          "message, spec, calibration, cost, steps_done, "
          "steps_total, result, evaluation, created_at, started_at, "
          "finished_at, synthetic_source, approval_expires_at) VALUES(?, "
          "?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0, 0, ?, ?)"));
  RETURN_IF_ERROR(st.BindText(1, job.id));
  RETURN_IF_ERROR(st.BindInt64(2, dataset.id));
  RETURN_IF_ERROR(st.BindText(3, job.principal));
  RETURN_IF_ERROR(st.BindInt64(4, static_cast<int64_t>(job.state)));
  RETURN_IF_ERROR(st.BindText(5, job.message));
  RETURN_IF_ERROR(st.BindBlob(6, job.spec));
  RETURN_IF_ERROR(st.BindBlob(7, job.calibration));
  RETURN_IF_ERROR(st.BindBlob(8, job.cost));
  RETURN_IF_ERROR(st.BindInt64(9, job.steps_done));
  RETURN_IF_ERROR(st.BindInt64(10, job.steps_total));
  RETURN_IF_ERROR(st.BindBlob(11, job.result));
  RETURN_IF_ERROR(st.BindBlob(12, job.evaluation));
  RETURN_IF_ERROR(st.BindInt64(13, job.created_at_micros));
  RETURN_IF_ERROR(st.BindText(14, job.synthetic_source));
  RETURN_IF_ERROR(st.BindInt64(15, job.approval_expires_at_micros));
  absl::Status s = st.Run();
  if (absl::IsAlreadyExists(s)) {
    return absl::AlreadyExistsError(
        absl::StrCat("a job with id \"", job.id, "\" already exists"));
  }
  return s;
}

absl::StatusOr<JobRecord> JobStore::GetLocked(Connection& conn,
                                              absl::string_view id) {
  ASSIGN_OR_RETURN(Statement st,
                   conn.Prepare(absl::StrCat(kSelectJob, "WHERE j.id = ?")));
  RETURN_IF_ERROR(st.BindText(1, id));
  ASSIGN_OR_RETURN(bool row, st.Step());
  if (!row) return NotFound(id);
  return ReadJob(st);
}

absl::StatusOr<JobRecord> JobStore::GetStateLocked(Connection& conn,
                                                   absl::string_view id) {
  ASSIGN_OR_RETURN(Statement st,
                   conn.Prepare("SELECT id, state FROM jobs WHERE id = ?"));
  RETURN_IF_ERROR(st.BindText(1, id));
  ASSIGN_OR_RETURN(bool row, st.Step());
  if (!row) return NotFound(id);
  JobRecord j;
  j.id = st.ColumnText(0);
  const int64_t state = st.ColumnInt64(1);
  if (state < 0 || state > static_cast<int64_t>(JobState::kRejected)) {
    return absl::DataLossError(
        absl::StrCat("job \"", j.id, "\" has an unknown state"));
  }
  j.state = static_cast<JobState>(state);
  return j;
}

absl::StatusOr<JobRecord> JobStore::Create(const JobRecord& job) {
  return db_.WithConnection([&](Connection& conn) -> absl::StatusOr<JobRecord> {
    Transaction txn(conn);
    RETURN_IF_ERROR(txn.Begin(Transaction::Mode::kImmediate));
    ASSIGN_OR_RETURN(DatasetRecord dataset,
                     DatasetStore::GetLocked(conn, job.dataset));
    // A dry run reads no row and a pending job none until it is charged
    // by its approval: neither needs a charge now.
    const bool uncharged = !job.synthetic_source.empty() ||
                           job.state == JobState::kPendingApproval;
    if (!dataset.is_public && !uncharged) {
      return absl::FailedPreconditionError(
          absl::StrCat("dataset \"", dataset.name,
                       "\" is private: its jobs must be created with a ledger "
                       "charge"));
    }
    JobRecord stored = job;
    RETURN_IF_ERROR(InsertLocked(conn, dataset, stored));
    RETURN_IF_ERROR(txn.Commit());
    return stored;
  });
}

absl::Status JobStore::TransitionLocked(Connection& conn, const JobRecord& job,
                                        JobState to,
                                        absl::string_view message) {
  return WriteTransition(conn, job, to, message);
}

absl::StatusOr<JobRecord> JobStore::Get(absl::string_view id) {
  return db_.WithConnection(
      [&](Connection& conn) { return GetLocked(conn, id); });
}

absl::StatusOr<std::vector<JobRecord>> JobStore::List(const JobFilter& filter) {
  if (filter.limit < 0) {
    return absl::InvalidArgumentError("a job listing limit must be >= 0");
  }
  const char* order = filter.newest_first ? "DESC" : "ASC";
  const std::string sql = absl::StrCat(
      filter.without_result ? kSelectJobWithoutResult : kSelectJob,
      "WHERE (?1 = '' OR d.name = ?1) AND (?2 = '' OR j.principal = ?2) AND "
      "(?3 < 0 OR j.state = ?3) AND (?4 = 0 OR (j.created_at, j.rowid) ",
      filter.newest_first ? "<" : ">", " (?5, ?6)) ORDER BY j.created_at ",
      order, ", j.rowid ", order, " LIMIT ?7");
  return db_.WithConnection(
      [&](Connection& conn) -> absl::StatusOr<std::vector<JobRecord>> {
        ASSIGN_OR_RETURN(Statement st, conn.Prepare(sql));
        RETURN_IF_ERROR(st.BindText(1, filter.dataset));
        RETURN_IF_ERROR(st.BindText(2, filter.principal));
        RETURN_IF_ERROR(st.BindInt64(
            3, filter.state.has_value() ? static_cast<int64_t>(*filter.state)
                                        : -1));
        RETURN_IF_ERROR(st.BindInt64(4, filter.after.has_value() ? 1 : 0));
        RETURN_IF_ERROR(st.BindInt64(
            5, filter.after.has_value() ? filter.after->created_at_micros : 0));
        RETURN_IF_ERROR(st.BindInt64(
            6, filter.after.has_value() ? filter.after->rowid : 0));
        RETURN_IF_ERROR(st.BindInt64(7, filter.limit > 0 ? filter.limit : -1));
        std::vector<JobRecord> out;
        for (;;) {
          ASSIGN_OR_RETURN(bool row, st.Step());
          if (!row) break;
          ASSIGN_OR_RETURN(JobRecord j, ReadJob(st));
          out.push_back(std::move(j));
        }
        return out;
      });
}

absl::Status JobStore::UpdateState(absl::string_view id, JobState to,
                                   absl::string_view message) {
  return db_.WithConnection([&](Connection& conn) -> absl::Status {
    Transaction txn(conn);
    RETURN_IF_ERROR(txn.Begin(Transaction::Mode::kImmediate));
    ASSIGN_OR_RETURN(JobRecord job, GetStateLocked(conn, id));
    RETURN_IF_ERROR(WriteTransition(conn, job, to, message));
    return txn.Commit();
  });
}

absl::Status JobStore::UpdateStateFrom(absl::string_view id, JobState from,
                                       JobState to, absl::string_view message) {
  return db_.WithConnection([&](Connection& conn) -> absl::Status {
    Transaction txn(conn);
    RETURN_IF_ERROR(txn.Begin(Transaction::Mode::kImmediate));
    ASSIGN_OR_RETURN(JobRecord job, GetStateLocked(conn, id));
    if (job.state != from) {
      return absl::AbortedError(absl::StrCat("job \"", job.id, "\" is ",
                                             JobStateName(job.state), ", not ",
                                             JobStateName(from)));
    }
    RETURN_IF_ERROR(WriteTransition(conn, job, to, message));
    return txn.Commit();
  });
}

absl::Status JobStore::MarkRunning(absl::string_view id) {
  return db_.WithConnection([&](Connection& conn) -> absl::Status {
    Transaction txn(conn);
    RETURN_IF_ERROR(txn.Begin(Transaction::Mode::kImmediate,
                              Transaction::Durability::kRelaxed));
    ASSIGN_OR_RETURN(JobRecord job, GetStateLocked(conn, id));
    if (job.state != JobState::kQueued) {
      return absl::FailedPreconditionError(
          absl::StrCat("job \"", job.id, "\" is ", JobStateName(job.state),
                       "; cannot move to RUNNING"));
    }
    RETURN_IF_ERROR(WriteTransition(conn, job, JobState::kRunning, ""));
    return txn.Commit();
  });
}

absl::Status JobStore::UpdateProgress(absl::string_view id,
                                      int64_t steps_done) {
  return RecordProgress(id, steps_done, {});
}

absl::Status JobStore::RecordProgress(absl::string_view id, int64_t steps_done,
                                      const std::vector<TraceEntry>& trace) {
  if (steps_done < 0) {
    return absl::InvalidArgumentError("steps_done must be >= 0");
  }
  return db_.WithConnection([&](Connection& conn) -> absl::Status {
    Transaction txn(conn);
    RETURN_IF_ERROR(txn.Begin(Transaction::Mode::kImmediate,
                              Transaction::Durability::kRelaxed));
    ASSIGN_OR_RETURN(JobRecord job, GetStateLocked(conn, id));
    if (job.state != JobState::kRunning) {
      return absl::FailedPreconditionError(
          absl::StrCat("job \"", job.id, "\" is ", JobStateName(job.state),
                       ", not RUNNING"));
    }
    ASSIGN_OR_RETURN(
        Statement st,
        conn.Prepare("UPDATE jobs SET steps_done = ? WHERE id = ?"));
    RETURN_IF_ERROR(st.BindInt64(1, steps_done));
    RETURN_IF_ERROR(st.BindText(2, job.id));
    RETURN_IF_ERROR(st.Run());
    RETURN_IF_ERROR(InsertTraceLocked(conn, job.id, trace));
    return txn.Commit();
  });
}

absl::Status JobStore::SetResult(absl::string_view id, absl::string_view result,
                                 absl::string_view evaluation,
                                 int64_t steps_done,
                                 const std::vector<TraceEntry>& trace) {
  // Fully durable, in a commit shared with other durable writes
  // (storage/group_commit.h).
  return db_.group_commit().Run([&](Connection& conn) -> absl::Status {
    ASSIGN_OR_RETURN(JobRecord job, GetStateLocked(conn, id));
    if (job.state != JobState::kRunning) {
      return absl::FailedPreconditionError(
          absl::StrCat("job \"", job.id, "\" is ", JobStateName(job.state),
                       ", not RUNNING"));
    }
    ASSIGN_OR_RETURN(
        Statement st,
        conn.Prepare(
            "UPDATE jobs SET result = ?, evaluation = ?, steps_done = "
            "CASE WHEN ? >= 0 THEN ? ELSE steps_done END WHERE id = ?"));
    RETURN_IF_ERROR(st.BindBlob(1, result));
    RETURN_IF_ERROR(st.BindBlob(2, evaluation));
    RETURN_IF_ERROR(st.BindInt64(3, steps_done));
    RETURN_IF_ERROR(st.BindInt64(4, steps_done));
    RETURN_IF_ERROR(st.BindText(5, job.id));
    RETURN_IF_ERROR(st.Run());
    RETURN_IF_ERROR(InsertTraceLocked(conn, job.id, trace));
    return WriteTransition(conn, job, JobState::kSucceeded, "");
  });
}

absl::Status JobStore::AppendTrace(absl::string_view id, int64_t step,
                                   absl::string_view data) {
  return db_.WithConnection([&](Connection& conn) -> absl::Status {
    Transaction txn(conn);
    RETURN_IF_ERROR(txn.Begin(Transaction::Mode::kImmediate,
                              Transaction::Durability::kRelaxed));
    ASSIGN_OR_RETURN(JobRecord job, GetStateLocked(conn, id));
    RETURN_IF_ERROR(
        InsertTraceLocked(conn, job.id, {TraceEntry{step, std::string(data)}}));
    return txn.Commit();
  });
}

absl::StatusOr<std::vector<TraceEntry>> JobStore::ListTrace(
    absl::string_view id, int64_t after_step) {
  return db_.WithConnection(
      [&](Connection& conn) -> absl::StatusOr<std::vector<TraceEntry>> {
        Transaction txn(conn);
        RETURN_IF_ERROR(txn.Begin(Transaction::Mode::kDeferred));
        ASSIGN_OR_RETURN(JobRecord job, GetStateLocked(conn, id));
        ASSIGN_OR_RETURN(Statement st,
                         conn.Prepare("SELECT step, data FROM job_trace WHERE "
                                      "job_id = ? AND step > ? ORDER BY step"));
        RETURN_IF_ERROR(st.BindText(1, job.id));
        RETURN_IF_ERROR(st.BindInt64(2, after_step));
        std::vector<TraceEntry> out;
        for (;;) {
          ASSIGN_OR_RETURN(bool row, st.Step());
          if (!row) break;
          out.push_back(TraceEntry{st.ColumnInt64(0), st.ColumnBlob(1)});
        }
        RETURN_IF_ERROR(txn.Commit());
        return out;
      });
}

absl::StatusOr<JobStore::TracePage> JobStore::ListTracePage(
    absl::string_view id, const TracePageQuery& query) {
  if (query.offset < 0 || query.max_entries < 0 || query.max_bytes < 0) {
    return absl::InvalidArgumentError(
        "trace page: offset, max_entries and max_bytes must be >= 0");
  }
  return db_.WithConnection([&](Connection& conn) -> absl::StatusOr<TracePage> {
    Transaction txn(conn);
    RETURN_IF_ERROR(txn.Begin(Transaction::Mode::kDeferred));
    ASSIGN_OR_RETURN(JobRecord job, GetStateLocked(conn, id));
    TracePage page;
    {
      ASSIGN_OR_RETURN(
          Statement count,
          conn.Prepare("SELECT COUNT(*) FROM job_trace WHERE job_id = ?"));
      RETURN_IF_ERROR(count.BindText(1, job.id));
      ASSIGN_OR_RETURN(bool row, count.Step());
      if (row) page.total = count.ColumnInt64(0);
    }
    // length(data) is read from the record header: a record that does not
    // fit is never loaded.
    ASSIGN_OR_RETURN(
        Statement st,
        conn.Prepare("SELECT step, length(data), data FROM job_trace WHERE "
                     "job_id = ? AND step > ? ORDER BY step LIMIT ? OFFSET ?"));
    RETURN_IF_ERROR(st.BindText(1, job.id));
    RETURN_IF_ERROR(st.BindInt64(2, query.after_step));
    RETURN_IF_ERROR(
        st.BindInt64(3, query.max_entries == 0 ? -1 : query.max_entries));
    RETURN_IF_ERROR(st.BindInt64(4, query.offset));
    int64_t bytes = 0;
    for (;;) {
      ASSIGN_OR_RETURN(bool row, st.Step());
      if (!row) break;
      const int64_t size = st.ColumnInt64(1);
      if (query.max_bytes > 0 && !page.entries.empty() &&
          bytes + size > query.max_bytes) {
        break;
      }
      bytes += size;
      page.entries.push_back(TraceEntry{st.ColumnInt64(0), st.ColumnBlob(2)});
    }
    RETURN_IF_ERROR(txn.Commit());
    return page;
  });
}

absl::StatusOr<int> JobStore::FailInterruptedJobs(absl::string_view message) {
  return db_.WithConnection([&](Connection& conn) -> absl::StatusOr<int> {
    Transaction txn(conn);
    RETURN_IF_ERROR(txn.Begin(Transaction::Mode::kImmediate));
    ASSIGN_OR_RETURN(
        Statement st,
        conn.Prepare("UPDATE jobs SET state = ?, message = ?, finished_at = ? "
                     "WHERE state IN (?, ?)"));
    RETURN_IF_ERROR(st.BindInt64(1, static_cast<int64_t>(JobState::kFailed)));
    RETURN_IF_ERROR(st.BindText(2, message));
    RETURN_IF_ERROR(st.BindInt64(3, internal::NowMicros()));
    RETURN_IF_ERROR(st.BindInt64(4, static_cast<int64_t>(JobState::kQueued)));
    RETURN_IF_ERROR(st.BindInt64(5, static_cast<int64_t>(JobState::kRunning)));
    RETURN_IF_ERROR(st.Run());
    const int64_t changed = conn.Changes();
    RETURN_IF_ERROR(txn.Commit());
    return static_cast<int>(changed);
  });
}

}  // namespace dpopt::storage
