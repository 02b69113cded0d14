// Thin gRPC adapters (design.md §3 item 8): convert the request, call the
// manager, map absl::Status to grpc::Status in one place. No logic here.
#ifndef DPOPT_SERVER_SERVICES_H_
#define DPOPT_SERVER_SERVICES_H_

#include "dpopt/v1/dpopt.grpc.pb.h"
#include "server/dataset_manager.h"
#include "server/job_manager.h"
#include "server/trace_hub.h"

namespace dpopt::server {

class DatasetServiceImpl final : public v1::DatasetService::Service {
 public:
  explicit DatasetServiceImpl(DatasetManager* datasets) : datasets_(datasets) {}
  grpc::Status ImportDataset(
      grpc::ServerContext* ctx,
      grpc::ServerReader<v1::ImportDatasetRequest>* reader,
      v1::DatasetInfo* response) override;
  grpc::Status ListDatasets(grpc::ServerContext* ctx,
                            const v1::ListDatasetsRequest* request,
                            v1::ListDatasetsResponse* response) override;
  grpc::Status GetDataset(grpc::ServerContext* ctx,
                          const v1::GetDatasetRequest* request,
                          v1::DatasetInfo* response) override;

 private:
  DatasetManager* datasets_;
};

class BudgetServiceImpl final : public v1::BudgetService::Service {
 public:
  explicit BudgetServiceImpl(DatasetManager* datasets) : datasets_(datasets) {}
  grpc::Status GetBudget(grpc::ServerContext* ctx,
                         const v1::GetBudgetRequest* request,
                         v1::BudgetStatus* response) override;
  grpc::Status ListLedger(grpc::ServerContext* ctx,
                          const v1::ListLedgerRequest* request,
                          v1::ListLedgerResponse* response) override;

 private:
  DatasetManager* datasets_;
};

class JobServiceImpl final : public v1::JobService::Service {
 public:
  JobServiceImpl(JobManager* jobs, TraceHub* hub) : jobs_(jobs), hub_(hub) {}
  grpc::Status EstimateJob(grpc::ServerContext* ctx,
                           const v1::EstimateJobRequest* request,
                           v1::JobEstimate* response) override;
  grpc::Status SubmitJob(grpc::ServerContext* ctx,
                         const v1::SubmitJobRequest* request,
                         v1::Job* response) override;
  grpc::Status GetJob(grpc::ServerContext* ctx,
                      const v1::GetJobRequest* request,
                      v1::Job* response) override;
  grpc::Status ListJobs(grpc::ServerContext* ctx,
                        const v1::ListJobsRequest* request,
                        v1::ListJobsResponse* response) override;
  grpc::Status WatchJob(grpc::ServerContext* ctx,
                        const v1::WatchJobRequest* request,
                        grpc::ServerWriter<v1::JobEvent>* writer) override;
  grpc::Status CancelJob(grpc::ServerContext* ctx,
                         const v1::CancelJobRequest* request,
                         v1::Job* response) override;
  grpc::Status GetJobResult(grpc::ServerContext* ctx,
                            const v1::GetJobResultRequest* request,
                            v1::JobResult* response) override;

 private:
  JobManager* jobs_;
  TraceHub* hub_;
};

// The caller's identity (design.md §6). Until token authentication lands,
// every caller is "anonymous"; jobs and charges record it already.
std::string CallerOf(const grpc::ServerContext* ctx);

}  // namespace dpopt::server

#endif  // DPOPT_SERVER_SERVICES_H_
