// The MPI worker pool (mpirun -np k --oversubscribe, k = 1, 2, 4, with the
// test pool's seeded generators) against the same sums computed in one
// process (ShardedRowSums with the same shards and seeds): every
// gradient family that reads its rows through the oracle gives bitwise the
// same model. Then placement and deletion on disk, and a rank's death.
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "core/common/child_process.h"
#include "core/noise/testing/seeded_random.h"
#include "core/optim/accelerated/accelerated.h"
#include "core/optim/dp_sgd.h"
#include "core/optim/line_search/dp_line_search.h"
#include "core/optim/mpi_pool/worker_pool.h"
#include "core/optim/non_private_gd.h"
#include "core/optim/objective.h"
#include "core/optim/row_sums.h"
#include "gtest/gtest.h"
#include "tests/common/status_matchers.h"

namespace dpopt::optim::mpi_pool {
namespace {

using ::dpopt::noise::testing::SeededRandomForTesting;
using ::dpopt::testing::StatusIs;

constexpr uint64_t kPoolSeed = 1000;
constexpr uint64_t kNoiseSeed = 77;

Dataset DenseRows(int64_t n, int64_t d, uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::normal_distribution<double> normal;
  Eigen::MatrixXd x(n, d);
  Eigen::VectorXd y(n);
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < d; ++j) x(i, j) = normal(gen);
    y[i] = x(i, 0) + 0.3 * normal(gen) > 0 ? 1.0 : -1.0;
  }
  return Dataset::Dense(x, y, LabelKind::kBinary);
}

Dataset SparseRows(int64_t n, int64_t d, uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::uniform_int_distribution<int64_t> col(0, d - 1);
  std::normal_distribution<double> normal;
  std::vector<Eigen::Triplet<double, int64_t>> t;
  Eigen::VectorXd y(n);
  for (int64_t i = 0; i < n; ++i) {
    for (int k = 0; k < 3; ++k) t.emplace_back(i, col(gen), normal(gen));
    y[i] = normal(gen) > 0 ? 1.0 : -1.0;
  }
  ::dpopt::SparseRows x(n, d);
  x.setFromTriplets(t.begin(), t.end());
  return Dataset::Sparse(std::move(x), y, LabelKind::kBinary);
}

// k shards of `data` in this process, shard r sampled with seed
// kPoolSeed + r: what the test pool computes.
class InProcessShards final : public RemoteRows {
 public:
  InProcessShards(const Dataset& data, int k) : data_(data), k_(k) {}
  absl::StatusOr<std::unique_ptr<RowSums>> Open(
      const Objective& objective) override {
    shards_.clear();
    rngs_.clear();
    std::vector<std::unique_ptr<RowSums>> parts;
    for (int r = 0; r < k_; ++r) {
      std::vector<int64_t> rows;
      for (int64_t i = ShardBegin(data_.rows(), k_, r);
           i < ShardBegin(data_.rows(), k_, r + 1); ++i) {
        rows.push_back(i);
      }
      shards_.push_back(std::make_unique<Dataset>(SelectRows(data_, rows)));
      rngs_.push_back(std::make_unique<SeededRandomForTesting>(kPoolSeed + r));
      parts.push_back(std::make_unique<LocalRowSums>(*shards_.back(), objective,
                                                     *rngs_.back()));
    }
    return std::unique_ptr<RowSums>(new ShardedRowSums(std::move(parts)));
  }

 private:
  const Dataset& data_;
  const int k_;
  std::vector<std::unique_ptr<Dataset>> shards_;
  std::vector<std::unique_ptr<noise::RandomSource>> rngs_;
};

std::string TempStore() {
  std::string dir = ::testing::TempDir() + "pool_store_XXXXXX";
  EXPECT_NE(mkdtemp(dir.data()), nullptr);
  return dir;
}

WorkerPoolOptions TestPool(int k, const std::string& store,
                           std::vector<std::string> extra = {}) {
  WorkerPoolOptions o;
  o.mpirun = "mpirun";
  o.worker = DPOPT_POOL_TEST_WORKER;
  o.ranks = k;
  o.store_dir = store;
  o.mpirun_args = {"--oversubscribe"};
  o.worker_args = {"--test-seed=" + std::to_string(kPoolSeed)};
  for (auto& a : extra) o.worker_args.push_back(std::move(a));
  o.allow_testing_worker = true;
  return o;
}

struct NamedAlgorithm {
  std::string name;
  std::unique_ptr<Algorithm> algorithm;
};

