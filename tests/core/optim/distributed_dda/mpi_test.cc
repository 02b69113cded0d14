// dp_dda on MPI (distributed-DDA family): with the test-only
// seeded generators, a simulated run and the same run on 4 MPI ranks
// (mpirun -np 4 --oversubscribe) give bitwise identical traces, models and
// node models, in both chargeable modes and on dense and sparse data; a
// rank that dies, a rank that hangs past the deadline and a cancellation
// all stop every process of the job.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/noise/testing/seeded_random.h"
#include "core/optim/distributed_dda/dp_dda.h"
#include "core/optim/distributed_dda/testing/dp_dda_test_peer.h"
#include "core/optim/distributed_dda/wire.h"
#include "gtest/gtest.h"
#include "tests/common/processes.h"
#include "tests/common/sanitizers.h"
#include "tests/common/status_matchers.h"
#include "tests/core/optim/distributed_dda/dda_fixture.h"

namespace dpopt::optim::distributed_dda {
namespace {

using ::dpopt::testing::kUnderAddressSanitizer;
using ::dpopt::testing::StatusIs;
using ::dpopt::testing::WaitUntilNoProcesses;

MpiSettings Settings(const std::vector<std::string>& worker_args,
                     absl::Duration timeout = absl::Seconds(600)) {
  MpiSettings s;
  s.mpirun = "mpirun";
  s.worker = DPOPT_DDA_TEST_WORKER;
  s.mpirun_args = {"--oversubscribe"};
  s.worker_args = worker_args;
  s.timeout = timeout;
  return s;
}

struct Recorder : IterationCallback {
  std::vector<int64_t> steps;
  std::vector<Eigen::VectorXd> iterates;
  std::vector<double> norms;
  int64_t stop_at = -1;
  bool OnIteration(const IterationSummary& s) override {
    steps.push_back(s.step);
    iterates.push_back(s.iterate);
    norms.push_back(s.noisy_gradient_norm);
    return s.step != stop_at;
  }
};

Dataset SparseBinary(int rows, int dim, uint64_t seed) {
  noise::testing::SeededRandomForTesting rng(seed);
  std::vector<Eigen::Triplet<double, int64_t>> t;
  Eigen::VectorXd y(rows);
  for (int i = 0; i < rows; ++i) {
    for (int k = 0; k < 5; ++k) {
      t.emplace_back(i, static_cast<int64_t>(rng.UniformInt(dim)),
                     rng.UniformDouble());
    }
    y[i] = rng.UniformDouble() < 0.5 ? -1 : 1;
  }
  SparseRows x(rows, dim);
  x.setFromTriplets(t.begin(), t.end(),
                    [](double a, double b) { return a + b; });
  return Dataset::Sparse(std::move(x), std::move(y), LabelKind::kBinary);
}

struct JobRun {
  absl::StatusOr<SolveResult> result;
  Recorder trace;
};

JobRun RunJob(const DpDdaOptions& o, privacy::Relation relation,
              const Dataset& data, uint64_t secret, Recorder trace = {},
              int64_t chunk_bytes = 0) {
  JobRun out;
  out.trace = trace;
  auto a = DpDda::Create(o);
  EXPECT_TRUE(a.ok()) << a.status();
  testing::DpDdaTestPeer::UseSeededNodes(**a, secret);
  if (chunk_bytes > 0) {
    testing::DpDdaTestPeer::SetMpiChunkBytes(**a, chunk_bytes);
  }
  PublicDatasetInfo info;
  info.rows = data.rows();
  info.dimension = data.dimension();
  info.relation = relation;
  PrivacyTarget target;
  target.epsilon = 2;
  target.delta = 1e-5;
  auto c = (*a)->Calibrate(info, target);
  EXPECT_TRUE(c.ok()) << c.status();
  noise::testing::SeededRandomForTesting split(secret + 99);
  SolveContext ctx(&split, &out.trace);
  out.result = (*a)->Run(data, *c, ctx);
  return out;
}

DpDdaOptions Base(int64_t T = 400) {
  DpDdaOptions o;
  o.model.loss = LossKind::kLogistic;
  o.model.l2 = 0.01;
  o.nodes = 6;
  o.iterations = T;
  o.gossip.edges_per_step = 2;
  o.public_seed = 77;
  o.release_node_models = true;
  o.trace_every = 20;
  return o;
}

TEST(DpDdaMpiTest, FourRanksAreBitwiseIdenticalToTheSimulation) {
  const Dataset dense = test::MakeBinary(360, 7, 3);
  const Dataset sparse = SparseBinary(360, 40, 4);
  struct Case {
    const Dataset* data;
    privacy::Relation relation;
    GraphKind graph;
    bool literal;
  };
  std::vector<Case> cases = {
      Case{&dense, privacy::Relation::kReplaceOne, GraphKind::kComplete, false},
      Case{&sparse, privacy::Relation::kAddRemove, GraphKind::kRing, true},
      Case{&dense, privacy::Relation::kAddRemove, GraphKind::kGrid, false}};
  // Under AddressSanitizer (four instrumented ranks on two cores, minutes
  // per case) the dense and the sparse case only, without the second seed:
  // the same worker and wire code; the ordinary build runs them all.
  if (kUnderAddressSanitizer) cases.resize(2);
  for (const Case& c : cases) {
    DpDdaOptions o = Base();
    o.graph.kind = c.graph;
    o.literal_inactive = c.literal;
    const JobRun sim = RunJob(o, c.relation, *c.data, 5);
    ASSERT_OK(sim.result.status());
    o.execution = Execution::kMpi;
    o.mpi_ranks = 4;
    o.mpi = Settings({"--test-seed=5"});
    const JobRun mpi = RunJob(o, c.relation, *c.data, 5);
    ASSERT_OK(mpi.result.status());
    EXPECT_EQ(sim.trace.steps, mpi.trace.steps);
    ASSERT_EQ(sim.trace.iterates.size(), mpi.trace.iterates.size());
    for (size_t k = 0; k < sim.trace.iterates.size(); ++k) {
      ASSERT_EQ(sim.trace.iterates[k], mpi.trace.iterates[k]) << k;
      ASSERT_EQ(sim.trace.norms[k], mpi.trace.norms[k]) << k;
    }
    EXPECT_EQ(sim.result->model.weights, mpi.result->model.weights);
    ASSERT_EQ(sim.result->released.size(), mpi.result->released.size());
    for (size_t k = 0; k < sim.result->released.size(); ++k) {
      EXPECT_EQ(sim.result->released[k].values, mpi.result->released[k].values);
    }
    EXPECT_GT(mpi.result->model.weights.norm(), 0);
    if (kUnderAddressSanitizer) continue;
    // A different secret seed gives a different run (noise is on).
    o.mpi = Settings({"--test-seed=6"});
    const JobRun other = RunJob(o, c.relation, *c.data, 5);
    ASSERT_OK(other.result.status());
    EXPECT_NE(other.result->model.weights, mpi.result->model.weights);
  }
}

// Shards travel in chunks (wire.h): with 64-byte chunks, far smaller than
// one shard (about 4 KB here), so that every shard crosses the server's pipe
// and rank 0's MPI sends in dozens of pieces, the run is still bitwise the
// simulation's, on dense and sparse data.
TEST(DpDdaMpiTest, ChunksSmallerThanAShardGiveTheSameRun) {
  const Dataset dense = test::MakeBinary(360, 7, 3);
  const Dataset sparse = SparseBinary(360, 40, 4);
  for (const Dataset* data : {&dense, &sparse}) {
    DpDdaOptions o = Base(200);
    const JobRun sim = RunJob(o, privacy::Relation::kAddRemove, *data, 8);
    ASSERT_OK(sim.result.status());
    o.execution = Execution::kMpi;
    o.mpi_ranks = 3;
    o.mpi = Settings({"--test-seed=8"});
    const JobRun mpi =
        RunJob(o, privacy::Relation::kAddRemove, *data, 8, {}, kMinChunkBytes);
    ASSERT_OK(mpi.result.status());
    ASSERT_EQ(sim.trace.iterates.size(), mpi.trace.iterates.size());
    for (size_t k = 0; k < sim.trace.iterates.size(); ++k) {
      ASSERT_EQ(sim.trace.iterates[k], mpi.trace.iterates[k]) << k;
    }
    EXPECT_EQ(sim.result->model.weights, mpi.result->model.weights);
    ASSERT_EQ(sim.result->released.size(), mpi.result->released.size());
    for (size_t k = 0; k < sim.result->released.size(); ++k) {
      EXPECT_EQ(sim.result->released[k].values, mpi.result->released[k].values);
    }
  }
}

TEST(DpDdaMpiTest, DeadRankHangingRankAndCancelStopEveryProcess) {
  const Dataset data = test::MakeBinary(360, 7, 3);
  DpDdaOptions o = Base(2000);
  o.execution = Execution::kMpi;
  o.mpi_ranks = 3;
  // A rank dies after pass 50: mpirun aborts the job.
  o.mpi = Settings({"--test-seed=101", "--test-fault=die:1:50"});
  JobRun r = RunJob(o, privacy::Relation::kReplaceOne, data, 1);
  EXPECT_THAT(r.result.status(), StatusIs(absl::StatusCode::kAborted));
  EXPECT_EQ(WaitUntilNoProcesses("--test-seed=101"), 0);
  // A rank hangs at pass 50: the deadline stops everything. (On a loaded
  // machine the deadline may come before pass 50; the outcome is the same.)
  o.mpi =
      Settings({"--test-seed=102", "--test-fault=hang:2:50"}, absl::Seconds(8));
  r = RunJob(o, privacy::Relation::kReplaceOne, data, 1);
  EXPECT_THAT(r.result.status(), StatusIs(absl::StatusCode::kDeadlineExceeded));
  EXPECT_EQ(WaitUntilNoProcesses("--test-seed=102"), 0);
  // The callback asks to stop at step 100: the ranks are stopped.
  o.mpi = Settings({"--test-seed=103"});
  Recorder stop;
  stop.stop_at = 100;
  r = RunJob(o, privacy::Relation::kReplaceOne, data, 1, stop);
  ASSERT_OK(r.result.status());
  EXPECT_TRUE(r.result->cancelled);
  EXPECT_EQ(r.trace.steps.back(), 100);
  EXPECT_EQ(WaitUntilNoProcesses("--test-seed=103"), 0);
  // A worker that is not there.
  o.mpi = Settings({});
  o.mpi->worker = "/nonexistent/dpopt-dda-worker";
  r = RunJob(o, privacy::Relation::kReplaceOne, data, 1);
  EXPECT_FALSE(r.result.ok());
}

}  // namespace
}  // namespace dpopt::optim::distributed_dda
