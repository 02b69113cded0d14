// The MPI worker pool through the real server: a server started with a pool
// of 2 ranks (`mpirun --oversubscribe`, the test pool program) places a
// dataset (every rank reports its host and rows, its shard files appear in
// the rank's store), runs a dp_sgd job with execution EXECUTION_MPI_POOL
// without reading a row itself (the dataset's stored rows are made
// unreadable first; an in-process control job fails on them), charges it
// once, runs a line-search job there too, refuses before charging a dp_dda
// job on the pool (a job type that cannot read its rows there) and a job on
// an unplaced dataset, refuses PlaceDataset to an analyst, and deletes the
// shards with the dataset (every rank confirms; the store is empty after),
// also when the database forgot the placement; a rank's death fails the
// running job, which stays charged.
// Without a pool, pool requests are refused: access_test.cc and the Python
// client's tests.
#include <sqlite3.h>

#include <cmath>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/optim/mpi_pool/worker_pool.h"
#include "core/optim/row_sums.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "tests/integration/stored_rows.h"
#include "tests/integration/test_server.h"

namespace dpopt::testing {
namespace {

using ::testing::HasSubstr;

constexpr int kRanks = 2;
constexpr int kRows = 1000;

#ifdef DPOPT_MPI_POOL_TEST_WORKER
constexpr bool kHavePool = true;
constexpr char kTestPool[] = DPOPT_MPI_POOL_TEST_WORKER;
#else
constexpr bool kHavePool = false;
constexpr char kTestPool[] = "";
#endif

// Regular files under `dir` (recursively); 0 if it does not exist.
int FilesUnder(const std::filesystem::path& dir) {
  std::error_code ec;
  if (!std::filesystem::exists(dir, ec)) return 0;
  int n = 0;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir, ec)) {
    if (e.is_regular_file()) ++n;
  }
  return n;
}

int64_t LedgerEntries(TestServer& s, const std::string& dataset) {
  grpc::ClientContext ctx;
  v1::ListLedgerRequest req;
  req.set_dataset(dataset);
  v1::ListLedgerResponse resp;
  const grpc::Status st = s.budget().ListLedger(&ctx, req, &resp);
  EXPECT_TRUE(st.ok()) << st.error_message();
  return resp.entries_size();
}

v1::JobSpec Spec(const std::string& json) {
  v1::JobSpec spec;
  const auto parsed = google::protobuf::util::JsonStringToMessage(json, &spec);
  EXPECT_TRUE(parsed.ok()) << parsed.message();
  return spec;
}

v1::JobSpec PoolDpSgd(const std::string& dataset) {
  return Spec(absl::StrFormat(
      R"({"dataset": "%s", "model": {"logistic_regression": {"l2": 0.01}},
          "privacy": {"epsilon": 1, "delta": 1e-6},
          "algorithm": {"dp_sgd": {"sampling_rate": 0.1, "steps": 40,
                                   "clip_norm": 1, "learning_rate": 0.5}},
          "execution": "EXECUTION_MPI_POOL"})",
      dataset));
}

// The curator places `dataset` on the server's pool.
grpc::Status Place(TestServer& s, const std::string& dataset,
                   v1::PlaceDatasetResponse* out = nullptr) {
  grpc::ClientContext ctx;
  v1::PlaceDatasetRequest req;
  req.set_name(dataset);
  v1::PlaceDatasetResponse ignored;
  return s.datasets().PlaceDataset(&ctx, req, out != nullptr ? out : &ignored);
}

grpc::Status Submit(TestServer& s, const v1::JobSpec& spec, v1::Job* job) {
  grpc::ClientContext ctx;
  v1::SubmitJobRequest req;
  *req.mutable_spec() = spec;
  return s.jobs().SubmitJob(&ctx, req, job);
}

class MpiPoolServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!kHavePool) {
      GTEST_SKIP() << "built without Open MPI: no dpopt-mpi-pool-testing";
    }
    store_ = std::filesystem::temp_directory_path() /
             absl::StrCat("dpopt-pool-test-", getpid());
    std::filesystem::remove_all(store_);
    const std::string store = store_.string();
    server_ =
        std::make_unique<TestServer>([store, this](server::ServerOptions& o) {
          if (without_pool_) return;
          optim::mpi_pool::WorkerPoolOptions p;
          p.mpirun = "mpirun";
          p.worker = kTestPool;
          p.ranks = kRanks;
          p.store_dir = store;
          p.mpirun_args = {"--oversubscribe"};
          p.worker_args = worker_args_;
          // Tests only: the test pool program (the server's flags never set
          // this; a production server refuses any other pool).
          p.allow_testing_worker = true;
          o.mpi_pool =
              std::make_shared<const optim::mpi_pool::WorkerPoolOptions>(p);
        });
    ASSERT_TRUE(
        server_->Import(SmallCsvHeader("placed", 100), SmallCsv(kRows)).ok());
    ASSERT_TRUE(
        server_->Import(SmallCsvHeader("unplaced", 100), SmallCsv(200)).ok());
  }
  void TearDown() override {
    server_.reset();
    if (!store_.empty()) std::filesystem::remove_all(store_);
  }

  std::filesystem::path store_;
  // Restarts of server_ start no pool while set.
  bool without_pool_ = false;
  // The test pool's arguments at the next start.
  std::vector<std::string> worker_args_;
  std::unique_ptr<TestServer> server_;
};