// Every algorithm that reads rows through the private gradient oracle.
std::vector<NamedAlgorithm> GradientJobs(int64_t d) {
  std::vector<NamedAlgorithm> out;
  DpSgdOptions sgd;
  sgd.steps = 6;
  sgd.sampling_rate = 0.2;
  sgd.clip_norm = 1.0;
  sgd.learning_rate = 0.5;
  sgd.momentum = 0.5;
  out.push_back({"dp_sgd", *NewDpSgd(sgd)});
  sgd.sampling_rate = 1.0;
  out.push_back({"dp_gd", *NewDpSgd(sgd)});
  accelerated::AcceleratedOptions acc;
  acc.method = accelerated::Method::kNag;
  acc.noise = accelerated::NoiseFamily::kLaplace;
  acc.steps = 5;
  acc.batch_size = 40;
  acc.clip_norm = 1.0;
  acc.smoothness = 1.0;
  acc.model.l2 = 0.1;
  out.push_back(
      {"accel_dp_nag (Laplace)", *accelerated::NewAcceleratedAlgorithm(acc)});
  acc.noise = accelerated::NoiseFamily::kGaussian;
  acc.method = accelerated::Method::kHeavyBall;
  out.push_back(
      {"accel_dp_hb (Gaussian)", *accelerated::NewAcceleratedAlgorithm(acc)});
  (void)d;
  // The line-search family: gradients and the noisy line search's loss
  // sums, each on its own fresh sample.
  line_search::DpLineSearchOptions ls;
  ls.variant = line_search::Variant::kBlsgd;
  ls.sampling_rate = 0.3;
  ls.planned_iterations = 4;
  ls.max_iterations = 6;
  ls.model.l2 = 0.001;
  out.push_back({"dp_blsgd", *line_search::NewDpLineSearch(ls)});
  ls.variant = line_search::Variant::kBlgd;
  ls.sampling_rate = 1.0;
  ls.line_search_noise = line_search::SvtNoiseKind::kGaussian;
  out.push_back(
      {"dp_blgd (Gaussian search)", *line_search::NewDpLineSearch(ls)});
  return out;
}

absl::StatusOr<SolveResult> RunWith(const Algorithm& algorithm,
                                    const Dataset& data, RemoteRows& rows) {
  PublicDatasetInfo info;
  info.rows = data.rows();
  info.dimension = data.dimension();
  PrivacyTarget target;
  target.epsilon = 2;
  target.delta = 1e-6;
  absl::StatusOr<Calibration> calibration = algorithm.Calibrate(info, target);
  if (!calibration.ok()) return calibration.status();
  SeededRandomForTesting noise_rng(kNoiseSeed);
  SolveContext context(&noise_rng);
  context.remote_rows = &rows;
  const Dataset no_rows =
      Dataset::Dense(Eigen::MatrixXd(0, data.dimension()), Eigen::VectorXd(0),
                     LabelKind::kBinary);
  return algorithm.Run(no_rows, *calibration, context);
}

class PoolTest : public ::testing::TestWithParam<int> {};

