#include "server/job_manager.h"

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
#include "core/optim/distributed_dda/mpi_launcher.h"
#include "core/optim/objective.h"
#include "core/privacy/privacy_filter.h"
#include "server/event_log.h"
#include "server/job_listing.h"
#include "server/proto_util.h"
#include "server/spec_translation.h"
#include "server/translation/registry.h"

namespace dpopt::server {
namespace {

using storage::JobRecord;

// Largest model (number of parameters) a job may train.
constexpr int64_t kMaxParameters = int64_t{1} << 26;
// Limits on what a trace may hold.
constexpr int64_t kMaxTracePoints = 10000;
constexpr int64_t kMaxTracedParameters = 100000;
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

v1::Calibration CalibrationToProto(const optim::Calibration& c) {
  v1::Calibration out;
  out.set_noise_multiplier(c.noise_multiplier);
  out.set_noise_stddev(c.noise_stddev);
  out.set_steps(c.steps);
  out.set_sampling_rate(c.sampling_rate);
  out.set_expected_batch_size(c.expected_batch_size);
  out.set_clip_norm(c.clip_norm);
  out.set_work_units(c.work_units);
  for (const auto& n : c.notes) out.add_notes(n);
  return out;
}

// Whether a charge with cost blob `next` fits: the privacy filter built from
// `record` (the dataset's budget, or an analyst's cap: the ledger passes the
// dataset with its budget replaced by the cap) over `prior_costs`. Cost
// blobs do not depend on the epsilon budget, so the same blobs price both.
storage::AdmitFn AdmitNext(std::string next) {
  return [next = std::move(next)](
             const storage::DatasetRecord& record,
             const std::vector<std::string>& prior_costs) -> absl::Status {
    ASSIGN_OR_RETURN(privacy::BudgetConfig config,
                     DatasetManager::BudgetConfigOf(record));
    ASSIGN_OR_RETURN(std::unique_ptr<privacy::PrivacyFilter> filter,
                     privacy::PrivacyFilter::Create(config));
    return filter->Admit(prior_costs, next);
  };
}

// Max-affine problems and their job types belong together: no other job
// type is analysed under the l-infinity offset relation.
absl::Status CheckDatasetKind(const TranslatedJob& job,
                              const storage::DatasetRecord& dataset) {
  const DatasetKind kind = dataset.problem_json.empty()
                               ? DatasetKind::kExamples
                               : DatasetKind::kMaxAffine;
  if (job.traits.dataset_kind == kind) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "dataset ", dataset.name,
      kind == DatasetKind::kMaxAffine ? " is a max-affine problem; "
                                      : " is not a max-affine problem; ",
      job.algorithm_name,
      kind == DatasetKind::kMaxAffine ? " does not run on max-affine problems"
                                      : " runs only on max-affine problems"));
}

// Job failure messages must never carry private data: core errors are
// written without row values, and we keep only code and message.
std::string PublicFailure(const absl::Status& s) {
  return absl::StrCat(absl::StatusCodeToString(s.code()), ": ", s.message());
}

}  // namespace

// Everything a job needs that was decided before it was charged.
struct JobManager::Prepared {
  v1::JobSpec spec;
  // Who submitted it (for the log).
  std::string principal;
  TranslatedJob job;
  storage::DatasetRecord dataset;
  bool has_eval = false;
  storage::DatasetRecord eval_dataset;
  optim::Calibration calibration;
  v1::PrivacyCost cost;
  // Filled for private datasets only.
  std::unique_ptr<privacy::PrivacyFilter> filter;
  privacy::PricedCharge priced;
};

