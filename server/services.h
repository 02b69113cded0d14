// Thin gRPC adapters (docs/architecture.md, convention "thin RPC handlers"):
// authenticate the caller, apply
// the access policy, convert the request, call the manager, map
// absl::Status to grpc::Status in one place, and append the audit record.
#ifndef DPOPT_SERVER_SERVICES_H_
#define DPOPT_SERVER_SERVICES_H_

#include "dpopt/v1/dpopt.grpc.pb.h"
#include "server/auth.h"
#include "server/call_guards.h"
#include "server/dataset_manager.h"
#include "server/job_manager.h"
#include "server/metrics.h"
#include "server/principal_limits.h"
#include "server/trace_hub.h"

namespace dpopt::server {

// What every service needs to authenticate, limit and audit a call. The
// pointers outlive the services (owned by DpoptServer).
struct CallEnv {
  const Authenticator* auth = nullptr;
  storage::AccessStore* access = nullptr;
  storage::Database* db = nullptr;
  AuthFailureLog* auth_failures = nullptr;
  StreamRegistry* streams = nullptr;
  ConcurrencyLimiter* watches = nullptr;  // open WatchJob streams
  RateLimiter* estimates = nullptr;       // EstimateJob calls
  Metrics* metrics = nullptr;             // null without --metrics-listen
};

class DatasetServiceImpl final : public v1::DatasetService::Service {
 public:
  DatasetServiceImpl(CallEnv env, DatasetManager* datasets, JobManager* jobs)
      : env_(env), datasets_(datasets), jobs_(jobs) {}
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
  grpc::Status DeleteDataset(grpc::ServerContext* ctx,
                             const v1::DeleteDatasetRequest* request,
                             v1::DeleteDatasetResponse* response) override;
  grpc::Status PlaceDataset(grpc::ServerContext* ctx,
                            const v1::PlaceDatasetRequest* request,
                            v1::PlaceDatasetResponse* response) override;

 private:
  void HideInvisibleDummyTarget(const Caller& caller, v1::DatasetInfo& d) const;

  CallEnv env_;
  DatasetManager* datasets_;
  JobManager* jobs_;
};

class BudgetServiceImpl final : public v1::BudgetService::Service {
 public:
  BudgetServiceImpl(CallEnv env, DatasetManager* datasets)
      : env_(env), datasets_(datasets) {}
  grpc::Status GetBudget(grpc::ServerContext* ctx,
                         const v1::GetBudgetRequest* request,
                         v1::BudgetStatus* response) override;
  grpc::Status ListLedger(grpc::ServerContext* ctx,
                          const v1::ListLedgerRequest* request,
                          v1::ListLedgerResponse* response) override;

 private:
  CallEnv env_;
  DatasetManager* datasets_;
};

class JobServiceImpl final : public v1::JobService::Service {
 public:
  JobServiceImpl(CallEnv env, JobManager* jobs, TraceHub* hub)
      : env_(env), jobs_(jobs), hub_(hub) {}
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
  // Curators only (PERMISSION_DENIED otherwise).
  grpc::Status ListPendingJobs(grpc::ServerContext* ctx,
                               const v1::ListPendingJobsRequest* request,
                               v1::ListJobsResponse* response) override;
  grpc::Status ApproveJob(grpc::ServerContext* ctx,
                          const v1::ApproveJobRequest* request,
                          v1::Job* response) override;
  grpc::Status RejectJob(grpc::ServerContext* ctx,
                         const v1::RejectJobRequest* request,
                         v1::Job* response) override;

 private:
  // NOT_FOUND unless the caller is a curator or submitted the job.
  absl::StatusOr<v1::Job> OwnJob(const Caller& caller, const std::string& id);

  CallEnv env_;
  JobManager* jobs_;
  TraceHub* hub_;
};

// Principals, tokens, grants and the audit log (curators; WhoAmI for all).
class AdminServiceImpl final : public v1::AdminService::Service {
 public:
  explicit AdminServiceImpl(CallEnv env) : env_(env) {}
  grpc::Status WhoAmI(grpc::ServerContext* ctx, const v1::WhoAmIRequest* req,
                      v1::Principal* resp) override;
  grpc::Status CreatePrincipal(grpc::ServerContext* ctx,
                               const v1::CreatePrincipalRequest* req,
                               v1::CreatedToken* resp) override;
  grpc::Status ListPrincipals(grpc::ServerContext* ctx,
                              const v1::ListPrincipalsRequest* req,
                              v1::ListPrincipalsResponse* resp) override;
  grpc::Status RevokePrincipal(grpc::ServerContext* ctx,
                               const v1::RevokePrincipalRequest* req,
                               v1::Principal* resp) override;
  grpc::Status SetPrincipalLimits(grpc::ServerContext* ctx,
                                  const v1::SetPrincipalLimitsRequest* req,
                                  v1::Principal* resp) override;
  grpc::Status CreateToken(grpc::ServerContext* ctx,
                           const v1::CreateTokenRequest* req,
                           v1::CreatedToken* resp) override;
  grpc::Status RevokeToken(grpc::ServerContext* ctx,
                           const v1::RevokeTokenRequest* req,
                           v1::TokenInfo* resp) override;
  grpc::Status ListTokens(grpc::ServerContext* ctx,
                          const v1::ListTokensRequest* req,
                          v1::ListTokensResponse* resp) override;
  grpc::Status GrantDataset(grpc::ServerContext* ctx,
                            const v1::GrantDatasetRequest* req,
                            v1::Grant* resp) override;
  grpc::Status RevokeGrant(grpc::ServerContext* ctx,
                           const v1::RevokeGrantRequest* req,
                           v1::Grant* resp) override;
  grpc::Status ListGrants(grpc::ServerContext* ctx,
                          const v1::ListGrantsRequest* req,
                          v1::ListGrantsResponse* resp) override;
  grpc::Status ListAudit(grpc::ServerContext* ctx,
                         const v1::ListAuditRequest* req,
                         v1::ListAuditResponse* resp) override;

 private:
  CallEnv env_;
};

}  // namespace dpopt::server

#endif  // DPOPT_SERVER_SERVICES_H_