TEST_P(PoolTest, SameModelsAsTheShardsSummedInOneProcess) {
  const int k = GetParam();
  const std::string store = TempStore();
  WorkerPool pool(TestPool(k, store));
  const Dataset dense = DenseRows(203, 5, 1);
  const Dataset sparse = SparseRows(157, 9, 2);
  ASSERT_OK_AND_ASSIGN(std::vector<RankReport> placed,
                       pool.Place("dense-1", dense));
  ASSERT_EQ(placed.size(), static_cast<size_t>(k));
  int64_t rows = 0;
  for (int r = 0; r < k; ++r) {
    EXPECT_TRUE(placed[r].ok);
    EXPECT_EQ(placed[r].rank, r);
    EXPECT_FALSE(placed[r].host.empty());
    EXPECT_EQ(placed[r].count,
              ShardBegin(203, k, r + 1) - ShardBegin(203, k, r));
    rows += placed[r].count;
  }
  EXPECT_EQ(rows, 203);
  ASSERT_OK(pool.Place("sparse-1", sparse).status());

  uint64_t job_id = 1;
  for (const auto& [id, data] :
       std::vector<std::pair<std::string, const Dataset*>>{
           {"dense-1", &dense}, {"sparse-1", &sparse}}) {
    for (const NamedAlgorithm& job : GradientJobs(data->dimension())) {
      SCOPED_TRACE(job.name + " on " + id + ", k = " + std::to_string(k));
      InProcessShards local(*data, k);
      ASSERT_OK_AND_ASSIGN(SolveResult expected,
                           RunWith(*job.algorithm, *data, local));
      std::unique_ptr<RemoteRows> remote = pool.RowsFor(id, job_id++);
      ASSERT_OK_AND_ASSIGN(SolveResult got,
                           RunWith(*job.algorithm, *data, *remote));
      ASSERT_EQ(got.steps_done, expected.steps_done);
      EXPECT_EQ(got.model.weights, expected.model.weights);  // bit for bit
      EXPECT_GT(expected.model.weights.norm(), 0);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Ranks, PoolTest, ::testing::Values(1, 2, 4));

TEST(PoolTest, NonPrivateGradientDescentOnThePool) {
  const std::string store = TempStore();
  WorkerPool pool(TestPool(2, store));
  const Dataset dense = DenseRows(120, 4, 3);
  ASSERT_OK(pool.Place("public-1", dense).status());
  GdOptions gd;
  gd.steps = 5;
  gd.learning_rate = 0.5;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Algorithm> algorithm,
                       NewNonPrivateGd(gd));
  PublicDatasetInfo info;
  info.rows = dense.rows();
  info.dimension = dense.dimension();
  PrivacyTarget target;
  target.non_private = true;
  ASSERT_OK_AND_ASSIGN(Calibration calibration,
                       algorithm->Calibrate(info, target));
  SeededRandomForTesting rng(1);
  SolveContext local(&rng);
  ASSERT_OK_AND_ASSIGN(SolveResult expected,
                       algorithm->Run(dense, calibration, local));
  std::unique_ptr<RemoteRows> remote = pool.RowsFor("public-1", 1);
  SolveContext context(&rng);
  context.remote_rows = remote.get();
  const Dataset no_rows = Dataset::Dense(
      Eigen::MatrixXd(0, 4), Eigen::VectorXd(0), LabelKind::kBinary);
  ASSERT_OK_AND_ASSIGN(SolveResult got,
                       algorithm->Run(no_rows, calibration, context));
  // The same terms added per shard, then the shards in order.
  EXPECT_LT((got.model.weights - expected.model.weights).norm(),
            1e-12 * expected.model.weights.norm());
}

TEST(PoolTest, PlacementIsPrivateOnDiskAndDeletionRemovesIt) {
  const std::string store = TempStore();
  WorkerPool pool(TestPool(2, store));
  const Dataset dense = DenseRows(50, 3, 4);
  ASSERT_OK(pool.Place("ds-7", dense).status());
  for (int r = 0; r < 2; ++r) {
    const std::string dir = store + "/rank-" + std::to_string(r);
    const std::string file = dir + "/ds-7.shard";
    struct stat st;
    ASSERT_EQ(stat(dir.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0700u) << dir;
    ASSERT_EQ(stat(file.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0600u) << file;
  }
  ASSERT_OK_AND_ASSIGN(std::vector<RankReport> dropped, pool.Drop("ds-7"));
  ASSERT_EQ(dropped.size(), 2u);
  for (const RankReport& r : dropped) {
    EXPECT_TRUE(r.ok);
    EXPECT_EQ(r.count, 1) << "rank " << r.rank << " had a shard";
  }
  for (int r = 0; r < 2; ++r) {
    EXPECT_FALSE(std::filesystem::exists(store + "/rank-" + std::to_string(r) +
                                         "/ds-7.shard"));
  }
  ASSERT_OK_AND_ASSIGN(dropped, pool.Drop("ds-7"));
  for (const RankReport& r : dropped) EXPECT_EQ(r.count, 0);
  // A job on a dataset that is not placed fails to open, on every rank.
  std::unique_ptr<RemoteRows> rows = pool.RowsFor("ds-7", 1);
  ASSERT_OK_AND_ASSIGN(auto objective, Objective::Create({}, 3));
  EXPECT_THAT(rows->Open(*objective).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_THAT(pool.Place("../etc", dense).status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(PoolTest, ARankThatDiesFailsTheJobAndThePoolRestartsWithItsShards) {
  const std::string store = TempStore();
  // Rank 1 dies after its third sum.
  WorkerPool pool(TestPool(2, store, {"--test-fault=die:1:3"}));
  const Dataset dense = DenseRows(80, 3, 5);
  ASSERT_OK(pool.Place("ds-9", dense).status());
  ASSERT_OK_AND_ASSIGN(auto objective, Objective::Create({}, 3));
  std::unique_ptr<RemoteRows> rows = pool.RowsFor("ds-9", 1);
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<RowSums> sums, rows->Open(*objective));
  const Eigen::VectorXd w = Eigen::VectorXd::Zero(3);
  Eigen::VectorXd s;
  ASSERT_OK(sums->ClippedSum({0.5, Objective::ClipNorm::kL2, 1.0}, w, &s));
  ASSERT_OK(sums->ClippedSum({0.5, Objective::ClipNorm::kL2, 1.0}, w, &s));
  const absl::Time start = absl::Now();
  EXPECT_THAT(sums->ClippedSum({0.5, Objective::ClipNorm::kL2, 1.0}, w, &s),
              StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_LT(absl::Now() - start, absl::Seconds(60));
  // The job's state died with the pool: its later sums fail too.
  EXPECT_THAT(sums->ClippedSum({0.5, Objective::ClipNorm::kL2, 1.0}, w, &s),
              StatusIs(absl::StatusCode::kUnavailable));
  // A new job starts a new pool, which finds the shards on disk.
  std::unique_ptr<RemoteRows> again = pool.RowsFor("ds-9", 2);
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<RowSums> sums2, again->Open(*objective));
  ASSERT_OK(sums2->ExactSum(w, &s));
  EXPECT_EQ(s.size(), 3);
}

// An operator's pool (mpirun started by hand, rank 0 listening on a Unix
// socket): the server connects, places, runs, disconnects; the pool stays up
// with its shards for the next connection.
TEST(PoolTest, AnOperatorsPoolServesSuccessiveConnections) {
  const std::string store = TempStore();
  const std::string socket = store + "/pool.sock";
  std::vector<std::string> argv = {"mpirun",
                                   "-np",
                                   "2",
                                   "--oversubscribe",
                                   DPOPT_POOL_TEST_WORKER,
                                   "--test-seed=" + std::to_string(kPoolSeed),
                                   "--store=" + store,
                                   "--listen=" + socket};
  std::vector<std::string> env;
  if (geteuid() == 0) {
    env = {"OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1"};
  }
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<ChildProcess> operator_pool,
                       ChildProcess::Spawn(argv, env));
  const absl::Time limit = absl::Now() + absl::Seconds(60);
  while (!std::filesystem::exists(socket) && absl::Now() < limit) {
    absl::SleepFor(absl::Milliseconds(50));
  }
  struct stat st;
  ASSERT_EQ(stat(socket.c_str(), &st), 0) << "the pool never listened";
  EXPECT_EQ(st.st_mode & 0777, 0600u);

  WorkerPoolOptions o;
  o.connect = socket;
  o.ranks = 2;
  o.allow_testing_worker = true;
  const Dataset dense = DenseRows(90, 4, 6);
  const std::vector<NamedAlgorithm> jobs = GradientJobs(4);
  {
    WorkerPool pool(o);
    ASSERT_OK(pool.Place("op-1", dense).status());
    InProcessShards local(dense, 2);
    ASSERT_OK_AND_ASSIGN(SolveResult expected,
                         RunWith(*jobs[0].algorithm, dense, local));
    std::unique_ptr<RemoteRows> remote = pool.RowsFor("op-1", 1);
    ASSERT_OK_AND_ASSIGN(SolveResult got,
                         RunWith(*jobs[0].algorithm, dense, *remote));
    EXPECT_EQ(got.model.weights, expected.model.weights);
  }
  {
    WorkerPool pool(o);  // a new connection: the shards are still placed
    ASSERT_OK_AND_ASSIGN(auto objective, Objective::Create({}, 4));
    std::unique_ptr<RemoteRows> rows = pool.RowsFor("op-1", 1);
    ASSERT_OK_AND_ASSIGN(std::unique_ptr<RowSums> sums, rows->Open(*objective));
    Eigen::VectorXd s;
    ASSERT_OK(sums->ExactSum(Eigen::VectorXd::Zero(4), &s));
    EXPECT_EQ(s.size(), 4);
    sums.reset();
    ASSERT_OK(pool.Drop("op-1").status());
  }
  o.ranks = 3;  // the operator's pool has 2
  WorkerPool wrong(o);
  EXPECT_THAT(wrong.EnsureStarted(),
              StatusIs(absl::StatusCode::kFailedPrecondition));
  operator_pool->Terminate();
}

TEST(PoolTest, AServerRefusesATestPoolUnlessAllowed) {
  WorkerPoolOptions o = TestPool(1, TempStore());
  o.allow_testing_worker = false;
  WorkerPool pool(o);
  EXPECT_THAT(pool.EnsureStarted(),
              StatusIs(absl::StatusCode::kFailedPrecondition));
}

}  // namespace
}  // namespace dpopt::optim::mpi_pool
