// The byte formats between the server and dp_dda's MPI ranks (wire.h):
// round trips, and corruption detected instead of misread.
#include "core/optim/distributed_dda/wire.h"

#include "gtest/gtest.h"
#include "tests/common/status_matchers.h"
#include "tests/core/optim/distributed_dda/dda_fixture.h"

namespace dpopt::optim::distributed_dda {
namespace {

using ::dpopt::testing::StatusIs;

TEST(WireTest, JobAndShardsRoundTrip) {
  WorkerJob j;
  j.model.loss = LossKind::kHinge;
  j.model.l2 = 0.5;
  j.model.l1 = 1e-3;
  j.nodes = 20;
  j.ranks = 4;
  j.iterations = 1234;
  j.trace_every = 12;
  j.literal_inactive = true;
  j.iota = 0.1;
  j.public_seed = (uint64_t{1} << 52) + 3;
  j.graph.kind = GraphKind::kGeometric;
  j.graph.radius = 0.7;
  j.gossip.activation = Activation::kBernoulli;
  j.gossip.activation_probability = 0.3;
  j.gossip.all_nodes_compute = true;
  j.schedule = {WeightSchedule::kUniform, 0.01, 0.5};
  j.dimension = 123;
  j.sampling = NodeSampling::kPoisson;
  j.batch_size = 3;
  j.poisson_rate = 0.002;
  j.normalizer = 3;
  j.clip_norm = 1.5;
  j.sensitivity = 1.5;
  j.noise_multiplier = 2.25;
  j.h = {0.5, 1e-3};
  const std::string bytes = EncodeWorkerJob(j);
  ASSERT_OK_AND_ASSIGN(WorkerJob k, DecodeWorkerJob(bytes));
  EXPECT_EQ(EncodeWorkerJob(k), bytes);
  EXPECT_EQ(k.public_seed, j.public_seed);
  EXPECT_EQ(k.gossip.activation, Activation::kBernoulli);
  std::string bad = bytes;
  bad[17] ^= 1;
  EXPECT_THAT(DecodeWorkerJob(bad).status(),
              StatusIs(absl::StatusCode::kDataLoss));
  EXPECT_THAT(DecodeWorkerJob(bytes.substr(0, 20)).status(),
              StatusIs(absl::StatusCode::kDataLoss));

  const Dataset dense = test::MakeBinary(10, 4, 1);
  ASSERT_OK_AND_ASSIGN(Dataset d, DecodeShard(EncodeShard(dense)));
  EXPECT_EQ(d.dense(), dense.dense());
  EXPECT_EQ(d.labels(), dense.labels());
  SparseRows x(3, 1000);
  x.insert(0, 999) = 1e308;
  x.insert(2, 0) = -4.9406564584124654e-324;
  const Dataset sparse =
      Dataset::Sparse(x, Eigen::Vector3d(1, -1, 1), LabelKind::kBinary);
  ASSERT_OK_AND_ASSIGN(Dataset s, DecodeShard(EncodeShard(sparse)));
  EXPECT_EQ(Eigen::MatrixXd(s.sparse()), Eigen::MatrixXd(sparse.sparse()));
}

TEST(WireTest, FramesParseIncrementallyAndRejectGarbage) {
  TraceFrame t{7, 0.25, Eigen::Vector3d(1, -0.0, 3)};
  DoneFrame d{9,
              false,
              Eigen::Vector3d(4, 5, 6),
              {Eigen::Vector3d(1, 1, 1), Eigen::Vector3d(2, 2, 2)}};
  const std::string stream = EncodeFrame(FrameType::kTrace, EncodeTrace(t)) +
                             EncodeFrame(FrameType::kDone, EncodeDone(d));
  FrameParser p;
  std::vector<Frame> frames;
  for (char c : stream) {  // one byte at a time
    p.Append(std::string(1, c));
    Frame f;
    ASSERT_OK_AND_ASSIGN(bool got, p.Next(&f));
    if (got) frames.push_back(f);
  }
  ASSERT_EQ(frames.size(), 2u);
  ASSERT_OK_AND_ASSIGN(TraceFrame t2, DecodeTrace(frames[0].payload));
  EXPECT_EQ(t2.step, 7);
  EXPECT_EQ(t2.average, t.average);
  EXPECT_TRUE(std::signbit(t2.average[1]));
  ASSERT_OK_AND_ASSIGN(DoneFrame d2, DecodeDone(frames[1].payload));
  EXPECT_EQ(d2.node_models.size(), 2u);
  EXPECT_EQ(d2.node_models[1], d.node_models[1]);
  FrameParser g;
  g.Append("mpirun noticed that process rank 1 exited\n");
  Frame f;
  EXPECT_THAT(g.Next(&f).status(), StatusIs(absl::StatusCode::kDataLoss));
}

}  // namespace
}  // namespace dpopt::optim::distributed_dda
