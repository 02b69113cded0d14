#include "server/server.h"

#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "core/common/address.h"
#include "core/common/status_macros.h"
#include "core/optim/mpi_pool/worker_pool.h"
#include "core/optim/parallel.h"
#include "google/protobuf/descriptor.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/health_check_service_interface.h"
#include "grpcpp/resource_quota.h"
#include "server/auth.h"
#include "server/call_guards.h"
#include "server/console/console.h"
#include "server/dataset_manager.h"
#include "server/job_manager.h"
#include "server/principal_limits.h"
#include "server/services.h"
#include "server/startup_listener.h"
#include "server/trace_hub.h"
#include "storage/database.h"
#include "storage/file_util.h"

namespace dpopt::server {

bool IsLoopbackAddress(absl::string_view listen) {
  return ::dpopt::IsLoopbackAddress(listen);
}

std::string DatabaseDirectoryWarning(const std::string& db_path) {
  std::string dir = std::filesystem::path(db_path).parent_path().string();
  if (dir.empty()) dir = ".";
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0) return "";
  if ((st.st_mode & (S_IRWXG | S_IRWXO)) == 0) return "";
  return absl::StrFormat(
      "the database directory %s has mode %04o: other users can list it%s. "
      "Keep the database in a directory only the server's user can read "
      "(chmod 700 %s)",
      dir, st.st_mode & 07777,
      (st.st_mode & (S_IWGRP | S_IWOTH)) != 0 ? " and replace its files" : "",
      dir);
}

namespace {

// Serves gRPC reflection on this server only when asked: linking the
// reflection library registers its plugin for every ServerBuilder of the
// process (a static initializer), so the plugin is removed here unless
// wanted, and added if wanted and missing.
class ReflectionOption : public grpc::ServerBuilderOption {
 public:
  explicit ReflectionOption(bool enabled) : enabled_(enabled) {}
  void UpdateArguments(grpc::ChannelArguments*) override {}
  void UpdatePlugins(std::vector<std::unique_ptr<grpc::ServerBuilderPlugin>>*
                         plugins) override {
    const std::string name =
        grpc::reflection::ProtoServerReflectionPlugin().name();
    auto is_reflection = [&](const auto& p) { return p->name() == name; };
    plugins->erase(
        std::remove_if(plugins->begin(), plugins->end(), is_reflection),
        plugins->end());
    if (enabled_) {
      plugins->push_back(
          std::make_unique<grpc::reflection::ProtoServerReflectionPlugin>());
    }
  }

 private:
  const bool enabled_;
};

absl::StatusOr<std::string> ReadPem(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot read TLS file ", path));
  }
  std::stringstream buf;
  buf << in.rdbuf();
  return buf.str();
}
}  // namespace

