#include "server/metrics.h"

#include <chrono>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "grpcpp/support/status.h"
#include "prometheus/metric_family.h"
#include "server/server.h"

namespace dpopt::server {
namespace {

using prometheus::Histogram;

// Latency buckets (seconds): 100 us to 100 s.
Histogram::BucketBoundaries LatencyBuckets() {
  return {1e-4, 3e-4, 1e-3, 3e-3, 0.01, 0.03, 0.1, 0.3, 1, 3, 10, 30, 100};
}

// Job run time buckets (seconds): 1 ms to about 3 hours.
Histogram::BucketBoundaries RunTimeBuckets() {
  return {1e-3, 0.01, 0.1, 0.3, 1, 3, 10, 30, 100, 300, 1000, 3600, 10000};
}

const char* ReasonLabel(RefusalReason r) {
  switch (r) {
    case RefusalReason::kBudget:
      return "budget";
    case RefusalReason::kCap:
      return "cap";
    case RefusalReason::kQueueFull:
      return "queue_full";
    case RefusalReason::kInvalid:
      return "invalid";
    case RefusalReason::kOther:
      return "other";
  }
  return "other";
}

prometheus::ClientMetric GaugeValue(double v) {
  prometheus::ClientMetric m;
  m.gauge.value = v;
  return m;
}

prometheus::MetricFamily GaugeFamily(std::string name, std::string help) {
  prometheus::MetricFamily f;
  f.name = std::move(name);
  f.help = std::move(help);
  f.type = prometheus::MetricType::Gauge;
  return f;
}

}  // namespace

absl::Status MetricsOptions::Validate() const {
  if (listen.empty()) return absl::OkStatus();
  if (!IsLoopbackAddress(listen)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--metrics-listen=", listen,
        ": the metrics listener serves plain HTTP without authentication, so "
        "it binds only to a loopback address (scrape through a TLS proxy "
        "from other hosts)"));
  }
  return absl::OkStatus();
}

RefusalReason RefusalReasonOf(const absl::Status& s) {
  if (absl::IsInvalidArgument(s) || absl::IsNotFound(s) ||
      absl::IsPermissionDenied(s) || absl::IsFailedPrecondition(s)) {
    return RefusalReason::kInvalid;
  }
  if (!absl::IsResourceExhausted(s)) return RefusalReason::kOther;
  const absl::string_view m = s.message();
  if (m.find("over the cap") != absl::string_view::npos) {
    return RefusalReason::kCap;
  }
  if (m.find("queue full") != absl::string_view::npos) {
    return RefusalReason::kQueueFull;
  }
  return RefusalReason::kBudget;
}

// Values read at scrape time.
class Metrics::Collector : public prometheus::Collectable {
 public:
  explicit Collector(std::function<ScrapeSample()> sample)
      : sample_(std::move(sample)) {}

  std::vector<prometheus::MetricFamily> Collect() const override {
    const ScrapeSample s = sample_();
    std::vector<prometheus::MetricFamily> out;
    auto add = [&out](std::string name, std::string help, double v) {
      prometheus::MetricFamily f =
          GaugeFamily(std::move(name), std::move(help));
      f.metric.push_back(GaugeValue(v));
      out.push_back(std::move(f));
    };
    add("dpopt_database_bytes", "Size of the SQLite database file.",
        static_cast<double>(s.database_bytes));
    add("dpopt_wal_bytes", "Size of the SQLite write-ahead log.",
        static_cast<double>(s.wal_bytes));
    add("dpopt_dataset_cache_bytes",
        "Bytes of decoded datasets held in the cache.",
        static_cast<double>(s.cache_bytes));
    add("dpopt_dataset_cache_hits", "Dataset cache hits since the start.",
        static_cast<double>(s.cache_hits));
    add("dpopt_dataset_cache_misses", "Dataset cache misses since the start.",
        static_cast<double>(s.cache_misses));
    add("dpopt_checkpoints", "WAL checkpoints completed since the start.",
        static_cast<double>(s.checkpoints));
    add("dpopt_checkpoint_seconds_total",
        "Time spent in WAL checkpoints since the start (seconds).",
        s.checkpoint_seconds_total);
    add("dpopt_checkpoint_last_seconds",
        "Duration of the last WAL checkpoint (seconds).",
        s.checkpoint_last_seconds);
    add("dpopt_watchers_dropped",
        "WatchJob streams dropped for falling behind "
        "(--max-watch-buffer-bytes) "
        "since the start.",
        static_cast<double>(s.watchers_dropped));
    if (!s.budgets.empty()) {
      prometheus::MetricFamily spent =
          GaugeFamily("dpopt_dataset_epsilon_spent",
                      "Epsilon spent on a private dataset, under its filter.");
      prometheus::MetricFamily remaining =
          GaugeFamily("dpopt_dataset_epsilon_remaining",
                      "Epsilon remaining on a private dataset.");
      for (const ScrapeSample::DatasetBudget& b : s.budgets) {
        prometheus::ClientMetric m = GaugeValue(b.epsilon_spent);
        m.label.push_back({"dataset", b.dataset});
        spent.metric.push_back(m);
        m = GaugeValue(b.epsilon_remaining);
        m.label.push_back({"dataset", b.dataset});
        remaining.metric.push_back(m);
      }
      out.push_back(std::move(spent));
      out.push_back(std::move(remaining));
    }
    return out;
  }

