#include "server/job_manager.h"

#include <algorithm>
#include <cmath>
#include <iostream>
#include <optional>
#include <utility>
#include <vector>

#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "core/common/status_macros.h"
#include "core/noise/random.h"
#include "core/optim/mpi_pool/worker_pool.h"
#include "core/optim/objective.h"
#include "core/privacy/privacy_filter.h"
#include "server/event_log.h"
#include "server/job_admission.h"
#include "server/job_listing.h"
#include "server/proto_util.h"
#include "server/spec_translation.h"
#include "server/synthetic_dataset.h"
#include "server/translation/registry.h"

namespace dpopt::server {
namespace {

using storage::JobRecord;

using storage::JobState;

v1::JobState ToProtoState(JobState s) {
  switch (s) {
    case JobState::kQueued:
      return v1::JOB_STATE_QUEUED;
    case JobState::kRunning:
      return v1::JOB_STATE_RUNNING;
    case JobState::kSucceeded:
      return v1::JOB_STATE_SUCCEEDED;
    case JobState::kFailed:
      return v1::JOB_STATE_FAILED;
    case JobState::kCancelled:
      return v1::JOB_STATE_CANCELLED;
    case JobState::kPendingApproval:
      return v1::JOB_STATE_PENDING_APPROVAL;
    case JobState::kRejected:
      return v1::JOB_STATE_REJECTED;
  }
  return v1::JOB_STATE_UNSPECIFIED;
}

// "job-YYYYMMDD-HHMMSS-" + 64 random bits in hex. The random part used to be
// 24 bits, and the concurrency harness (tests/concurrency) hit a collision
// among a few hundred jobs submitted within one second: the submit failed
// with "already exists" (nothing charged, but a spurious error). With 64
// bits a collision needs ~4e9 jobs in one second.
std::string NewJobId() {
  static absl::Mutex mu;
  static absl::BitGen* gen = new absl::BitGen();
  uint64_t r;
  {
    absl::MutexLock lock(&mu);
    r = absl::Uniform<uint64_t>(*gen);
  }
  return absl::StrCat(
      "job-",
      absl::FormatTime("%Y%m%d-%H%M%S", absl::Now(), absl::UTCTimeZone()), "-",
      absl::StrFormat("%016x", r));
}

// Job failure messages must never carry private data: core errors are
// written without row values, and we keep only code and message.
std::string PublicFailure(const absl::Status& s) {
  return absl::StrCat(absl::StatusCodeToString(s.code()), ": ", s.message());
}

}  // namespace

absl::Status JobManager::Options::Validate() const {
  if (workers < 1) return absl::InvalidArgumentError("workers must be >= 1");
  if (!(max_job_work >= 1 && max_job_work <= 1e18)) {
    return absl::InvalidArgumentError("max_job_work must be in [1, 1e18]");
  }
  if (max_trace_bytes_per_job < 0 ||
      max_trace_bytes_per_job > (int64_t{1} << 40)) {
    return absl::InvalidArgumentError(
        "--max-trace-bytes-per-job must be in [0, 2^40] (0 = no limit)");
  }
  if (queue_capacity < 1) {
    return absl::InvalidArgumentError("queue_capacity must be >= 1");
  }
  if (max_active_jobs_per_principal < 0) {
    return absl::InvalidArgumentError(
        "max_active_jobs_per_principal must be >= 0 (0 = no limit)");
  }
  if (mpi.has_value()) RETURN_IF_ERROR(mpi->Validate());
  return dataset_cache.Validate();
}

absl::StatusOr<std::unique_ptr<JobManager>> JobManager::Create(
    const Options& options, storage::Database* db, DatasetManager* datasets,
    TraceHub* hub) {
  RETURN_IF_ERROR(options.Validate());
  std::unique_ptr<JobManager> m(new JobManager(db, hub));
  m->options_ = options;
  ExecutionEnvironment env;
  if (m->options_.mpi.has_value()) env.mpi = &*m->options_.mpi;
  env.pool = m->options_.pool;
  // The families' start-up checks (e.g. only the production MPI worker).
  RETURN_IF_ERROR(CheckExecutionEnvironment(env));
  JobAdmission::Limits limits;
  limits.max_job_work = options.max_job_work;
  limits.max_trace_bytes_per_job = options.max_trace_bytes_per_job;
  m->admission_ = std::make_unique<JobAdmission>(db, env, limits);
  ASSIGN_OR_RETURN(m->cache_, DatasetCache::Create(options.dataset_cache));
  jobs::JobRunner::Options ro;
  ro.workers = options.workers;
  ro.queue_capacity = options.queue_capacity;
  ASSIGN_OR_RETURN(m->runner_, jobs::JobRunner::Create(ro));
  m->active_jobs_ = std::make_unique<ConcurrencyLimiter>(
      options.max_active_jobs_per_principal, "jobs queued or running",
      "--max-jobs-per-principal");
  return m;
}

JobManager::~JobManager() { Shutdown(); }

void JobManager::BeginDrain() { draining_.store(true); }

bool JobManager::WaitIdle(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (active_.load() > 0) {
    if (absl::Now() >= deadline) return false;
    absl::SleepFor(absl::Milliseconds(20));
  }
  return true;
}

void JobManager::Shutdown() {
  if (runner_) runner_->Shutdown();
}

absl::Status JobManager::RecoverInterruptedJobs() {
  ASSIGN_OR_RETURN(int n, db_->jobs().FailInterruptedJobs(
                              "the server stopped while the job was queued or "
                              "running; its privacy cost stays charged"));
  (void)n;
  return absl::OkStatus();
}

absl::StatusOr<v1::JobEstimate> JobManager::Estimate(
    const v1::JobSpec& spec, const std::string& principal) {
  ASSIGN_OR_RETURN(v1::JobEstimate est, admission_->Estimate(spec, principal));
  if (spec.dry_run() || principal.empty() || !est.cost().charged()) return est;
  // Whether the job would wait for a curator's approval (analysts only:
  // curators hold no grants).
  ASSIGN_OR_RETURN(std::optional<storage::GrantRecord> grant,
                   db_->access().FindGrant(principal, spec.dataset()));
  if (grant.has_value() && grant->approval_above_epsilon > 0 &&
      est.cost().epsilon() > grant->approval_above_epsilon) {
    est.set_message(absl::StrCat(
        est.message(), est.message().empty() ? "" : "; ",
        absl::StrFormat("its cost is above the approval threshold of your "
                        "grant (epsilon %.6g): submitted, it will wait for a "
                        "curator's approval, uncharged",
                        grant->approval_above_epsilon)));
  }
  return est;
}

absl::StatusOr<v1::Job> JobManager::Submit(
    const v1::JobSpec& spec, const std::string& principal, storage::Role role,
    const std::function<void(const std::string&)>& on_id,
    std::optional<int> own_max_active_jobs,
    const std::function<void(const std::string&)>& on_note) {
  absl::StatusOr<v1::Job> job =
      Admit(spec, principal, role, on_id, own_max_active_jobs, on_note);
  LogFields fields;
  fields.principal = principal;
  fields.dataset = spec.dataset().substr(0, 128);
  if (job.ok()) {
    fields.job = job->id();
    fields.status = v1::JobState_Name(job->state());
    LogEvent(LogLevel::kInfo, "job_admitted",
             absl::StrCat("job ", job->id(), " admitted (",
                          job->synthetic_data() ? "dry run, not charged"
                          : job->state() == v1::JOB_STATE_PENDING_APPROVAL
                              ? "waiting for approval, not charged"
                          : job->cost().charged() ? "charged"
                                                  : "not charged",
                          ")"),
             fields);
  } else {
    fields.status = absl::StatusCodeToString(job.status().code());
    LogEvent(LogLevel::kInfo, "job_refused", "a submission was refused",
             fields);
  }
  if (options_.metrics != nullptr) {
    const std::string type = JobTypeName(spec.algorithm().algorithm_case());
    const std::string label = type.empty() ? "unknown" : type;
    if (job.ok()) {
      options_.metrics->JobAdmitted(label, job->cost().charged());
    } else {
      options_.metrics->JobRefused(label, RefusalReasonOf(job.status()));
    }
  }
  return job;
}

absl::StatusOr<bool> JobManager::MaybeCreatePending(
    const PreparedJob& p, JobRecord& record,
    std::optional<int> own_max_active_jobs,
    const std::function<void(const std::string&)>& on_note) {
  if (p.dry_run || !p.cost.charged() || !p.requires_grant) return false;
  ASSIGN_OR_RETURN(std::optional<storage::GrantRecord> grant,
                   db_->access().FindGrant(p.principal, p.dataset.name));
  if (!grant.has_value() || grant->approval_above_epsilon <= 0 ||
      !(p.cost.epsilon() > grant->approval_above_epsilon)) {
    return false;
  }
  // Waiting jobs are bounded per principal like active ones.
  const int limit =
      own_max_active_jobs.value_or(options_.max_active_jobs_per_principal);
  if (limit > 0) {
    storage::JobFilter filter;
    filter.principal = p.principal;
    filter.state = JobState::kPendingApproval;
    filter.limit = limit;
    filter.without_result = true;
    ASSIGN_OR_RETURN(std::vector<JobRecord> waiting, db_->jobs().List(filter));
    if (static_cast<int>(waiting.size()) >= limit) {
      return absl::ResourceExhaustedError(
          absl::StrCat("at most ", limit,
                       " jobs per principal may wait for approval "
                       "(--max-jobs-per-principal); nothing was charged"));
    }
  }
  const int64_t timeout = grant->approval_timeout_seconds > 0
                              ? grant->approval_timeout_seconds
                              : storage::kDefaultApprovalTimeoutSeconds;
  record.state = JobState::kPendingApproval;
  record.approval_expires_at_micros =
      absl::ToUnixMicros(absl::Now()) + timeout * 1000000;
  record.message = absl::StrFormat(
      "waiting for a curator's approval: its cost, epsilon %.6g, is above "
      "the approval threshold of this grant, %.6g; nothing is charged "
      "unless it is approved",
      p.cost.epsilon(), grant->approval_above_epsilon);
  if (on_note) on_note("pending approval");
  RETURN_IF_ERROR(db_->jobs().Create(record).status());
  return true;
}

absl::StatusOr<v1::Job> JobManager::Admit(
    const v1::JobSpec& spec, const std::string& principal, storage::Role role,
    const std::function<void(const std::string&)>& on_id,
    std::optional<int> own_max_active_jobs,
    const std::function<void(const std::string&)>& on_note) {
  if (draining_.load()) {
    return absl::UnavailableError(
        "the server is shutting down and admits no new jobs; nothing was "
        "charged. Retry when it is back");
  }
  ASSIGN_OR_RETURN(PreparedJob prepared, admission_->Prepare(spec));
  prepared.principal = principal;
  prepared.requires_grant = role != storage::Role::kCurator;
  auto p = std::make_shared<PreparedJob>(std::move(prepared));

  JobRecord record;
  record.id = NewJobId();
  record.dataset = p->dataset.name;
  record.principal = principal;
  record.state = JobState::kQueued;
  record.spec = p->spec.SerializeAsString();
  record.calibration = CalibrationToProto(p->calibration).SerializeAsString();
  record.cost = p->cost.SerializeAsString();
  record.steps_total = p->calibration.steps;
  record.synthetic_source = p->synthetic_source;

  // A job above its grant's approval threshold waits, uncharged.
  if (on_id) on_id(record.id);
  ASSIGN_OR_RETURN(bool pending, MaybeCreatePending(
                                     *p, record, own_max_active_jobs, on_note));
  if (pending) return Get(record.id);

  // The principal's job slot and a queue slot first: neither limit may
  // cost budget. The slot is released when the job's work is dropped
  // (after it ran, or unrun at shutdown) or on any return before that.
  ASSIGN_OR_RETURN(std::shared_ptr<ConcurrencyLimiter::Slot> slot,
                   active_jobs_->Acquire(principal, own_max_active_jobs));
  ASSIGN_OR_RETURN(jobs::JobRunner::Ticket ticket, runner_->Reserve());

  ASSIGN_OR_RETURN(JobAdmission::Outcome outcome,
                   admission_->ChargeAndCreate(*p, record));
  if (outcome == JobAdmission::Outcome::kChargedNotStarted) {
    return Get(record.id);
  }
  // Durable from here on. The worker loads private rows only after this.
  RETURN_IF_ERROR(Enqueue(std::move(ticket), std::move(slot), p, record.id));
  return Get(record.id);
}

absl::Status JobManager::Enqueue(jobs::JobRunner::Ticket ticket,
                                 std::shared_ptr<ConcurrencyLimiter::Slot> slot,
                                 std::shared_ptr<PreparedJob> p,
                                 const std::string& id) {
  active_.fetch_add(1);
  absl::Status queued = runner_->Submit(
      std::move(ticket), id,
      [this, id, p, slot = std::move(slot)](
          const jobs::CancellationToken& token) { Execute(id, p, token); });
  if (!queued.ok()) {
    active_.fetch_sub(1);
    // Only during shutdown. The charge stands (it is durable); the job fails.
    (void)db_->jobs().UpdateState(
        id, JobState::kFailed,
        p->cost.charged() && !p->dry_run
            ? "the server is shutting down; its privacy cost stays charged"
            : "the server is shutting down");
  }
  return queued;
}

void JobManager::ExpirePendingJobs() {
  storage::JobFilter filter;
  filter.state = JobState::kPendingApproval;
  filter.without_result = true;
  absl::StatusOr<std::vector<JobRecord>> pending = db_->jobs().List(filter);
  if (!pending.ok()) return;
  const int64_t now = absl::ToUnixMicros(absl::Now());
  for (const JobRecord& r : *pending) {
    if (now < r.approval_expires_at_micros) continue;
    if (db_->jobs()
            .UpdateState(r.id, JobState::kRejected,
                         "not approved within the grant's approval timeout "
                         "(expired); nothing was charged")
            .ok()) {
      // The server's own decision, audited like the curators'.
      storage::AuditRecord audit;
      audit.principal = "dpopt-server";
      audit.method = "Server/ExpireJob";
      audit.dataset = r.dataset;
      audit.job_id = r.id;
      audit.target = r.principal;
      audit.detail = "approval expired; nothing was charged";
      (void)db_->access().AppendAudit(audit);
      PublishJob(r.id);
    }
  }
}

absl::StatusOr<v1::ListJobsResponse> JobManager::ListPending(
    const std::string& dataset) {
  ExpirePendingJobs();
  storage::JobFilter filter;
  filter.dataset = dataset;
  filter.state = JobState::kPendingApproval;
  filter.without_result = true;
  ASSIGN_OR_RETURN(std::vector<JobRecord> records, db_->jobs().List(filter));
  v1::ListJobsResponse out;
  for (const JobRecord& r : records) {
    ASSIGN_OR_RETURN(*out.add_jobs(), ToProto(r));
  }
  return out;
}

absl::StatusOr<v1::Job> JobManager::Approve(const std::string& id) {
  if (draining_.load()) {
    return absl::UnavailableError(
        "the server is shutting down and admits no new jobs; nothing was "
        "charged. Retry when it is back");
  }
  ExpirePendingJobs();
  ASSIGN_OR_RETURN(JobRecord r, db_->jobs().Get(id));
  if (r.state != JobState::kPendingApproval) {
    return absl::FailedPreconditionError(
        absl::StrCat("job ", id, " is not waiting for approval (",
                     storage::JobStateName(r.state), ")"));
  }
  v1::JobSpec spec;
  if (!spec.ParseFromString(r.spec)) {
    return absl::DataLossError(absl::StrCat("job ", id, " record is corrupt"));
  }
  // The normal admission, on the ledger as it is now.
  ASSIGN_OR_RETURN(PreparedJob prepared, admission_->Prepare(spec));
  prepared.principal = r.principal;
  prepared.requires_grant = true;  // only analysts' jobs wait for approval
  auto p = std::make_shared<PreparedJob>(std::move(prepared));
  // The submitter's own active-job limit (a curator's override), as at
  // submission.
  ASSIGN_OR_RETURN(storage::PrincipalRecord submitter,
                   db_->access().GetPrincipal(r.principal));
  ASSIGN_OR_RETURN(
      std::shared_ptr<ConcurrencyLimiter::Slot> slot,
      active_jobs_->Acquire(r.principal, submitter.limits.max_active_jobs));
  ASSIGN_OR_RETURN(jobs::JobRunner::Ticket ticket, runner_->Reserve());
  ASSIGN_OR_RETURN(JobAdmission::Outcome outcome,
                   admission_->ChargePending(*p, id));
  if (outcome == JobAdmission::Outcome::kQueued) {
    RETURN_IF_ERROR(Enqueue(std::move(ticket), std::move(slot), p, id));
  }
  PublishJob(id);
  return Get(id);
}

absl::StatusOr<v1::Job> JobManager::Reject(const std::string& id,
                                           const std::string& reason) {
  ExpirePendingJobs();
  ASSIGN_OR_RETURN(JobRecord r, db_->jobs().Get(id));
  if (r.state != JobState::kPendingApproval) {
    return absl::FailedPreconditionError(
        absl::StrCat("job ", id, " is not waiting for approval (",
                     storage::JobStateName(r.state), ")"));
  }
  RETURN_IF_ERROR(db_->jobs().UpdateState(
      id, JobState::kRejected,
      absl::StrCat("rejected by a curator",
                   reason.empty() ? "" : absl::StrCat(": ", reason),
                   "; nothing was charged")));
  PublishJob(id);
  return Get(id);
}

// Records privatized trace points (persisted, streamed to watchers) and
// answers the algorithms' stop questions from the job's cancellation token
// (set by Cancel, a dataset deletion and server shutdown). Called only
// through optim::StepReporter.
//
// Points are kept in memory and stored in batches, each with the job's
// steps_done: when kTraceFlushInterval has passed since the last batch or
// FlushBytes() are pending (checked at each traced step), and the last
// ones in the transaction that stores the result (a small job: one write
// for its whole trace instead of one per point). A point is published to
// watchers only once stored, so a watcher that subscribes and then replays
// the stored trace (WatchJob) misses none.
class JobManager::TraceRecorder : public optim::IterationCallback {
 public:
  static constexpr absl::Duration kTraceFlushInterval = absl::Milliseconds(100);
  static constexpr int64_t kTraceFlushBytes = int64_t{1} << 20;

