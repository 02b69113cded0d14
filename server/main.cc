// dpopt-server: the curator's long-running gRPC service.
#include <csignal>
#include <cstdlib>
#include <iostream>
#include <thread>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/match.h"
#include "server/server.h"

ABSL_FLAG(std::string, db, "dpopt.db",
          "SQLite database file (created and migrated on first start)");
ABSL_FLAG(std::string, listen, "127.0.0.1:50051",
          "address to listen on, HOST:PORT (0.0.0.0:50051 for all interfaces)");
ABSL_FLAG(int, workers, 2, "job worker threads");
ABSL_FLAG(int, queue, 64, "maximum number of queued jobs");

namespace {
volatile std::sig_atomic_t g_signal = 0;
void OnSignal(int sig) { g_signal = sig; }
}  // namespace

int main(int argc, char** argv) {
  absl::FlagsUsageConfig usage;
  usage.contains_help_flags = [](absl::string_view path) {
    return absl::StrContains(path, "server/main.cc");
  };
  usage.contains_helpshort_flags = usage.contains_help_flags;
  usage.version_string = [] { return std::string("dpopt-server 0.1.0\n"); };
  absl::SetFlagsUsageConfig(usage);
  absl::SetProgramUsageMessage(
      "differentially private optimization service.\n"
      "Holds datasets and a persistent privacy ledger in SQLite and runs DP\n"
      "optimization jobs submitted over gRPC (see `dpopt --help`).\n\n"
      "usage: dpopt-server [--db=PATH] [--listen=HOST:PORT] [--workers=N] "
      "[--queue=N]");
  absl::ParseCommandLine(argc, argv);

  dpopt::server::ServerOptions o;
  o.db_path = absl::GetFlag(FLAGS_db);
  o.listen = absl::GetFlag(FLAGS_listen);
  o.workers = absl::GetFlag(FLAGS_workers);
  o.queue_capacity = absl::GetFlag(FLAGS_queue);
  auto server = dpopt::server::DpoptServer::Start(o);
  if (!server.ok()) {
    std::cerr << "dpopt-server: " << server.status().ToString() << std::endl;
    return 1;
  }
  std::cerr << "dpopt-server: listening on port " << (*server)->port()
            << ", database " << o.db_path << std::endl;
  std::signal(SIGINT, OnSignal);
  std::signal(SIGTERM, OnSignal);
  while (g_signal == 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  std::cerr << "dpopt-server: shutting down (signal " << g_signal << ")"
            << std::endl;
  (*server)->Shutdown();
  return 0;
}