 private:
  std::function<ScrapeSample()> sample_;
};

namespace {

class MetricsInterceptor : public grpc::experimental::Interceptor {
 public:
  MetricsInterceptor(Metrics* metrics, std::string method)
      : metrics_(metrics),
        method_(std::move(method)),
        start_(std::chrono::steady_clock::now()) {}

  void Intercept(grpc::experimental::InterceptorBatchMethods* m) override {
    if (m->QueryInterceptionHookPoint(
            grpc::experimental::InterceptionHookPoints::PRE_SEND_STATUS)) {
      const grpc::Status status = m->GetSendStatus();
      const double seconds = std::chrono::duration<double>(
                                 std::chrono::steady_clock::now() - start_)
                                 .count();
      metrics_->RpcDone(method_, static_cast<int>(status.error_code()),
                        seconds);
    }
    m->Proceed();
  }

 private:
  Metrics* metrics_;
  std::string method_;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace

class Metrics::InterceptorFactory
    : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  InterceptorFactory(Metrics* metrics, std::vector<std::string> methods)
      : metrics_(metrics), methods_(methods.begin(), methods.end()) {}

  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override {
    // A client may call any method name; only the registered ones become
    // labels (bounded cardinality).
    std::string method = info->method() != nullptr ? info->method() : "";
    if (!methods_.contains(method)) method = "unknown";
    return new MetricsInterceptor(metrics_, std::move(method));
  }

