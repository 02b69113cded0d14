#include "server/job_admission.h"

#include <algorithm>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "core/common/status_macros.h"
#include "core/optim/mpi_pool/worker_pool.h"
#include "core/optim/objective.h"
#include "server/event_log.h"
#include "server/job_limits.h"
#include "server/synthetic_dataset.h"
#include "server/translation/registry.h"

namespace dpopt::server {
namespace {

using storage::JobState;

// Largest model (number of parameters) a job may train.
constexpr int64_t kMaxParameters = int64_t{1} << 26;
// Limits on what a trace may hold.
constexpr int64_t kMaxTracePoints = 10000;
constexpr int64_t kMaxTracedParameters = 100000;

}  // namespace

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

namespace {

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

}  // namespace

JobAdmission::JobAdmission(storage::Database* db, ExecutionEnvironment env,
                           const Limits& limits)
    : db_(db), env_(env), limits_(limits) {}

absl::StatusOr<PreparedJob> JobAdmission::Prepare(
    const v1::JobSpec& spec) const {
  ASSIGN_OR_RETURN(PreparedJob p, PrepareRealJob(spec));
  if (!spec.dry_run()) return p;
  // Everything above is the real job's (validation, calibration, the work
  // and trace bounds, the price). A dry run charges none of it.
  p.dry_run = true;
  p.cost.set_charged(false);
  if (!p.dataset.is_public) {
    ASSIGN_OR_RETURN(p.dummy, db_->datasets().FindDummyFor(p.dataset.id));
  }
  if (p.dummy.has_value()) {
    RETURN_IF_ERROR(CheckDummyFits(p.dataset, *p.dummy));
    p.synthetic_source = absl::StrCat("public dummy dataset ", p.dummy->name);
  } else {
    p.synthetic_source = absl::StrCat(
        "generated from the public schema of dataset ", p.dataset.name,
        p.dataset.problem_json.empty()
            ? ""
            : " (its public slopes and polytope, synthetic offsets)");
  }
  return p;
}

absl::StatusOr<PreparedJob> JobAdmission::PrepareRealJob(
    const v1::JobSpec& spec) const {
  PreparedJob p;
  p.spec = spec;
  if (spec.dataset().empty()) {
    return absl::InvalidArgumentError("dataset is required");
  }
  ASSIGN_OR_RETURN(p.dataset, db_->datasets().Get(spec.dataset()));
  ASSIGN_OR_RETURN(p.job, TranslateJobSpec(spec, p.dataset.is_public,
                                           p.dataset.num_classes, env_));
  RETURN_IF_ERROR(CheckDatasetKind(p.job, p.dataset));
  if (!v1::Execution_IsValid(spec.execution())) {
    return absl::InvalidArgumentError(
        "execution must be EXECUTION_UNSPECIFIED, EXECUTION_IN_PROCESS or "
        "EXECUTION_MPI_POOL");
  }
  // A dry run ignores the execution field: it runs in this process on
  // synthetic rows or the public dummy's (docs/user-guide.md, "Dry runs").
  if (spec.execution() == v1::EXECUTION_MPI_POOL && !spec.dry_run()) {
    RETURN_IF_ERROR(CheckWorkerPool(p));
  }
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
  if (p.calibration.work_units > limits_.max_job_work) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: the public bound on this job's work, %.4g row-coordinate "
        "operations, exceeds this server's limit of %.4g (--max-job-work); "
        "reduce the steps, the iterations or the problem size",
        p.job.algorithm_name, p.calibration.work_units, limits_.max_job_work));
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
  // The stored trace is bounded from public values too: a point every
  // trace_every steps plus the first and the last step, each with its
  // iterate's values when trace_iterates.
  p.trace_points_bound = p.calibration.steps / p.job.trace_every + 2;
  const int64_t traced_values =
      spec.trace_iterates() ? outputs * p.dataset.dimension : 0;
  p.trace_bytes_bound = TraceBytesBound(p.trace_points_bound, traced_values);
  if (limits_.max_trace_bytes_per_job > 0 &&
      p.trace_bytes_bound > limits_.max_trace_bytes_per_job) {
    return absl::InvalidArgumentError(absl::StrCat(
        p.job.algorithm_name, ": the trace of this job could take ",
        p.trace_bytes_bound, " bytes (", p.trace_points_bound,
        " points of at most ", kTracePointOverheadBytes, " + ",
        kTraceBytesPerValue, " x ", traced_values,
        " bytes), over this server's limit of ",
        limits_.max_trace_bytes_per_job,
        " bytes per job (--max-trace-bytes-per-job); raise trace_every",
        traced_values > 0 ? " or turn trace_iterates off" : ""));
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
  if (p.calibration.guarantee_epsilon > 0) {
    p.cost.set_guarantee_epsilon(p.calibration.guarantee_epsilon);
  }
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

absl::Status JobAdmission::CheckWorkerPool(PreparedJob& p) const {
  if (env_.pool == nullptr) {
    return absl::FailedPreconditionError(
        "execution EXECUTION_MPI_POOL: this server has no worker pool (it "
        "was started without --mpi-pool); nothing was charged");
  }
  if (!p.job.traits.runs_on_worker_pool) {
    std::vector<std::string> pool_types;
    for (const JobFamily* family : JobFamilies()) {
      for (AlgorithmCase c : family->cases) {
        v1::AlgorithmSpec probe;
        // The traits of case c: a spec with that oneof member set.
        const google::protobuf::FieldDescriptor* field =
            v1::AlgorithmSpec::descriptor()->FindFieldByNumber(c);
        if (field == nullptr) continue;
        probe.GetReflection()->MutableMessage(&probe, field);
        if (family->traits(probe).runs_on_worker_pool) {
          pool_types.push_back(JobTypeName(c));
        }
      }
    }
    return absl::FailedPreconditionError(absl::StrCat(
        "execution EXECUTION_MPI_POOL: ", p.job.algorithm_name,
        " cannot read its rows on the worker pool (job types that can: ",
        absl::StrJoin(pool_types, ", "), "); nothing was charged"));
  }
  ASSIGN_OR_RETURN(std::optional<storage::DatasetPlacement> placement,
                   db_->datasets().FindPlacement(p.dataset.id));
  if (!placement.has_value()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "execution EXECUTION_MPI_POOL: dataset ", p.dataset.name,
        " is not placed on the worker pool (a curator places it with `dpopt "
        "dataset place ",
        p.dataset.name, "`); nothing was charged"));
  }
  const int ranks = env_.pool->options().ranks;
  if (placement->ranks != ranks) {
    return absl::FailedPreconditionError(absl::StrCat(
        "execution EXECUTION_MPI_POOL: dataset ", p.dataset.name,
        " was placed on ", placement->ranks, " ranks but the worker pool has ",
        ranks, " now (a curator places it again with `dpopt dataset place ",
        p.dataset.name, "`); nothing was charged"));
  }
  p.pool_dataset_id = DatasetManager::PoolDatasetId(p.dataset);
  p.pool_ranks = ranks;
  return absl::OkStatus();
}

