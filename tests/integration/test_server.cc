#include "tests/integration/test_server.h"

#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "gtest/gtest.h"

namespace dpopt::testing {

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

TestServer::TestServer(int workers, int queue_capacity)
    : workers_(workers), queue_capacity_(queue_capacity) {
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
  server::ServerOptions o;
  o.db_path = db_path_;
  o.listen = "127.0.0.1:0";
  o.workers = workers_;
  o.queue_capacity = queue_capacity_;
  auto s = server::DpoptServer::Start(o);
  if (!s.ok()) {
    ADD_FAILURE() << s.status();
    return;
  }
  server_ = std::move(*s);
  channel_ = grpc::CreateChannel("127.0.0.1:" + std::to_string(server_->port()),
                                 grpc::InsecureChannelCredentials());
  datasets_ = v1::DatasetService::NewStub(channel_);
  budget_ = v1::BudgetService::NewStub(channel_);
  jobs_ = v1::JobService::NewStub(channel_);
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