 private:
  Metrics* metrics_;
  absl::flat_hash_set<std::string> methods_;
};

absl::StatusOr<std::unique_ptr<Metrics>> Metrics::Start(
    const MetricsOptions& options, std::function<ScrapeSample()> sample) {
  if (auto s = options.Validate(); !s.ok()) return s;
  if (options.listen.empty()) {
    return absl::InvalidArgumentError("metrics: no listen address");
  }
  std::unique_ptr<Metrics> m(new Metrics());
  m->registry_ = std::make_shared<prometheus::Registry>();
  prometheus::Registry& r = *m->registry_;
  m->rpc_requests_ = &prometheus::BuildCounter()
                          .Name("dpopt_rpc_requests_total")
                          .Help("RPCs by method and gRPC status code.")
                          .Register(r);
  m->rpc_latency_ = &prometheus::BuildHistogram()
                         .Name("dpopt_rpc_latency_seconds")
                         .Help("RPC latency by method (seconds).")
                         .Register(r);
  m->jobs_admitted_ =
      &prometheus::BuildCounter()
           .Name("dpopt_jobs_admitted_total")
           .Help("Jobs admitted, by job type and whether they were charged.")
           .Register(r);
  m->jobs_refused_ =
      &prometheus::BuildCounter()
           .Name("dpopt_jobs_refused_total")
           .Help(
               "Submissions refused, by job type and reason (budget, cap, "
               "queue_full, invalid, other). Nothing was charged.")
           .Register(r);
  m->jobs_finished_ = &prometheus::BuildCounter()
                           .Name("dpopt_jobs_finished_total")
                           .Help("Jobs that ended, by job type and state.")
                           .Register(r);
  m->job_run_seconds_ = &prometheus::BuildHistogram()
                             .Name("dpopt_job_run_seconds")
                             .Help("Job run time by job type (seconds).")
                             .Register(r);
  m->jobs_running_ = &prometheus::BuildGauge()
                          .Name("dpopt_jobs_running")
                          .Help("Jobs running now.")
                          .Register(r);
  m->jobs_queued_ = &prometheus::BuildGauge()
                         .Name("dpopt_jobs_queued")
                         .Help("Jobs admitted and waiting for a worker.")
                         .Register(r);
  m->imports_ = &prometheus::BuildCounter()
                     .Name("dpopt_imports_total")
                     .Help("ImportDataset calls by outcome (status code).")
                     .Register(r);
  m->import_bytes_ = &prometheus::BuildCounter()
                          .Name("dpopt_import_bytes_total")
                          .Help("Bytes of dataset files received by imports.")
                          .Register(r);
  m->import_rows_ = &prometheus::BuildCounter()
                         .Name("dpopt_import_rows_total")
                         .Help("Rows stored by successful imports.")
                         .Register(r);
  m->import_seconds_ = &prometheus::BuildHistogram()
                            .Name("dpopt_import_seconds")
                            .Help("ImportDataset duration (seconds).")
                            .Register(r);
  m->collector_ = std::make_shared<Collector>(std::move(sample));
  try {
    m->exposer_ =
        std::make_unique<prometheus::Exposer>(std::vector<std::string>{
            "listening_ports", options.listen, "num_threads", "2"});
  } catch (const std::exception& e) {
    return absl::UnavailableError(absl::StrCat("cannot serve metrics on ",
                                               options.listen, ": ", e.what()));
  }
  m->exposer_->RegisterCollectable(m->registry_);
  m->exposer_->RegisterCollectable(m->collector_);
  return m;
}

Metrics::~Metrics() {
  if (exposer_) {
    exposer_->RemoveCollectable(collector_);
    exposer_->RemoveCollectable(registry_);
  }
}

int Metrics::port() const {
  const std::vector<int> ports = exposer_->GetListeningPorts();
  return ports.empty() ? 0 : ports.front();
}

std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>
Metrics::NewInterceptorFactory(std::vector<std::string> methods) {
  return std::make_unique<InterceptorFactory>(this, std::move(methods));
}

void Metrics::RpcDone(const std::string& method, int code, double seconds) {
  rpc_requests_->Add({{"method", method}, {"code", std::to_string(code)}})
      .Increment();
  rpc_latency_->Add({{"method", method}}, LatencyBuckets()).Observe(seconds);
}

void Metrics::JobAdmitted(const std::string& job_type, bool charged) {
  jobs_admitted_
      ->Add({{"job_type", job_type}, {"charged", charged ? "true" : "false"}})
      .Increment();
  jobs_queued_->Add({}).Increment();
}

void Metrics::JobRefused(const std::string& job_type, RefusalReason reason) {
  jobs_refused_->Add({{"job_type", job_type}, {"reason", ReasonLabel(reason)}})
      .Increment();
}

void Metrics::JobStarted(const std::string& job_type) {
  (void)job_type;
  jobs_queued_->Add({}).Decrement();
  jobs_running_->Add({}).Increment();
}

void Metrics::JobFinished(const std::string& job_type, const std::string& state,
                          double run_seconds) {
  jobs_running_->Add({}).Decrement();
  jobs_finished_->Add({{"job_type", job_type}, {"state", state}}).Increment();
  job_run_seconds_->Add({{"job_type", job_type}}, RunTimeBuckets())
      .Observe(run_seconds);
}

void Metrics::ImportDone(absl::StatusCode code, int64_t bytes, int64_t rows,
                         double seconds) {
  imports_->Add({{"code", absl::StatusCodeToString(code)}}).Increment();
  import_bytes_->Add({}).Increment(static_cast<double>(bytes));
  import_rows_->Add({}).Increment(static_cast<double>(rows));
  import_seconds_->Add({}, RunTimeBuckets()).Observe(seconds);
}

}  // namespace dpopt::server
