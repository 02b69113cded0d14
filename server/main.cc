// dpopt-server: the curator's long-running gRPC service.
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <string>
#include <thread>
#include <vector>
#if defined(__GLIBC__)  // defined by the C++ headers above
#include <malloc.h>
#endif

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "server/server.h"
#include "storage/backup.h"

ABSL_FLAG(std::string, db, "dpopt.db",
          "SQLite database file (created and migrated on first start)");
ABSL_FLAG(std::string, listen, "127.0.0.1:50051",
          "address to listen on, HOST:PORT (0.0.0.0:50051 for all interfaces)");
ABSL_FLAG(int, workers, 2, "job worker threads");
ABSL_FLAG(int, queue, 64, "maximum number of queued jobs");
ABSL_FLAG(int, kernel_threads, 0,
          "threads one large kernel call (full-batch gradient, evaluation on a "
          "large set) may use; 0 = hardware threads, at most 4; results are "
          "identical for any value");
ABSL_FLAG(double, max_job_work, dpopt::server::kDefaultMaxJobWork,
          "largest public bound on a job's work (row-coordinate operations) "
          "the server admits; larger jobs are refused before charging");
ABSL_FLAG(int64_t, dataset_cache_mb, 512,
          "memory cap (MiB) of the decoded datasets kept between jobs so a "
          "job does not re-read its rows from the database; least recently "
          "used first out; 0 turns the cache off");
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
// dp_dda MPI execution (distributed-DDA family).
ABSL_FLAG(std::string, mpirun, "",
          "mpirun of Open MPI (path or name in PATH) for dp_dda jobs with "
          "\"execution\": \"DDA_EXECUTION_MPI\"; empty (the default): such "
          "jobs are refused before anything is charged");
ABSL_FLAG(std::string, dda_worker, "",
          "the dpopt-dda-worker executable the ranks run (default: next to "
          "dpopt-server)");
ABSL_FLAG(std::string, mpi_hostfile, "",
          "Open MPI hostfile for dp_dda's ranks (default: none, local ranks)");
ABSL_FLAG(std::string, mpi_args, "",
          "extra mpirun arguments, comma-separated (e.g. --oversubscribe)");
ABSL_FLAG(int, mpi_timeout, 3600,
          "seconds after which an MPI job is stopped and FAILED (still "
          "charged)");
ABSL_FLAG(int, mpi_max_ranks, 64, "most MPI ranks one dp_dda job may use");

ABSL_FLAG(std::string, ledger_mark_file, "",
          "the ledger's high-water mark, kept outside the database so that a "
          "rolled-back ledger (a restored old backup) is noticed; default: "
          "the --db path + \".ledger-mark\"");
ABSL_FLAG(bool, allow_ledger_rollback_respending_budget, false,
          "DANGER: start even though the database's ledger is behind its "
          "high-water mark (e.g. after restoring an old backup). The charges "
          "missing from the restored ledger are forgotten, so their privacy "
          "BUDGET MAY BE SPENT AGAIN on the same data and the datasets' "
          "(epsilon, delta) guarantees no longer hold as stated. Recorded in "
          "the audit log; the mark is then reset to the restored ledger");
ABSL_FLAG(std::string, to, "",
          "backup: the backup file to create (must not exist)");
ABSL_FLAG(std::string, from, "", "restore: the backup file to restore");

