// dpopt-server: the curator's long-running gRPC service.
#include <sys/stat.h>
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
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "core/common/status_macros.h"
#include "core/optim/mpi_pool/worker_pool.h"
#include "server/auth.h"
#include "server/event_log.h"
#include "server/server.h"
#include "storage/access_store.h"
#include "storage/audit_archive.h"
#include "storage/backup.h"
#include "storage/database.h"
#include "storage/file_util.h"
#include "storage/sqlite.h"

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
ABSL_FLAG(int64_t, max_trace_bytes_per_job,
          dpopt::server::kDefaultMaxTraceBytesPerJob,
          "largest public bound on a job's stored trace, in bytes ((steps / "
          "trace_every + 2) points of 64 + 8 x traced parameters bytes); "
          "larger jobs are refused before charging; 0 = no limit");
ABSL_FLAG(int64_t, max_watch_buffer_bytes,
          dpopt::server::kDefaultMaxWatchBufferBytes,
          "bytes of job events the server holds for one WatchJob stream; a "
          "watcher that falls further behind is dropped (it can watch again "
          "and replay the stored trace); in [1 MiB, 1 GiB]");
ABSL_FLAG(int64_t, grpc_memory_mb,
          dpopt::server::ServerOptions().grpc_memory_mb,
          "memory (MiB) gRPC may use for its buffers and messages in flight "
          "(its resource quota); past it gRPC refuses new work");
ABSL_FLAG(int, max_concurrent_streams,
          dpopt::server::ServerOptions().max_concurrent_streams,
          "most concurrent calls (HTTP/2 streams) on one client connection");
ABSL_FLAG(int64_t, dataset_cache_mb, 512,
          "memory cap (MiB) of the decoded datasets kept between jobs so a "
          "job does not re-read its rows from the database; least recently "
          "used first out; 0 turns the cache off");
ABSL_FLAG(std::string, curator_token_file, "",
          "where the first start on a fresh database writes the curator's "
          "bearer token (mode 0600), and where rotate-curator-token writes "
          "its replacement; default: the --db path + \".curator-token\"");
ABSL_FLAG(std::string, tls_cert, "", "TLS certificate chain (PEM)");
ABSL_FLAG(std::string, tls_key, "", "TLS private key (PEM)");
ABSL_FLAG(std::string, tls_client_ca, "",
          "CA (PEM) that must have signed client certificates (mutual TLS)");
ABSL_FLAG(bool, insecure, false,
          "allow listening on a non-loopback address without TLS (only "
          "behind a trusted TLS-terminating proxy; tokens travel in clear)");

ABSL_FLAG(std::string, log_format, "text",
          "text: one line per event; json: one JSON object per line (time, "
          "level, event, message, job, principal, dataset, status)");
ABSL_FLAG(absl::Duration, drain_timeout, absl::Seconds(60),
          "on SIGTERM/SIGINT: how long admitted jobs may keep running after "
          "the server stops admitting new ones (health reports NOT_SERVING); "
          "then the rest are cancelled (they stay charged) and the server "
          "exits 0");
ABSL_FLAG(std::string, metrics_listen, "",
          "serve Prometheus metrics at http://HOST:PORT/metrics (e.g. "
          "127.0.0.1:9464; off when empty, the default). Loopback addresses "
          "only: plain HTTP without authentication (docs/operations.md)");
ABSL_FLAG(bool, metrics_dataset_budgets, false,
          "also export each private dataset's epsilon spent and remaining, "
          "labelled with the dataset's name (off by default)");
ABSL_FLAG(std::string, console_listen, "",
          "serve the read-only web console on HOST:PORT (e.g. "
          "127.0.0.1:8080; off when empty, the default). Same tokens and "
          "roles as the API; HTTPS with the --tls-* files when they are "
          "given; without TLS only on a loopback address unless "
          "--console-insecure");
ABSL_FLAG(bool, console_insecure, false,
          "allow the console on a non-loopback address without TLS (only "
          "behind a trusted TLS-terminating proxy; tokens travel in clear). "
          "--insecure does not cover the console");
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
// The MPI worker pool (the gradient, accelerated and line-search job types with
// "execution": "EXECUTION_MPI_POOL"; DEVELOPERS.md, "Worker pool").
ABSL_FLAG(int, mpi_pool, 0,
          "ranks of the MPI worker pool started with the server, in [0, "
          "1024]; 0 (the default): no pool, and jobs asking for it are "
          "refused before anything is charged. Uses --mpirun (default "
          "mpirun), --mpi-hostfile and --mpi-args");
