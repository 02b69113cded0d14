#include "server/services.h"

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "server/status_util.h"

namespace dpopt::server {
namespace {

// Largest dataset file accepted by ImportDataset.
constexpr size_t kMaxImportBytes = size_t{2} << 30;

template <typename T>
grpc::Status Reply(absl::StatusOr<T> result, T* response) {
  if (!result.ok()) return ToGrpcStatus(result.status());
  *response = *std::move(result);
  return grpc::Status::OK;
}

bool Terminal(v1::JobState s) {
  return s == v1::JOB_STATE_SUCCEEDED || s == v1::JOB_STATE_FAILED ||
         s == v1::JOB_STATE_CANCELLED;
}

}  // namespace

std::string CallerOf(const grpc::ServerContext* ctx) { return "anonymous"; }

grpc::Status DatasetServiceImpl::ImportDataset(
    grpc::ServerContext* ctx,
    grpc::ServerReader<v1::ImportDatasetRequest>* reader,
    v1::DatasetInfo* response) {
  v1::ImportDatasetRequest req;
  if (!reader->Read(&req) || !req.has_header()) {
    return grpc::Status(grpc::INVALID_ARGUMENT,
                        "the first ImportDataset message must be the header");
  }
  const v1::ImportHeader header = req.header();
  std::string bytes;
  while (reader->Read(&req)) {
    if (req.has_header()) {
      return grpc::Status(grpc::INVALID_ARGUMENT,
                          "only the first message may carry a header");
    }
    if (bytes.size() + req.chunk().size() > kMaxImportBytes) {
      return grpc::Status(grpc::RESOURCE_EXHAUSTED,
                          "dataset file larger than 2 GiB");
    }
    bytes += req.chunk();
  }
  if (ctx->IsCancelled()) {
    return grpc::Status(grpc::CANCELLED, "import cancelled; nothing imported");
  }
  return Reply(datasets_->Import(header, bytes, CallerOf(ctx)), response);
}

grpc::Status DatasetServiceImpl::ListDatasets(
    grpc::ServerContext* ctx, const v1::ListDatasetsRequest* request,
    v1::ListDatasetsResponse* response) {
  return Reply(datasets_->List(), response);
}

grpc::Status DatasetServiceImpl::GetDataset(
    grpc::ServerContext* ctx, const v1::GetDatasetRequest* request,
    v1::DatasetInfo* response) {
  return Reply(datasets_->Get(request->name()), response);
}

grpc::Status BudgetServiceImpl::GetBudget(grpc::ServerContext* ctx,
                                          const v1::GetBudgetRequest* request,
                                          v1::BudgetStatus* response) {
  return Reply(datasets_->Budget(request->dataset()), response);
}

grpc::Status BudgetServiceImpl::ListLedger(grpc::ServerContext* ctx,
                                           const v1::ListLedgerRequest* request,
                                           v1::ListLedgerResponse* response) {
  return Reply(datasets_->Ledger(request->dataset()), response);
}

grpc::Status JobServiceImpl::EstimateJob(grpc::ServerContext* ctx,
                                         const v1::EstimateJobRequest* request,
                                         v1::JobEstimate* response) {
  return Reply(jobs_->Estimate(request->spec()), response);
}

grpc::Status JobServiceImpl::SubmitJob(grpc::ServerContext* ctx,
                                       const v1::SubmitJobRequest* request,
                                       v1::Job* response) {
  return Reply(jobs_->Submit(request->spec(), CallerOf(ctx)), response);
}

grpc::Status JobServiceImpl::GetJob(grpc::ServerContext* ctx,
                                    const v1::GetJobRequest* request,
                                    v1::Job* response) {
  return Reply(jobs_->Get(request->id()), response);
}

grpc::Status JobServiceImpl::ListJobs(grpc::ServerContext* ctx,
                                      const v1::ListJobsRequest* request,
                                      v1::ListJobsResponse* response) {
  return Reply(jobs_->List(request->dataset()), response);
}

grpc::Status JobServiceImpl::WatchJob(
    grpc::ServerContext* ctx, const v1::WatchJobRequest* request,
    grpc::ServerWriter<v1::JobEvent>* writer) {
  // Subscribe before reading the state so that no event is missed.
  auto sub = hub_->Subscribe(request->id());
  struct Unsub {
    TraceHub* hub;
    std::string id;
    std::shared_ptr<TraceHub::Subscription> sub;
    ~Unsub() { hub->Unsubscribe(id, sub); }
  } unsub{hub_, request->id(), sub};

  auto job = jobs_->Get(request->id());
  if (!job.ok()) return ToGrpcStatus(job.status());
  v1::JobEvent first;
  *first.mutable_job() = *job;
  if (!writer->Write(first)) return grpc::Status::CANCELLED;
  if (Terminal(job->state())) return grpc::Status::OK;

  absl::Time last_poll = absl::Now();
  while (!ctx->IsCancelled()) {
    v1::JobEvent ev;
    if (sub->Next(&ev, absl::Milliseconds(250))) {
      if (!writer->Write(ev)) return grpc::Status::CANCELLED;
      if (ev.has_job() && Terminal(ev.job().state())) return grpc::Status::OK;
      continue;
    }
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
  return Reply(jobs_->Cancel(request->id()), response);
}

grpc::Status JobServiceImpl::GetJobResult(
    grpc::ServerContext* ctx, const v1::GetJobResultRequest* request,
    v1::JobResult* response) {
  return Reply(jobs_->Result(request->id()), response);
}

}  // namespace dpopt::server