TEST_F(MpiPoolServerTest, PlacesRunsRefusesAndDeletes) {
  TestServer& s = *server_;
  EXPECT_EQ(FilesUnder(store_), 0);

  // An analyst may not place a dataset (checked before anything moves).
  {
    auto analyst = v1::DatasetService::NewStub(
        TokenChannel(s.target(), s.CreateAnalyst("alice")));
    ASSERT_TRUE(s.Grant("alice", "placed").ok());
    grpc::ClientContext ctx;
    v1::PlaceDatasetRequest req;
    req.set_name("placed");
    v1::PlaceDatasetResponse out;
    EXPECT_EQ(analyst->PlaceDataset(&ctx, req, &out).error_code(),
              grpc::StatusCode::PERMISSION_DENIED);
    EXPECT_EQ(FilesUnder(store_), 0);
  }

  // Placement: rank r holds rows [floor(r n / R), floor((r + 1) n / R)).
  {
    grpc::ClientContext ctx;
    v1::PlaceDatasetRequest req;
    req.set_name("placed");
    v1::PlaceDatasetResponse out;
    const grpc::Status st = s.datasets().PlaceDataset(&ctx, req, &out);
    ASSERT_TRUE(st.ok()) << st.error_message();
    ASSERT_EQ(out.shards_size(), kRanks);
    for (int r = 0; r < kRanks; ++r) {
      const v1::RankShard& shard = out.shards(r);
      EXPECT_EQ(shard.rank(), r);
      EXPECT_TRUE(shard.ok());
      EXPECT_FALSE(shard.host().empty());
      EXPECT_EQ(shard.rows(), optim::ShardBegin(kRows, kRanks, r + 1) -
                                  optim::ShardBegin(kRows, kRanks, r));
      EXPECT_GE(FilesUnder(store_ / absl::StrCat("rank-", r)), 1) << r;
    }
  }
  {
    grpc::ClientContext ctx;
    v1::GetDatasetRequest req;
    req.set_name("placed");
    v1::DatasetInfo info;
    ASSERT_TRUE(s.datasets().GetDataset(&ctx, req, &info).ok());
    ASSERT_TRUE(info.has_placement());
    EXPECT_EQ(info.placement().ranks(), kRanks);
    EXPECT_EQ(info.placement().shards_size(), kRanks);
    EXPECT_TRUE(info.placement().current());
  }

  // From here on the server cannot read the placed dataset's rows: a pool
  // job must not need them. (Control: an in-process job fails on them.)
  MakeRowsUnreadable(s, "placed");
  {
    v1::JobSpec control = PoolDpSgd("placed");
    control.set_execution(v1::EXECUTION_IN_PROCESS);
    v1::Job job;
    ASSERT_TRUE(Submit(s, control, &job).ok());
    const v1::Job done = s.WaitForJob(job.id(), 120);
    EXPECT_EQ(done.state(), v1::JOB_STATE_FAILED);
    EXPECT_THAT(done.message(), HasSubstr("DATA_LOSS"));
  }

  // A dp_sgd job on the pool: succeeds, charged exactly once.
  const int64_t before = LedgerEntries(s, "placed");
  {
    v1::Job job;
    const grpc::Status st = Submit(s, PoolDpSgd("placed"), &job);
    ASSERT_TRUE(st.ok()) << st.error_message();
    EXPECT_EQ(LedgerEntries(s, "placed"), before + 1);
    const v1::Job done = s.WaitForJob(job.id(), 120);
    ASSERT_EQ(done.state(), v1::JOB_STATE_SUCCEEDED) << done.message();
    EXPECT_EQ(LedgerEntries(s, "placed"), before + 1);
    grpc::ClientContext ctx;
    v1::GetJobResultRequest req;
    req.set_id(job.id());
    v1::JobResult result;
    ASSERT_TRUE(s.jobs().GetJobResult(&ctx, req, &result).ok());
    ASSERT_EQ(result.model().weights_size(), 2);
    double norm = 0;
    for (double w : result.model().weights()) {
      EXPECT_TRUE(std::isfinite(w));
      norm += w * w;
    }
    EXPECT_GT(norm, 0);
    EXPECT_TRUE(result.cost().charged());
  }

  // A line-search job (dp_blgd) reads its gradients and loss sums on the
  // pool too.
  {
    v1::JobSpec line_search = Spec(
        R"({"dataset": "placed", "model": {"logistic_regression": {"l2": 0.01}},
            "privacy": {"epsilon": 1, "delta": 1e-6},
            "algorithm": {"dp_blgd": {"planned_iterations": 5}},
            "execution": "EXECUTION_MPI_POOL"})");
    v1::Job job;
    const grpc::Status st = Submit(s, line_search, &job);
    ASSERT_TRUE(st.ok()) << st.error_message();
    const v1::Job done = s.WaitForJob(job.id(), 120);
    ASSERT_EQ(done.state(), v1::JOB_STATE_SUCCEEDED) << done.message();
    EXPECT_EQ(LedgerEntries(s, "placed"), before + 2);
  }

  // Refused before charging: a job type that cannot read its rows on the
  // pool (dp_dda: its own execution field starts mpirun per job), and a
  // dataset that is not placed.
  {
    v1::JobSpec dda = Spec(
        R"({"dataset": "placed", "model": {"hinge_svm": {"l2": 0.0005}},
            "privacy": {"epsilon": 1, "delta": 1e-6},
            "algorithm": {"dp_dda": {"nodes": 4, "iterations": 20,
                                     "batch_size": 8}},
            "execution": "EXECUTION_MPI_POOL"})");
    v1::Job job;
    const grpc::Status st = Submit(s, dda, &job);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
    EXPECT_THAT(st.error_message(),
                HasSubstr("dp_dda cannot read its rows on the worker pool"));
    EXPECT_THAT(st.error_message(), HasSubstr("dp_sgd"));
    EXPECT_THAT(st.error_message(), HasSubstr("dp_blgd"));
    EXPECT_EQ(LedgerEntries(s, "placed"), before + 2);
  }
  {
    v1::Job job;
    const grpc::Status st = Submit(s, PoolDpSgd("unplaced"), &job);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
    EXPECT_THAT(st.error_message(), HasSubstr("not placed"));
    EXPECT_EQ(LedgerEntries(s, "unplaced"), 0);
  }

  // Deleting the dataset deletes its shards on every rank first.
  {
    grpc::ClientContext ctx;
    v1::DeleteDatasetRequest req;
    req.set_name("placed");
    v1::DeleteDatasetResponse out;
    const grpc::Status st = s.datasets().DeleteDataset(&ctx, req, &out);
    ASSERT_TRUE(st.ok()) << st.error_message();
    ASSERT_EQ(out.pool_shards_deleted_size(), kRanks);
    for (int r = 0; r < kRanks; ++r) {
      EXPECT_EQ(out.pool_shards_deleted(r).rank(), r);
      EXPECT_TRUE(out.pool_shards_deleted(r).ok());
      EXPECT_EQ(out.pool_shards_deleted(r).rows(), 1);
      EXPECT_FALSE(out.pool_shards_deleted(r).host().empty());
    }
  }
  EXPECT_EQ(FilesUnder(store_), 0);
  // The unplaced dataset's deletion involves no rank.
  {
    grpc::ClientContext ctx;
    v1::DeleteDatasetRequest req;
    req.set_name("unplaced");
    v1::DeleteDatasetResponse out;
    ASSERT_TRUE(s.datasets().DeleteDataset(&ctx, req, &out).ok());
    EXPECT_EQ(out.pool_shards_deleted_size(), 0);
  }
}