ABSL_FLAG(std::string, mpi_pool_worker, "",
          "the dpopt-mpi-pool executable the pool's ranks run (default: next "
          "to dpopt-server)");
ABSL_FLAG(std::string, mpi_pool_connect, "",
          "connect to an operator-started pool of --mpi-pool ranks (rank 0 of "
          "`mpirun ... dpopt-mpi-pool --store=DIR --listen=SOCKET`, on this "
          "host) at this Unix socket instead of starting mpirun; "
          "--mpi-pool-worker, --mpi-pool-store and the --mpi* launcher flags "
          "are then unused (docs/scale-out.md)");
ABSL_FLAG(std::string, mpi_pool_store, "",
          "each pool rank's shard directory (rank r uses DIR/rank-r on its "
          "host; an absolute path valid on every host); default: the --db "
          "path + \".pool-shards\"");

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
ABSL_FLAG(std::string, deletion_record_file, "",
          "the record of deleted datasets, kept outside the database so that "
          "a dataset deleted after a backup was taken is erased again when "
          "that backup is restored; default: beside the ledger mark, the "
          "--ledger-mark-file path with \".ledger-mark\" replaced by "
          "\".deletions\" (the --db path + \".deletions\" by default)");
ABSL_FLAG(bool, keep_old, false,
          "restore: keep the replaced database files as "
          "DB.pre-restore-<time>[-wal] (they hold every row in plaintext); "
          "by default they are removed once the restored copy is in place");
ABSL_FLAG(bool, reflection, false,
          "serve gRPC server reflection (lets any client that reaches the "
          "port list the services and messages); off by default");
ABSL_FLAG(int, max_jobs_per_principal,
          dpopt::server::PrincipalLimits().max_active_jobs,
          "most jobs one principal may have queued or running (public-"
          "dataset jobs included); over it SubmitJob fails with "
          "RESOURCE_EXHAUSTED and nothing is charged; 0 = no limit");
ABSL_FLAG(int, max_estimates_per_second,
          dpopt::server::PrincipalLimits().max_estimates_per_second,
          "most EstimateJob calls one principal may make per second (bursts "
          "of one second's worth); 0 = no limit");
ABSL_FLAG(int, max_watches_per_principal,
          dpopt::server::PrincipalLimits().max_watch_streams,
          "most WatchJob streams one principal may have open; 0 = no limit");
ABSL_FLAG(int, max_token_ttl_days,
          dpopt::server::TokenLifetimeOptions().max_ttl_seconds / 86400,
          "longest lifetime of a token, and the lifetime of one created "
          "without --ttl; analyst tokens cannot be made to never expire "
          "unless this is 0 (no maximum)");
ABSL_FLAG(std::string, to, "",
          "backup: the backup file to create; audit-archive: the archive "
          "file to create (must not exist)");
ABSL_FLAG(std::string, before, "",
          "audit-archive: archive the audit records older than this date "
          "(YYYY-MM-DD, UTC midnight, or RFC 3339 time)");
ABSL_FLAG(std::string, from, "", "restore: the backup file to restore");

using dpopt::server::LogEvent;
using dpopt::server::LogFormat;
using dpopt::server::LogLevel;
using dpopt::server::ParseLogFormat;
using dpopt::server::SetLogFormat;

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

// dpopt-server audit-verify --db=PATH
int RunAuditVerify() {
  dpopt::storage::ConnectionOptions options;
  options.read_only = true;
  options.create_if_missing = false;
  auto conn =
      dpopt::storage::Connection::Open(absl::GetFlag(FLAGS_db), options);
  if (!conn.ok()) {
    std::cerr << "dpopt-server audit-verify: " << conn.status() << std::endl;
    return 1;
  }
  auto report = dpopt::storage::AccessStore::VerifyAuditChain(**conn);
  if (!report.ok()) {
    std::cerr << "dpopt-server audit-verify: " << report.status() << std::endl;
    return 1;
  }
  if (!report->ok()) {
    std::cout << "audit log of " << absl::GetFlag(FLAGS_db)
              << ": BROKEN at record #" << report->first_broken_seq
              << " (its hash does not match its fields and its "
                 "predecessor: the record, or one before it, was changed or "
                 "removed outside the server); "
              << report->records << " records" << std::endl;
    return 1;
  }
  std::cout << "audit log of " << absl::GetFlag(FLAGS_db) << ": "
            << report->chained_records << " chained records verified, "
            << report->legacy_records
            << " older records from before the chain; head "
            << absl::BytesToHexString(report->head) << std::endl;
  return 0;
}

