#include "core/optim/distributed_dda/mpi/worker.h"

#include <mpi.h>

#include <climits>
#include <cstdio>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/common/status_macros.h"
#include "core/optim/objective.h"
#include "core/optim/private_oracle.h"
#include "core/optim/distributed_dda/dda_node.h"
#include "core/optim/distributed_dda/engine.h"
#include "core/optim/distributed_dda/mpi/mpi_transport.h"
#include "core/optim/distributed_dda/wire.h"

namespace dpopt::optim::distributed_dda {
namespace {

constexpr int kShardTag = 7000;

absl::Status ReadExactly(std::FILE* f, void* out, size_t n) {
  if (std::fread(out, 1, n, f) != n) {
    return absl::DataLossError("the job stream on standard input ended early");
  }
  return absl::OkStatus();
}

absl::StatusOr<uint64_t> ReadU64(std::FILE* f) {
  unsigned char b[8];
  RETURN_IF_ERROR(ReadExactly(f, b, 8));
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(b[i]) << (8 * i);
  return v;
}

absl::StatusOr<std::string> ReadBlock(std::FILE* f) {
  ASSIGN_OR_RETURN(uint64_t n, ReadU64(f));
  if (n > static_cast<uint64_t>(INT_MAX)) {
    return absl::DataLossError("a block of the job stream is too large");
  }
  std::string s(n, '\0');
  RETURN_IF_ERROR(ReadExactly(f, s.data(), n));
  return s;
}

absl::Status Mpi(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(what, " failed"));
}

absl::Status SendBytes(const std::string& s, int to, int tag) {
  uint64_t n = s.size();
  RETURN_IF_ERROR(
      Mpi(MPI_Send(&n, 1, MPI_UINT64_T, to, tag, MPI_COMM_WORLD), "send"));
  return Mpi(MPI_Send(s.data(), static_cast<int>(n), MPI_CHAR, to, tag,
                      MPI_COMM_WORLD),
             "send");
}

absl::StatusOr<std::string> RecvBytes(int from, int tag) {
  uint64_t n = 0;
  RETURN_IF_ERROR(Mpi(MPI_Recv(&n, 1, MPI_UINT64_T, from, tag, MPI_COMM_WORLD,
                               MPI_STATUS_IGNORE),
                      "recv"));
  if (n > static_cast<uint64_t>(INT_MAX)) {
    return absl::DataLossError("shard too large");
  }
  std::string s(n, '\0');
  RETURN_IF_ERROR(Mpi(MPI_Recv(s.data(), static_cast<int>(n), MPI_CHAR, from,
                               tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE),
                      "recv"));
  return s;
}

void WriteFrame(FrameType type, const std::string& payload) {
  const std::string f = EncodeFrame(type, payload);
  std::fwrite(f.data(), 1, f.size(), stdout);
  std::fflush(stdout);
}

absl::Status RunRank(int rank, int size, const WorkerHooks& hooks) {
  // 1. The public job description, from rank 0's standard input.
  std::string header;
  std::vector<std::string> shard_bytes;
  if (rank == 0) {
    char magic[8];
    RETURN_IF_ERROR(ReadExactly(stdin, magic, 8));
    if (std::memcmp(magic, "DPDDA\x01\0\0", 8) != 0) {
      return absl::DataLossError("standard input is not a dp_dda job stream");
    }
    ASSIGN_OR_RETURN(header, ReadBlock(stdin));
  }
  uint64_t header_size = header.size();
  RETURN_IF_ERROR(
      Mpi(MPI_Bcast(&header_size, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD),
          "broadcast"));
  header.resize(header_size);
  RETURN_IF_ERROR(Mpi(MPI_Bcast(header.data(), static_cast<int>(header_size),
                                MPI_CHAR, 0, MPI_COMM_WORLD),
                      "broadcast"));
  ASSIGN_OR_RETURN(WorkerJob job, DecodeWorkerJob(header));
  if (job.ranks != size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the job asks for ", job.ranks, " ranks but mpirun started ", size));
  }
  const Placement placement{job.nodes, job.ranks};
  // 2. Shards: rank 0 reads them all and sends each to its owner.
  std::vector<std::string> mine(job.nodes);
  if (rank == 0) {
    for (int i = 0; i < job.nodes; ++i) {
      ASSIGN_OR_RETURN(std::string s, ReadBlock(stdin));
      const int owner = placement.Owner(i);
      if (owner == 0) {
        mine[i] = std::move(s);
      } else {
        RETURN_IF_ERROR(SendBytes(s, owner, kShardTag + i));
      }
    }
  } else {
    for (int i = 0; i < job.nodes; ++i) {
      if (placement.Owner(i) != rank) continue;
      ASSIGN_OR_RETURN(mine[i], RecvBytes(0, kShardTag + i));
    }
  }
  // 3. The same engine and node code as the simulation.
  ASSIGN_OR_RETURN(Graph graph,
                   Graph::Build(job.nodes, job.graph, job.public_seed));
  RETURN_IF_ERROR(job.gossip.Validate(graph));
  const Gossip gossip(&graph, job.gossip, job.public_seed);
  const Schedule schedule(job.schedule);
  ASSIGN_OR_RETURN(auto objective, Objective::Create(job.model, job.dimension));
  NodeParams params;
  params.sampling = job.sampling;
  params.batch_size = job.batch_size;
  params.poisson_rate = job.poisson_rate;
  params.normalizer = job.normalizer;
  params.clip_norm = job.clip_norm;
  ASSIGN_OR_RETURN(params.plan,
                   noise::PlanGaussian(job.sensitivity, job.noise_multiplier,
                                       objective->parameter_size()));
  params.iota = job.iota;
  params.h = job.h;
  std::vector<std::unique_ptr<DdaNode>> nodes;
  std::vector<DdaNode*> local(job.nodes, nullptr);
  for (int i = 0; i < job.nodes; ++i) {
    if (placement.Owner(i) != rank) continue;
    ASSIGN_OR_RETURN(Dataset shard, DecodeShard(mine[i]));
    mine[i].clear();
    RETURN_IF_ERROR(objective->CheckDataset(shard));
    ASSIGN_OR_RETURN(std::unique_ptr<noise::RandomSource> rng,
                     hooks.node_random(i));
    nodes.push_back(std::make_unique<DdaNode>(i, std::move(shard),
                                              objective.get(), &params,
                                              std::move(rng), &SecureNoise()));
    local[i] = nodes.back().get();
  }
  EngineOptions eo;
  eo.iterations = job.iterations;
  eo.trace_every = job.trace_every;
  eo.literal_inactive = job.literal_inactive;
  eo.iota = job.iota;
  if (hooks.after_pass) {
    eo.after_pass = [&hooks, rank](int64_t t, const GossipStep&) {
      hooks.after_pass(rank, t);
    };
  }
  MpiTransport transport(rank, objective->parameter_size());
  auto sink = [](int64_t step, const Eigen::VectorXd& average, double theta) {
    WriteFrame(FrameType::kTrace, EncodeTrace({step, theta, average}));
    return true;
  };
  ASSIGN_OR_RETURN(EngineResult r, RunEngine(eo, schedule, gossip, placement,
                                             local, transport, sink));
  if (rank == 0) {
    WriteFrame(FrameType::kDone,
               EncodeDone({r.steps_done, r.stopped, r.model, r.node_models}));
  }
  return absl::OkStatus();
}

}  // namespace

int WorkerMain(int argc, char** argv, const WorkerHooks& hooks) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  absl::Status s = absl::OkStatus();
  for (int i = 1; i < argc; ++i) {
    if (!absl::StartsWith(argv[i], "--job-tag=")) {
      s = absl::InvalidArgumentError(
          absl::StrCat("dpopt-dda-worker: unknown argument ", argv[i],
                       " (it is started by dpopt-server through mpirun)"));
    }
  }
  if (s.ok()) s = RunRank(rank, size, hooks);
  if (!s.ok()) {
    if (rank == 0) {
      WireWriter w;
      w.Str(s.ToString());
      WriteFrame(FrameType::kError, w.Finish());
    }
    std::fprintf(stderr, "dpopt-dda-worker rank %d: %s\n", rank,
                 s.ToString().c_str());
    MPI_Abort(MPI_COMM_WORLD, 3);
    return 3;
  }
  MPI_Finalize();
  return 0;
}

}  // namespace dpopt::optim::distributed_dda
