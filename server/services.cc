#include "server/services.h"

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "core/common/status_macros.h"
#include "grpcpp/alarm.h"
#include "server/proto_util.h"
#include "server/request_limits.h"
#include "server/status_util.h"

namespace dpopt::server {
namespace {

template <typename T>
absl::Status Assign(absl::StatusOr<T> result, T* response) {
  if (!result.ok()) return result.status();
  *response = *std::move(result);
  return absl::OkStatus();
}

bool Terminal(v1::JobState s) {
  return s == v1::JOB_STATE_SUCCEEDED || s == v1::JOB_STATE_FAILED ||
         s == v1::JOB_STATE_CANCELLED || s == v1::JOB_STATE_REJECTED;
}

// One RPC: authenticates the caller from its metadata on construction,
// checks the request's field limits (server/request_limits.h) and audits
// the call: who (principal, token id, peer), what, which dataset/job/target,
// outcome. Tokens never reach the log.
//  * Unauthenticated: the record holds only the method, the outcome, the
//    peer address (at most kMaxPeerBytes) and the time; nothing from the
//    request. At most one such record per peer per minute
//    (AuthFailureLog), carrying the count of the ones not recorded.
//  * Authenticated, request over a limit: principal, token id, peer,
//    method and outcome; nothing from the request.
//  * A change: while the Call lives, a ScopedCommitHook writes the audit
//    record (code OK) inside the first write transaction this RPC commits,
//    so the change and its audit record commit together or not at all.
//    Handlers set dataset/job/target before the change (Submit reports
//    the new job id before its admission transaction commits).
//  * No change (reads, refusals, errors before any write): Done() appends
//    the record with the outcome code in its own transaction.
//  * An RPC that changed something and then failed gets both records: OK
//    for the committed change, then the error.
class Call {
 public:
  // `request` (may be null: streams check their messages with
  // CheckLimits) is checked against the field limits once the caller is
  // authenticated.
  Call(const CallEnv& env, const grpc::ServerContext* ctx, const char* method,
       const google::protobuf::Message* request,
       size_t max_request_bytes = kMaxRequestBytes)
      : env_(env),
        method_(method),
        peer_(ctx->peer()),
        hook_([this](storage::Connection& conn) -> absl::Status {
          if (hook_.commits() > 0) return absl::OkStatus();  // once per RPC
          return storage::AccessStore::AppendAuditLocked(
              conn, Record(absl::OkStatus()));
        }) {
    const auto& md = ctx->client_metadata();
    const auto it = md.find("authorization");
    if (it != md.end()) {
      authorization_.assign(it->second.data(), it->second.size());
    }
    absl::StatusOr<Caller> caller = env_.auth->Authenticate(authorization_);
    if (!caller.ok()) {
      admitted_ = caller.status();
      return;
    }
    caller_ = *std::move(caller);
    authenticated_ = true;
    if (request != nullptr) (void)CheckLimits(*request, max_request_bytes);
  }
  // OK once the caller is authenticated and the request within its limits.
  const absl::Status& admitted() const { return admitted_; }
  const Caller& caller() const { return caller_; }
  // For messages read after the call starts (ImportDataset's stream).
  absl::Status CheckLimits(const google::protobuf::Message& m,
                           size_t max_bytes) {
    absl::Status s = CheckRequestLimits(m, max_bytes);
    if (!s.ok()) {
      fields_valid_ = false;
      admitted_.Update(s);
    }
    return s;
  }
  // Streams: whether the caller's token still authenticates (not revoked
  // or expired since the call began). A storage hiccup during the check
  // (UNAVAILABLE) does not end the stream; the next check decides.
  bool StillAuthenticated() const {
    absl::StatusOr<Caller> again = env_.auth->Authenticate(authorization_);
    if (!again.ok()) return !absl::IsUnauthenticated(again.status());
    return again->token_id == caller_.token_id;
  }
  Call& dataset(std::string d) {
    dataset_ = std::move(d);
    return *this;
  }
  Call& job(std::string j) {
    job_ = std::move(j);
    return *this;
  }
  Call& target(std::string t) {
    target_ = std::move(t);
    return *this;
  }
  // A short, server-written note for the audit record (never request text).
  Call& detail(std::string d) {
    detail_ = std::move(d);
    return *this;
  }
  grpc::Status Done(const absl::Status& s) {
    if (!authenticated_) {
      std::optional<int64_t> suppressed =
          env_.auth_failures == nullptr
              ? std::optional<int64_t>(0)
              : env_.auth_failures->Admit(PeerHost(peer_));
      if (suppressed.has_value()) {
        storage::AuditRecord r = Record(s);
        if (*suppressed > 0) {
          r.detail = absl::StrCat(*suppressed,
                                  " earlier unauthenticated call(s) from this "
                                  "peer were not recorded");
        }
        (void)env_.access->AppendAudit(r);
      }
      return ToGrpcStatus(s);
    }
    if (hook_.commits() == 0 || !s.ok()) {
      // Best effort: nothing was changed by this RPC (or the change is
      // already audited and this records the later failure).
      (void)env_.access->AppendAudit(Record(s));
    }
    return ToGrpcStatus(s);
  }

 private:
  storage::AuditRecord Record(const absl::Status& s) const {
    storage::AuditRecord r;
    r.method = method_;
    r.code = static_cast<int>(s.code());
    r.peer = AuditedPeer(peer_);
    if (!authenticated_) return r;
    r.principal = caller_.name;
    r.token_id = caller_.token_id;
    if (!fields_valid_) return r;
    r.dataset = dataset_;
    r.job_id = job_;
    r.target = target_;
    r.detail = detail_;
    return r;
  }