absl::Status JobManager::Options::Validate() const {
  if (workers < 1) return absl::InvalidArgumentError("workers must be >= 1");
  if (!(max_job_work >= 1 && max_job_work <= 1e18)) {
    return absl::InvalidArgumentError("max_job_work must be in [1, 1e18]");
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
  std::unique_ptr<JobManager> m(new JobManager(db, datasets, hub));
  m->options_ = options;
  // Start-up check: only the production worker (secure generators) may run
  // dp_dda's ranks.
  if (options.mpi.has_value()) {
    RETURN_IF_ERROR(
        optim::distributed_dda::CheckProductionWorker(*options.mpi));
  }
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

absl::StatusOr<JobManager::Prepared> JobManager::Prepare(
    const v1::JobSpec& spec) {
  Prepared p;
  p.spec = spec;
  if (spec.dataset().empty()) {
    return absl::InvalidArgumentError("dataset is required");
  }
  ASSIGN_OR_RETURN(p.dataset, db_->datasets().Get(spec.dataset()));
  ExecutionEnvironment env;
  if (options_.mpi.has_value()) env.mpi = &*options_.mpi;
  ASSIGN_OR_RETURN(p.job, TranslateJobSpec(spec, p.dataset.is_public,
                                           p.dataset.num_classes, env));
  RETURN_IF_ERROR(CheckDatasetKind(p.job, p.dataset));
  if (p.job.traits.trains_model &&
      optim::RequiredLabelKind(p.job.model.loss) != p.dataset.label_kind) {
    return absl::InvalidArgumentError(
        absl::StrCat("model ", ProtoLossName(p.job.model.loss),
                     " does not fit the labels of dataset ", p.dataset.name));
  }
  // Refuse models too large for the server's memory before any allocation.
  const int64_t outputs = p.job.model.loss == optim::LossKind::kSoftmax
                              ? p.job.model.num_classes
                              : 1;
  if (p.dataset.dimension > kMaxParameters / std::max<int64_t>(outputs, 1)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the model would have ", outputs, " x ", p.dataset.dimension,
        " parameters; at most ", kMaxParameters, " are supported"));
  }
  if (spec.trace_iterates() &&
      outputs * p.dataset.dimension > kMaxTracedParameters) {
    return absl::InvalidArgumentError(
        absl::StrCat("trace_iterates is limited to models with at most ",
                     kMaxTracedParameters, " parameters"));
  }
  if (!spec.evaluate_on().empty() && !p.job.traits.trains_model) {
    return absl::InvalidArgumentError(absl::StrCat(
        p.job.algorithm_name, " releases ", p.job.traits.output_name,
        ", not a model of the dataset: evaluate_on is not supported"));
  }
  if (!spec.evaluate_on().empty()) {
    ASSIGN_OR_RETURN(p.eval_dataset, db_->datasets().Get(spec.evaluate_on()));
    if (!p.eval_dataset.is_public) {
      return absl::PermissionDeniedError(
          absl::StrCat("evaluate_on must name a public dataset; ",
                       spec.evaluate_on(), " is private"));
    }
    if (p.eval_dataset.dimension != p.dataset.dimension ||
        p.eval_dataset.label_kind != p.dataset.label_kind) {
      return absl::InvalidArgumentError(absl::StrCat(
          "evaluate_on dataset ", spec.evaluate_on(), " has dimension ",
          p.eval_dataset.dimension, ", training dataset ", p.dataset.name,
          " has ", p.dataset.dimension, " (or their label types differ)"));
    }
    p.has_eval = true;
  }
  optim::PrivacyTarget target = p.job.target;
  // A DP algorithm on a public dataset still runs with its noise, but the
  // cost is not charged anywhere.
  absl::StatusOr<optim::Calibration> calibration = p.job.algorithm->Calibrate(
      DatasetManager::PublicInfoOf(p.dataset), target);
  if (absl::IsUnimplemented(calibration.status()) &&
      target.accountant == privacy::AccountantKind::kPld) {
    return absl::UnimplementedError(absl::StrCat(
        calibration.status().message(),
        ". The PLD accountant cannot price this algorithm's mechanisms; use "
        "\"accountant\": \"ACCOUNTANT_RDP\""));
  }
  if (!calibration.ok()) return calibration.status();
  p.calibration = *std::move(calibration);
  // Every job's work is bounded from public values before anything is
  // charged (docs/architecture.md, invariant "public work bounds").
  if (!(p.calibration.work_units > 0)) {
    return absl::InternalError(absl::StrCat(
        p.job.algorithm_name, " did not bound its work; refused (a defect)"));
  }
  if (p.calibration.work_units > options_.max_job_work) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: the public bound on this job's work, %.4g row-coordinate "
        "operations, exceeds this server's limit of %.4g (--max-job-work); "
        "reduce the steps, the iterations or the problem size",
        p.job.algorithm_name, p.calibration.work_units, options_.max_job_work));
  }
  if (spec.trace_every() == 0) {
    // Default: about 100 trace points over the planned steps.
    p.job.trace_every = DefaultTraceEvery(p.calibration.steps);
  }
  if (p.calibration.steps / p.job.trace_every > kMaxTracePoints) {
    return absl::InvalidArgumentError(absl::StrCat(
        "trace_every = ", p.job.trace_every, " would record more than ",
        kMaxTracePoints, " trace points for ", p.calibration.steps,
        " steps; choose trace_every >= ",
        (p.calibration.steps + kMaxTracePoints - 1) / kMaxTracePoints));
  }
  p.cost.set_event_json(p.calibration.event.ToJson());
  if (target.non_private) {
    p.cost.set_accountant("none");
    p.cost.set_charged(false);
    return p;
  }
  ASSIGN_OR_RETURN(auto eps,
                   privacy::ComputeEpsilon(p.calibration.event, target.delta,
                                           target.accountant));
  p.cost.set_epsilon(eps.epsilon);
  p.cost.set_delta(target.delta);
  p.cost.set_accountant(privacy::AccountantName(target.accountant));
  if (p.dataset.is_public) {
    p.cost.set_charged(false);
    return p;
  }
  ASSIGN_OR_RETURN(auto config, DatasetManager::BudgetConfigOf(p.dataset));
  ASSIGN_OR_RETURN(p.filter, privacy::PrivacyFilter::Create(config));
  ASSIGN_OR_RETURN(p.priced,
                   p.filter->Price(p.calibration.event, target.accountant,
                                   p.calibration.relation));
  // The ledger's view of the cost: at the dataset's delta.
  p.cost.set_epsilon(p.priced.epsilon);
  p.cost.set_delta(p.priced.delta);
  p.cost.set_accountant(p.priced.accountant);
  p.cost.set_charged(true);
  return p;
}

