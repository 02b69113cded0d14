#include "tests/integration/test_server.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "google/protobuf/util/json_util.h"
#include "grpcpp/support/client_interceptor.h"
#include "gtest/gtest.h"

namespace dpopt::testing {
namespace {

// Adds "authorization: Bearer TOKEN" to every call of a channel.
class BearerInterceptor : public grpc::experimental::Interceptor {
 public:
  explicit BearerInterceptor(std::string token) : token_(std::move(token)) {}
  void Intercept(
      grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(
            grpc::experimental::InterceptionHookPoints::
                PRE_SEND_INITIAL_METADATA)) {
      methods->GetSendInitialMetadata()->insert(
          {"authorization", "Bearer " + token_});
    }
    methods->Proceed();
  }

 private:
  std::string token_;
};

class BearerFactory
    : public grpc::experimental::ClientInterceptorFactoryInterface {
 public:
  explicit BearerFactory(std::string token) : token_(std::move(token)) {}
  grpc::experimental::Interceptor* CreateClientInterceptor(
      grpc::experimental::ClientRpcInfo* info) override {
    return new BearerInterceptor(token_);
  }

 private:
  std::string token_;
};

}  // namespace

std::shared_ptr<grpc::Channel> TokenChannel(const std::string& target,
                                            const std::string& token) {
  std::vector<
      std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>>
      factories;
  if (!token.empty())
    factories.push_back(std::make_unique<BearerFactory>(token));
  return grpc::experimental::CreateCustomChannelWithInterceptors(
      target, grpc::InsecureChannelCredentials(), grpc::ChannelArguments(),
      std::move(factories));
}

std::string SmallCsv(int n) {
  std::string out;
  for (int i = 0; i < n; ++i) {
    const double a = (i % 10) / 10.0, b = (i % 7) / 7.0;
    absl::StrAppend(&out, a, ",", b, ",", a + b > 0.9 ? "1" : "-1", "\n");
  }
  return out;
}

v1::ImportHeader SmallCsvHeader(const std::string& name, double eps,
                                bool is_public) {
  v1::ImportHeader h;
  h.set_name(name);
  h.set_format(v1::DATASET_FORMAT_CSV);
  h.set_dimension(2);
  h.set_label_last(true);
  h.set_public_(is_public);
  if (!is_public) {
    h.set_epsilon_budget(eps);
    h.set_delta_budget(1e-6);
  }
  return h;
}

v1::JobSpec QuickDpGdSpec(const std::string& dataset, double eps, int steps) {
  v1::JobSpec spec;
  const std::string json = absl::StrCat(
      R"({"dataset": ")", dataset,
      R"(", "model": {"logistic_regression": {"l2": 0.01}}, "privacy": {"epsilon": )",
      eps, R"(, "delta": 1e-6}, "algorithm": {"dp_gd": {"steps": )", steps,
      R"(, "clip_norm": 1, "learning_rate": 0.5}}})");
  EXPECT_TRUE(google::protobuf::util::JsonStringToMessage(json, &spec).ok());
  return spec;
}

std::string DataPath(const std::string& relative) {
  const char* root = std::getenv("DPOPT_SOURCE_DIR");
  return std::string(root != nullptr ? root : ".") + "/" + relative;
}

std::string ReadFileOrDie(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    ADD_FAILURE() << "cannot read " << path;
    return "";
  }
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string FirstLines(const std::string& text, int n) {
  size_t end = 0;
  for (int i = 0; i < n && end < text.size(); ++i) {
    const size_t newline = text.find('\n', end);
    end = newline == std::string::npos ? text.size() : newline + 1;
  }
  return text.substr(0, end);
}

TestServer::TestServer(int workers, int queue_capacity)
    : workers_(workers), queue_capacity_(queue_capacity) {
  char tmpl[] = "/tmp/dpopt-it-XXXXXX";
  dir_ = mkdtemp(tmpl);
  db_path_ = dir_ + "/dpopt.db";
  Start();
}

TestServer::TestServer(std::function<void(server::ServerOptions&)> configure)
    : workers_(2), queue_capacity_(64), configure_(std::move(configure)) {
  char tmpl[] = "/tmp/dpopt-it-XXXXXX";
  dir_ = mkdtemp(tmpl);
  db_path_ = dir_ + "/dpopt.db";
  Start();
}

TestServer::~TestServer() {
  Stop();
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
}

void TestServer::Start() {
  const absl::Status s = TryStart();
  if (!s.ok()) ADD_FAILURE() << s;
}