  const CallEnv& env_;
  const char* method_;
  const std::string peer_;
  std::string authorization_;
  absl::Status admitted_;
  bool authenticated_ = false;
  bool fields_valid_ = true;
  Caller caller_;
  std::string dataset_, job_, target_, detail_;
  storage::ScopedCommitHook hook_;
};

// How often a stream re-checks its caller's token (revocation also cancels
// streams at once through the StreamRegistry; this catches expiry).
constexpr absl::Duration kStreamAuthRecheck = absl::Seconds(1);

// How long a dropped watcher's blocked write may wait for its client before
// the call is cancelled.
constexpr std::chrono::seconds kDropGrace(2);

// Ends a WatchJob call whose watcher the trace hub dropped while the
// handler is blocked writing to a client that does not read. Shared with
// the hub's callback and a timer, which hold it weakly; End() (when the
// handler returns) makes it inert, since the call's context dies then.
class DropWatch {
 public:
  explicit DropWatch(grpc::ServerContext* ctx) : ctx_(ctx) {}
  void Arm(const std::weak_ptr<DropWatch>& self) {
    absl::MutexLock lock(&mu_);
    if (ended_) return;
    alarm_.Set(std::chrono::system_clock::now() + kDropGrace,
               [self](bool fired) {
                 if (!fired) return;
                 if (auto d = self.lock()) d->Cancel();
               });
  }
  void End() {
    absl::MutexLock lock(&mu_);
    ended_ = true;
  }