  TraceRecorder(JobManager* m, const std::string& job_id,
                const PreparedJob& prepared, const optim::Objective* objective,
                const Dataset* eval, const jobs::CancellationToken& token)
      : m_(m),
        job_id_(job_id),
        prepared_(prepared),
        objective_(objective),
        eval_(eval),
        token_(token),
        last_flush_(absl::Now()) {}

  bool StopRequested() override { return token_.cancelled(); }

  bool OnIteration(const optim::IterationSummary& s) override {
    if (token_.cancelled()) return false;
    const int64_t every = prepared_.job.trace_every;
    if (s.step % every == 0 || s.step == s.total_steps || s.step == 1) {
      steps_done_ = s.step;
      Record(s);
      if (pending_bytes_ >= FlushBytes() ||
          absl::Now() - last_flush_ >= kTraceFlushInterval) {
        Flush();
      }
    }
    return !token_.cancelled();
  }

  // kTraceFlushBytes, or a quarter of a watcher's buffer if that is less: a
  // batch is published at once, and a watcher that keeps reading must never
  // fall a whole buffer behind because of one batch.
  int64_t FlushBytes() const {
    const int64_t buffer = m_->hub_->options().max_buffered_bytes_per_watcher;
    return buffer > 0 ? std::min(kTraceFlushBytes, buffer / 4)
                      : kTraceFlushBytes;
  }

