// The server's memory for the job stream of an MPI dp_dda job (distributed-DDA
// family). Prints one line: the process's resident memory once the dataset
// is loaded, its peak, and the bytes of the stream.
//
//   dda_stream_memory MODE ROWS DIM [TEST_WORKER]
//
// MODE one-string: every node's shard encoded, then concatenated into one
//      string, as the server held the stream before it was streamed
//      (the representation scripts/bench.sh compares against);
//      streamed: the stream pulled a chunk at a time through
//      JobStreamWriter, as the MPI launcher does, each chunk dropped;
//      mpi: a real 2-iteration job on 2 ranks of TEST_WORKER (the test-only
//      dpopt-dda-worker-testing; seeded generators, NOT DP), the ranks'
//      memory not counted (other processes).
// Data: ROWS x DIM dense rows on 8 nodes (generated, seeded).
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "core/noise/testing/seeded_random.h"
#include "core/optim/distributed_dda/dp_dda.h"
#include "core/optim/distributed_dda/testing/dp_dda_test_peer.h"
#include "core/optim/distributed_dda/wire.h"

namespace dpopt::optim::distributed_dda {
namespace {

long StatusKb(const char* key) {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind(key, 0) == 0) return std::stol(line.substr(strlen(key)));
  }
  return -1;
}

int Main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr,
                 "usage: %s one-string|streamed|mpi ROWS DIM [WORKER]\n",
                 argv[0]);
    return 2;
  }
  const std::string mode = argv[1];
  const int64_t rows = std::stoll(argv[2]);
  const int64_t dim = std::stoll(argv[3]);
  constexpr int kNodes = 8;
  Eigen::MatrixXd x(rows, dim);
  noise::testing::SeededRandomForTesting rng(1);
  for (int64_t j = 0; j < dim; ++j) {
    for (int64_t i = 0; i < rows; ++i) {
      x(i, j) = (rng.UniformDouble() - 0.5) / static_cast<double>(dim);
    }
  }
  Eigen::VectorXd y(rows);
  for (int64_t i = 0; i < rows; ++i) y[i] = rng.UniformDouble() < 0.5 ? -1 : 1;
  const Dataset data =
      Dataset::Dense(std::move(x), std::move(y), LabelKind::kBinary);
  const long loaded_kb = StatusKb("VmRSS:");
  std::vector<std::vector<int64_t>> shards;
  noise::testing::SeededRandomForTesting split(2);
  if (!SplitRows(rows, kNodes, NodeSampling::kWithoutReplacement, rows / kNodes,
                 split, &shards)
           .ok()) {
    return 1;
  }
  double stream_bytes = 0;
  if (mode == "one-string") {
    std::vector<std::string> encoded;
    for (int i = 0; i < kNodes; ++i) {
      encoded.push_back(EncodeShard(SelectRows(data, shards[i])));
    }
    std::string stream;
    for (const std::string& s : encoded) stream += s;
    encoded.clear();
    stream_bytes = static_cast<double>(stream.size());
  } else if (mode == "streamed") {
    JobStreamWriter writer("header", data, shards, kMaxChunkBytes);
    std::string piece;
    while (writer.Next(&piece))
      stream_bytes += static_cast<double>(piece.size());
  } else if (mode == "mpi" && argc >= 5) {
    DpDdaOptions o;
    o.model.loss = LossKind::kLogistic;
    o.model.l2 = 0.01;
    o.nodes = kNodes;
    o.iterations = 2;
    o.public_seed = 7;
    o.execution = Execution::kMpi;
    o.mpi_ranks = 2;
    MpiSettings m;
    m.mpirun = "mpirun";
    m.worker = argv[4];
    m.mpirun_args = {"--oversubscribe"};
    m.worker_args = {"--test-seed=3"};
    testing::MpiSettingsTestPeer::AllowTestingWorker(m);
    o.mpi = m;
    absl::StatusOr<std::unique_ptr<DpDda>> a = DpDda::Create(o);
    if (!a.ok()) return 1;
    testing::DpDdaTestPeer::UseSeededNodes(**a, 3);
    PublicDatasetInfo info;
    info.rows = rows;
    info.dimension = dim;
    info.relation = privacy::Relation::kReplaceOne;
    PrivacyTarget target;
    target.epsilon = 2;
    target.delta = 1e-5;
    absl::StatusOr<Calibration> c = (*a)->Calibrate(info, target);
    if (!c.ok()) {
      std::fprintf(stderr, "%s\n", c.status().ToString().c_str());
      return 1;
    }
    noise::testing::SeededRandomForTesting s(4);
    SolveContext ctx(&s, nullptr);
    absl::StatusOr<SolveResult> r = (*a)->Run(data, *c, ctx);
    if (!r.ok()) {
      std::fprintf(stderr, "%s\n", r.status().ToString().c_str());
      return 1;
    }
  } else {
    std::fprintf(stderr, "unknown mode %s\n", mode.c_str());
    return 2;
  }
  const long peak_kb = StatusKb("VmHWM:");
  std::printf(
      "mode=%s rows=%lld dim=%lld loaded_mib=%.1f peak_mib=%.1f "
      "above_loaded_mib=%.1f stream_mib=%.1f\n",
      mode.c_str(), static_cast<long long>(rows), static_cast<long long>(dim),
      loaded_kb / 1024.0, peak_kb / 1024.0, (peak_kb - loaded_kb) / 1024.0,
      stream_bytes / 1048576.0);
  return 0;
}

}  // namespace
}  // namespace dpopt::optim::distributed_dda

int main(int argc, char** argv) {
  return dpopt::optim::distributed_dda::Main(argc, argv);
}
