// dpopt-server: the curator's long-running gRPC service.
#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

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
ABSL_FLAG(std::string, curator_token_file, "",
          "where the first start on a fresh database writes the curator's "
          "bearer token (mode 0600); default: the --db path + "
          "\".curator-token\"");
ABSL_FLAG(std::string, tls_cert, "", "TLS certificate chain (PEM)");
ABSL_FLAG(std::string, tls_key, "", "TLS private key (PEM)");
ABSL_FLAG(std::string, tls_client_ca, "",
          "CA (PEM) that must have signed client certificates (mutual TLS)");
ABSL_FLAG(bool, insecure, false,
          "allow listening on a non-loopback address without TLS (only "
          "behind a trusted TLS-terminating proxy; tokens travel in clear)");

ABSL_FLAG(std::string, console_listen, "",
          "serve the read-only web console on HOST:PORT (e.g. "
          "127.0.0.1:8080; off when empty, the default). Same tokens and "
          "roles as the API; HTTPS with the --tls-* files when they are "
          "given; without TLS only on a loopback address unless --insecure");

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
      "[--queue=N] [--curator-token-file=PATH] [--tls-cert=PEM "
      "--tls-key=PEM [--tls-client-ca=PEM]] [--insecure] "
      "[--console-listen=HOST:PORT]");
  // Flags are documented with dashes (--tls-cert); Abseil names them with
  // underscores. Accept both spellings of every flag name.
  std::vector<std::string> args(argv, argv + argc);
  for (size_t i = 1; i < args.size(); ++i) {
    std::string& a = args[i];
    if (a == "--") break;
    if (a.rfind("--", 0) != 0) continue;
    const size_t end = std::min(a.find('='), a.size());
    std::replace(a.begin() + 2, a.begin() + end, '-', '_');
  }
  std::vector<char*> normalized;
  for (std::string& a : args) normalized.push_back(a.data());
  absl::ParseCommandLine(static_cast<int>(normalized.size()),
                         normalized.data());

  dpopt::server::ServerOptions o;
  o.db_path = absl::GetFlag(FLAGS_db);
  o.listen = absl::GetFlag(FLAGS_listen);
  o.workers = absl::GetFlag(FLAGS_workers);
  o.queue_capacity = absl::GetFlag(FLAGS_queue);
  o.curator_token_file = absl::GetFlag(FLAGS_curator_token_file);
  o.tls_cert = absl::GetFlag(FLAGS_tls_cert);
  o.tls_key = absl::GetFlag(FLAGS_tls_key);
  o.tls_client_ca = absl::GetFlag(FLAGS_tls_client_ca);
  o.insecure = absl::GetFlag(FLAGS_insecure);
  o.console_listen = absl::GetFlag(FLAGS_console_listen);
  if (o.insecure && o.tls_cert.empty() &&
      !dpopt::server::IsLoopbackAddress(o.listen)) {
    std::cerr << "dpopt-server: WARNING: --insecure: listening on " << o.listen
              << " WITHOUT TLS; bearer tokens and results cross the network "
                 "in clear text. Use only behind a TLS-terminating proxy."
              << std::endl;
  }
  auto server = dpopt::server::DpoptServer::Start(o);
  if (!server.ok()) {
    std::cerr << "dpopt-server: " << server.status().ToString() << std::endl;
    return 1;
  }
  std::cerr << "dpopt-server: listening on port " << (*server)->port()
            << (o.tls_cert.empty() ? " (plaintext)" : " (TLS)") << ", database "
            << o.db_path << std::endl;
  if ((*server)->console_port() > 0) {
    std::cerr << "dpopt-server: web console on "
              << (o.tls_cert.empty() ? "http" : "https") << "://"
              << o.console_listen.substr(0, o.console_listen.rfind(':')) << ":"
              << (*server)->console_port() << "/console/" << std::endl;
  }
  if ((*server)->bootstrapped()) {
    std::cerr << "dpopt-server: created the curator principal \"curator\"; "
                 "its token is in "
              << o.TokenFile() << " (mode 0600)" << std::endl;
  }
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
