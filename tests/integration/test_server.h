// An in-process dpopt server on a temporary database and a free port, with
// stubs connected to it. For integration tests only.
#ifndef DPOPT_TESTS_INTEGRATION_TEST_SERVER_H_
#define DPOPT_TESTS_INTEGRATION_TEST_SERVER_H_

#include <functional>
#include <memory>
#include <string>

#include "dpopt/v1/dpopt.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "server/server.h"

namespace dpopt::testing {

class TestServer {
 public:
  // Starts a server on a fresh database in a temporary directory.
  explicit TestServer(int workers = 2, int queue_capacity = 64);
  // Same, with `configure` applied to the server's options at every start
  // (e.g. dp_dda's MPI settings).
  explicit TestServer(std::function<void(server::ServerOptions&)> configure);
  ~TestServer();

  // Restarts the server on the same database (after Stop()).
  void Start();
  // Start() that returns the server's start-up error instead of failing the
  // test; `allow_ledger_rollback` as in server::ServerOptions.
  absl::Status TryStart(bool allow_ledger_rollback = false);
  void Stop();

  v1::DatasetService::Stub& datasets() { return *datasets_; }
  v1::BudgetService::Stub& budget() { return *budget_; }
  v1::JobService::Stub& jobs() { return *jobs_; }
  v1::AdminService::Stub& admin() { return *admin_; }
  // The stubs above authenticate as the bootstrap curator.
  const std::string& curator_token() const { return curator_token_; }
  // "127.0.0.1:PORT".
  std::string target() const;
  // The web console's port (0 unless ServerOptions::console_listen is set).
  int console_port() const;
  // The metrics listener's port (0 unless ServerOptions::metrics is set).
  int metrics_port() const;
  // Creates an analyst; returns its token.
  std::string CreateAnalyst(const std::string& name);
  // Grants `principal` access to `dataset` (cap 0 = none).
  grpc::Status Grant(const std::string& principal, const std::string& dataset,
                     double cap = 0);
  const std::string& db_path() const { return db_path_; }

  // Imports `bytes` (a file's content) with `header`; returns the status.
  grpc::Status Import(const v1::ImportHeader& header, const std::string& bytes,
                      v1::DatasetInfo* info = nullptr);
  // Waits until the job ends; returns its final state.
  v1::Job WaitForJob(const std::string& id, double timeout_s = 300);

 private:
  std::string dir_;
  std::string db_path_;
  int workers_;
  int queue_capacity_;
  std::function<void(server::ServerOptions&)> configure_;
  std::unique_ptr<server::DpoptServer> server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::DatasetService::Stub> datasets_;
  std::unique_ptr<v1::BudgetService::Stub> budget_;
  std::unique_ptr<v1::JobService::Stub> jobs_;
  std::unique_ptr<v1::AdminService::Stub> admin_;
  std::string curator_token_;
};

// A channel to `target` whose calls carry "authorization: Bearer token"
// (no metadata when token is empty).
std::shared_ptr<grpc::Channel> TokenChannel(const std::string& target,
                                            const std::string& token);

// A small 2-feature CSV (label last) of n rows, for quick jobs.
std::string SmallCsv(int n);
// The import header of a SmallCsv: private with budget (eps, 1e-6), or
// public.
v1::ImportHeader SmallCsvHeader(const std::string& name, double eps,
                                bool is_public = false);
// A quick DP-GD logistic-regression job on `dataset` at (eps, 1e-6).
v1::JobSpec QuickDpGdSpec(const std::string& dataset, double eps,
                          int steps = 5);

// Path of a vendored data file (data/adult/a9a, ...), from $DPOPT_SOURCE_DIR.
std::string DataPath(const std::string& relative);
std::string ReadFileOrDie(const std::string& path);
// The first `n` lines of `text` (all of them if it has fewer).
std::string FirstLines(const std::string& text, int n);

// Import headers of the bundled datasets the examples name
// (examples/README.md). Private ones have room for every example's charge
// (budget 100, delta 1e-5).
// a9a-format LIBSVM, dimension 123 ("adult", "adult-test").
v1::ImportHeader ExampleLibsvmHeader(const std::string& name, bool is_public);
// CSV with a header line, real labels last, dimension from the file
// ("quadratic-q").
v1::ImportHeader ExampleCsvHeader(const std::string& name);
// The max-affine problem of examples/data/max_affine.csv: b_max 1, the
// polytope of examples/data/max_affine_polytope.json; private ones under
// basic composition ("max-affine", "max-affine-public").
v1::ImportHeader ExampleMaxAffineHeader(const std::string& name,
                                        bool is_public);

}  // namespace dpopt::testing

#endif  // DPOPT_TESTS_INTEGRATION_TEST_SERVER_H_