absl::StatusOr<v1::JobEstimate> JobAdmission::Estimate(
    const v1::JobSpec& spec, const std::string& principal) const {
  // A dry run is estimated as the real job (what it would cost, whether it
  // would be admitted now); the dry run itself charges nothing.
  ASSIGN_OR_RETURN(PreparedJob p, PrepareRealJob(spec));
  v1::JobEstimate est;
  if (spec.dry_run()) {
    ASSIGN_OR_RETURN(est, EstimatePrepared(p, principal));
    est.set_message(absl::StrCat(
        "dry run: runs on synthetic data and charges nothing; the cost "
        "shown is the real job's",
        est.message().empty() ? "" : ". The real job: ", est.message()));
    return est;
  }
  return EstimatePrepared(p, principal);
}

absl::StatusOr<v1::JobEstimate> JobAdmission::EstimatePrepared(
    const PreparedJob& p, const std::string& principal) const {
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

storage::ChargeRequest JobAdmission::ChargeOf(const PreparedJob& p) const {
  storage::ChargeRequest charge;
  charge.dataset = p.dataset.name;
  charge.event_json = p.cost.event_json();
  charge.accountant = p.priced.accountant;
  charge.cost_blob = p.priced.cost_blob;
  charge.epsilon = p.priced.epsilon;
  charge.delta = p.priced.delta;
  charge.principal = p.principal;
  charge.note = absl::StrCat(p.job.algorithm_name, " job");
  charge.require_grant = p.requires_grant;
  return charge;
}

JobAdmission::Outcome JobAdmission::AdvanceMark(
    int64_t seq, const std::string& job_id) const {
  // The ledger's high-water mark (storage/ledger_mark.h) moves AFTER the
  // charge commits and BEFORE the job may read a row. A crash between the
  // two leaves the mark behind a ledger that holds the charge, which the
  // next start accepts and catches up; the opposite order could leave the
  // mark ahead of a ledger that never got the charge, and the server would
  // refuse its own database. Since nothing is released before this point,
  // every charge behind a released result is covered by the mark, so a
  // restored backup that lost it is refused.
  storage::LedgerMark* mark = db_->ledger_mark();
  if (mark == nullptr) return Outcome::kQueued;
  absl::Status marked = mark->Advance(seq);
  if (marked.ok()) return Outcome::kQueued;
  // Charged (durably) but not run: the job fails, the charge stays.
  (void)db_->jobs().UpdateState(
      job_id, JobState::kFailed,
      "the server could not record the ledger's high-water mark; the "
      "job did not run and its privacy cost stays charged");
  LogFields fields;
  fields.job = job_id;
  fields.status = absl::StatusCodeToString(marked.code());
  LogEvent(LogLevel::kError, "job_not_started",
           absl::StrCat("job ", job_id, " not started: ", marked.message()),
           fields);
  return Outcome::kChargedNotStarted;
}

absl::StatusOr<JobAdmission::Outcome> JobAdmission::ChargePending(
    const PreparedJob& p, const std::string& job_id) const {
  if (!p.cost.charged() || p.dry_run) {
    return absl::FailedPreconditionError(
        "only a charged job waits for approval");
  }
  ASSIGN_OR_RETURN(storage::LedgerEntry entry,
                   db_->ledger().ChargeAndQueuePendingJob(
                       ChargeOf(p), job_id, AdmitNext(p.priced.cost_blob)));
  return AdvanceMark(entry.seq, job_id);
}

absl::StatusOr<JobAdmission::Outcome> JobAdmission::ChargeAndCreate(
    const PreparedJob& p, const storage::JobRecord& record) const {
  // A dry run never reaches the ledger (Prepare cleared cost.charged; the
  // flag is checked again here so no later change can charge one).
  if (p.cost.charged() && !p.dry_run) {
    ASSIGN_OR_RETURN(storage::LedgerEntry entry,
                     db_->ledger().ChargeAndCreateJob(
                         ChargeOf(p), record, AdmitNext(p.priced.cost_blob)));
    return AdvanceMark(entry.seq, record.id);
  } else {
    RETURN_IF_ERROR(db_->jobs().Create(record).status());
  }
  return Outcome::kQueued;
}

}  // namespace dpopt::server