// dpopt-server audit-archive --db=PATH --before=DATE --to=FILE
int RunAuditArchive() {
  const std::string when = absl::GetFlag(FLAGS_before);
  absl::Time before;
  std::string err;
  if (when.empty() ||
      (!absl::ParseTime("%Y-%m-%d", when, absl::UTCTimeZone(), &before, &err) &&
       !absl::ParseTime(absl::RFC3339_full, when, &before, &err))) {
    std::cerr << "dpopt-server audit-archive: --before=DATE is required "
                 "(YYYY-MM-DD or RFC 3339)"
              << std::endl;
    return 2;
  }
  if (absl::GetFlag(FLAGS_to).empty()) {
    std::cerr << "dpopt-server audit-archive: --to=FILE is required"
              << std::endl;
    return 2;
  }
  auto r = dpopt::storage::ArchiveAuditLog(absl::GetFlag(FLAGS_db), before,
                                           absl::GetFlag(FLAGS_to));
  if (!r.ok()) {
    std::cerr << "dpopt-server audit-archive: " << r.status() << std::endl;
    return 1;
  }
  if (r->records == 0) {
    std::cout << "no audit record is older than " << when
              << "; nothing archived" << std::endl;
    return 0;
  }
  std::cout << "archived audit records #" << r->first_seq << "-#" << r->last_seq
            << " (" << r->records << ") to " << absl::GetFlag(FLAGS_to)
            << " (sha256 " << r->file_sha256_hex << "); chain head "
            << r->chain_head_hex << " (recorded in the audit log)" << std::endl;
  return 0;
}