  // Stores the pending points and steps_done (relaxed durability, like
  // every progress write), then publishes the points. Failures do not stop
  // the job; the final state records them if it cannot complete.
  void Flush() {
    last_flush_ = absl::Now();
    if (pending_.empty() && steps_done_ == stored_steps_) return;
    (void)m_->db_->jobs().RecordProgress(job_id_, steps_done_, pending_);
    stored_steps_ = steps_done_;
    pending_.clear();
    pending_bytes_ = 0;
    PublishStored();
  }

  // The points not stored yet, for the transaction that stores the result;
  // once it committed, PublishStored() sends them.
  const std::vector<storage::TraceEntry>& pending() const { return pending_; }
  void PublishStored() {
    for (v1::TracePoint& t : unpublished_) {
      v1::JobEvent ev;
      *ev.mutable_trace() = std::move(t);
      m_->hub_->Publish(job_id_, ev);
    }
    unpublished_.clear();
  }

 private:
  void Record(const optim::IterationSummary& s) {
    v1::TracePoint t;
    t.set_step(s.step);
    t.set_iterate_norm(s.iterate.norm());
    t.set_noisy_gradient_norm(s.noisy_gradient_norm);
    if (eval_ != nullptr) {
      // Post-processing of the privatized iterate on PUBLIC data.
      t.set_has_public_eval(true);
      t.set_public_loss(objective_->Loss(*eval_, s.iterate));
      t.set_public_accuracy(objective_->Accuracy(*eval_, s.iterate));
    }
    if (prepared_.spec.trace_iterates()) {
      for (Eigen::Index i = 0; i < s.iterate.size(); ++i) {
        t.add_iterate(s.iterate[i]);
      }
    }
    std::string data = t.SerializeAsString();
    // Admission bounded the trace from public values; a point past the
    // server's limit (a defect of that bound) is neither stored nor sent,
    // and which points those are depends on public sizes only.
    const int64_t limit = m_->options_.max_trace_bytes_per_job;
    if (limit > 0 &&
        stored_bytes_ + static_cast<int64_t>(data.size()) > limit) {
      if (!truncated_) {
        truncated_ = true;
        LogFields fields;
        fields.job = job_id_;
        LogEvent(LogLevel::kError, "job_trace_truncated",
                 absl::StrCat("job ", job_id_, " reached ", stored_bytes_,
                              " trace bytes; later points are not kept "
                              "(the admission bound was too low: a defect)"),
                 fields);
      }
      return;
    }
    stored_bytes_ += static_cast<int64_t>(data.size());
    pending_bytes_ += static_cast<int64_t>(data.size());
    pending_.push_back(storage::TraceEntry{s.step, std::move(data)});
    unpublished_.push_back(std::move(t));
  }