absl::StatusOr<v1::JobEstimate> JobManager::Estimate(
    const v1::JobSpec& spec, const std::string& principal) {
  ASSIGN_OR_RETURN(Prepared p, Prepare(spec));
  v1::JobEstimate est;
  *est.mutable_calibration() = CalibrationToProto(p.calibration);
  *est.mutable_cost() = p.cost;
  if (!p.cost.charged()) {
    est.set_admissible(true);
    est.set_message(
        p.dataset.is_public ? "public dataset: the job is not charged" : "");
    return est;
  }
  ASSIGN_OR_RETURN(storage::LedgerTotals totals,
                   db_->ledger().Totals(p.dataset.name, principal));
  ASSIGN_OR_RETURN(
      *est.mutable_budget_before(),
      DatasetManager::BudgetOf(totals.dataset, totals.charges, totals.costs));
  ASSIGN_OR_RETURN(std::optional<storage::GrantRecord> grant,
                   db_->access().FindGrant(principal, p.dataset.name));
  absl::Status admit = storage::ApplyAdmissionRule(
      AdmitNext(p.priced.cost_blob), totals.dataset, totals, grant, principal);
  if (admit.ok()) {
    est.set_admissible(true);
    std::vector<std::string> blobs = totals.costs;
    blobs.push_back(p.priced.cost_blob);
    ASSIGN_OR_RETURN(auto after, p.filter->View(blobs));
    *est.mutable_budget_after() = est.budget_before();
    est.mutable_budget_after()->set_epsilon_spent(after.epsilon_spent);
    est.mutable_budget_after()->set_epsilon_remaining(after.epsilon_remaining);
    est.mutable_budget_after()->set_charges(est.budget_before().charges() + 1);
  } else if (admit.code() == absl::StatusCode::kResourceExhausted) {
    est.set_admissible(false);
    est.set_message(std::string(admit.message()));
  } else {
    return admit;
  }
  return est;
}