// A placed dataset is deleted only with its shards: a server restarted
// without its pool refuses the deletion with UNAVAILABLE and deletes
// nothing; with the pool back, the deletion goes through.
TEST_F(MpiPoolServerTest, DeletionWithoutThePoolIsRefusedAndDeletesNothing) {
  TestServer& s = *server_;
  ASSERT_TRUE(Place(s, "placed").ok());
  const int files = FilesUnder(store_);
  ASSERT_GE(files, kRanks);
  // The same database, no pool this time.
  s.Stop();
  without_pool_ = true;
  s.Start();
  {
    grpc::ClientContext ctx;
    v1::DeleteDatasetRequest req;
    req.set_name("placed");
    v1::DeleteDatasetResponse out;
    const grpc::Status st = s.datasets().DeleteDataset(&ctx, req, &out);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::UNAVAILABLE);
    EXPECT_THAT(st.error_message(), HasSubstr("--mpi-pool=2"));
  }
  EXPECT_EQ(FilesUnder(store_), files);
  {
    grpc::ClientContext ctx;
    v1::GetDatasetRequest req;
    req.set_name("placed");
    v1::DatasetInfo info;
    ASSERT_TRUE(s.datasets().GetDataset(&ctx, req, &info).ok());
    EXPECT_TRUE(info.has_placement());
    EXPECT_FALSE(info.placement().current());
  }
  s.Stop();
  without_pool_ = false;
  s.Start();
  {
    grpc::ClientContext ctx;
    v1::DeleteDatasetRequest req;
    req.set_name("placed");
    v1::DeleteDatasetResponse out;
    const grpc::Status st = s.datasets().DeleteDataset(&ctx, req, &out);
    ASSERT_TRUE(st.ok()) << st.error_message();
    EXPECT_EQ(out.pool_shards_deleted_size(), kRanks);
  }
  EXPECT_EQ(FilesUnder(store_), 0);
}

// Shards the database does not know about (a backup restored from before
// the placement) are still dropped with the dataset when the server has a
// pool.
TEST_F(MpiPoolServerTest, ForgottenShardsAreDroppedWithTheDataset) {
  TestServer& s = *server_;
  ASSERT_TRUE(Place(s, "placed").ok());
  ASSERT_GE(FilesUnder(store_), kRanks);
  Sql(s.db_path(), "DELETE FROM dataset_placements");
  grpc::ClientContext ctx;
  v1::DeleteDatasetRequest req;
  req.set_name("placed");
  v1::DeleteDatasetResponse out;
  const grpc::Status st = s.datasets().DeleteDataset(&ctx, req, &out);
  ASSERT_TRUE(st.ok()) << st.error_message();
  ASSERT_EQ(out.pool_shards_deleted_size(), kRanks);
  for (const v1::RankShard& shard : out.pool_shards_deleted()) {
    EXPECT_EQ(shard.rows(), 1) << shard.rank();
  }
  EXPECT_EQ(FilesUnder(store_), 0);
}