// dpopt-server rotate-curator-token --db=PATH [--curator-token-file=PATH]
int RunRotateCuratorToken() {
  dpopt::server::ServerOptions o;
  o.db_path = absl::GetFlag(FLAGS_db);
  o.curator_token_file = absl::GetFlag(FLAGS_curator_token_file);
  auto rotated =
      [&]() -> absl::StatusOr<dpopt::server::Authenticator::Rotation> {
    // Offline, like restore: no server may hold the database meanwhile.
    ASSIGN_OR_RETURN(std::unique_ptr<dpopt::storage::FileLock> lock,
                     dpopt::storage::FileLock::TryAcquire(
                         dpopt::storage::DatabaseLockPath(o.db_path)));
    dpopt::storage::DatabaseOptions db_options;
    db_options.create_if_missing = false;
    ASSIGN_OR_RETURN(std::unique_ptr<dpopt::storage::Database> db,
                     dpopt::storage::Database::Open(o.db_path, db_options));
    dpopt::server::Authenticator auth(db.get());
    return auth.RotateBootstrapToken(o.TokenFile());
  }();
  if (!rotated.ok()) {
    std::cerr << "dpopt-server rotate-curator-token: " << rotated.status()
              << std::endl;
    return 1;
  }
  std::cout << "new curator token " << rotated->new_token_id << " written to "
            << o.TokenFile() << " (mode 0600); revoked "
            << (rotated->revoked_token_ids.empty()
                    ? std::string("none")
                    : absl::StrJoin(rotated->revoked_token_ids, ", "))
            << ". Recorded in the audit log." << std::endl;
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
  o.deletion_record_file = absl::GetFlag(FLAGS_deletion_record_file);
  dpopt::storage::RestoreOptions ro;
  ro.from = absl::GetFlag(FLAGS_from);
  ro.db_path = o.db_path;
  ro.ledger_mark_path = o.LedgerMarkFile();
  ro.deletion_record_path = o.DeletionRecordFile();
  ro.keep_old = absl::GetFlag(FLAGS_keep_old);
  auto r = dpopt::storage::RestoreDatabase(ro);
  if (!r.ok()) {
    std::cerr << "dpopt-server restore: " << r.status() << std::endl;
    return 1;
  }
  std::cout << "restored " << ro.from << " to " << o.db_path << ": "
            << Describe(r->restored) << std::endl;
  for (const dpopt::storage::DeletionEntry& e : r->reapplied_deletions) {
    std::cout << "dataset \"" << e.name
              << "\" was deleted after this backup was taken: its rows were "
                 "erased from the restored database (recorded in the audit "
                 "log)"
              << std::endl;
  }
  for (const std::string& f : r->moved_aside) {
    std::cout << "previous file kept as " << f << std::endl;
  }
  if (!r->removed.empty()) {
    std::cout << "previous database files removed (" << r->removed.size()
              << "); pass --keep-old to keep them" << std::endl;
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
  // Everything this process creates (database, WAL, shared-memory index,
  // backups, the ledger mark, the token file) is for its owner only; the
  // files are also created with explicit 0600 modes (storage/file_util.h).
  ::umask(077);
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
      "[--max-trace-bytes-per-job=N] [--max-watch-buffer-bytes=N] "
      "[--grpc-memory-mb=N] [--max-concurrent-streams=N] "
      "[--curator-token-file=PATH] "
      "[--tls-cert=PEM "
      "--tls-key=PEM [--tls-client-ca=PEM]] [--insecure] "
      "[--console-listen=HOST:PORT [--console-insecure]] "
      "[--ledger-mark-file=PATH] "
      "[--reflection] [--max-jobs-per-principal=N] "
      "[--max-estimates-per-second=N] [--max-watches-per-principal=N] "
      "[--max-token-ttl-days=N]\n"
      "       [--metrics-listen=HOST:PORT [--metrics-dataset-budgets]] "
      "[--log-format=text|json] [--drain-timeout=60s]\n"
      "       [--mpirun=PATH [--dda-worker=PATH] "
      "[--mpi-hostfile=FILE] [--mpi-args=A,B] [--mpi-timeout=S] "
      "[--mpi-max-ranks=N]]\n"
      "       [--mpi-pool=N [--mpi-pool-worker=PATH] "
      "[--mpi-pool-store=DIR] [--mpi-pool-connect=SOCKET]]\n"
      "       dpopt-server backup --db=PATH --to=FILE     online backup "
      "(SQLite "
      "backup API), safe while the server runs\n"
      "       dpopt-server restore --from=FILE --db=PATH  offline restore "
      "(server stopped; see docs/backup.md)\n"
      "                       [--keep-old]                keep the replaced "
      "database files\n"
      "       dpopt-server audit-verify --db=PATH         check the audit "
      "log's hash chain (safe while the server runs)\n"
      "       dpopt-server audit-archive --db=PATH --before=DATE --to=FILE\n"
      "                                                   move older audit "
      "records to FILE (verified; recorded in the log)\n"
      "       dpopt-server rotate-curator-token --db=PATH "
      "[--curator-token-file=PATH]\n"
      "                                                   replace the "
      "bootstrap "
      "curator token (server stopped; the old one is revoked)");
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
  {
    absl::StatusOr<LogFormat> format =
        ParseLogFormat(absl::GetFlag(FLAGS_log_format));
    if (!format.ok()) {
      std::cerr << "dpopt-server: " << format.status().message() << std::endl;
      return 2;
    }
    SetLogFormat(*format);
  }
  const std::string mode = positional.size() > 1 ? positional[1] : "";
  const bool known_mode = mode.empty() || mode == "backup" ||
                          mode == "restore" || mode == "audit-verify" ||
                          mode == "audit-archive" ||
                          mode == "rotate-curator-token";
  if (positional.size() > 2 || !known_mode) {
    std::cerr << "dpopt-server: unexpected argument \"" << positional.back()
              << "\" (see --help)" << std::endl;
    return 2;
  }
  if (mode != "backup" && mode != "audit-archive" &&
      !absl::GetFlag(FLAGS_to).empty()) {
    std::cerr << "dpopt-server: --to is only for `dpopt-server backup` and "
                 "`dpopt-server audit-archive`"
              << std::endl;
    return 2;
  }
  if (mode != "audit-archive" && !absl::GetFlag(FLAGS_before).empty()) {
    std::cerr << "dpopt-server: --before is only for `dpopt-server "
                 "audit-archive`"
              << std::endl;
    return 2;
  }
  if (mode != "restore" && absl::GetFlag(FLAGS_keep_old)) {
    std::cerr << "dpopt-server: --keep-old is only for `dpopt-server restore`"
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
  if (mode == "audit-verify") return RunAuditVerify();
  if (mode == "audit-archive") return RunAuditArchive();
  if (mode == "rotate-curator-token") return RunRotateCuratorToken();

  dpopt::server::ServerOptions o;
  o.db_path = absl::GetFlag(FLAGS_db);
  o.listen = absl::GetFlag(FLAGS_listen);
  o.workers = absl::GetFlag(FLAGS_workers);
  o.queue_capacity = absl::GetFlag(FLAGS_queue);
  o.dataset_cache_mb = absl::GetFlag(FLAGS_dataset_cache_mb);
  o.max_job_work = absl::GetFlag(FLAGS_max_job_work);
  o.max_trace_bytes_per_job = absl::GetFlag(FLAGS_max_trace_bytes_per_job);
  o.max_watch_buffer_bytes = absl::GetFlag(FLAGS_max_watch_buffer_bytes);
  o.grpc_memory_mb = absl::GetFlag(FLAGS_grpc_memory_mb);
  o.max_concurrent_streams = absl::GetFlag(FLAGS_max_concurrent_streams);
  o.kernel_threads = absl::GetFlag(FLAGS_kernel_threads);
  o.curator_token_file = absl::GetFlag(FLAGS_curator_token_file);
  o.tls_cert = absl::GetFlag(FLAGS_tls_cert);
  o.tls_key = absl::GetFlag(FLAGS_tls_key);
  o.tls_client_ca = absl::GetFlag(FLAGS_tls_client_ca);
  o.insecure = absl::GetFlag(FLAGS_insecure);
  o.console_listen = absl::GetFlag(FLAGS_console_listen);
  o.console_insecure = absl::GetFlag(FLAGS_console_insecure);
  o.metrics.listen = absl::GetFlag(FLAGS_metrics_listen);
  o.metrics.dataset_budgets = absl::GetFlag(FLAGS_metrics_dataset_budgets);
  o.reflection = absl::GetFlag(FLAGS_reflection);
  o.limits.max_active_jobs = absl::GetFlag(FLAGS_max_jobs_per_principal);
  o.limits.max_estimates_per_second =
      absl::GetFlag(FLAGS_max_estimates_per_second);
  o.limits.max_watch_streams = absl::GetFlag(FLAGS_max_watches_per_principal);
  o.tokens.max_ttl_seconds =
      int64_t{absl::GetFlag(FLAGS_max_token_ttl_days)} * 86400;
  if (!absl::GetFlag(FLAGS_mpirun).empty()) {
    dpopt::optim::MpiSettings m;
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
  if (absl::GetFlag(FLAGS_mpi_pool) < 0 ||
      absl::GetFlag(FLAGS_mpi_pool) > 1024) {
    std::cerr << "dpopt-server: --mpi-pool must be in [0, 1024] (0 = no pool)"
              << std::endl;
    return 2;
  }
  if (absl::GetFlag(FLAGS_mpi_pool) > 0) {
    dpopt::optim::mpi_pool::WorkerPoolOptions p;
    p.ranks = absl::GetFlag(FLAGS_mpi_pool);
    p.mpirun = absl::GetFlag(FLAGS_mpirun).empty()
                   ? "mpirun"
                   : absl::GetFlag(FLAGS_mpirun);
    p.connect = absl::GetFlag(FLAGS_mpi_pool_connect);
    p.worker = absl::GetFlag(FLAGS_mpi_pool_worker);
    if (p.worker.empty()) {
      std::error_code ec;
      const auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
      p.worker = (self.parent_path() / "dpopt-mpi-pool").string();
    }
    if (p.connect.empty() && access(p.worker.c_str(), X_OK) != 0) {
      std::cerr << "dpopt-server: --mpi-pool is set but the pool program "
                << p.worker << " is not executable (give --mpi-pool-worker)"
                << std::endl;
      return 1;
    }
    p.store_dir = absl::GetFlag(FLAGS_mpi_pool_store);
    p.hostfile = absl::GetFlag(FLAGS_mpi_hostfile);
    for (absl::string_view a : absl::StrSplit(absl::GetFlag(FLAGS_mpi_args),
                                              ',', absl::SkipEmpty())) {
      p.mpirun_args.emplace_back(a);
    }
    // Never allow_testing_worker: only the production pool program (secure
    // generators) serves this server.
    o.mpi_pool =
        std::make_shared<const dpopt::optim::mpi_pool::WorkerPoolOptions>(p);
  } else if (!absl::GetFlag(FLAGS_mpi_pool_worker).empty() ||
             !absl::GetFlag(FLAGS_mpi_pool_store).empty() ||
             !absl::GetFlag(FLAGS_mpi_pool_connect).empty()) {
    std::cerr << "dpopt-server: --mpi-pool-worker, --mpi-pool-store and "
                 "--mpi-pool-connect need --mpi-pool=N (N > 0)"
              << std::endl;
    return 2;
  }
  o.ledger_mark_file = absl::GetFlag(FLAGS_ledger_mark_file);
  o.deletion_record_file = absl::GetFlag(FLAGS_deletion_record_file);
  o.allow_ledger_rollback =
      absl::GetFlag(FLAGS_allow_ledger_rollback_respending_budget);
  if (o.insecure && o.tls_cert.empty() &&
      !dpopt::server::IsLoopbackAddress(o.listen)) {
    std::cerr << "dpopt-server: WARNING: --insecure: listening on " << o.listen
              << " WITHOUT TLS; bearer tokens and results cross the network "
                 "in clear text. Use only behind a TLS-terminating proxy."
              << std::endl;
  }
  if (const std::string w = dpopt::server::DatabaseDirectoryWarning(o.db_path);
      !w.empty()) {
    std::cerr << "dpopt-server: WARNING: " << w << std::endl;
  }
  auto server = dpopt::server::DpoptServer::Start(o);
  if (!server.ok()) {
    LogEvent(LogLevel::kError, "start_failed", server.status().ToString());
    return 1;
  }
  LogEvent(LogLevel::kInfo, "listening",
           absl::StrCat("listening on port ", (*server)->port(),
                        o.tls_cert.empty() ? " (plaintext)" : " (TLS)",
                        ", database ", o.db_path));
  if ((*server)->console_port() > 0) {
    LogEvent(LogLevel::kInfo, "console",
             absl::StrCat(
                 "web console on ", o.tls_cert.empty() ? "http" : "https",
                 "://", o.console_listen.substr(0, o.console_listen.rfind(':')),
                 ":", (*server)->console_port(), "/console/"));
  }
  if ((*server)->metrics_port() > 0) {
    LogEvent(
        LogLevel::kInfo, "metrics",
        absl::StrCat("metrics on http://",
                     o.metrics.listen.substr(0, o.metrics.listen.rfind(':')),
                     ":", (*server)->metrics_port(), "/metrics"));
  }
  const dpopt::storage::LedgerMarkCheck& mark = (*server)->ledger_mark_check();
  if (mark.rolled_back) {
    LogEvent(
        LogLevel::kWarning, "ledger_rolled_back",
        absl::StrCat("WARNING: started on a ledger ROLLED BACK to charge #",
                     mark.ledger_seq, " (its high-water mark said ",
                     mark.mark_seq ? absl::StrCat("#", *mark.mark_seq)
                                   : std::string("nothing readable"),
                     "): the forgotten charges' budget may be spent again. "
                     "Recorded in the audit log; the mark now follows this "
                     "ledger."));
  } else if (!mark.mark_seq.has_value()) {
    LogEvent(LogLevel::kInfo, "ledger_mark_created",
             absl::StrCat("created the ledger high-water mark ",
                          o.LedgerMarkFile(), " at charge #", mark.ledger_seq));
  }
  for (const dpopt::storage::DeletionEntry& e :
       (*server)->reapplied_deletions()) {
    LogEvent(LogLevel::kWarning, "deletion_reapplied",
             absl::StrCat("dataset \"", e.name,
                          "\" was deleted but live in this database (a "
                          "backup restored from before the deletion, or an "
                          "interrupted deletion): its rows were erased again "
                          "(recorded in the audit log)"));
  }
  if ((*server)->discarded_imports() > 0) {
    LogEvent(LogLevel::kInfo, "imports_discarded",
             absl::StrCat("removed ", (*server)->discarded_imports(),
                          " dataset import(s) interrupted by a previous stop "
                          "(never visible; nothing was charged)"));
  }
  if ((*server)->bootstrapped()) {
    LogEvent(LogLevel::kInfo, "curator_created",
             absl::StrCat("created the curator principal \"curator\"; its "
                          "token is in ",
                          o.TokenFile(), " (mode 0600)"));
  }
  std::signal(SIGINT, OnSignal);
  std::signal(SIGTERM, OnSignal);
  while (g_signal == 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  const absl::Duration drain = absl::GetFlag(FLAGS_drain_timeout);
  LogEvent(LogLevel::kInfo, "draining",
           absl::StrCat("draining (signal ", static_cast<int>(g_signal),
                        "): no new jobs; running jobs may finish within ",
                        absl::FormatDuration(drain)));
  const bool idle = (*server)->Drain(drain);
  LogEvent(LogLevel::kInfo, "stopped",
           absl::StrCat("stopped",
                        idle ? ""
                             : " (jobs still running at the drain timeout "
                               "were cancelled; they stay charged)"));
  return 0;
}