absl::Status ServerOptions::Validate() const {
  if (db_path.empty()) return absl::InvalidArgumentError("--db is required");
  if (listen.empty()) return absl::InvalidArgumentError("--listen is required");
  if (workers < 1 || workers > 256) {
    return absl::InvalidArgumentError("--workers must be in [1, 256]");
  }
  if (queue_capacity < 1 || queue_capacity > 100000) {
    return absl::InvalidArgumentError("--queue must be in [1, 100000]");
  }
  if (dataset_cache_mb < 0 || dataset_cache_mb > (int64_t{1} << 30)) {
    return absl::InvalidArgumentError(
        "--dataset-cache-mb must be in [0, 2^30] (0 turns the cache off)");
  }
  if (kernel_threads < 0 ||
      kernel_threads > optim::ParallelOptions::kMaxThreads) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--kernel-threads must be in [0, ", optim::ParallelOptions::kMaxThreads,
        "] (0 = hardware threads, at most ",
        optim::ParallelOptions::kDefaultMaxThreads, ")"));
  }
  if (max_message_bytes < (1 << 20) + (64 << 10) ||
      max_message_bytes > (64 << 20)) {
    return absl::InvalidArgumentError(
        "max_message_bytes must be in [1 MiB + 64 KiB, 64 MiB] (import "
        "chunks are 1 MiB)");
  }
  RETURN_IF_ERROR(limits.Validate());
  RETURN_IF_ERROR(tokens.Validate());
  if (max_trace_bytes_per_job < 0 ||
      max_trace_bytes_per_job > (int64_t{1} << 40)) {
    return absl::InvalidArgumentError(
        "--max-trace-bytes-per-job must be in [0, 2^40] (0 = no limit)");
  }
  TraceHub::Options hub;
  hub.max_buffered_bytes_per_watcher = max_watch_buffer_bytes;
  RETURN_IF_ERROR(hub.Validate());
  if (grpc_memory_mb < 16 || grpc_memory_mb > (int64_t{1} << 20)) {
    return absl::InvalidArgumentError("--grpc-memory-mb must be in [16, 2^20]");
  }
  if (max_concurrent_streams < 1 || max_concurrent_streams > 100000) {
    return absl::InvalidArgumentError(
        "--max-concurrent-streams must be in [1, 100000]");
  }
  if (tls_cert.empty() != tls_key.empty()) {
    return absl::InvalidArgumentError(
        "--tls-cert and --tls-key must be given together");
  }
  if (!tls_client_ca.empty() && tls_cert.empty()) {
    return absl::InvalidArgumentError(
        "--tls-client-ca (mutual TLS) needs --tls-cert and --tls-key");
  }
  if (!console_listen.empty()) {
    console::ConsoleOptions co;
    co.listen = console_listen;
    co.tls_cert = tls_cert;
    co.tls_key = tls_key;
    co.insecure = console_insecure;
    RETURN_IF_ERROR(co.Validate());
  }
  if (tls_cert.empty() && !insecure && !IsLoopbackAddress(listen)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "refusing to listen on ", listen,
        " without TLS: bearer tokens would cross the network in clear text. "
        "Give --tls-cert and --tls-key, listen on 127.0.0.1, or pass "
        "--insecure if a trusted proxy terminates TLS"));
  }
  RETURN_IF_ERROR(metrics.Validate());
  if (mpi_pool != nullptr) {
    optim::mpi_pool::WorkerPoolOptions pool = *mpi_pool;
    pool.store_dir = PoolStoreDir();
    absl::Status valid = pool.Validate();
    if (!valid.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("worker pool (--mpi-pool): ", valid.message()));
    }
  }
  return absl::OkStatus();
}

std::string ServerOptions::PoolStoreDir() const {
  if (mpi_pool != nullptr && !mpi_pool->store_dir.empty()) {
    return mpi_pool->store_dir;
  }
  std::error_code ec;
  const std::filesystem::path dir =
      std::filesystem::absolute(db_path + ".pool-shards", ec);
  return ec ? db_path + ".pool-shards" : dir.string();
}

const std::vector<storage::DeletionEntry>& DpoptServer::reapplied_deletions()
    const {
  return db_->reapplied_deletions();
}

