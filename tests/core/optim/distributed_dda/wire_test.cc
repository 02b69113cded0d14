// The byte formats between the server and dp_dda's MPI ranks (wire.h):
// round trips, and corruption detected instead of misread.
#include "core/optim/distributed_dda/wire.h"

#include "core/noise/testing/seeded_random.h"
#include "core/optim/distributed_dda/dp_dda.h"
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

// The one-string shard encoding of before the chunked stream, kept here as
// the reference the streamed encoding must reproduce byte for byte.
std::string ReferenceShardBytes(const Dataset& d) {
  WireWriter w;
  w.I64(d.rows());
  w.I64(d.dimension());
  w.U64(d.is_sparse());
  w.U64(static_cast<uint64_t>(d.label_kind()));
  w.I64(d.num_classes());
  w.F64s(d.labels().data(), d.rows());
  if (!d.is_sparse()) {
    for (int64_t i = 0; i < d.rows(); ++i) {
      for (int64_t j = 0; j < d.dimension(); ++j) w.F64(d.dense()(i, j));
    }
  } else {
    for (int64_t i = 0; i < d.rows(); ++i) {
      int64_t nnz = 0;
      for (SparseRows::InnerIterator it(d.sparse(), i); it; ++it) ++nnz;
      w.I64(nnz);
      for (SparseRows::InnerIterator it(d.sparse(), i); it; ++it) {
        w.I64(it.col());
        w.F64(it.value());
      }
    }
  }
  return w.Finish();
}

Dataset SparseData(int rows, int dim, uint64_t seed) {
  noise::testing::SeededRandomForTesting rng(seed);
  std::vector<Eigen::Triplet<double, int64_t>> t;
  Eigen::VectorXd y(rows);
  for (int i = 0; i < rows; ++i) {
    // Rows with 0 to 6 nonzeros (some empty).
    const int nnz = static_cast<int>(rng.UniformInt(7));
    for (int k = 0; k < nnz; ++k) {
      t.emplace_back(i, static_cast<int64_t>(rng.UniformInt(dim)),
                     rng.UniformDouble() - 0.5);
    }
    y[i] = rng.UniformDouble() < 0.5 ? -1 : 1;
  }
  SparseRows x(rows, dim);
  x.setFromTriplets(t.begin(), t.end(),
                    [](double a, double b) { return a + b; });
  return Dataset::Sparse(std::move(x), std::move(y), LabelKind::kBinary);
}

// Each node's rows, as dp_dda splits them (some nodes may get no row).
std::vector<std::vector<int64_t>> Split(int64_t rows, int nodes,
                                        uint64_t seed) {
  noise::testing::SeededRandomForTesting rng(seed);
  std::vector<std::vector<int64_t>> shards;
  EXPECT_OK(SplitRows(rows, nodes, NodeSampling::kPoisson, 0, rng, &shards));
  return shards;
}

// The chunked job stream, with chunks far smaller than a shard, carries each
// node's shard as exactly the bytes of the one-string encoding of its rows,
// in chunks no larger than asked; the writer never hands out more than one
// chunk (plus its length) at a time.
TEST(WireTest, ChunkedJobStreamCarriesTheSameShardBytes) {
  const Dataset dense = test::MakeBinary(300, 7, 2);
  const Dataset sparse = SparseData(400, 50, 3);
  const std::string header = "public job header";
  for (const Dataset* data : {&dense, &sparse}) {
    const std::vector<std::vector<int64_t>> shards = Split(data->rows(), 5, 11);
    for (int64_t chunk : {kMinChunkBytes, int64_t{1000}, kMaxChunkBytes}) {
      JobStreamWriter writer(header, *data, shards, chunk);
      std::string stream, piece;
      int pieces = 0;
      while (writer.Next(&piece)) {
        EXPECT_LE(piece.size(), static_cast<size_t>(chunk) + 8);
        stream += piece;
        ASSERT_LT(++pieces, 1000000);
      }
      EXPECT_EQ(stream, EncodeJobStream(header, *data, shards, chunk));
      ASSERT_OK_AND_ASSIGN(ParsedJobStream p, ParseJobStream(stream, 5));
      EXPECT_EQ(p.header, header);
      ASSERT_EQ(p.shards.size(), 5u);
      EXPECT_LE(p.largest_chunk, static_cast<uint64_t>(chunk));
      size_t total = 0;
      for (int i = 0; i < 5; ++i) {
        const Dataset shard = SelectRows(*data, shards[i]);
        EXPECT_EQ(p.shards[i], ReferenceShardBytes(shard)) << i;
        EXPECT_EQ(p.shards[i], EncodeShard(shard)) << i;
        total += p.shards[i].size();
        ASSERT_OK_AND_ASSIGN(Dataset back, DecodeShard(p.shards[i]));
        EXPECT_EQ(back.labels(), shard.labels());
      }
      if (chunk == kMinChunkBytes) {
        EXPECT_GT(p.chunks, 5 * 20) << "many chunks per shard";
      } else if (chunk == kMaxChunkBytes) {
        EXPECT_EQ(p.chunks, 5);  // one chunk per shard
      }
      EXPECT_EQ(p.chunks, [&] {
        int64_t c = 0;
        for (const std::string& s : p.shards) {
          c += (static_cast<int64_t>(s.size()) + chunk - 1) / chunk;
        }
        return c;
      }()) << total;
    }
  }
}

// The streamed encoder fills by small steps, never far past what was asked.
TEST(WireTest, ShardEncoderFillsInSmallSteps) {
  const Dataset sparse = SparseData(50, 20, 4);
  ShardEncoder e(sparse, nullptr);
  std::string out;
  int steps = 0;
  while (!e.done()) {
    const size_t want = out.size() + 1;
    e.Fill(&out, want);
    EXPECT_LE(out.size(), want + 16);
    ASSERT_LT(++steps, 100000);
  }
  EXPECT_EQ(out, ReferenceShardBytes(sparse));
}

// A stream with a chunk over the public maximum, or cut short, or with bytes
// after the last shard is refused.
TEST(WireTest, MalformedChunkedStreamsAreRefused) {
  const Dataset dense = test::MakeBinary(40, 3, 2);
  const std::vector<std::vector<int64_t>> shards = Split(40, 2, 5);
  const std::string good = EncodeJobStream("h", dense, shards, 64);
  ASSERT_OK(ParseJobStream(good, 2).status());
  EXPECT_THAT(ParseJobStream(good.substr(0, good.size() - 3), 2).status(),
              StatusIs(absl::StatusCode::kDataLoss));
  EXPECT_THAT(ParseJobStream(good + "x", 2).status(),
              StatusIs(absl::StatusCode::kDataLoss));
  std::string big = good;
  // The first shard's first chunk length (after magic, length, "h").
  big[8 + 8 + 1 + 3] = 0x10;  // 64 + 2^24 bytes > 4 MiB
  EXPECT_THAT(ParseJobStream(big, 2).status(),
              StatusIs(absl::StatusCode::kDataLoss));
  std::string v1 = good;
  v1[5] = 1;  // the unchunked format of before
  EXPECT_THAT(ParseJobStream(v1, 2).status(),
              StatusIs(absl::StatusCode::kDataLoss));
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