absl::StatusOr<v1::Job> JobManager::Submit(
    const v1::JobSpec& spec, const std::string& principal,
    const std::function<void(const std::string&)>& on_id) {
  absl::StatusOr<v1::Job> job = Admit(spec, principal, on_id);
  LogFields fields;
  fields.principal = principal;
  fields.dataset = spec.dataset().substr(0, 128);
  if (job.ok()) {
    fields.job = job->id();
    fields.status = v1::JobState_Name(job->state());
    LogEvent(
        LogLevel::kInfo, "job_admitted",
        absl::StrCat("job ", job->id(), " admitted (",
                     job->cost().charged() ? "charged" : "not charged", ")"),
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

absl::StatusOr<v1::Job> JobManager::Admit(
    const v1::JobSpec& spec, const std::string& principal,
    const std::function<void(const std::string&)>& on_id) {
  if (draining_.load()) {
    return absl::UnavailableError(
        "the server is shutting down and admits no new jobs; nothing was "
        "charged. Retry when it is back");
  }
  ASSIGN_OR_RETURN(Prepared prepared, Prepare(spec));
  prepared.principal = principal;
  auto p = std::make_shared<Prepared>(std::move(prepared));
  // The principal's job slot and a queue slot first: neither limit may
  // cost budget. The slot is released when the job's work is dropped
  // (after it ran, or unrun at shutdown) or on any return before that.
  ASSIGN_OR_RETURN(std::shared_ptr<ConcurrencyLimiter::Slot> slot,
                   active_jobs_->Acquire(principal));
  ASSIGN_OR_RETURN(jobs::JobRunner::Ticket ticket, runner_->Reserve());

  JobRecord record;
  record.id = NewJobId();
  if (on_id) on_id(record.id);
  record.dataset = p->dataset.name;
  record.principal = principal;
  record.state = JobState::kQueued;
  record.spec = p->spec.SerializeAsString();
  record.calibration = CalibrationToProto(p->calibration).SerializeAsString();
  record.cost = p->cost.SerializeAsString();
  record.steps_total = p->calibration.steps;

  if (p->cost.charged()) {
    storage::ChargeRequest charge;
    charge.dataset = p->dataset.name;
    charge.event_json = p->cost.event_json();
    charge.accountant = p->priced.accountant;
    charge.cost_blob = p->priced.cost_blob;
    charge.epsilon = p->priced.epsilon;
    charge.delta = p->priced.delta;
    charge.principal = principal;
    charge.note = absl::StrCat(p->job.algorithm_name, " job");
    ASSIGN_OR_RETURN(storage::LedgerEntry entry,
                     db_->ledger().ChargeAndCreateJob(
                         charge, record, AdmitNext(p->priced.cost_blob)));
    // The ledger's high-water mark (storage/ledger_mark.h) moves AFTER the
    // charge commits and BEFORE the job may read a row. A crash between the
    // two leaves the mark behind a ledger that holds the charge, which the
    // next start accepts and catches up; the opposite order could leave the
    // mark ahead of a ledger that never got the charge, and the server would
    // refuse its own database. Since nothing is released before this point,
    // every charge behind a released result is covered by the mark, so a
    // restored backup that lost it is refused.
    if (storage::LedgerMark* mark = db_->ledger_mark(); mark != nullptr) {
      absl::Status marked = mark->Advance(entry.seq);
      if (!marked.ok()) {
        // Charged (durably) but not run: the job fails, the charge stays.
        (void)db_->jobs().UpdateState(
            record.id, JobState::kFailed,
            "the server could not record the ledger's high-water mark; the "
            "job did not run and its privacy cost stays charged");
        LogFields fields;
        fields.job = record.id;
        fields.status = absl::StatusCodeToString(marked.code());
        LogEvent(
            LogLevel::kError, "job_not_started",
            absl::StrCat("job ", record.id, " not started: ", marked.message()),
            fields);
        return Get(record.id);
      }
    }
  } else {
    RETURN_IF_ERROR(db_->jobs().Create(record).status());
  }
  // Durable from here on. The worker loads private rows only after this.
  const std::string id = record.id;
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
        "the server is shutting down; its privacy cost stays charged");
    return queued;
  }
  return Get(id);
}

// Records privatized trace points (persisted, streamed to watchers) and
// answers the algorithms' stop questions from the job's cancellation token
// (set by Cancel, a dataset deletion and server shutdown). Called only
// through optim::StepReporter.
class JobManager::TraceRecorder : public optim::IterationCallback {
 public:
  TraceRecorder(JobManager* m, const std::string& job_id,
                const Prepared& prepared, const optim::Objective* objective,
                const Dataset* eval, const jobs::CancellationToken& token)
      : m_(m),
        job_id_(job_id),
        prepared_(prepared),
        objective_(objective),
        eval_(eval),
        token_(token) {}

  bool StopRequested() override { return token_.cancelled(); }

  bool OnIteration(const optim::IterationSummary& s) override {
    if (token_.cancelled()) return false;
    const int64_t every = prepared_.job.trace_every;
    if (s.step % every == 0 || s.step == s.total_steps || s.step == 1) {
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
      // Persistence failures of the trace do not stop the job; the final
      // state records them if the job cannot complete.
      (void)m_->db_->jobs().RecordProgress(
          job_id_, s.step,
          {storage::TraceEntry{s.step, t.SerializeAsString()}});
      v1::JobEvent ev;
      *ev.mutable_trace() = t;
      m_->hub_->Publish(job_id_, ev);
    }
    return !token_.cancelled();
  }

 private:
  JobManager* m_;
  const std::string& job_id_;
  const Prepared& prepared_;
  const optim::Objective* objective_;
  const Dataset* eval_;
  const jobs::CancellationToken& token_;
};

void JobManager::PublishJob(const std::string& job_id) {
  auto job = Get(job_id);
  if (!job.ok()) return;
  v1::JobEvent ev;
  *ev.mutable_job() = *job;
  hub_->Publish(job_id, ev);
}

void JobManager::Execute(const std::string& job_id,
                         std::shared_ptr<Prepared> prepared,
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
            ? "cancelled; its privacy cost stays charged"
            : PublicFailure(s));
  }
  PublishJob(job_id);
  active_.fetch_sub(1);
}

