#include "core/optim/distributed_dda/mpi/worker.h"

#include <mpi.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/common/status_macros.h"
#include "core/optim/distributed_dda/dda_node.h"
#include "core/optim/distributed_dda/engine.h"
#include "core/optim/distributed_dda/mpi/mpi_transport.h"
#include "core/optim/distributed_dda/wire.h"
#include "core/optim/objective.h"
#include "core/optim/private_oracle.h"

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

// The next chunk's length: 0 closes a shard; at most kMaxChunkBytes.
absl::StatusOr<uint64_t> ReadChunkLength(std::FILE* f) {
  ASSIGN_OR_RETURN(uint64_t n, ReadU64(f));
  if (n > static_cast<uint64_t>(kMaxChunkBytes)) {
    return absl::DataLossError("a chunk of the job stream is too large");
  }
  return n;
}

absl::Status Mpi(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(what, " failed"));
}

// A chunk of a shard to its owner: its length, then (if not 0) its bytes;
// both messages hold at most kMaxChunkBytes bytes, so no MPI count
// depends on the size of the shard.
absl::Status SendChunk(const char* data, uint64_t n, int to, int tag) {
  RETURN_IF_ERROR(
      Mpi(MPI_Send(&n, 1, MPI_UINT64_T, to, tag, MPI_COMM_WORLD), "send"));
  if (n == 0) return absl::OkStatus();
  return Mpi(
      MPI_Send(data, static_cast<int>(n), MPI_CHAR, to, tag, MPI_COMM_WORLD),
      "send");
}

// Appends the chunks of one shard from rank 0 to *out, up to the closing
// zero length.
absl::Status RecvShard(int from, int tag, std::string* out) {
  std::string chunk;
  for (;;) {
    uint64_t n = 0;
    RETURN_IF_ERROR(Mpi(MPI_Recv(&n, 1, MPI_UINT64_T, from, tag, MPI_COMM_WORLD,
                                 MPI_STATUS_IGNORE),
                        "recv"));
    if (n == 0) return absl::OkStatus();
    if (n > static_cast<uint64_t>(kMaxChunkBytes) ||
        out->size() + n > kMaxShardBytes) {
      return absl::DataLossError("a shard chunk is too large");
    }
    chunk.resize(n);
    RETURN_IF_ERROR(Mpi(MPI_Recv(chunk.data(), static_cast<int>(n), MPI_CHAR,
                                 from, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE),
                        "recv"));
    out->append(chunk);
  }
}

void WriteFrame(FrameType type, const std::string& payload) {
  const std::string f = EncodeFrame(type, payload);
  std::fwrite(f.data(), 1, f.size(), stdout);
  std::fflush(stdout);
}

absl::Status RunRank(int rank, int size, const WorkerHooks& hooks) {
  // 1. The public job description, from rank 0's standard input.
  std::string header;
  if (rank == 0) {
    char magic[8];
    RETURN_IF_ERROR(ReadExactly(stdin, magic, 8));
    if (std::memcmp(magic, kJobStreamMagic, 8) != 0) {
      return absl::DataLossError("standard input is not a dp_dda job stream");
    }
    ASSIGN_OR_RETURN(uint64_t n, ReadChunkLength(stdin));
    header.resize(n);
    RETURN_IF_ERROR(ReadExactly(stdin, header.data(), n));
  }
  uint64_t header_size = header.size();
  RETURN_IF_ERROR(
      Mpi(MPI_Bcast(&header_size, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD),
          "broadcast"));
  if (header_size > static_cast<uint64_t>(kMaxChunkBytes)) {
    return absl::DataLossError("the job header is too large");
  }
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
  // 2. Shards: rank 0 reads them chunk by chunk (each at most
  // kMaxChunkBytes) and forwards every chunk to the shard's owner as it
  // arrives, so neither the standard input nor any MPI message carries more
  // than one chunk at a time.
  std::vector<std::string> mine(job.nodes);
  if (rank == 0) {
    std::string chunk;
    for (int i = 0; i < job.nodes; ++i) {
      const int owner = placement.Owner(i);
      for (;;) {
        ASSIGN_OR_RETURN(uint64_t n, ReadChunkLength(stdin));
        chunk.resize(n);
        RETURN_IF_ERROR(ReadExactly(stdin, chunk.data(), n));
        if (owner == 0) {
          if (mine[i].size() + n > kMaxShardBytes) {
            return absl::DataLossError("a shard is too large");
          }
          mine[i].append(chunk);
        } else {
          RETURN_IF_ERROR(SendChunk(chunk.data(), n, owner, kShardTag + i));
        }
        if (n == 0) break;
      }
    }
  } else {
    for (int i = 0; i < job.nodes; ++i) {
      if (placement.Owner(i) != rank) continue;
      RETURN_IF_ERROR(RecvShard(0, kShardTag + i, &mine[i]));
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
    std::string().swap(mine[i]);  // frees the bytes for the run
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
