#include "server/startup_listener.h"

#include <chrono>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "grpcpp/ext/health_check_service_server_builder_option.h"

namespace dpopt::server {

using grpc::health::v1::HealthCheckRequest;
using grpc::health::v1::HealthCheckResponse;

grpc::ServerUnaryReactor* StartupListener::NotServingHealth::Check(
    grpc::CallbackServerContext* ctx, const HealthCheckRequest* /*request*/,
    HealthCheckResponse* response) {
  response->set_status(HealthCheckResponse::NOT_SERVING);
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

grpc::ServerWriteReactor<HealthCheckResponse>*
StartupListener::NotServingHealth::Watch(
    grpc::CallbackServerContext* /*ctx*/,
    const HealthCheckRequest* /*request*/) {
  class Reactor final : public grpc::ServerWriteReactor<HealthCheckResponse> {
   public:
    Reactor() {
      response_.set_status(HealthCheckResponse::NOT_SERVING);
      StartWriteAndFinish(
          &response_, grpc::WriteOptions(),
          grpc::Status(grpc::StatusCode::UNAVAILABLE, kStartingMessage));
    }
    void OnDone() override { delete this; }

   private:
    HealthCheckResponse response_;
  };
  return new Reactor();
}

grpc::ServerGenericBidiReactor* StartupListener::StartingService::CreateReactor(
    grpc::GenericCallbackServerContext* /*ctx*/) {
  class Reactor final : public grpc::ServerGenericBidiReactor {
   public:
    Reactor() {
      Finish(grpc::Status(grpc::StatusCode::UNAVAILABLE, kStartingMessage));
    }
    void OnDone() override { delete this; }
  };
  return new Reactor();
}

absl::StatusOr<std::unique_ptr<StartupListener>> StartupListener::Start(
    const std::string& listen,
    std::shared_ptr<grpc::ServerCredentials> credentials) {
  std::unique_ptr<StartupListener> l(new StartupListener());
  grpc::ServerBuilder builder;
  // This builder's own health service (NOT_SERVING) instead of gRPC's
  // default one, which would answer SERVING until told otherwise.
  builder.SetOption(
      std::make_unique<grpc::HealthCheckServiceServerBuilderOption>(nullptr));
  builder.AddListeningPort(listen, std::move(credentials), &l->port_);
  builder.RegisterService(&l->health_);
  builder.RegisterCallbackGenericService(&l->starting_);
  l->server_ = builder.BuildAndStart();
  if (l->server_ == nullptr || l->port_ == 0) {
    return absl::UnavailableError(absl::StrCat(
        "cannot listen on ", listen, " (address in use or invalid?)"));
  }
  return l;
}

StartupListener::~StartupListener() { Stop(); }

void StartupListener::Stop() {
  if (server_ == nullptr) return;
  // The calls answer at once; the deadline only bounds a stuck peer.
  server_->Shutdown(std::chrono::system_clock::now() +
                    std::chrono::milliseconds(200));
  server_->Wait();
  server_.reset();
}

std::string WithPort(const std::string& listen, int port) {
  if (absl::StartsWith(listen, "unix:") || absl::StartsWith(listen, "unix-")) {
    return listen;
  }
  const size_t colon = listen.rfind(':');
  if (colon == std::string::npos) return listen;
  const size_t bracket = listen.rfind(']');
  if (bracket != std::string::npos && bracket > colon) return listen;
  return absl::StrCat(listen.substr(0, colon + 1), port);
}

}  // namespace dpopt::server
