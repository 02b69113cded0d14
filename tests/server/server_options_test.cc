// ServerOptions::Validate for the performance knobs and the worker pool.
#include <stdlib.h>

#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/optim/mpi_pool/worker_pool.h"
#include "core/optim/parallel.h"
#include "gtest/gtest.h"
#include "server/server.h"

namespace dpopt::server {
namespace {

ServerOptions Valid() {
  ServerOptions o;
  o.db_path = "unused.db";
  return o;
}

TEST(ServerOptionsTest, KernelThreadsRange) {
  ServerOptions o = Valid();
  ASSERT_TRUE(o.Validate().ok()) << o.Validate();
  for (int t : {0, 1, 2, optim::ParallelOptions::kMaxThreads}) {
    o.kernel_threads = t;
    EXPECT_TRUE(o.Validate().ok()) << t;
  }
  for (int t : {-1, optim::ParallelOptions::kMaxThreads + 1}) {
    o.kernel_threads = t;
    const absl::Status s = o.Validate();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << t;
    EXPECT_NE(s.message().find("--kernel-threads"), std::string::npos) << s;
  }
}

TEST(ServerOptionsTest, StartAppliesKernelThreads) {
  char dir[] = "/tmp/dpopt-options-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const optim::ParallelOptions before = optim::GetParallelOptions();
  ServerOptions o = Valid();
  o.db_path = std::string(dir) + "/d.db";
  o.listen = "127.0.0.1:0";
  o.kernel_threads = 3;
  {
    absl::StatusOr<std::unique_ptr<DpoptServer>> s = DpoptServer::Start(o);
    ASSERT_TRUE(s.ok()) << s.status();
    EXPECT_EQ(optim::GetParallelOptions().threads, 3);
  }
  ASSERT_TRUE(optim::SetParallelOptions(before).ok());
  std::filesystem::remove_all(dir);
}

TEST(ServerOptionsTest, DatasetCacheRange) {
  ServerOptions o = Valid();
  o.dataset_cache_mb = 0;
  EXPECT_TRUE(o.Validate().ok());
  o.dataset_cache_mb = -1;
  EXPECT_EQ(o.Validate().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ServerOptionsTest, TraceAndTransportLimitsRanges) {
  ServerOptions o = Valid();
  o.max_trace_bytes_per_job = 0;  // no limit
  EXPECT_TRUE(o.Validate().ok());
  struct Case {
    std::function<void(ServerOptions&)> set;
    const char* flag;
  };
  const std::vector<Case> cases = {
      {[](ServerOptions& x) { x.max_trace_bytes_per_job = -1; },
       "--max-trace-bytes-per-job"},
      {[](ServerOptions& x) { x.max_watch_buffer_bytes = 1000; },
       "--max-watch-buffer-bytes"},
      {[](ServerOptions& x) { x.grpc_memory_mb = 1; }, "--grpc-memory-mb"},
      {[](ServerOptions& x) { x.max_concurrent_streams = 0; },
       "--max-concurrent-streams"},
  };
  for (const Case& c : cases) {
    ServerOptions bad = Valid();
    c.set(bad);
    const absl::Status s = bad.Validate();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.flag;
    EXPECT_NE(s.message().find(c.flag), std::string::npos) << s;
  }
}

}  // namespace
}  // namespace dpopt::server

namespace dpopt::server {
namespace {

// The worker pool's options: checked with the server's (naming the flag),
// the shard store defaulting to an absolute path beside the database.
TEST(ServerOptionsTest, WorkerPoolOptionsAndTheStoreDefault) {
  ServerOptions o = Valid();
  EXPECT_EQ(
      o.PoolStoreDir(),
      (std::filesystem::current_path() / "unused.db.pool-shards").string());
  optim::mpi_pool::WorkerPoolOptions p;
  p.mpirun = "mpirun";
  p.worker = "/usr/bin/dpopt-mpi-pool";
  p.ranks = 2;
  o.mpi_pool = std::make_shared<const optim::mpi_pool::WorkerPoolOptions>(p);
  EXPECT_TRUE(o.Validate().ok()) << o.Validate();
  p.store_dir = "/srv/shards";
  o.mpi_pool = std::make_shared<const optim::mpi_pool::WorkerPoolOptions>(p);
  EXPECT_EQ(o.PoolStoreDir(), "/srv/shards");
  for (int ranks : {0, 1025}) {
    p.ranks = ranks;
    o.mpi_pool = std::make_shared<const optim::mpi_pool::WorkerPoolOptions>(p);
    const absl::Status s = o.Validate();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << ranks;
    EXPECT_NE(s.message().find("--mpi-pool"), std::string::npos) << s;
  }
  p.ranks = 2;
  p.store_dir = "relative/shards";
  o.mpi_pool = std::make_shared<const optim::mpi_pool::WorkerPoolOptions>(p);
  EXPECT_EQ(o.Validate().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace dpopt::server