absl::StatusOr<std::unique_ptr<DpoptServer>> DpoptServer::Start(
    const ServerOptions& options) {
  RETURN_IF_ERROR(options.Validate());
  std::unique_ptr<DpoptServer> s(new DpoptServer());
  if (options.kernel_threads > 0) {
    optim::ParallelOptions parallel;
    parallel.threads = options.kernel_threads;
    RETURN_IF_ERROR(optim::SetParallelOptions(parallel));
  }
  s->options_ = options;
  // One server per database: a second server (or `dpopt-server restore`)
  // would race this one's ledger mark and files.
  ASSIGN_OR_RETURN(s->lock_, storage::FileLock::TryAcquire(
                                 storage::DatabaseLockPath(options.db_path)));
  std::shared_ptr<grpc::ServerCredentials> creds =
      grpc::InsecureServerCredentials();
  if (!options.tls_cert.empty()) {
    grpc::SslServerCredentialsOptions ssl(
        options.tls_client_ca.empty()
            ? GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE
            : GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
    grpc::SslServerCredentialsOptions::PemKeyCertPair pair;
    ASSIGN_OR_RETURN(pair.private_key, ReadPem(options.tls_key));
    ASSIGN_OR_RETURN(pair.cert_chain, ReadPem(options.tls_cert));
    ssl.pem_key_cert_pairs.push_back(std::move(pair));
    if (!options.tls_client_ca.empty()) {
      ASSIGN_OR_RETURN(ssl.pem_root_certs, ReadPem(options.tls_client_ca));
    }
    creds = grpc::SslServerCredentials(ssl);
  }

  // The port opens now; until the database is open and the jobs recovered
  // it answers health NOT_SERVING and every method UNAVAILABLE.
  ASSIGN_OR_RETURN(std::unique_ptr<StartupListener> startup,
                   StartupListener::Start(options.listen, creds));
  if (options.before_open_for_testing) {
    options.before_open_for_testing(startup->port());
  }
  storage::DatabaseOptions db_options;
  db_options.ledger_mark_path = options.LedgerMarkFile();
  db_options.allow_ledger_rollback = options.allow_ledger_rollback;
  db_options.deletion_record_path = options.DeletionRecordFile();
  ASSIGN_OR_RETURN(s->db_,
                   storage::Database::Open(options.db_path, db_options));
  s->mark_check_ = s->db_->ledger_mark_check();
  // Imports a crash interrupted were never visible: remove their rows.
  ASSIGN_OR_RETURN(s->discarded_imports_,
                   s->db_->datasets().DiscardStagedImports());
  TraceHub::Options hub_options;
  hub_options.max_buffered_bytes_per_watcher = options.max_watch_buffer_bytes;
  s->hub_ = std::make_unique<TraceHub>(hub_options);
  if (options.mpi_pool != nullptr) {
    // The pool starts with the server: a server that was asked for a pool
    // and cannot start it does not start either.
    optim::mpi_pool::WorkerPoolOptions pool = *options.mpi_pool;
    pool.store_dir = options.PoolStoreDir();
    s->pool_ = std::make_unique<optim::mpi_pool::WorkerPool>(pool);
    absl::Status started = s->pool_->EnsureStarted();
    if (!started.ok()) {
      return absl::Status(started.code(),
                          absl::StrCat("the MPI worker pool (--mpi-pool=",
                                       pool.ranks, ", store ", pool.store_dir,
                                       ") did not start: ", started.message()));
    }
  }
  ASSIGN_OR_RETURN(s->datasets_,
                   DatasetManager::Create(s->db_.get(), s->pool_.get()));
  if (!options.metrics.listen.empty()) {
    DpoptServer* server = s.get();
    ASSIGN_OR_RETURN(s->metrics_, Metrics::Start(options.metrics, [server]() {
                       return server->Sample();
                     }));
  }
  JobManager::Options jo;
  jo.metrics = s->metrics_.get();
  jo.workers = options.workers;
  jo.queue_capacity = options.queue_capacity;
  jo.mpi = options.mpi;
  jo.pool = s->pool_.get();
  jo.dataset_cache.capacity_bytes = options.dataset_cache_mb << 20;
  jo.max_active_jobs_per_principal = options.limits.max_active_jobs;
  jo.max_job_work = options.max_job_work;
  jo.max_trace_bytes_per_job = options.max_trace_bytes_per_job;
  ASSIGN_OR_RETURN(
      s->jobs_,
      JobManager::Create(jo, s->db_.get(), s->datasets_.get(), s->hub_.get()));
  RETURN_IF_ERROR(s->jobs_->RecoverInterruptedJobs());

  s->auth_ = std::make_unique<Authenticator>(s->db_.get(), options.tokens);
  s->auth_failures_ =
      std::make_unique<AuthFailureLog>(AuthFailureLog::Options());
  s->streams_ = std::make_unique<StreamRegistry>();
  s->watches_ = std::make_unique<ConcurrencyLimiter>(
      options.limits.max_watch_streams, "open WatchJob streams",
      "--max-watches-per-principal");
  s->estimates_ = std::make_unique<RateLimiter>(
      options.limits.max_estimates_per_second, "EstimateJob calls",
      "--max-estimates-per-second");
  CallEnv env;
  env.auth = s->auth_.get();
  env.access = &s->db_->access();
  env.db = s->db_.get();
  env.auth_failures = s->auth_failures_.get();
  env.streams = s->streams_.get();
  env.watches = s->watches_.get();
  env.estimates = s->estimates_.get();
  env.metrics = s->metrics_.get();
  s->dataset_service_ = std::make_unique<DatasetServiceImpl>(
      env, s->datasets_.get(), s->jobs_.get());
  s->budget_service_ =
      std::make_unique<BudgetServiceImpl>(env, s->datasets_.get());
  s->job_service_ =
      std::make_unique<JobServiceImpl>(env, s->jobs_.get(), s->hub_.get());
  s->admin_service_ = std::make_unique<AdminServiceImpl>(env);

  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  builder.SetOption(std::make_unique<ReflectionOption>(options.reflection));
  // Same port as the startup listener (which picked it if the address said
  // port 0); its calls end with UNAVAILABLE, so clients retry here.
  const int startup_port = startup->port();
  startup->Stop();
  builder.AddListeningPort(WithPort(options.listen, startup_port), creds,
                           &s->port_);
  builder.SetMaxReceiveMessageSize(options.max_message_bytes);
  // gRPC's own memory (read and write buffers, messages in flight) is
  // bounded, and so are the concurrent calls of one connection: a client
  // that opens streams and stops reading holds at most its flow-control
  // windows per stream.
  grpc::ResourceQuota quota("dpopt-server");
  quota.Resize(static_cast<size_t>(options.grpc_memory_mb) << 20);
  builder.SetResourceQuota(quota);
  builder.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS,
                             options.max_concurrent_streams);
  // The synchronous server keeps at most MAX_POLLERS idle threads (default
  // 2) and spawns one for each burst of calls beyond them, so under many
  // concurrent short calls it created and destroyed threads continually
  // (clone, mmap/munmap of stacks: about 8% of its CPU time at 64 budget
  // queries in flight). 64 idle threads cost only their stacks' address
  // space. Budget queries from a loopback client: about 2,100 -> 2,400/s.
  builder.SetSyncServerOption(
      grpc::ServerBuilder::SyncServerOption::MIN_POLLERS, 2);
  builder.SetSyncServerOption(
      grpc::ServerBuilder::SyncServerOption::MAX_POLLERS, 64);
  builder.RegisterService(s->dataset_service_.get());
  builder.RegisterService(s->budget_service_.get());
  builder.RegisterService(s->job_service_.get());
  builder.RegisterService(s->admin_service_.get());
  if (s->metrics_ != nullptr) {
    std::vector<std::string> methods;
    for (const char* service :
         {"dpopt.v1.DatasetService", "dpopt.v1.BudgetService",
          "dpopt.v1.JobService", "dpopt.v1.AdminService"}) {
      const google::protobuf::ServiceDescriptor* d =
          google::protobuf::DescriptorPool::generated_pool()->FindServiceByName(
              service);
      for (int i = 0; d != nullptr && i < d->method_count(); ++i) {
        methods.push_back(
            absl::StrCat("/", service, "/", d->method(i)->name()));
      }
    }
    // The health service is gRPC's built-in one (its descriptor is not in
    // this binary's pool).
    methods.push_back("/grpc.health.v1.Health/Check");
    methods.push_back("/grpc.health.v1.Health/Watch");
    std::vector<
        std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>>
        interceptors;
    interceptors.push_back(s->metrics_->NewInterceptorFactory(methods));
    builder.experimental().SetInterceptorCreators(std::move(interceptors));
  }
  s->grpc_server_ = builder.BuildAndStart();
  if (s->grpc_server_ == nullptr || s->port_ == 0) {
    s->jobs_->Shutdown();
    return absl::UnavailableError(absl::StrCat(
        "cannot listen on ", options.listen, " (address in use or invalid?)"));
  }
  if (!options.console_listen.empty()) {
    // The console calls the gRPC services in-process with the browser's
    // token, so it goes through the same authentication and policy.
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(256 << 20);
    console::ConsoleOptions co;
    co.listen = options.console_listen;
    co.tls_cert = options.tls_cert;
    co.tls_key = options.tls_key;
    co.tls_client_ca = options.tls_client_ca;
    co.insecure = options.console_insecure;
    auto c =
        console::Console::Start(co, s->grpc_server_->InProcessChannel(args));
    if (!c.ok()) {
      s->Shutdown();
      return c.status();
    }
    s->console_ = *std::move(c);
  }
  // Last: on a fresh database the curator's token file appears only once the
  // services answer on the port, so a script that waits for the file finds
  // the server serving.
  absl::StatusOr<bool> bootstrapped = s->auth_->Bootstrap(options.TokenFile());
  if (!bootstrapped.ok()) {
    s->Shutdown();
    return bootstrapped.status();
  }
  s->bootstrapped_ = *bootstrapped;
  return s;
}