namespace {
volatile std::sig_atomic_t g_signal = 0;
void OnSignal(int sig) { g_signal = sig; }

std::string Describe(const dpopt::storage::DatabaseFileInfo& i) {
  return absl::StrCat(i.bytes, " bytes, schema v", i.schema_version,
                      ", ledger at charge #", i.ledger_seq, " (", i.charges,
                      " charges), ", i.jobs, " jobs, ", i.datasets,
                      " datasets; integrity_check ok");
}

// dpopt-server backup --db=PATH --to=FILE
int RunBackup() {
  if (absl::GetFlag(FLAGS_to).empty()) {
    std::cerr << "dpopt-server backup: --to=FILE is required" << std::endl;
    return 2;
  }
  auto info = dpopt::storage::BackupDatabase(absl::GetFlag(FLAGS_db),
                                             absl::GetFlag(FLAGS_to));
  if (!info.ok()) {
    std::cerr << "dpopt-server backup: " << info.status() << std::endl;
    return 1;
  }
  std::cout << "backup of " << absl::GetFlag(FLAGS_db) << " written to "
            << info->path << ": " << Describe(*info) << std::endl;
  return 0;
}

// dpopt-server restore --from=FILE --db=PATH
int RunRestore() {
  if (absl::GetFlag(FLAGS_from).empty()) {
    std::cerr << "dpopt-server restore: --from=FILE is required" << std::endl;
    return 2;
  }
  dpopt::server::ServerOptions o;
  o.db_path = absl::GetFlag(FLAGS_db);
  o.ledger_mark_file = absl::GetFlag(FLAGS_ledger_mark_file);
  auto r = dpopt::storage::RestoreDatabase(absl::GetFlag(FLAGS_from), o.db_path,
                                           o.LedgerMarkFile());
  if (!r.ok()) {
    std::cerr << "dpopt-server restore: " << r.status() << std::endl;
    return 1;
  }
  std::cout << "restored " << absl::GetFlag(FLAGS_from) << " to " << o.db_path
            << ": " << Describe(r->restored) << std::endl;
  for (const std::string& f : r->moved_aside) {
    std::cout << "previous file kept as " << f << std::endl;
  }
  if (r->mark_seq.has_value() && *r->mark_seq > r->restored.ledger_seq) {
    std::cout << "The ledger's high-water mark " << o.LedgerMarkFile()
              << " records charge #" << *r->mark_seq
              << ": the restored ledger is "
              << *r->mark_seq - r->restored.ledger_seq
              << " charge(s) behind. dpopt-server will refuse to start on it "
                 "unless started with "
                 "--allow-ledger-rollback-respending-budget, which forgets "
                 "those charges: their privacy budget may be spent again."
              << std::endl;
  } else {
    std::cout << "The restored ledger is not behind its high-water mark; "
                 "dpopt-server will start on it normally."
              << std::endl;
  }
  return 0;
}
}  // namespace

// glibc gives every thread that allocates concurrently its own arena (up to
// 8 per core) and keeps each arena's freed memory. With gRPC's thread pool
// and the job workers, the soak (tests/soak/soak.py) saw RSS climb from 40
// to 92 MiB over 7000 jobs while under 9 MiB were in use (malloc_stats):
// retained free memory, not a leak. Four arenas keep RSS flat at no
// measurable cost for this server; MALLOC_ARENA_MAX in the environment
// still decides when set.
static void LimitMallocArenas() {
#if defined(__GLIBC__)
  if (std::getenv("MALLOC_ARENA_MAX") == nullptr) mallopt(M_ARENA_MAX, 4);
#endif
}