 private:
  void Cancel() {
    absl::MutexLock lock(&mu_);
    if (!ended_) ctx_->TryCancel();
  }
  absl::Mutex mu_;
  grpc::ServerContext* ctx_ ABSL_GUARDED_BY(mu_);
  bool ended_ ABSL_GUARDED_BY(mu_) = false;
  grpc::Alarm alarm_;
};

v1::Role ToProtoRole(storage::Role r) {
  return r == storage::Role::kCurator ? v1::ROLE_CURATOR : v1::ROLE_ANALYST;
}

v1::Principal ToProto(const storage::PrincipalRecord& p) {
  v1::Principal out;
  out.set_name(p.name);
  out.set_role(ToProtoRole(p.role));
  *out.mutable_created_at() = ToTimestamp(p.created_at_micros);
  out.set_revoked(p.revoked_at_micros != 0);
  v1::PrincipalLimits* l = out.mutable_limits();
  if (p.limits.max_active_jobs)
    l->set_max_active_jobs(*p.limits.max_active_jobs);
  if (p.limits.max_estimates_per_second) {
    l->set_max_estimates_per_second(*p.limits.max_estimates_per_second);
  }
  if (p.limits.max_watch_streams) {
    l->set_max_watch_streams(*p.limits.max_watch_streams);
  }
  return out;
}

v1::TokenInfo ToProto(const storage::TokenRecord& t) {
  v1::TokenInfo out;
  out.set_id(t.id);
  out.set_principal(t.principal);
  *out.mutable_created_at() = ToTimestamp(t.created_at_micros);
  if (t.expires_at_micros != 0) {
    *out.mutable_expires_at() = ToTimestamp(t.expires_at_micros);
  }
  out.set_revoked(t.revoked_at_micros != 0);
  out.set_label(t.label);
  return out;
}

v1::Grant ToProto(const storage::GrantRecord& g) {
  v1::Grant out;
  out.set_principal(g.principal);
  out.set_dataset(g.dataset);
  out.set_epsilon_cap(g.epsilon_cap);
  *out.mutable_created_at() = ToTimestamp(g.created_at_micros);
  out.set_approval_above_epsilon(g.approval_above_epsilon);
  out.set_approval_timeout_seconds(
      g.approval_above_epsilon > 0
          ? (g.approval_timeout_seconds > 0
                 ? g.approval_timeout_seconds
                 : storage::kDefaultApprovalTimeoutSeconds)
          : 0);
  return out;
}

// Analysts may refer only to datasets they can see: the training dataset and
// the evaluation dataset of a spec.
absl::Status CheckSpecVisible(const Authenticator& auth, const Caller& caller,
                              const v1::JobSpec& spec) {
  if (!spec.dataset().empty()) {
    RETURN_IF_ERROR(auth.CheckDatasetVisible(caller, spec.dataset()));
  }
  if (!spec.evaluate_on().empty()) {
    RETURN_IF_ERROR(auth.CheckDatasetVisible(caller, spec.evaluate_on()));
  }
  return absl::OkStatus();
}

// The import stream after authentication: header, chunks, Finish. Counts
// the bytes received into `bytes`.
absl::StatusOr<v1::DatasetInfo> ReceiveImport(
    Call& call, DatasetManager& datasets, grpc::ServerContext* ctx,
    grpc::ServerReader<v1::ImportDatasetRequest>* reader, int64_t* bytes) {
  v1::ImportDatasetRequest req;
  if (!reader->Read(&req) || !req.has_header()) {
    return absl::InvalidArgumentError(
        "the first ImportDataset message must be the header");
  }
  // The header's fields have the usual limits; the message as a whole is
  // bounded by the server's receive limit.
  RETURN_IF_ERROR(call.CheckLimits(req.header(), 0));
  const v1::ImportHeader header = req.header();
  call.dataset(header.name());
  // Chunks are parsed and stored as they arrive (memory bounded by one
  // block); the pending import is discarded on any return before Finish.
  ASSIGN_OR_RETURN(std::unique_ptr<DatasetManager::PendingImport> import,
                   datasets.BeginImport(header));
  absl::Time last_auth = absl::Now();
  while (reader->Read(&req)) {
    if (req.has_header()) {
      return absl::InvalidArgumentError(
          "only the first message may carry a header");
    }
    if (absl::Now() - last_auth > kStreamAuthRecheck) {
      last_auth = absl::Now();
      if (!call.StillAuthenticated()) {
        return absl::UnauthenticatedError(
            "the token was revoked or expired during the import; nothing "
            "imported");
      }
    }
    *bytes += static_cast<int64_t>(req.chunk().size());
    RETURN_IF_ERROR(import->Write(req.chunk()));
  }
  if (ctx->IsCancelled()) {
    return absl::CancelledError("import cancelled; nothing imported");
  }
  if (!call.StillAuthenticated()) {
    return absl::UnauthenticatedError(
        "the token was revoked or expired during the import; nothing "
        "imported");
  }
  return import->Finish();
}

}  // namespace

// ---------------------------------------------------------------- datasets

grpc::Status DatasetServiceImpl::ImportDataset(
    grpc::ServerContext* ctx,
    grpc::ServerReader<v1::ImportDatasetRequest>* reader,
    v1::DatasetInfo* response) {
  Call call(env_, ctx, "DatasetService/ImportDataset", nullptr);
  if (!call.admitted().ok()) return call.Done(call.admitted());
  absl::Status allowed =
      Authenticator::RequireCurator(call.caller(), "importing datasets");
  if (!allowed.ok()) return call.Done(allowed);
  // Revoking the caller's token or principal cancels this stream.
  std::unique_ptr<StreamRegistry::Handle> registered =
      env_.streams == nullptr ? nullptr
                              : env_.streams->Register(call.caller().token_id,
                                                       call.caller().name, ctx);
  const absl::Time started = absl::Now();
  int64_t bytes = 0;
  absl::StatusOr<v1::DatasetInfo> imported =
      ReceiveImport(call, *datasets_, ctx, reader, &bytes);
  if (env_.metrics != nullptr) {
    env_.metrics->ImportDone(imported.status().code(), bytes,
                             imported.ok() ? imported->rows() : 0,
                             absl::ToDoubleSeconds(absl::Now() - started));
  }
  return call.Done(Assign(std::move(imported), response));
}

// A public dummy names the private dataset it stands in for; a caller who
// cannot see that dataset must not learn its name (hidden datasets look
// exactly like missing ones).
void DatasetServiceImpl::HideInvisibleDummyTarget(const Caller& caller,
                                                  v1::DatasetInfo& d) const {
  if (!d.dummy_for().empty() &&
      !env_.auth->CheckDatasetVisible(caller, d.dummy_for()).ok()) {
    d.clear_dummy_for();
  }
}

grpc::Status DatasetServiceImpl::ListDatasets(
    grpc::ServerContext* ctx, const v1::ListDatasetsRequest* request,
    v1::ListDatasetsResponse* response) {
  Call call(env_, ctx, "DatasetService/ListDatasets", request);
  if (!call.admitted().ok()) return call.Done(call.admitted());
  absl::StatusOr<v1::ListDatasetsResponse> all = datasets_->List();
  if (!all.ok()) return call.Done(all.status());
  for (v1::DatasetInfo& d : *all->mutable_datasets()) {
    if (env_.auth->CheckDatasetVisible(call.caller(), d.name()).ok()) {
      HideInvisibleDummyTarget(call.caller(), d);
      *response->add_datasets() = std::move(d);
    }
  }
  return call.Done(absl::OkStatus());
}

grpc::Status DatasetServiceImpl::GetDataset(
    grpc::ServerContext* ctx, const v1::GetDatasetRequest* request,
    v1::DatasetInfo* response) {
  Call call(env_, ctx, "DatasetService/GetDataset", request);
  call.dataset(request->name());
  if (!call.admitted().ok()) return call.Done(call.admitted());
  absl::Status s =
      env_.auth->CheckDatasetVisible(call.caller(), request->name());
  if (s.ok()) s = Assign(datasets_->Get(request->name()), response);
  if (s.ok()) HideInvisibleDummyTarget(call.caller(), *response);
  return call.Done(s);
}

grpc::Status DatasetServiceImpl::DeleteDataset(
    grpc::ServerContext* ctx, const v1::DeleteDatasetRequest* request,
    v1::DeleteDatasetResponse* response) {
  Call call(env_, ctx, "DatasetService/DeleteDataset", request);
  call.dataset(request->name());
  if (!call.admitted().ok()) return call.Done(call.admitted());
  return call.Done(Assign(
      [&]() -> absl::StatusOr<v1::DeleteDatasetResponse> {
        RETURN_IF_ERROR(
            Authenticator::RequireCurator(call.caller(), "deleting datasets"));
        ASSIGN_OR_RETURN(storage::DatasetRecord r,
                         env_.db->datasets().Get(request->name()));
        // A dataset placed on the worker pool is deleted only together
        // with its shards: refused (nothing deleted, no job cancelled) when
        // the pool cannot delete them now.
        RETURN_IF_ERROR(datasets_->CheckPlacementDroppable(r));
        ASSIGN_OR_RETURN(int64_t cancelled,
                         jobs_->CancelDatasetJobs(r.name, absl::Seconds(60)));
        // The shards first: if the pool fails now, the rows stay in the
        // database (and the deletion can be retried).
        ASSIGN_OR_RETURN(std::vector<v1::RankShard> dropped,
                         datasets_->DropPlacement(r));
        if (!dropped.empty()) {
          std::vector<std::string> hosts;
          for (const v1::RankShard& shard : dropped) {
            hosts.push_back(
                absl::StrCat("rank ", shard.rank(), "@", shard.host(), ":",
                             shard.rows() > 0 ? "deleted" : "none"));
          }
          call.detail(absl::StrCat("pool shards: ", absl::StrJoin(hosts, " ")));
        }
        ASSIGN_OR_RETURN(storage::DeletedDataset d,
                         env_.db->datasets().Delete(r.name));
        // The decoded rows go from memory too (a job that raced the
        // deletion finds the dataset NOT_FOUND, cached or not).
        jobs_->ForgetDataset(r.id);
        v1::DeleteDatasetResponse out;
        out.set_name(d.record.name);
        out.set_cancelled_jobs(cancelled);
        out.set_blocks_deleted(d.blocks_deleted);
        out.set_wal_truncation_pending(d.wal_truncation_pending);
        *out.mutable_deleted_at() = ToTimestamp(d.record.deleted_at_micros);
        for (v1::RankShard& shard : dropped) {
          *out.add_pool_shards_deleted() = std::move(shard);
        }
        return out;
      }(),
      response));
}

grpc::Status DatasetServiceImpl::PlaceDataset(
    grpc::ServerContext* ctx, const v1::PlaceDatasetRequest* request,
    v1::PlaceDatasetResponse* response) {
  Call call(env_, ctx, "DatasetService/PlaceDataset", request);
  call.dataset(request->name());
  if (!call.admitted().ok()) return call.Done(call.admitted());
  absl::StatusOr<v1::PlaceDatasetResponse> placed =
      [&]() -> absl::StatusOr<v1::PlaceDatasetResponse> {
    RETURN_IF_ERROR(
        Authenticator::RequireCurator(call.caller(), "placing datasets"));
    return datasets_->Place(request->name());
  }();
  if (placed.ok()) {
    std::vector<std::string> hosts;
    for (const v1::RankShard& shard : placed->shards()) {
      hosts.push_back(absl::StrCat("rank ", shard.rank(), "@", shard.host(),
                                   ":", shard.rows()));
    }
    call.detail(absl::StrCat("pool shards: ", absl::StrJoin(hosts, " ")));
  }
  return call.Done(Assign(std::move(placed), response));
}

// ---------------------------------------------------------------- budget

grpc::Status BudgetServiceImpl::GetBudget(grpc::ServerContext* ctx,
                                          const v1::GetBudgetRequest* request,
                                          v1::BudgetStatus* response) {
  Call call(env_, ctx, "BudgetService/GetBudget", request);
  call.dataset(request->dataset());
  if (!call.admitted().ok()) return call.Done(call.admitted());
  absl::Status s =
      env_.auth->CheckDatasetVisible(call.caller(), request->dataset());
  if (s.ok()) {
    s = Assign(datasets_->Budget(request->dataset(), call.caller().name),
               response);
  }
  return call.Done(s);
}

grpc::Status BudgetServiceImpl::ListLedger(grpc::ServerContext* ctx,
                                           const v1::ListLedgerRequest* request,
                                           v1::ListLedgerResponse* response) {
  Call call(env_, ctx, "BudgetService/ListLedger", request);
  call.dataset(request->dataset());
  if (!call.admitted().ok()) return call.Done(call.admitted());
  absl::Status s =
      env_.auth->CheckDatasetVisible(call.caller(), request->dataset());
  if (s.ok()) {
    // Analysts see only their own charges.
    s = Assign(
        datasets_->Ledger(request->dataset(),
                          call.caller().curator() ? "" : call.caller().name),
        response);
  }
  return call.Done(s);
}

// ---------------------------------------------------------------- jobs

absl::StatusOr<v1::Job> JobServiceImpl::OwnJob(const Caller& caller,
                                               const std::string& id) {
  ASSIGN_OR_RETURN(v1::Job job, jobs_->Get(id));
  if (!caller.curator() && job.principal() != caller.name) {
    // Exactly the reply for a missing job: no existence leak.
    return absl::NotFoundError(absl::StrCat("job \"", id, "\" not found"));
  }
  return job;
}

grpc::Status JobServiceImpl::EstimateJob(grpc::ServerContext* ctx,
                                         const v1::EstimateJobRequest* request,
                                         v1::JobEstimate* response) {
  Call call(env_, ctx, "JobService/EstimateJob", request);
  call.dataset(request->spec().dataset());
  if (!call.admitted().ok()) return call.Done(call.admitted());
  absl::Status s = env_.estimates == nullptr
                       ? absl::OkStatus()
                       : env_.estimates->Allow(
                             call.caller().name, absl::Now(),
                             call.caller().limits.max_estimates_per_second);
  if (s.ok()) s = CheckSpecVisible(*env_.auth, call.caller(), request->spec());
  if (s.ok())
    s = Assign(jobs_->Estimate(request->spec(), call.caller().name), response);
  return call.Done(s);
}

grpc::Status JobServiceImpl::SubmitJob(grpc::ServerContext* ctx,
                                       const v1::SubmitJobRequest* request,
                                       v1::Job* response) {
  Call call(env_, ctx, "JobService/SubmitJob", request);
  call.dataset(request->spec().dataset());
  // Dry runs are audited as such (they charge nothing).
  if (request->spec().dry_run()) call.detail("dry run");
  if (!call.admitted().ok()) return call.Done(call.admitted());
  absl::Status s = CheckSpecVisible(*env_.auth, call.caller(), request->spec());
  if (s.ok()) {
    s = Assign(jobs_->Submit(
                   request->spec(), call.caller().name, call.caller().role,
                   [&call](const std::string& id) { call.job(id); },
                   call.caller().limits.max_active_jobs,
                   [&call](const std::string& note) { call.detail(note); }),
               response);
  }
  if (!s.ok()) call.job("");  // the id was never created
  return call.Done(s);
}

grpc::Status JobServiceImpl::GetJob(grpc::ServerContext* ctx,
                                    const v1::GetJobRequest* request,
                                    v1::Job* response) {
  Call call(env_, ctx, "JobService/GetJob", request);
  call.job(request->id());
  if (!call.admitted().ok()) return call.Done(call.admitted());
  return call.Done(Assign(OwnJob(call.caller(), request->id()), response));
}

grpc::Status JobServiceImpl::ListJobs(grpc::ServerContext* ctx,
                                      const v1::ListJobsRequest* request,
                                      v1::ListJobsResponse* response) {
  Call call(env_, ctx, "JobService/ListJobs", request);
  call.dataset(request->dataset());
  if (!call.admitted().ok()) return call.Done(call.admitted());
  if (!request->dataset().empty()) {
    absl::Status s =
        env_.auth->CheckDatasetVisible(call.caller(), request->dataset());
    if (!s.ok()) return call.Done(s);
  }
  // Analysts page through their own jobs only (filtered in the query, so
  // pages stay full).
  return call.Done(
      Assign(jobs_->ListPage(*request,
                             call.caller().curator() ? "" : call.caller().name),
             response));
}

grpc::Status JobServiceImpl::WatchJob(
    grpc::ServerContext* ctx, const v1::WatchJobRequest* request,
    grpc::ServerWriter<v1::JobEvent>* writer) {
  Call call(env_, ctx, "JobService/WatchJob", request);
  call.job(request->id());
  if (!call.admitted().ok()) return call.Done(call.admitted());
  std::shared_ptr<ConcurrencyLimiter::Slot> slot;
  if (env_.watches != nullptr) {
    auto acquired = env_.watches->Acquire(
        call.caller().name, call.caller().limits.max_watch_streams);
    if (!acquired.ok()) return call.Done(acquired.status());
    slot = *std::move(acquired);
  }
  // Revoking the caller's token or principal cancels this stream.
  std::unique_ptr<StreamRegistry::Handle> registered =
      env_.streams == nullptr ? nullptr
                              : env_.streams->Register(call.caller().token_id,
                                                       call.caller().name, ctx);
  // Subscribe before reading the state so that no event is missed.
  auto sub = hub_->Subscribe(request->id());
  struct Unsub {
    TraceHub* hub;
    std::string id;
    std::shared_ptr<TraceHub::Subscription> sub;
    ~Unsub() { hub->Unsubscribe(id, sub); }
  } unsub{hub_, request->id(), sub};
  // A dropped watcher whose write is still blocked after kDropGrace (its
  // client does not read) has its call cancelled, which ends the write;
  // otherwise the loop below sees the drop and ends the stream itself.
  auto drop = std::make_shared<DropWatch>(ctx);
  struct EndDrop {
    std::shared_ptr<DropWatch> drop;
    ~EndDrop() { drop->End(); }
  } end_drop{drop};
  sub->OnDrop([weak = std::weak_ptr<DropWatch>(drop)] {
    if (auto d = weak.lock()) d->Arm(weak);
  });
  const auto dropped = [this]() {
    return grpc::Status(
        grpc::RESOURCE_EXHAUSTED,
        absl::StrCat("this watcher fell more than ",
                     hub_->options().max_buffered_bytes_per_watcher,
                     " bytes behind the job's events and was dropped "
                     "(--max-watch-buffer-bytes); watch the job again to "
                     "replay its stored trace, or page through it with "
                     "GetJobResult once it has ended"));
  };

  auto job = OwnJob(call.caller(), request->id());
  if (!job.ok()) return call.Done(job.status());
  call.Done(absl::OkStatus());  // audited once, when the watch starts
  v1::JobEvent first;
  *first.mutable_job() = *job;
  if (!writer->Write(first)) return grpc::Status::CANCELLED;
  if (Terminal(job->state())) return grpc::Status::OK;
  // Replay the points recorded before this watch (released to this caller
  // already: live on this stream and in GetJobResult), so that a late
  // watcher (the web console) has the whole trace; live points that were
  // also replayed are skipped below. The stored trace is read a bounded page
  // at a time.
  int64_t replayed_step = -1;
  for (;;) {
    auto page = jobs_->TracePage(request->id(), replayed_step);
    if (!page.ok() || page->empty()) break;
    for (v1::TracePoint& t : *page) {
      replayed_step = t.step();
      v1::JobEvent ev;
      *ev.mutable_trace() = std::move(t);
      if (!writer->Write(ev)) return grpc::Status::CANCELLED;
    }
    if (sub->dropped()) return dropped();
    if (ctx->IsCancelled()) return grpc::Status::CANCELLED;
  }

  absl::Time last_poll = absl::Now();
  absl::Time last_auth = absl::Now();
  while (!ctx->IsCancelled()) {
    if (absl::Now() - last_auth > kStreamAuthRecheck) {
      last_auth = absl::Now();
      if (!call.StillAuthenticated()) {
        return grpc::Status(grpc::UNAUTHENTICATED,
                            "the token was revoked or expired; watch ended");
      }
    }
    v1::JobEvent ev;
    if (sub->Next(&ev, absl::Milliseconds(250))) {
      if (ev.has_trace() && ev.trace().step() <= replayed_step) continue;
      if (!writer->Write(ev)) return grpc::Status::CANCELLED;
      if (ev.has_job() && Terminal(ev.job().state())) return grpc::Status::OK;
      continue;
    }
    if (sub->dropped()) return dropped();
    if (sub->closed()) {
      return grpc::Status(grpc::UNAVAILABLE, "server is shutting down");
    }
    // Safety net: re-read the state now and then.
    if (absl::Now() - last_poll > absl::Seconds(2)) {
      last_poll = absl::Now();
      auto now = jobs_->Get(request->id());
      if (now.ok() && Terminal(now->state())) {
        v1::JobEvent last;
        *last.mutable_job() = *now;
        writer->Write(last);
        return grpc::Status::OK;
      }
    }
  }
  return grpc::Status::CANCELLED;
}

grpc::Status JobServiceImpl::CancelJob(grpc::ServerContext* ctx,
                                       const v1::CancelJobRequest* request,
                                       v1::Job* response) {
  Call call(env_, ctx, "JobService/CancelJob", request);
  call.job(request->id());
  if (!call.admitted().ok()) return call.Done(call.admitted());
  absl::Status s = OwnJob(call.caller(), request->id()).status();
  if (s.ok()) s = Assign(jobs_->Cancel(request->id()), response);
  return call.Done(s);
}

grpc::Status JobServiceImpl::ListPendingJobs(
    grpc::ServerContext* ctx, const v1::ListPendingJobsRequest* request,
    v1::ListJobsResponse* response) {
  Call call(env_, ctx, "JobService/ListPendingJobs", request);
  call.dataset(request->dataset());
  if (!call.admitted().ok()) return call.Done(call.admitted());
  absl::Status s =
      Authenticator::RequireCurator(call.caller(), "listing jobs for approval");
  if (s.ok()) s = Assign(jobs_->ListPending(request->dataset()), response);
  return call.Done(s);
}

grpc::Status JobServiceImpl::ApproveJob(grpc::ServerContext* ctx,
                                        const v1::ApproveJobRequest* request,
                                        v1::Job* response) {
  Call call(env_, ctx, "JobService/ApproveJob", request);
  call.job(request->id());
  if (!call.admitted().ok()) return call.Done(call.admitted());
  absl::Status s =
      Authenticator::RequireCurator(call.caller(), "approving jobs");
  if (s.ok()) {
    call.detail("approved");
    absl::StatusOr<v1::Job> job = jobs_->Get(request->id());
    s = job.status();
    if (s.ok()) call.dataset(job->spec().dataset());
  }
  if (s.ok()) s = Assign(jobs_->Approve(request->id()), response);
  return call.Done(s);
}

grpc::Status JobServiceImpl::RejectJob(grpc::ServerContext* ctx,
                                       const v1::RejectJobRequest* request,
                                       v1::Job* response) {
  Call call(env_, ctx, "JobService/RejectJob", request);
  call.job(request->id());
  if (!call.admitted().ok()) return call.Done(call.admitted());
  absl::Status s =
      Authenticator::RequireCurator(call.caller(), "rejecting jobs");
  if (s.ok()) {
    // The reason is bounded (request limits) and, past the role check,
    // written by a curator: only then is it recorded.
    call.detail(absl::StrCat("rejected: ", request->reason()));
    absl::StatusOr<v1::Job> job = jobs_->Get(request->id());
    s = job.status();
    if (s.ok()) call.dataset(job->spec().dataset());
  }
  if (s.ok()) {
    s = Assign(jobs_->Reject(request->id(), request->reason()), response);
  }
  return call.Done(s);
}

grpc::Status JobServiceImpl::GetJobResult(
    grpc::ServerContext* ctx, const v1::GetJobResultRequest* request,
    v1::JobResult* response) {
  Call call(env_, ctx, "JobService/GetJobResult", request);
  call.job(request->id());
  if (!call.admitted().ok()) return call.Done(call.admitted());
  absl::Status s = OwnJob(call.caller(), request->id()).status();
  if (s.ok()) {
    s = Assign(jobs_->Result(request->id(), request->trace_offset(),
                             request->max_trace_points()),
               response);
  }
  return call.Done(s);
}

// ---------------------------------------------------------------- admin

grpc::Status AdminServiceImpl::WhoAmI(grpc::ServerContext* ctx,
                                      const v1::WhoAmIRequest* req,
                                      v1::Principal* resp) {
  Call call(env_, ctx, "AdminService/WhoAmI", req);
  if (!call.admitted().ok()) return call.Done(call.admitted());
  return call.Done(Assign(
      [&]() -> absl::StatusOr<v1::Principal> {
        ASSIGN_OR_RETURN(storage::PrincipalRecord p,
                         env_.access->GetPrincipal(call.caller().name));
        return ToProto(p);
      }(),
      resp));
}

grpc::Status AdminServiceImpl::CreatePrincipal(
    grpc::ServerContext* ctx, const v1::CreatePrincipalRequest* req,
    v1::CreatedToken* resp) {
  Call call(env_, ctx, "AdminService/CreatePrincipal", req);
  call.target(req->name());
  if (!call.admitted().ok()) return call.Done(call.admitted());
  return call.Done(Assign(
      [&]() -> absl::StatusOr<v1::CreatedToken> {
        RETURN_IF_ERROR(Authenticator::RequireCurator(call.caller(),
                                                      "creating principals"));
        const storage::Role role = req->role() == v1::ROLE_CURATOR
                                       ? storage::Role::kCurator
                                       : storage::Role::kAnalyst;
        // The lifetime is checked before the principal exists.
        ASSIGN_OR_RETURN(const int64_t ttl,
                         env_.auth->Lifetime(role, req->token_ttl_seconds(),
                                             req->token_no_expiry()));
        ASSIGN_OR_RETURN(storage::PrincipalRecord p,
                         env_.access->CreatePrincipal(req->name(), role));
        ASSIGN_OR_RETURN(IssuedToken t, env_.auth->Issue(p.name, ttl, "first"));
        v1::CreatedToken out;
        *out.mutable_principal() = ToProto(p);
        *out.mutable_info() = ToProto(t.record);
        out.set_token(t.token);
        return out;
      }(),
      resp));
}

grpc::Status AdminServiceImpl::ListPrincipals(
    grpc::ServerContext* ctx, const v1::ListPrincipalsRequest* req,
    v1::ListPrincipalsResponse* resp) {
  Call call(env_, ctx, "AdminService/ListPrincipals", req);
  if (!call.admitted().ok()) return call.Done(call.admitted());
  return call.Done(Assign(
      [&]() -> absl::StatusOr<v1::ListPrincipalsResponse> {
        RETURN_IF_ERROR(
            Authenticator::RequireCurator(call.caller(), "listing principals"));
        ASSIGN_OR_RETURN(auto all, env_.access->ListPrincipals());
        v1::ListPrincipalsResponse out;
        for (const auto& p : all) *out.add_principals() = ToProto(p);
        return out;
      }(),
      resp));
}

grpc::Status AdminServiceImpl::RevokePrincipal(
    grpc::ServerContext* ctx, const v1::RevokePrincipalRequest* req,
    v1::Principal* resp) {
  Call call(env_, ctx, "AdminService/RevokePrincipal", req);
  call.target(req->name());
  if (!call.admitted().ok()) return call.Done(call.admitted());
  return call.Done(Assign(
      [&]() -> absl::StatusOr<v1::Principal> {
        RETURN_IF_ERROR(Authenticator::RequireCurator(call.caller(),
                                                      "revoking principals"));
        if (req->name() == call.caller().name) {
          return absl::FailedPreconditionError(
              "a curator cannot revoke itself (ask another curator)");
        }
        ASSIGN_OR_RETURN(auto p, env_.access->RevokePrincipal(req->name()));
        // Its open streams end now (docs/security.md).
        if (env_.streams != nullptr) env_.streams->CancelPrincipal(p.name);
        return ToProto(p);
      }(),
      resp));
}

grpc::Status AdminServiceImpl::SetPrincipalLimits(
    grpc::ServerContext* ctx, const v1::SetPrincipalLimitsRequest* req,
    v1::Principal* resp) {
  Call call(env_, ctx, "AdminService/SetPrincipalLimits", req);
  call.target(req->name());
  if (!call.admitted().ok()) return call.Done(call.admitted());
  return call.Done(Assign(
      [&]() -> absl::StatusOr<v1::Principal> {
        RETURN_IF_ERROR(Authenticator::RequireCurator(
            call.caller(), "setting a principal's limits"));
        storage::PrincipalLimitOverrides l;
        const v1::PrincipalLimits& in = req->limits();
        if (in.has_max_active_jobs()) l.max_active_jobs = in.max_active_jobs();
        if (in.has_max_estimates_per_second()) {
          l.max_estimates_per_second = in.max_estimates_per_second();
        }
        if (in.has_max_watch_streams()) {
          l.max_watch_streams = in.max_watch_streams();
        }
        ASSIGN_OR_RETURN(storage::PrincipalRecord p,
                         env_.access->SetPrincipalLimits(req->name(), l));
        return ToProto(p);
      }(),
      resp));
}

grpc::Status AdminServiceImpl::CreateToken(grpc::ServerContext* ctx,
                                           const v1::CreateTokenRequest* req,
                                           v1::CreatedToken* resp) {
  Call call(env_, ctx, "AdminService/CreateToken", req);
  call.target(req->principal());
  if (!call.admitted().ok()) return call.Done(call.admitted());
  return call.Done(Assign(
      [&]() -> absl::StatusOr<v1::CreatedToken> {
        RETURN_IF_ERROR(
            Authenticator::RequireCurator(call.caller(), "creating tokens"));
        ASSIGN_OR_RETURN(storage::PrincipalRecord p,
                         env_.access->GetPrincipal(req->principal()));
        ASSIGN_OR_RETURN(
            const int64_t ttl,
            env_.auth->Lifetime(p.role, req->ttl_seconds(), req->no_expiry()));
        ASSIGN_OR_RETURN(IssuedToken t,
                         env_.auth->Issue(p.name, ttl, req->label()));
        v1::CreatedToken out;
        *out.mutable_principal() = ToProto(p);
        *out.mutable_info() = ToProto(t.record);
        out.set_token(t.token);
        return out;
      }(),
      resp));
}

grpc::Status AdminServiceImpl::RevokeToken(grpc::ServerContext* ctx,
                                           const v1::RevokeTokenRequest* req,
                                           v1::TokenInfo* resp) {
  Call call(env_, ctx, "AdminService/RevokeToken", req);
  call.target(req->id());
  if (!call.admitted().ok()) return call.Done(call.admitted());
  return call.Done(Assign(
      [&]() -> absl::StatusOr<v1::TokenInfo> {
        RETURN_IF_ERROR(
            Authenticator::RequireCurator(call.caller(), "revoking tokens"));
        ASSIGN_OR_RETURN(auto t, env_.access->RevokeToken(req->id()));
        // Its open streams end now (docs/security.md).
        if (env_.streams != nullptr) env_.streams->CancelToken(t.id);
        t.secret_sha256.clear();
        return ToProto(t);
      }(),
      resp));
}

grpc::Status AdminServiceImpl::ListTokens(grpc::ServerContext* ctx,
                                          const v1::ListTokensRequest* req,
                                          v1::ListTokensResponse* resp) {
  Call call(env_, ctx, "AdminService/ListTokens", req);
  call.target(req->principal());
  if (!call.admitted().ok()) return call.Done(call.admitted());
  return call.Done(Assign(
      [&]() -> absl::StatusOr<v1::ListTokensResponse> {
        RETURN_IF_ERROR(
            Authenticator::RequireCurator(call.caller(), "listing tokens"));
        ASSIGN_OR_RETURN(auto all, env_.access->ListTokens(req->principal()));
        v1::ListTokensResponse out;
        for (const auto& t : all) *out.add_tokens() = ToProto(t);
        return out;
      }(),
      resp));
}

grpc::Status AdminServiceImpl::GrantDataset(grpc::ServerContext* ctx,
                                            const v1::GrantDatasetRequest* req,
                                            v1::Grant* resp) {
  Call call(env_, ctx, "AdminService/GrantDataset", req);
  call.dataset(req->dataset()).target(req->principal());
  if (!call.admitted().ok()) return call.Done(call.admitted());
  return call.Done(Assign(
      [&]() -> absl::StatusOr<v1::Grant> {
        RETURN_IF_ERROR(
            Authenticator::RequireCurator(call.caller(), "granting datasets"));
        ASSIGN_OR_RETURN(auto g,
                         env_.access->Grant(req->principal(), req->dataset(),
                                            req->epsilon_cap(),
                                            req->approval_above_epsilon(),
                                            req->approval_timeout_seconds()));
        return ToProto(g);
      }(),
      resp));
}

grpc::Status AdminServiceImpl::RevokeGrant(grpc::ServerContext* ctx,
                                           const v1::RevokeGrantRequest* req,
                                           v1::Grant* resp) {
  Call call(env_, ctx, "AdminService/RevokeGrant", req);
  call.dataset(req->dataset()).target(req->principal());
  if (!call.admitted().ok()) return call.Done(call.admitted());
  return call.Done(Assign(
      [&]() -> absl::StatusOr<v1::Grant> {
        RETURN_IF_ERROR(
            Authenticator::RequireCurator(call.caller(), "revoking grants"));
        RETURN_IF_ERROR(
            env_.access->RevokeGrant(req->principal(), req->dataset()));
        v1::Grant out;
        out.set_principal(req->principal());
        out.set_dataset(req->dataset());
        return out;
      }(),
      resp));
}

grpc::Status AdminServiceImpl::ListGrants(grpc::ServerContext* ctx,
                                          const v1::ListGrantsRequest* req,
                                          v1::ListGrantsResponse* resp) {
  Call call(env_, ctx, "AdminService/ListGrants", req);
  call.dataset(req->dataset()).target(req->principal());
  if (!call.admitted().ok()) return call.Done(call.admitted());
  return call.Done(Assign(
      [&]() -> absl::StatusOr<v1::ListGrantsResponse> {
        RETURN_IF_ERROR(
            Authenticator::RequireCurator(call.caller(), "listing grants"));
        ASSIGN_OR_RETURN(auto all, env_.access->ListGrants(req->principal(),
                                                           req->dataset()));
        v1::ListGrantsResponse out;
        for (const auto& g : all) *out.add_grants() = ToProto(g);
        return out;
      }(),
      resp));
}

grpc::Status AdminServiceImpl::ListAudit(grpc::ServerContext* ctx,
                                         const v1::ListAuditRequest* req,
                                         v1::ListAuditResponse* resp) {
  Call call(env_, ctx, "AdminService/ListAudit", req);
  call.dataset(req->dataset()).target(req->principal());
  if (!call.admitted().ok()) return call.Done(call.admitted());
  return call.Done(Assign(
      [&]() -> absl::StatusOr<v1::ListAuditResponse> {
        RETURN_IF_ERROR(Authenticator::RequireCurator(call.caller(),
                                                      "reading the audit log"));
        storage::AuditFilter f;
        f.dataset = req->dataset();
        f.principal = req->principal();
        if (req->limit() > 0) f.limit = std::min<int64_t>(req->limit(), 100000);
        ASSIGN_OR_RETURN(auto all, env_.access->ListAudit(f));
        v1::ListAuditResponse out;
        for (const auto& r : all) {
          v1::AuditEntry* e = out.add_entries();
          e->set_sequence(r.seq);
          *e->mutable_at() = ToTimestamp(r.at_micros);
          e->set_principal(r.principal);
          e->set_method(r.method);
          e->set_dataset(r.dataset);
          e->set_job_id(r.job_id);
          e->set_target(r.target);
          e->set_code(r.code);
          e->set_detail(r.detail);
          e->set_peer(r.peer);
          e->set_token_id(r.token_id);
        }
        return out;
      }(),
      resp));
}

}  // namespace dpopt::server