int DpoptServer::metrics_port() const {
  return metrics_ ? metrics_->port() : 0;
}

ScrapeSample DpoptServer::Sample() const {
  ScrapeSample out;
  struct stat st;
  if (stat(options_.db_path.c_str(), &st) == 0) out.database_bytes = st.st_size;
  if (stat((options_.db_path + "-wal").c_str(), &st) == 0) {
    out.wal_bytes = st.st_size;
  }
  if (db_ != nullptr) {
    const storage::Checkpointer::Stats c = db_->checkpointer().stats();
    out.checkpoints = c.checkpoints;
    out.checkpoint_seconds_total = absl::ToDoubleSeconds(c.total_duration);
    out.checkpoint_last_seconds = absl::ToDoubleSeconds(c.last_duration);
  }
  if (jobs_ != nullptr) {
    const DatasetCache::Stats c = jobs_->dataset_cache_stats();
    out.cache_bytes = c.charged_bytes;
    out.cache_hits = c.hits;
    out.cache_misses = c.misses;
  }
  if (hub_ != nullptr) out.watchers_dropped = hub_->dropped_watchers();
  if (options_.metrics.dataset_budgets && datasets_ != nullptr) {
    absl::StatusOr<v1::ListDatasetsResponse> all = datasets_->List();
    if (!all.ok()) return out;
    for (const v1::DatasetInfo& d : all->datasets()) {
      if (d.public_()) continue;
      absl::StatusOr<v1::BudgetStatus> b = datasets_->Budget(d.name(), "");
      if (!b.ok()) continue;
      out.budgets.push_back(
          {d.name(), b->epsilon_spent(), b->epsilon_remaining()});
    }
  }
  return out;
}

