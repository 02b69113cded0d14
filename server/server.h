// dpopt-server as a library: storage, managers, gRPC services, health and
// reflection. Used by main.cc and by the in-process integration tests.
#ifndef DPOPT_SERVER_SERVER_H_
#define DPOPT_SERVER_SERVER_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "grpcpp/grpcpp.h"

namespace dpopt::storage {
class Database;
}

namespace dpopt::server {

class DatasetManager;
class JobManager;
class TraceHub;
class DatasetServiceImpl;
class BudgetServiceImpl;
class JobServiceImpl;
class AdminServiceImpl;
class Authenticator;
namespace console {
class Console;
}

struct ServerOptions {
  // SQLite database file; created and migrated on first start.
  std::string db_path = "dpopt.db";
  // Listen address. Port 0 picks a free port (see DpoptServer::port()).
  std::string listen = "127.0.0.1:50051";
  // Job worker threads and bounded queue length.
  int workers = 2;
  int queue_capacity = 64;
  // Largest gRPC message accepted (import chunks are 1 MiB).
  int max_message_bytes = 16 << 20;
  // Where the first start on a fresh database writes the curator's bearer
  // token (mode 0600). Empty: db_path + ".curator-token".
  std::string curator_token_file;
  // TLS (PEM files). With tls_client_ca, clients must present a certificate
  // signed by it (mutual TLS). Without TLS the server listens only on a
  // loopback address unless `insecure` is set (logged loudly).
  std::string tls_cert;
  std::string tls_key;
  std::string tls_client_ca;
  bool insecure = false;
  // Web console (issue 16): HOST:PORT of its HTTP listener; empty = off
  // (the default). Uses the TLS files above when they are set, and the same
  // loopback-only rule without TLS. Port 0 picks a free port.
  std::string console_listen;
  absl::Status Validate() const;
  std::string TokenFile() const {
    return curator_token_file.empty() ? db_path + ".curator-token"
                                      : curator_token_file;
  }
};

// True for 127.0.0.0/8, ::1, localhost and unix sockets (HOST:PORT form).
bool IsLoopbackAddress(absl::string_view listen);

class DpoptServer {
 public:
  // Opens (and migrates) the database, marks jobs interrupted by a previous
  // crash as FAILED (they stay charged), and starts listening.
  static absl::StatusOr<std::unique_ptr<DpoptServer>> Start(
      const ServerOptions& options);
  ~DpoptServer();

  int port() const { return port_; }
  // The console's port (0 when the console is off).
  int console_port() const;
  // Whether this start created the bootstrap curator and wrote its token.
  bool bootstrapped() const { return bootstrapped_; }
  // Blocks until Shutdown() is called from another thread.
  void Wait();
  // Deterministic shutdown: stop accepting RPCs, cancel and join jobs, close
  // watchers and storage. Idempotent.
  void Shutdown();

 private:
  DpoptServer() = default;

  ServerOptions options_;
  int port_ = 0;
  std::unique_ptr<storage::Database> db_;
  std::unique_ptr<TraceHub> hub_;
  std::unique_ptr<DatasetManager> datasets_;
  std::unique_ptr<JobManager> jobs_;
  std::unique_ptr<DatasetServiceImpl> dataset_service_;
  std::unique_ptr<BudgetServiceImpl> budget_service_;
  std::unique_ptr<JobServiceImpl> job_service_;
  std::unique_ptr<AdminServiceImpl> admin_service_;
  std::unique_ptr<Authenticator> auth_;
  bool bootstrapped_ = false;
  std::unique_ptr<grpc::Server> grpc_server_;
  std::unique_ptr<console::Console> console_;
  bool shut_down_ = false;
};

}  // namespace dpopt::server

#endif  // DPOPT_SERVER_SERVER_H_