absl::Status TestServer::TryStart(bool allow_ledger_rollback) {
  server::ServerOptions o;
  o.db_path = db_path_;
  o.listen = "127.0.0.1:0";
  o.workers = workers_;
  o.queue_capacity = queue_capacity_;
  // The integration tests submit bursts of jobs and estimates as one
  // principal; the per-principal limits are off unless a test sets them
  // (tests/security does, with the production defaults among its cases).
  o.limits.max_active_jobs = 0;
  o.limits.max_estimates_per_second = 0;
  o.limits.max_watch_streams = 0;
  if (configure_) configure_(o);
  o.allow_ledger_rollback = allow_ledger_rollback;
  auto s = server::DpoptServer::Start(o);
  if (!s.ok()) return s.status();
  server_ = std::move(*s);
  curator_token_ = ReadFileOrDie(o.TokenFile());
  while (!curator_token_.empty() && curator_token_.back() == '\n') {
    curator_token_.pop_back();
  }
  channel_ = TokenChannel(target(), curator_token_);
  datasets_ = v1::DatasetService::NewStub(channel_);
  budget_ = v1::BudgetService::NewStub(channel_);
  jobs_ = v1::JobService::NewStub(channel_);
  admin_ = v1::AdminService::NewStub(channel_);
  return absl::OkStatus();
}

void TestServer::Stop() {
  if (server_) server_->Shutdown();
  server_.reset();
}

grpc::Status TestServer::Import(const v1::ImportHeader& header,
                                const std::string& bytes,
                                v1::DatasetInfo* info) {
  grpc::ClientContext ctx;
  v1::DatasetInfo local;
  auto writer = datasets_->ImportDataset(&ctx, info ? info : &local);
  v1::ImportDatasetRequest req;
  *req.mutable_header() = header;
  writer->Write(req);
  constexpr size_t kChunk = 1 << 20;
  for (size_t off = 0; off < bytes.size(); off += kChunk) {
    v1::ImportDatasetRequest c;
    c.set_chunk(bytes.substr(off, kChunk));
    if (!writer->Write(c)) break;
  }
  writer->WritesDone();
  return writer->Finish();
}

v1::Job TestServer::WaitForJob(const std::string& id, double timeout_s) {
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::milliseconds(int64_t(timeout_s * 1000));
  v1::Job job;
  while (std::chrono::steady_clock::now() < deadline) {
    grpc::ClientContext ctx;
    v1::GetJobRequest req;
    req.set_id(id);
    grpc::Status s = jobs_->GetJob(&ctx, req, &job);
    if (!s.ok()) {
      ADD_FAILURE() << "GetJob: " << s.error_message();
      return job;
    }
    if (job.state() == v1::JOB_STATE_SUCCEEDED ||
        job.state() == v1::JOB_STATE_FAILED ||
        job.state() == v1::JOB_STATE_CANCELLED) {
      return job;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ADD_FAILURE() << "job " << id << " did not finish in time";
  return job;
}

}  // namespace dpopt::testing

namespace dpopt::testing {

int TestServer::console_port() const { return server_->console_port(); }
int TestServer::metrics_port() const { return server_->metrics_port(); }

std::string TestServer::target() const {
  return "127.0.0.1:" + std::to_string(server_->port());
}

std::string TestServer::CreateAnalyst(const std::string& name) {
  grpc::ClientContext ctx;
  v1::CreatePrincipalRequest req;
  req.set_name(name);
  req.set_role(v1::ROLE_ANALYST);
  v1::CreatedToken out;
  const grpc::Status s = admin_->CreatePrincipal(&ctx, req, &out);
  EXPECT_TRUE(s.ok()) << s.error_message();
  return out.token();
}

grpc::Status TestServer::Grant(const std::string& principal,
                               const std::string& dataset, double cap) {
  grpc::ClientContext ctx;
  v1::GrantDatasetRequest req;
  req.set_principal(principal);
  req.set_dataset(dataset);
  req.set_epsilon_cap(cap);
  v1::Grant out;
  return admin_->GrantDataset(&ctx, req, &out);
}

v1::ImportHeader ExampleLibsvmHeader(const std::string& name, bool is_public) {
  v1::ImportHeader h;
  h.set_name(name);
  h.set_format(v1::DATASET_FORMAT_LIBSVM);
  h.set_dimension(123);
  h.set_public_(is_public);
  if (!is_public) {
    h.set_epsilon_budget(100);
    h.set_delta_budget(1e-5);
  }
  return h;
}

v1::ImportHeader ExampleCsvHeader(const std::string& name) {
  v1::ImportHeader h;
  h.set_name(name);
  h.set_format(v1::DATASET_FORMAT_CSV);
  h.set_has_header(true);
  h.set_label_last(true);
  h.set_label_type(v1::LABEL_TYPE_REAL);
  h.set_epsilon_budget(100);
  h.set_delta_budget(1e-5);
  return h;
}

v1::ImportHeader ExampleMaxAffineHeader(const std::string& name,
                                        bool is_public) {
  v1::ImportHeader h = ExampleCsvHeader(name);
  h.clear_label_type();
  h.set_public_(is_public);
  h.clear_delta_budget();
  if (is_public) {
    h.clear_epsilon_budget();
  } else {
    h.set_budget_filter(v1::BUDGET_FILTER_BASIC);
  }
  h.mutable_max_affine()->set_b_max(1);
  const auto st = google::protobuf::util::JsonStringToMessage(
      ReadFileOrDie(DataPath("examples/data/max_affine_polytope.json")),
      h.mutable_max_affine()->mutable_polytope());
  if (!st.ok()) {
    std::fprintf(stderr, "max_affine_polytope.json: %s\n",
                 st.ToString().c_str());
    std::abort();
  }
  return h;
}

}  // namespace dpopt::testing
