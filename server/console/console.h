// The web console's HTTP(S) listener: off unless the server is
// started with --console_listen. Read-only. Routes:
//   /console/, /console/jobs, /console/jobs/ID, /console/datasets/NAME,
//   /console/ledger/NAME, /console/login   the page shell (no data)
//   /console/static/console.{js,css}       the script and style sheet
//   /console/api/...                        the pages' content (Pages),
//                                           needs Authorization: Bearer
// HTTP handlers only parse the request and forward the Authorization
// header; Pages calls the gRPC API in-process with it, so authentication,
// roles and visibility are the API's (server/services.cc, server/auth.h).
#ifndef DPOPT_SERVER_CONSOLE_CONSOLE_H_
#define DPOPT_SERVER_CONSOLE_CONSOLE_H_

#include <memory>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "grpcpp/grpcpp.h"

namespace httplib {
class Server;
}

namespace dpopt::server::console {

class Pages;

struct ConsoleOptions {
  // HOST:PORT; port 0 picks a free port (see Console::port()).
  std::string listen;
  // TLS (PEM files), normally the gRPC listener's: with tls_client_ca the
  // browser must present a client certificate signed by it.
  std::string tls_cert;
  std::string tls_key;
  std::string tls_client_ca;
  // Without TLS the console listens only on a loopback address unless this
  // is set (dpopt-server --console-insecure; the gRPC listener's --insecure
  // does not cover the console).
  bool insecure = false;
  // Connections served at once, and accepted connections waiting for a
  // worker. Past both the listener stops accepting until one frees (further
  // clients wait in the kernel's backlog): a flood of idle connections
  // (slowloris) holds at most this many, never more threads or memory.
  int worker_threads = 4;
  int max_queued_connections = 32;
  // A request's bytes must keep arriving: each read (request line, headers)
  // waits at most read_timeout; an idle keep-alive connection is closed
  // after keep_alive_timeout and after keep_alive_max_requests requests.
  absl::Duration read_timeout = absl::Seconds(5);
  absl::Duration write_timeout = absl::Seconds(10);
  absl::Duration keep_alive_timeout = absl::Seconds(5);
  int keep_alive_max_requests = 100;
  absl::Status Validate() const;
};

class Console {
 public:
  // Binds and starts serving on a background thread. `api` is a channel to
  // the server's gRPC services (its in-process channel).
  static absl::StatusOr<std::unique_ptr<Console>> Start(
      const ConsoleOptions& options, std::shared_ptr<grpc::Channel> api);
  ~Console();

  int port() const { return port_; }
  bool tls() const { return tls_; }
  // Stops accepting requests and joins the listener thread. Idempotent.
  void Stop();

 private:
  Console() = default;

  class BoundedTaskQueue;

  std::unique_ptr<Pages> pages_;
  std::unique_ptr<BoundedTaskQueue> queue_;
  std::unique_ptr<httplib::Server> http_;
  std::thread thread_;
  int port_ = 0;
  bool tls_ = false;
};

}  // namespace dpopt::server::console

#endif  // DPOPT_SERVER_CONSOLE_CONSOLE_H_