  JobManager* m_;
  const std::string& job_id_;
  const PreparedJob& prepared_;
  const optim::Objective* objective_;
  const Dataset* eval_;
  const jobs::CancellationToken& token_;
  // Bytes of every point kept (stored or pending), for the trace limit.
  int64_t stored_bytes_ = 0;
  bool truncated_ = false;
  // Points recorded but not stored yet, and their events (published once
  // stored).
  std::vector<storage::TraceEntry> pending_;
  std::vector<v1::TracePoint> unpublished_;
  int64_t pending_bytes_ = 0;
  // The last traced step, and the steps_done last stored.
  int64_t steps_done_ = 0;
  int64_t stored_steps_ = 0;
  absl::Time last_flush_;
};

void JobManager::PublishJob(const std::string& job_id) {
  auto job = Get(job_id);
  if (!job.ok()) return;
  v1::JobEvent ev;
  *ev.mutable_job() = *job;
  hub_->Publish(job_id, ev);
}

void JobManager::Execute(const std::string& job_id,
                         std::shared_ptr<PreparedJob> prepared,
                         const jobs::CancellationToken& token) {
  const std::string& type = prepared->job.algorithm_name;
  if (options_.metrics != nullptr) options_.metrics->JobStarted(type);
  const absl::Time start = absl::Now();
  absl::Status s = RunJob(job_id, *prepared, token);
  const JobState state = s.ok() ? JobState::kSucceeded
                         : s.code() == absl::StatusCode::kCancelled
                             ? JobState::kCancelled
                             : JobState::kFailed;
  {
    LogFields fields;
    fields.job = job_id;
    fields.principal = prepared->principal;
    fields.dataset = prepared->dataset.name;
    fields.status = v1::JobState_Name(ToProtoState(state));
    LogEvent(LogLevel::kInfo, "job_finished",
             absl::StrCat("job ", job_id, " ended: ", fields.status), fields);
  }
  if (options_.metrics != nullptr) {
    options_.metrics->JobFinished(type, v1::JobState_Name(ToProtoState(state)),
                                  absl::ToDoubleSeconds(absl::Now() - start));
  }
  if (!s.ok()) {
    (void)db_->jobs().UpdateState(
        job_id, state,
        state == JobState::kCancelled
            ? (prepared->dry_run ? "cancelled (a dry run: nothing was charged)"
                                 : "cancelled; its privacy cost stays charged")
            : PublicFailure(s));
  }
  PublishJob(job_id);
  active_.fetch_sub(1);
}

absl::Status JobManager::RunJob(const std::string& job_id, const PreparedJob& p,
                                const jobs::CancellationToken& token) {
  if (token.cancelled()) return absl::CancelledError("cancelled");
  RETURN_IF_ERROR(db_->jobs().MarkRunning(job_id));
  PublishJob(job_id);

  // A dry run never loads the dataset's rows: synthetic ones, or the public
  // dummy's. Nor does a pool job: its rows stay on the pool's ranks.
  const bool on_pool = !p.dry_run && !p.pool_dataset_id.empty();
  ASSIGN_OR_RETURN(std::shared_ptr<const Dataset> train_rows,
                   p.dry_run ? DryRunRows(p)
                   : on_pool ? PoolJobRows(p)
                             : LoadRows(p.dataset));
  const Dataset& train = *train_rows;
  std::shared_ptr<const Dataset> eval;
  if (p.has_eval) {
    ASSIGN_OR_RETURN(eval, LoadRows(p.eval_dataset));
  }
  ASSIGN_OR_RETURN(auto objective,
                   optim::Objective::Create(p.job.model, train.dimension()));
  ASSIGN_OR_RETURN(auto rng, noise::NewSecureRandom());
  TraceRecorder recorder(this, job_id, p, objective.get(), eval.get(), token);
  optim::SolveContext context(rng.get(), &recorder);
  // A pool job's rows: opened on every rank by the oracle, closed when this
  // goes. A pool failure fails the job (it stays charged).
  std::unique_ptr<optim::RemoteRows> remote_rows;
  if (on_pool) {
    remote_rows =
        options_.pool->RowsFor(p.pool_dataset_id, pool_jobs_.fetch_add(1) + 1);
    context.remote_rows = remote_rows.get();
  }
  absl::StatusOr<optim::SolveResult> run =
      p.job.algorithm->Run(train, p.calibration, context);
  if (!run.ok() || run->cancelled || token.cancelled()) {
    // The points recorded so far are kept, as for a job that completes.
    recorder.Flush();
    if (!run.ok()) return run.status();
    return absl::CancelledError("cancelled");
  }
  const optim::SolveResult& result = *run;

  v1::JobResult out;
  out.set_job_id(job_id);
  v1::Model* model = out.mutable_model();
  for (Eigen::Index i = 0; i < result.model.weights.size(); ++i) {
    model->add_weights(result.model.weights[i]);
  }
  model->set_dimension(result.model.dimension);
  model->set_num_classes(result.model.num_classes);
  model->set_loss(p.job.traits.trains_model ? ProtoLossName(result.model.loss)
                                            : p.job.traits.output_name);
  for (const optim::ReleasedOutput& r : result.released) {
    v1::ReleasedOutput* o = out.add_released();
    o->set_name(r.name);
    for (double v : r.values) o->add_values(v);
    o->set_description(r.description);
  }
  *out.mutable_cost() = p.cost;
  *out.mutable_calibration() = CalibrationToProto(p.calibration);
  if (p.dry_run) {
    out.set_synthetic_data(true);
    out.set_synthetic_source(p.synthetic_source);
  }
  v1::Evaluation evaluation;
  if (eval != nullptr) {
    evaluation.set_dataset(p.eval_dataset.name);
    evaluation.set_rows(eval->rows());
    evaluation.set_loss(objective->Loss(*eval, result.model.weights));
    evaluation.set_accuracy(objective->Accuracy(*eval, result.model.weights));
    *out.mutable_evaluation() = evaluation;
  }
  // The result, the final steps_done and the last trace points in one
  // transaction.
  absl::Status stored = db_->jobs().SetResult(
      job_id, out.SerializeAsString(), evaluation.SerializeAsString(),
      result.steps_done, recorder.pending());
  if (!stored.ok()) {
    recorder.Flush();
    return stored;
  }
  recorder.PublishStored();
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<const Dataset>> JobManager::LoadRows(
    const storage::DatasetRecord& record) {
  // A cache hit must not outlive a deletion: the dataset must still be live
  // (a deleted one is NOT_FOUND here, as a load from the database would be).
  ASSIGN_OR_RETURN(storage::DatasetRecord live,
                   db_->datasets().Get(record.name));
  if (live.id != record.id || live.deleted_at_micros != 0) {
    return absl::NotFoundError(
        absl::StrCat("dataset \"", record.name, "\" not found"));
  }
  CachedDatasetKey key;
  key.id = live.id;
  key.is_public = live.is_public;
  key.rows = live.rows;
  key.dimension = live.dimension;
  return cache_->Get(key, [&]() { return db_->datasets().Load(live.name); });
}

absl::StatusOr<std::shared_ptr<const Dataset>> JobManager::PoolJobRows(
    const PreparedJob& p) {
  ASSIGN_OR_RETURN(storage::DatasetRecord live,
                   db_->datasets().Get(p.dataset.name));
  if (live.id != p.dataset.id || live.deleted_at_micros != 0) {
    return absl::NotFoundError(
        absl::StrCat("dataset \"", p.dataset.name, "\" not found"));
  }
  ASSIGN_OR_RETURN(std::optional<storage::DatasetPlacement> placement,
                   db_->datasets().FindPlacement(live.id));
  if (options_.pool == nullptr || !placement.has_value() ||
      placement->ranks != p.pool_ranks) {
    return absl::FailedPreconditionError(absl::StrCat(
        "dataset ", p.dataset.name,
        "'s placement on the worker pool changed after the job was admitted; "
        "the job did not run (its privacy cost stays charged)"));
  }
  // Run() reads no row of it (SolveContext::remote_rows): only its shape.
  return std::make_shared<const Dataset>(
      Dataset::Dense(Eigen::MatrixXd(0, live.dimension), Eigen::VectorXd(0),
                     live.label_kind, live.num_classes));
}

absl::StatusOr<std::shared_ptr<const Dataset>> JobManager::DryRunRows(
    const PreparedJob& p) {
  if (p.dummy.has_value()) return LoadRows(*p.dummy);
  // The dataset must still be live, as for a real job.
  ASSIGN_OR_RETURN(storage::DatasetRecord live,
                   db_->datasets().Get(p.dataset.name));
  if (live.id != p.dataset.id || live.deleted_at_micros != 0) {
    return absl::NotFoundError(
        absl::StrCat("dataset \"", p.dataset.name, "\" not found"));
  }
  ASSIGN_OR_RETURN(auto rng, noise::NewSecureRandom());
  const SyntheticSchema schema = SyntheticSchema::Of(p.dataset);
  if (p.dataset.problem_json.empty()) {
    ASSIGN_OR_RETURN(Dataset data, SyntheticDataset::Generate(schema, *rng));
    return std::make_shared<const Dataset>(std::move(data));
  }
  // Max-affine problems: the public slopes (read without the offsets).
  ASSIGN_OR_RETURN(Eigen::MatrixXd slopes,
                   db_->datasets().LoadPublicSlopes(p.dataset.name));
  ASSIGN_OR_RETURN(Dataset data, SyntheticDataset::GenerateMaxAffine(
                                     schema, std::move(slopes), *rng));
  return std::make_shared<const Dataset>(std::move(data));
}

absl::StatusOr<v1::Job> JobManager::ToProto(const JobRecord& r) {
  v1::Job j;
  j.set_id(r.id);
  if (!j.mutable_spec()->ParseFromString(r.spec) ||
      !j.mutable_calibration()->ParseFromString(r.calibration) ||
      !j.mutable_cost()->ParseFromString(r.cost) ||
      !j.mutable_evaluation()->ParseFromString(r.evaluation)) {
    return absl::DataLossError(
        absl::StrCat("job ", r.id, " record is corrupt"));
  }
  j.set_state(ToProtoState(r.state));
  j.set_message(r.message);
  j.set_steps_done(r.steps_done);
  j.set_steps_total(r.steps_total);
  j.set_principal(r.principal);
  if (j.spec().dry_run()) {
    j.set_synthetic_data(true);
    j.set_synthetic_source(r.synthetic_source);
  }
  if (r.state == JobState::kPendingApproval || r.state == JobState::kRejected) {
    // Priced, but charged only once approved.
    j.mutable_cost()->set_charged(false);
  }
  if (r.state == JobState::kPendingApproval) {
    *j.mutable_approval_expires_at() =
        ToTimestamp(r.approval_expires_at_micros);
  }
  if (r.created_at_micros > 0)
    *j.mutable_created_at() = ToTimestamp(r.created_at_micros);
  if (r.started_at_micros > 0)
    *j.mutable_started_at() = ToTimestamp(r.started_at_micros);
  if (r.finished_at_micros > 0) {
    *j.mutable_finished_at() = ToTimestamp(r.finished_at_micros);
  }
  return j;
}

absl::StatusOr<v1::Job> JobManager::Get(const std::string& id) {
  ASSIGN_OR_RETURN(JobRecord r, db_->jobs().Get(id));
  if (r.state == JobState::kPendingApproval &&
      absl::ToUnixMicros(absl::Now()) >= r.approval_expires_at_micros) {
    ExpirePendingJobs();
    ASSIGN_OR_RETURN(r, db_->jobs().Get(id));
  }
  ASSIGN_OR_RETURN(v1::Job j, ToProto(r));
  return j;
}

absl::StatusOr<v1::ListJobsResponse> JobManager::List(
    const std::string& dataset) {
  storage::JobFilter filter;
  filter.dataset = dataset;
  ASSIGN_OR_RETURN(auto records, db_->jobs().List(filter));
  v1::ListJobsResponse out;
  for (const auto& r : records) {
    ASSIGN_OR_RETURN(*out.add_jobs(), ToProto(r));
  }
  return out;
}

absl::StatusOr<v1::ListJobsResponse> JobManager::ListPage(
    const v1::ListJobsRequest& request, const std::string& principal) {
  ASSIGN_OR_RETURN(storage::JobFilter filter,
                   JobPageFilter(request, principal));
  ASSIGN_OR_RETURN(std::vector<JobRecord> records, db_->jobs().List(filter));
  const size_t page = static_cast<size_t>(JobPageSize(request));
  v1::ListJobsResponse out;
  for (size_t i = 0; i < records.size() && i < page; ++i) {
    ASSIGN_OR_RETURN(*out.add_jobs(), ToProto(records[i]));
  }
  if (records.size() > page) {
    out.set_next_page_token(NextJobPageToken(request, records[page - 1]));
  }
  return out;
}

absl::StatusOr<v1::Job> JobManager::Cancel(const std::string& id) {
  ASSIGN_OR_RETURN(JobRecord r, db_->jobs().Get(id));
  if (r.state == JobState::kPendingApproval) {
    // Only if it still waits: an approval may have charged and queued it
    // since it was read, and then it is cancelled as a queued job.
    const absl::Status moved = db_->jobs().UpdateStateFrom(
        id, JobState::kPendingApproval, JobState::kCancelled,
        "cancelled while waiting for approval; nothing was charged");
    if (moved.ok()) {
      PublishJob(id);
      return Get(id);
    }
    if (!absl::IsAborted(moved)) return moved;
    ASSIGN_OR_RETURN(r, db_->jobs().Get(id));
  }
  if (r.state != JobState::kQueued && r.state != JobState::kRunning) {
    return absl::FailedPreconditionError(
        absl::StrCat("job ", id, " has already ended"));
  }
  runner_->Cancel(id);
  return Get(id);
}

absl::StatusOr<int64_t> JobManager::CancelDatasetJobs(
    const std::string& dataset, absl::Duration wait) {
  ASSIGN_OR_RETURN(v1::ListJobsResponse jobs, List(dataset));
  std::vector<std::string> ids;
  for (const v1::Job& j : jobs.jobs()) {
    if (j.state() == v1::JOB_STATE_PENDING_APPROVAL) {
      // Never charged: it ends with its dataset (unless an approval queued
      // it since the list was read: then it is cancelled as a queued job).
      const absl::Status moved = db_->jobs().UpdateStateFrom(
          j.id(), JobState::kPendingApproval, JobState::kCancelled,
          "its dataset was deleted while it waited for approval; nothing "
          "was charged");
      if (moved.ok() || !absl::IsAborted(moved)) {
        if (moved.ok()) PublishJob(j.id());
        continue;
      }
      runner_->Cancel(j.id());
      ids.push_back(j.id());
      continue;
    }
    if (j.state() == v1::JOB_STATE_QUEUED ||
        j.state() == v1::JOB_STATE_RUNNING) {
      runner_->Cancel(j.id());
      ids.push_back(j.id());
    }
  }
  const absl::Time deadline = absl::Now() + wait;
  for (const std::string& id : ids) {
    for (;;) {
      ASSIGN_OR_RETURN(JobRecord r, db_->jobs().Get(id));
      if (r.state != JobState::kQueued && r.state != JobState::kRunning) break;
      if (absl::Now() > deadline) {
        return absl::DeadlineExceededError(absl::StrCat(
            "job ", id, " did not stop in time; nothing was deleted, retry"));
      }
      absl::SleepFor(absl::Milliseconds(20));
    }
  }
  return static_cast<int64_t>(ids.size());
}

absl::StatusOr<v1::JobResult> JobManager::Result(const std::string& id,
                                                 int64_t trace_offset,
                                                 int64_t max_trace_points) {
  if (trace_offset < 0 || max_trace_points < 0) {
    return absl::InvalidArgumentError(
        "trace_offset and max_trace_points must be >= 0");
  }
  ASSIGN_OR_RETURN(JobRecord r, db_->jobs().Get(id));
  if (r.state != JobState::kSucceeded) {
    return absl::FailedPreconditionError(
        absl::StrCat("job ", id, " has no result (state ",
                     v1::JobState_Name(ToProtoState(r.state)), ")"));
  }
  v1::JobResult out;
  if (!out.ParseFromString(r.result)) {
    return absl::DataLossError(
        absl::StrCat("result of job ", id, " is corrupt"));
  }
  storage::JobStore::TracePageQuery query;
  query.offset = trace_offset;
  query.max_entries =
      max_trace_points == 0
          ? kMaxTracePointsPerReply
          : std::min<int64_t>(max_trace_points, kMaxTracePointsPerReply);
  query.max_bytes = kMaxTraceBytesPerReply;
  ASSIGN_OR_RETURN(storage::JobStore::TracePage page,
                   db_->jobs().ListTracePage(id, query));
  ASSIGN_OR_RETURN(std::vector<v1::TracePoint> points,
                   ParseTrace(id, std::move(page.entries)));
  for (v1::TracePoint& t : points) *out.add_trace() = std::move(t);
  out.set_trace_points_total(page.total);
  const int64_t next = trace_offset + out.trace_size();
  out.set_next_trace_offset(next < page.total ? next : 0);
  return out;
}

absl::StatusOr<std::vector<v1::TracePoint>> JobManager::TracePage(
    const std::string& id, int64_t after_step) {
  storage::JobStore::TracePageQuery query;
  query.after_step = after_step;
  query.max_entries = kMaxTracePointsPerReply;
  query.max_bytes = kMaxTraceBytesPerReply;
  ASSIGN_OR_RETURN(storage::JobStore::TracePage page,
                   db_->jobs().ListTracePage(id, query));
  return ParseTrace(id, std::move(page.entries));
}

absl::StatusOr<std::vector<v1::TracePoint>> JobManager::ParseTrace(
    const std::string& id, std::vector<storage::TraceEntry> entries) {
  std::vector<v1::TracePoint> out(entries.size());
  for (size_t i = 0; i < entries.size(); ++i) {
    if (!out[i].ParseFromString(entries[i].data)) {
      return absl::DataLossError(
          absl::StrCat("trace of job ", id, " is corrupt"));
    }
    entries[i].data.clear();
  }
  return out;
}

}  // namespace dpopt::server