int DpoptServer::console_port() const {
  return console_ ? console_->port() : 0;
}

DpoptServer::~DpoptServer() { Shutdown(); }

void DpoptServer::Wait() {
  if (grpc_server_) grpc_server_->Wait();
}

bool DpoptServer::Drain(absl::Duration timeout) {
  if (shut_down_) return true;
  if (grpc_server_ != nullptr &&
      grpc_server_->GetHealthCheckService() != nullptr) {
    grpc_server_->GetHealthCheckService()->SetServingStatus(false);
  }
  bool idle = true;
  if (jobs_ != nullptr) {
    jobs_->BeginDrain();
    idle = jobs_->WaitIdle(timeout);
  }
  Shutdown();
  return idle;
}

void DpoptServer::Shutdown() {
  if (shut_down_) return;
  shut_down_ = true;
  if (console_) console_->Stop();
  if (hub_) hub_->Shutdown();
  if (grpc_server_) {
    grpc_server_->Shutdown(std::chrono::system_clock::now() +
                           std::chrono::seconds(2));
  }
  if (jobs_) jobs_->Shutdown();
  // The exposer's threads read the managers at scrape time.
  metrics_.reset();
  jobs_.reset();
  datasets_.reset();
  pool_.reset();  // shuts the pool's ranks down
  db_.reset();
  lock_.reset();
}

}  // namespace dpopt::server
