// The port while dpopt-server opens its database (docs/operations.md,
// "Readiness"). Opening can take a while: schema migrations, the ledger
// mark check, removing interrupted imports, recovering interrupted jobs. The
// port is open during that time so that an orchestrator's probe and a
// client see "starting" rather than "connection refused":
//  * grpc.health.v1.Health/Check answers NOT_SERVING; Watch sends
//    NOT_SERVING and ends with UNAVAILABLE (watch again);
//  * every other method ends with UNAVAILABLE and a message saying the
//    server is starting.
// Nothing is read from a request and nothing is stored. DpoptServer stops
// it, then serves on the same port.
#ifndef DPOPT_SERVER_STARTUP_LISTENER_H_
#define DPOPT_SERVER_STARTUP_LISTENER_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/generic/async_generic_service.h"
#include "grpcpp/grpcpp.h"

namespace dpopt::server {

// The message of the UNAVAILABLE status every method gets while starting.
inline constexpr char kStartingMessage[] =
    "dpopt-server is starting (opening its database: schema migrations and "
    "recovery of interrupted jobs); retry shortly";

class StartupListener {
 public:
  // Listens on `listen` (HOST:PORT; port 0 picks one) with `credentials`.
  static absl::StatusOr<std::unique_ptr<StartupListener>> Start(
      const std::string& listen,
      std::shared_ptr<grpc::ServerCredentials> credentials);
  ~StartupListener();

  // The bound port.
  int port() const { return port_; }
  // Ends the calls in flight and closes the port. Idempotent.
  void Stop();

 private:
  class NotServingHealth final
      : public grpc::health::v1::Health::CallbackService {
    grpc::ServerUnaryReactor* Check(
        grpc::CallbackServerContext* ctx,
        const grpc::health::v1::HealthCheckRequest* request,
        grpc::health::v1::HealthCheckResponse* response) override;
    grpc::ServerWriteReactor<grpc::health::v1::HealthCheckResponse>* Watch(
        grpc::CallbackServerContext* ctx,
        const grpc::health::v1::HealthCheckRequest* request) override;
  };
  class StartingService final : public grpc::CallbackGenericService {
    grpc::ServerGenericBidiReactor* CreateReactor(
        grpc::GenericCallbackServerContext* ctx) override;
  };

  StartupListener() = default;

  NotServingHealth health_;
  StartingService starting_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
};

// `listen` with its port replaced by `port` ("0.0.0.0:0" -> "0.0.0.0:41234";
// "[::1]:0" -> "[::1]:41234"); addresses without a port (unix:PATH) and
// addresses that already name `port` are returned unchanged.
std::string WithPort(const std::string& listen, int port);

}  // namespace dpopt::server

#endif  // DPOPT_SERVER_STARTUP_LISTENER_H_