// A rank that dies during a pool job fails the job, which stays charged
// (as every job that started); the server keeps serving.
TEST_F(MpiPoolServerTest, ARankDyingMidJobFailsTheJobWhichStaysCharged) {
  TestServer& s = *server_;
  s.Stop();
  worker_args_ = {"--test-fault=die:1:5"};  // rank 1 dies after 5 sums
  s.Start();
  ASSERT_TRUE(Place(s, "placed").ok());
  v1::Job job;
  const grpc::Status st = Submit(s, PoolDpSgd("placed"), &job);
  ASSERT_TRUE(st.ok()) << st.error_message();
  const v1::Job done = s.WaitForJob(job.id(), 120);
  EXPECT_EQ(done.state(), v1::JOB_STATE_FAILED);
  EXPECT_THAT(done.message(), HasSubstr("UNAVAILABLE"));
  EXPECT_LT(done.steps_done(), 40);
  EXPECT_EQ(LedgerEntries(s, "placed"), 1);
  grpc::ClientContext ctx;
  v1::GetDatasetRequest req;
  req.set_name("placed");
  v1::DatasetInfo info;
  EXPECT_TRUE(s.datasets().GetDataset(&ctx, req, &info).ok());
}

// Cancelling a pool job stops it between two releases: the server stops
// asking the ranks for sums and closes the job on every rank; the job ends
// CANCELLED (still charged) and the pool serves the next job.
TEST_F(MpiPoolServerTest, ACancelledPoolJobStopsAndThePoolServesTheNext) {
  TestServer& s = *server_;
  ASSERT_TRUE(Place(s, "placed").ok());
  v1::JobSpec long_job = PoolDpSgd("placed");
  long_job.mutable_algorithm()->mutable_dp_sgd()->set_steps(200000);
  v1::Job job;
  grpc::Status st = Submit(s, long_job, &job);
  ASSERT_TRUE(st.ok()) << st.error_message();
  // Bounded wait for the job to be running on the pool.
  const absl::Time limit = absl::Now() + absl::Seconds(120);
  v1::Job now;
  do {
    absl::SleepFor(absl::Milliseconds(50));
    grpc::ClientContext ctx;
    v1::GetJobRequest req;
    req.set_id(job.id());
    ASSERT_TRUE(s.jobs().GetJob(&ctx, req, &now).ok());
  } while (now.steps_done() < 5 && absl::Now() < limit);
  ASSERT_GE(now.steps_done(), 5) << "the pool job never ran";
  const absl::Time cancelled_at = absl::Now();
  {
    grpc::ClientContext ctx;
    v1::CancelJobRequest req;
    req.set_id(job.id());
    v1::Job after;
    ASSERT_TRUE(s.jobs().CancelJob(&ctx, req, &after).ok());
  }
  const v1::Job done = s.WaitForJob(job.id(), 60);
  std::cout << "[figure] pool job cancelled after "
            << absl::ToDoubleMilliseconds(absl::Now() - cancelled_at) << " ms"
            << std::endl;
  EXPECT_EQ(done.state(), v1::JOB_STATE_CANCELLED);
  EXPECT_LT(done.steps_done(), 200000);
  EXPECT_EQ(LedgerEntries(s, "placed"), 1);
  // The ranks are free: the next pool job runs to its end.
  st = Submit(s, PoolDpSgd("placed"), &job);
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_EQ(s.WaitForJob(job.id(), 120).state(), v1::JOB_STATE_SUCCEEDED);
}

}  // namespace
}  // namespace dpopt::testing
