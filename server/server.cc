#include "server/server.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "core/common/status_macros.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/health_check_service_interface.h"
#include "server/dataset_manager.h"
#include "server/job_manager.h"
#include "server/services.h"
#include "server/trace_hub.h"
#include "storage/database.h"

namespace dpopt::server {

absl::Status ServerOptions::Validate() const {
  if (db_path.empty()) return absl::InvalidArgumentError("--db is required");
  if (listen.empty()) return absl::InvalidArgumentError("--listen is required");
  if (workers < 1 || workers > 256) {
    return absl::InvalidArgumentError("--workers must be in [1, 256]");
  }
  if (queue_capacity < 1 || queue_capacity > 100000) {
    return absl::InvalidArgumentError("--queue must be in [1, 100000]");
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<DpoptServer>> DpoptServer::Start(
    const ServerOptions& options) {
  RETURN_IF_ERROR(options.Validate());
  std::unique_ptr<DpoptServer> s(new DpoptServer());
  s->options_ = options;
  ASSIGN_OR_RETURN(s->db_, storage::Database::Open(options.db_path));
  s->hub_ = std::make_unique<TraceHub>();
  ASSIGN_OR_RETURN(s->datasets_, DatasetManager::Create(s->db_.get()));
  JobManager::Options jo;
  jo.workers = options.workers;
  jo.queue_capacity = options.queue_capacity;
  ASSIGN_OR_RETURN(
      s->jobs_,
      JobManager::Create(jo, s->db_.get(), s->datasets_.get(), s->hub_.get()));
  RETURN_IF_ERROR(s->jobs_->RecoverInterruptedJobs());

  s->dataset_service_ =
      std::make_unique<DatasetServiceImpl>(s->datasets_.get());
  s->budget_service_ = std::make_unique<BudgetServiceImpl>(s->datasets_.get());
  s->job_service_ =
      std::make_unique<JobServiceImpl>(s->jobs_.get(), s->hub_.get());

  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  builder.AddListeningPort(options.listen, grpc::InsecureServerCredentials(),
                           &s->port_);
  builder.SetMaxReceiveMessageSize(options.max_message_bytes);
  builder.RegisterService(s->dataset_service_.get());
  builder.RegisterService(s->budget_service_.get());
  builder.RegisterService(s->job_service_.get());
  s->grpc_server_ = builder.BuildAndStart();
  if (s->grpc_server_ == nullptr || s->port_ == 0) {
    s->jobs_->Shutdown();
    return absl::UnavailableError(absl::StrCat(
        "cannot listen on ", options.listen, " (address in use or invalid?)"));
  }
  return s;
}

DpoptServer::~DpoptServer() { Shutdown(); }

void DpoptServer::Wait() {
  if (grpc_server_) grpc_server_->Wait();
}

void DpoptServer::Shutdown() {
  if (shut_down_) return;
  shut_down_ = true;
  if (hub_) hub_->Shutdown();
  if (grpc_server_) {
    grpc_server_->Shutdown(std::chrono::system_clock::now() +
                           std::chrono::seconds(2));
  }
  if (jobs_) jobs_->Shutdown();
  jobs_.reset();
  datasets_.reset();
  db_.reset();
}

}  // namespace dpopt::server