absl::Status JobManager::RunJob(const std::string& job_id, const Prepared& p,
                                const jobs::CancellationToken& token) {
  if (token.cancelled()) return absl::CancelledError("cancelled");
  RETURN_IF_ERROR(db_->jobs().UpdateState(job_id, JobState::kRunning));
  PublishJob(job_id);

  ASSIGN_OR_RETURN(std::shared_ptr<const Dataset> train_rows,
                   LoadRows(p.dataset));
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
  ASSIGN_OR_RETURN(optim::SolveResult result,
                   p.job.algorithm->Run(train, p.calibration, context));
  if (result.cancelled || token.cancelled()) {
    return absl::CancelledError("cancelled");
  }

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
  v1::Evaluation evaluation;
  if (eval != nullptr) {
    evaluation.set_dataset(p.eval_dataset.name);
    evaluation.set_rows(eval->rows());
    evaluation.set_loss(objective->Loss(*eval, result.model.weights));
    evaluation.set_accuracy(objective->Accuracy(*eval, result.model.weights));
    *out.mutable_evaluation() = evaluation;
  }
  RETURN_IF_ERROR(db_->jobs().UpdateProgress(job_id, result.steps_done));
  return db_->jobs().SetResult(job_id, out.SerializeAsString(),
                               evaluation.SerializeAsString());
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
  ASSIGN_OR_RETURN(v1::Job j, ToProto(r));
  return j;
}

absl::StatusOr<v1::ListJobsResponse> JobManager::List(
    const std::string& dataset) {
  ASSIGN_OR_RETURN(auto records, db_->jobs().List(storage::JobFilter{
                                     dataset, "", std::nullopt}));
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

absl::StatusOr<v1::JobResult> JobManager::Result(const std::string& id) {
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
  ASSIGN_OR_RETURN(std::vector<v1::TracePoint> trace, Trace(id));
  for (v1::TracePoint& t : trace) *out.add_trace() = std::move(t);
  return out;
}

absl::StatusOr<std::vector<v1::TracePoint>> JobManager::Trace(
    const std::string& id) {
  ASSIGN_OR_RETURN(auto trace, db_->jobs().ListTrace(id));
  std::vector<v1::TracePoint> out(trace.size());
  for (size_t i = 0; i < trace.size(); ++i) {
    if (!out[i].ParseFromString(trace[i].data)) {
      return absl::DataLossError(
          absl::StrCat("trace of job ", id, " is corrupt"));
    }
  }
  return out;
}

}  // namespace dpopt::server
