// Prometheus metrics (Debian's prometheus-cpp: its registry, metric types
// and pull exposer). Off unless --metrics-listen is set.
//
// What is exported, and what never is: per RPC method, requests by status
// code and latency; jobs admitted, refused and finished by job type, state
// and reason, their run time, queued and running jobs; imports (outcome,
// bytes, rows, duration); the database and WAL sizes, checkpoints and their
// duration; and the decoded-dataset cache. Labels carry only public,
// bounded values: method names of the registered services (anything else is
// "unknown"), job type names, job states, status codes and refusal reasons.
// Nothing derived from private rows is a label or a value, and no principal
// name. Per-dataset budgets (epsilon spent and remaining, which curators see
// through the API anyway) are exported only with
// MetricsOptions::dataset_budgets, and then carry the dataset's name.
#ifndef DPOPT_SERVER_METRICS_H_
#define DPOPT_SERVER_METRICS_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "grpcpp/support/server_interceptor.h"
#include "prometheus/collectable.h"
#include "prometheus/counter.h"
#include "prometheus/exposer.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"

namespace dpopt::server {

struct MetricsOptions {
  // HOST:PORT of the HTTP listener serving /metrics; empty = off. Loopback
  // addresses only (the listener has no TLS and no authentication: put a
  // TLS proxy in front to scrape from another host). Port 0 picks a free
  // port (Metrics::port()).
  std::string listen;
  // Export each private dataset's epsilon spent and remaining, labelled
  // with its name.
  bool dataset_budgets = false;
  absl::Status Validate() const;
};

// Why an admission was refused, as a label.
enum class RefusalReason { kBudget, kCap, kQueueFull, kInvalid, kOther };

// A sample taken at scrape time (storage sizes, cache, budgets).
struct ScrapeSample {
  int64_t database_bytes = 0;
  int64_t wal_bytes = 0;
  int64_t cache_bytes = 0;
  int64_t cache_hits = 0;
  int64_t cache_misses = 0;
  // The background checkpointer: checkpoints completed, their total and
  // last duration.
  int64_t checkpoints = 0;
  double checkpoint_seconds_total = 0;
  double checkpoint_last_seconds = 0;
  // WatchJob streams the trace hub dropped for falling behind, since the
  // start.
  int64_t watchers_dropped = 0;
  struct DatasetBudget {
    std::string dataset;
    double epsilon_spent = 0;
    double epsilon_remaining = 0;
  };
  std::vector<DatasetBudget> budgets;  // only with dataset_budgets
};

class Metrics {
 public:
  // `sample` is called at every scrape, on the exposer's thread.
  static absl::StatusOr<std::unique_ptr<Metrics>> Start(
      const MetricsOptions& options, std::function<ScrapeSample()> sample);
  ~Metrics();

  // The listener's port.
  int port() const;

  // A gRPC server interceptor factory that counts every RPC by method and
  // status and observes its latency. `methods` are the full names
  // ("/dpopt.v1.JobService/SubmitJob") that may appear as labels.
  std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>
  NewInterceptorFactory(std::vector<std::string> methods);

  // Job lifecycle (called by the job manager).
  void JobAdmitted(const std::string& job_type, bool charged);
  void JobRefused(const std::string& job_type, RefusalReason reason);
  void JobStarted(const std::string& job_type);
  void JobFinished(const std::string& job_type, const std::string& state,
                   double run_seconds);

  // An ImportDataset call ended with `code` after receiving `bytes` of
  // file; `rows` imported (0 unless OK). Row counts and file sizes are
  // public dataset metadata (docs/privacy.md).
  void ImportDone(absl::StatusCode code, int64_t bytes, int64_t rows,
                  double seconds);

  // RPC outcome (called by the interceptor).
  void RpcDone(const std::string& method, int code, double seconds);

 private:
  class Collector;
  class InterceptorFactory;
  Metrics() = default;

  std::shared_ptr<prometheus::Registry> registry_;
  std::shared_ptr<Collector> collector_;
  std::unique_ptr<prometheus::Exposer> exposer_;
  prometheus::Family<prometheus::Counter>* rpc_requests_ = nullptr;
  prometheus::Family<prometheus::Histogram>* rpc_latency_ = nullptr;
  prometheus::Family<prometheus::Counter>* jobs_admitted_ = nullptr;
  prometheus::Family<prometheus::Counter>* jobs_refused_ = nullptr;
  prometheus::Family<prometheus::Counter>* jobs_finished_ = nullptr;
  prometheus::Family<prometheus::Histogram>* job_run_seconds_ = nullptr;
  prometheus::Family<prometheus::Gauge>* jobs_running_ = nullptr;
  prometheus::Family<prometheus::Gauge>* jobs_queued_ = nullptr;
  prometheus::Family<prometheus::Counter>* imports_ = nullptr;
  prometheus::Family<prometheus::Counter>* import_bytes_ = nullptr;
  prometheus::Family<prometheus::Counter>* import_rows_ = nullptr;
  prometheus::Family<prometheus::Histogram>* import_seconds_ = nullptr;
};

// A MetricsOptions-independent check: the refusal reason of an admission
// error (RESOURCE_EXHAUSTED from the ledger, the cap or the queue).
RefusalReason RefusalReasonOf(const absl::Status& s);

}  // namespace dpopt::server

#endif  // DPOPT_SERVER_METRICS_H_