int main(int argc, char** argv) {
  LimitMallocArenas();
  // Debian builds Abseil without NDEBUG, so absl::Mutex checks every
  // acquisition against a global lock graph (5-10% of the server's CPU time
  // under concurrent short calls). That is a debugging aid: the tests, which
  // run the same code in-process, keep it; the server binary turns it off.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
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
      "[--queue=N] [--dataset-cache-mb=N] [--max-job-work=X] "
      "[--curator-token-file=PATH] "
      "[--tls-cert=PEM "
      "--tls-key=PEM [--tls-client-ca=PEM]] [--insecure] "
      "[--console-listen=HOST:PORT] [--ledger-mark-file=PATH]\n"
      "       [--mpirun=PATH [--dda-worker=PATH] "
      "[--mpi-hostfile=FILE] [--mpi-args=A,B] [--mpi-timeout=S] "
      "[--mpi-max-ranks=N]]\n"
      "       dpopt-server backup --db=PATH --to=FILE     online backup "
      "(SQLite "
      "backup API), safe while the server runs\n"
      "       dpopt-server restore --from=FILE --db=PATH  offline restore "
      "(server stopped; see docs/backup.md)");
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
  std::vector<char*> positional = absl::ParseCommandLine(
      static_cast<int>(normalized.size()), normalized.data());
  const std::string mode = positional.size() > 1 ? positional[1] : "";
  if (positional.size() > 2 ||
      (!mode.empty() && mode != "backup" && mode != "restore")) {
    std::cerr << "dpopt-server: unexpected argument \"" << positional.back()
              << "\" (see --help)" << std::endl;
    return 2;
  }
  if (mode != "backup" && !absl::GetFlag(FLAGS_to).empty()) {
    std::cerr << "dpopt-server: --to is only for `dpopt-server backup`"
              << std::endl;
    return 2;
  }
  if (mode != "restore" && !absl::GetFlag(FLAGS_from).empty()) {
    std::cerr << "dpopt-server: --from is only for `dpopt-server restore`"
              << std::endl;
    return 2;
  }
  if (mode == "backup") return RunBackup();
  if (mode == "restore") return RunRestore();

  dpopt::server::ServerOptions o;
  o.db_path = absl::GetFlag(FLAGS_db);
  o.listen = absl::GetFlag(FLAGS_listen);
  o.workers = absl::GetFlag(FLAGS_workers);
  o.queue_capacity = absl::GetFlag(FLAGS_queue);
  o.dataset_cache_mb = absl::GetFlag(FLAGS_dataset_cache_mb);
  o.max_job_work = absl::GetFlag(FLAGS_max_job_work);
  o.kernel_threads = absl::GetFlag(FLAGS_kernel_threads);
  o.curator_token_file = absl::GetFlag(FLAGS_curator_token_file);
  o.tls_cert = absl::GetFlag(FLAGS_tls_cert);
  o.tls_key = absl::GetFlag(FLAGS_tls_key);
  o.tls_client_ca = absl::GetFlag(FLAGS_tls_client_ca);
  o.insecure = absl::GetFlag(FLAGS_insecure);
  o.console_listen = absl::GetFlag(FLAGS_console_listen);
  if (!absl::GetFlag(FLAGS_mpirun).empty()) {
    dpopt::optim::distributed_dda::MpiSettings m;
    m.mpirun = absl::GetFlag(FLAGS_mpirun);
    m.worker = absl::GetFlag(FLAGS_dda_worker);
    if (m.worker.empty()) {
      std::error_code ec;
      const auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
      m.worker = (self.parent_path() / "dpopt-dda-worker").string();
    }
    m.hostfile = absl::GetFlag(FLAGS_mpi_hostfile);
    for (absl::string_view a : absl::StrSplit(absl::GetFlag(FLAGS_mpi_args),
                                              ',', absl::SkipEmpty())) {
      m.mpirun_args.emplace_back(a);
    }
    m.timeout = absl::Seconds(absl::GetFlag(FLAGS_mpi_timeout));
    m.max_ranks = absl::GetFlag(FLAGS_mpi_max_ranks);
    if (access(m.worker.c_str(), X_OK) != 0) {
      std::cerr << "dpopt-server: --mpirun is set but the dp_dda worker "
                << m.worker << " is not executable (give --dda-worker)"
                << std::endl;
      return 1;
    }
    o.mpi = m;
  }
  o.ledger_mark_file = absl::GetFlag(FLAGS_ledger_mark_file);
  o.allow_ledger_rollback =
      absl::GetFlag(FLAGS_allow_ledger_rollback_respending_budget);
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
  const dpopt::storage::LedgerMarkCheck& mark = (*server)->ledger_mark_check();
  if (mark.rolled_back) {
    std::cerr << "dpopt-server: WARNING: started on a ledger ROLLED BACK to "
                 "charge #"
              << mark.ledger_seq << " (its high-water mark said "
              << (mark.mark_seq ? absl::StrCat("#", *mark.mark_seq)
                                : std::string("nothing readable"))
              << "): the forgotten charges' budget may be spent again. "
                 "Recorded in the audit log; the mark now follows this "
                 "ledger."
              << std::endl;
  } else if (!mark.mark_seq.has_value()) {
    std::cerr << "dpopt-server: created the ledger high-water mark "
              << o.LedgerMarkFile() << " at charge #" << mark.ledger_seq
              << std::endl;
  }
  if ((*server)->discarded_imports() > 0) {
    std::cerr << "dpopt-server: removed " << (*server)->discarded_imports()
              << " dataset import(s) interrupted by a previous stop (never "
                 "visible; nothing was charged)"
              << std::endl;
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
