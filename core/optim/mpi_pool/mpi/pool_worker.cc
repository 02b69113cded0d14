#include "core/optim/mpi_pool/mpi/pool_worker.h"

#include <mpi.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/common/status_macros.h"
#include "core/optim/gradient_sums.h"
#include "core/optim/mpi_pool/protocol.h"
#include "core/optim/mpi_pool/shard_store.h"
#include "core/optim/objective.h"

namespace dpopt::optim::mpi_pool {
namespace {

constexpr int kChunkTag = 8100;
constexpr int kChunkReplyTag = 8101;

absl::Status Mpi(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(what, " failed"));
}

std::string HostName() {
  char name[256] = {0};
  if (gethostname(name, sizeof name - 1) != 0) return "unknown";
  return name;
}

// What every rank learns of a request: its type, the rank a shard chunk is
// for, and the length of the payload broadcast next (0 for chunks, which
// go to their rank alone).
struct Header {
  uint32_t type = 0;
  int32_t target = 0;
  uint64_t length = 0;
};

struct Job {
  std::shared_ptr<const Dataset> shard;
  std::unique_ptr<Objective> objective;
  std::unique_ptr<noise::RandomSource> rng;
  std::unique_ptr<LocalGradientSums> sums;
};

class PoolRank {
 public:
  PoolRank(int rank, int size, ShardStore store, const PoolWorkerHooks& hooks)
      : rank_(rank),
        size_(size),
        host_(HostName()),
        store_(std::move(store)),
        hooks_(hooks) {}

  // Rank 0: serves requests from standard input until kShutdown or its end.
  int ServeRoot() {
    MessageParser parser;
    char buf[65536];
    for (;;) {
      Message request;
      absl::StatusOr<bool> got = parser.Next(&request);
      if (!got.ok()) {
        std::fprintf(stderr, "dpopt-mpi-pool: %s\n",
                     std::string(got.status().message()).c_str());
        (void)Broadcast({static_cast<uint32_t>(MessageType::kShutdown), 0, 0},
                        "");
        return 1;
      }
      if (!*got) {
        // read(), not fread(): a request is answered as soon as it is
        // whole, not when a buffer is full.
        const ssize_t n = read(STDIN_FILENO, buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {  // the server is gone
          (void)Broadcast({static_cast<uint32_t>(MessageType::kShutdown), 0, 0},
                          "");
          return 0;
        }
        parser.Append(absl::string_view(buf, static_cast<size_t>(n)));
        continue;
      }
      Header h{static_cast<uint32_t>(request.type), 0,
               static_cast<uint64_t>(request.payload.size())};
      std::string reply;
      if (request.type == MessageType::kPlaceChunk) {
        reply = RootChunk(request.payload);
      } else {
        if (!Broadcast(h, request.payload).ok()) return 1;
        reply = Handle(h.type, request.payload);
      }
      if (!WriteReply(reply)) return 1;
      if (request.type == MessageType::kShutdown) return 0;
    }
  }

  // Other ranks: follow rank 0's broadcasts.
  int Follow() {
    for (;;) {
      Header h;
      std::string payload;
      if (!ReceiveBroadcast(&h, &payload).ok()) return 1;
      if (h.type == static_cast<uint32_t>(MessageType::kPlaceChunk)) {
        if (h.target == rank_ && !FollowerChunk(h.length).ok()) return 1;
        continue;
      }
      Handle(h.type, payload);
      if (h.type == static_cast<uint32_t>(MessageType::kShutdown)) return 0;
    }
  }

 private:
  absl::Status Broadcast(Header h, const std::string& payload) {
    RETURN_IF_ERROR(
        Mpi(MPI_Bcast(&h, sizeof h, MPI_BYTE, 0, MPI_COMM_WORLD), "broadcast"));
    if (h.length == 0) return absl::OkStatus();
    std::string copy = payload;
    return Mpi(MPI_Bcast(copy.data(), static_cast<int>(copy.size()), MPI_BYTE,
                         0, MPI_COMM_WORLD),
               "broadcast");
  }

  absl::Status ReceiveBroadcast(Header* h, std::string* payload) {
    RETURN_IF_ERROR(
        Mpi(MPI_Bcast(h, sizeof *h, MPI_BYTE, 0, MPI_COMM_WORLD), "broadcast"));
    if (h->length > kMaxPayloadBytes) {
      return absl::DataLossError("broadcast too long");
    }
    payload->assign(h->length, '\0');
    if (h->length == 0) return absl::OkStatus();
    return Mpi(MPI_Bcast(payload->data(), static_cast<int>(h->length), MPI_BYTE,
                         0, MPI_COMM_WORLD),
               "broadcast");
  }

  bool WriteReply(const std::string& reply) {
    if (std::fwrite(reply.data(), 1, reply.size(), stdout) != reply.size()) {
      return false;
    }
    return std::fflush(stdout) == 0;
  }

  static std::string Error(const absl::Status& s) {
    return EncodeMessage(MessageType::kError, EncodeError(s));
  }
  static std::string Ok() { return EncodeMessage(MessageType::kOk, ""); }

  // A shard chunk: rank 0 stores its own, or sends it to its rank and waits
  // for that rank's status. Only those two ranks take part.
  std::string RootChunk(const std::string& payload) {
    absl::StatusOr<PlaceChunk> chunk = DecodePlaceChunk(payload);
    if (!chunk.ok()) return Error(chunk.status());
    if (chunk->rank >= size_) {
      return Error(absl::InvalidArgumentError("no such rank"));
    }
    if (chunk->rank == 0) {
      const absl::Status s = store_.Append(chunk->dataset_id, chunk->bytes);
      return s.ok() ? Ok() : Error(s);
    }
    const Header h{static_cast<uint32_t>(MessageType::kPlaceChunk), chunk->rank,
                   static_cast<uint64_t>(payload.size())};
    if (!Broadcast({h.type, h.target, 0}, "").ok()) {
      return Error(absl::InternalError("broadcast failed"));
    }
    const uint64_t n = payload.size();
    int code = 0;
    if (MPI_Send(&n, 1, MPI_UINT64_T, chunk->rank, kChunkTag, MPI_COMM_WORLD) !=
            MPI_SUCCESS ||
        MPI_Send(payload.data(), static_cast<int>(n), MPI_BYTE, chunk->rank,
                 kChunkTag, MPI_COMM_WORLD) != MPI_SUCCESS ||
        MPI_Recv(&code, 1, MPI_INT, chunk->rank, kChunkReplyTag, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE) != MPI_SUCCESS) {
      return Error(absl::InternalError("sending a shard chunk failed"));
    }
    if (code != 0) {
      return Error(absl::InternalError(absl::StrCat(
          "rank ", chunk->rank, " could not store a shard chunk")));
    }
    return Ok();
  }

  absl::Status FollowerChunk(uint64_t) {
    uint64_t n = 0;
    RETURN_IF_ERROR(Mpi(MPI_Recv(&n, 1, MPI_UINT64_T, 0, kChunkTag,
                                 MPI_COMM_WORLD, MPI_STATUS_IGNORE),
                        "recv"));
    if (n > kMaxPayloadBytes) return absl::DataLossError("chunk too long");
    std::string payload(n, '\0');
    RETURN_IF_ERROR(
        Mpi(MPI_Recv(payload.data(), static_cast<int>(n), MPI_BYTE, 0,
                     kChunkTag, MPI_COMM_WORLD, MPI_STATUS_IGNORE),
            "recv"));
    absl::StatusOr<PlaceChunk> chunk = DecodePlaceChunk(payload);
    absl::Status s = chunk.status();
    if (s.ok()) s = store_.Append(chunk->dataset_id, chunk->bytes);
    if (!s.ok()) {
      std::fprintf(stderr, "dpopt-mpi-pool rank %d: %s\n", rank_,
                   std::string(s.message()).c_str());
    }
    int code = s.ok() ? 0 : 1;
    return Mpi(MPI_Send(&code, 1, MPI_INT, 0, kChunkReplyTag, MPI_COMM_WORLD),
               "send");
  }

  // Every rank's report gathered on rank 0 (in rank order). Others: empty.
  std::vector<RankReport> Gather(const RankReport& mine) {
    // Sent as a list of one (rank 0 of it); the rank is set on rank 0.
    RankReport one = mine;
    one.rank = 0;
    const std::string bytes = EncodeRankReports({one});
    int n = static_cast<int>(bytes.size());
    std::vector<int> sizes(rank_ == 0 ? size_ : 0);
    MPI_Gather(&n, 1, MPI_INT, sizes.data(), 1, MPI_INT, 0, MPI_COMM_WORLD);
    std::vector<int> offsets(sizes.size());
    int total = 0;
    for (size_t r = 0; r < sizes.size(); ++r) {
      offsets[r] = total;
      total += sizes[r];
    }
    std::string all(static_cast<size_t>(total), '\0');
    MPI_Gatherv(bytes.data(), n, MPI_BYTE, all.data(), sizes.data(),
                offsets.data(), MPI_BYTE, 0, MPI_COMM_WORLD);
    std::vector<RankReport> out;
    for (size_t r = 0; r < sizes.size(); ++r) {
      absl::StatusOr<std::vector<RankReport>> one = DecodeRankReports(
          absl::string_view(all).substr(offsets[r], sizes[r]));
      RankReport report;
      if (one.ok() && one->size() == 1) {
        report = (*one)[0];
      } else {
        report.message = "malformed report";
      }
      report.rank = static_cast<int>(r);
      out.push_back(std::move(report));
    }
    return out;
  }

  RankReport Report(const absl::Status& s, int64_t count = 0) {
    RankReport r;
    r.rank = rank_;
    r.host = host_;
    r.ok = s.ok();
    r.count = count;
    if (!s.ok()) r.message = std::string(s.message());
    return r;
  }

  // On rank 0: kOk if every rank succeeded, else the first failure.
  static std::string AllOk(const std::vector<RankReport>& reports,
                           absl::StatusCode code) {
    for (const RankReport& r : reports) {
      if (!r.ok) {
        return Error(absl::Status(
            code,
            absl::StrCat("rank ", r.rank, " (", r.host, "): ", r.message)));
      }
    }
    return Ok();
  }

  // Runs a broadcast request on this rank; on rank 0 returns the reply.
  std::string Handle(uint32_t type, const std::string& payload) {
    switch (static_cast<MessageType>(type)) {
      case MessageType::kHello: {
        HelloReply hello{size_, hooks_.identity};
        return EncodeMessage(MessageType::kHelloReply, EncodeHelloReply(hello));
      }
      case MessageType::kPlaceBegin: {
        absl::StatusOr<PlaceBegin> m = DecodePlaceBegin(payload);
        absl::Status s = m.status();
        if (s.ok()) {
          placing_[m->dataset_id] = m->dimension;
          s = store_.BeginWrite(m->dataset_id);
        }
        return AllOk(Gather(Report(s)), absl::StatusCode::kInternal);
      }
      case MessageType::kPlaceEnd: {
        absl::StatusOr<std::string> id = DecodeId(payload);
        absl::Status s = id.status();
        int64_t rows = 0;
        if (s.ok()) {
          auto it = placing_.find(*id);
          if (it == placing_.end()) {
            s = absl::FailedPreconditionError("no placement under way");
          } else {
            absl::StatusOr<int64_t> r = store_.Commit(*id, it->second);
            s = r.status();
            if (r.ok()) rows = *r;
            placing_.erase(it);
          }
          loaded_.erase(*id);
        }
        return EncodeMessage(MessageType::kRankReports,
                             EncodeRankReports(Gather(Report(s, rows))));
      }
      case MessageType::kDrop: {
        absl::StatusOr<std::string> id = DecodeId(payload);
        absl::Status s = id.status();
        int64_t existed = 0;
        if (s.ok()) {
          loaded_.erase(*id);
          absl::StatusOr<bool> d = store_.SecureDelete(*id);
          s = d.status();
          existed = d.ok() && *d;
        }
        return EncodeMessage(MessageType::kRankReports,
                             EncodeRankReports(Gather(Report(s, existed))));
      }
      case MessageType::kOpenJob:
        return AllOk(Gather(Report(OpenJob(payload))),
                     absl::StatusCode::kFailedPrecondition);
      case MessageType::kSum:
        return Sum(payload);
      case MessageType::kCloseJob: {
        absl::StatusOr<uint64_t> id = DecodeJobId(payload);
        if (id.ok()) jobs_.erase(*id);
        return Ok();
      }
      case MessageType::kShutdown:
        return Ok();
      default:
        return Error(absl::InvalidArgumentError("not a request"));
    }
  }

  absl::Status OpenJob(const std::string& payload) {
    ASSIGN_OR_RETURN(mpi_pool::OpenJob m, DecodeOpenJob(payload));
    if (jobs_.count(m.job_id) != 0) {
      return absl::AlreadyExistsError("job already open");
    }
    auto& shard = loaded_[m.dataset_id];
    if (shard == nullptr) {
      absl::StatusOr<Dataset> loaded = store_.Load(m.dataset_id);
      if (!loaded.ok()) {
        loaded_.erase(m.dataset_id);
        return loaded.status();
      }
      shard = std::make_shared<const Dataset>(*std::move(loaded));
    }
    Job job;
    job.shard = shard;
    ASSIGN_OR_RETURN(job.objective, Objective::Create(m.model, m.dimension));
    RETURN_IF_ERROR(job.objective->CheckDataset(*job.shard));
    ASSIGN_OR_RETURN(job.rng, hooks_.job_random(rank_, m.job_id));
    job.sums = std::make_unique<LocalGradientSums>(*job.shard, *job.objective,
                                                   *job.rng);
    jobs_[m.job_id] = std::move(job);
    return absl::OkStatus();
  }

  // Every rank computes its shard's sum; rank 0 adds them in rank order.
  // Each rank sends p + 1 doubles: an ok flag, then its sum.
  std::string Sum(const std::string& payload) {
    absl::StatusOr<SumRequest> m = DecodeSumRequest(payload);
    Eigen::VectorXd mine;
    absl::Status s = m.status();
    int64_t p = 0;
    if (s.ok()) {
      auto it = jobs_.find(m->job_id);
      if (it == jobs_.end()) {
        s = absl::FailedPreconditionError("job not open");
      } else {
        p = it->second.objective->parameter_size();
        if (m->w.size() != p) {
          s = absl::InvalidArgumentError("iterate has the wrong size");
        } else if (m->exact) {
          s = it->second.sums->ExactSum(m->w, &mine);
        } else {
          s = it->second.sums->ClippedSum(m->query, m->w, &mine);
        }
      }
    }
    ++sums_;
    if (hooks_.after_sum) hooks_.after_sum(rank_, sums_);
    // Every rank agrees on p from the broadcast request (w's size).
    const int64_t width = (m.ok() ? m->w.size() : 0) + 1;
    std::vector<double> send(static_cast<size_t>(width), 0.0);
    send[0] = s.ok() ? 1.0 : 0.0;
    if (s.ok()) std::copy(mine.data(), mine.data() + p, send.begin() + 1);
    std::vector<double> all(rank_ == 0 ? static_cast<size_t>(width) * size_
                                       : 0);
    MPI_Gather(send.data(), static_cast<int>(width), MPI_DOUBLE, all.data(),
               static_cast<int>(width), MPI_DOUBLE, 0, MPI_COMM_WORLD);
    if (rank_ != 0) return "";
    if (!s.ok()) return Error(s);
    Eigen::VectorXd total;
    for (int r = 0; r < size_; ++r) {
      const double* part = all.data() + static_cast<size_t>(r) * width;
      if (part[0] != 1.0) {
        return Error(absl::InternalError(
            absl::StrCat("rank ", r, " could not compute its sum")));
      }
      Eigen::Map<const Eigen::VectorXd> v(part + 1, p);
      if (r == 0) {
        total = v;
      } else {
        total += v;
      }
    }
    return EncodeMessage(MessageType::kSumReply, EncodeVector(total));
  }

  const int rank_;
  const int size_;
  const std::string host_;
  ShardStore store_;
  const PoolWorkerHooks& hooks_;
  std::map<std::string, int64_t> placing_;  // dataset id -> dimension
  std::map<std::string, std::shared_ptr<const Dataset>> loaded_;
  std::map<uint64_t, Job> jobs_;
  int64_t sums_ = 0;
};

}  // namespace

int PoolWorkerMain(int argc, char** argv, const PoolWorkerHooks& hooks) {
  std::string store_dir;
  for (int i = 1; i < argc; ++i) {
    const absl::string_view a = argv[i];
    if (a == "--identify") {
      std::printf("%s\n", hooks.identity.c_str());
      return 0;
    }
    if (absl::StartsWith(a, "--store=")) {
      store_dir = std::string(a.substr(8));
    } else {
      std::fprintf(stderr, "dpopt-mpi-pool: unknown argument %s\n", argv[i]);
      return 2;
    }
  }
  if (store_dir.empty() || store_dir[0] != '/') {
    std::fprintf(stderr,
                 "dpopt-mpi-pool: --store=DIR (absolute) is required\n");
    return 2;
  }
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  absl::StatusOr<ShardStore> parent = ShardStore::Open(store_dir);
  absl::StatusOr<ShardStore> store =
      parent.ok() ? ShardStore::Open(absl::StrCat(store_dir, "/rank-", rank))
                  : parent.status();
  if (!store.ok()) {
    std::fprintf(stderr, "dpopt-mpi-pool rank %d: %s\n", rank,
                 std::string(store.status().message()).c_str());
    MPI_Abort(MPI_COMM_WORLD, 1);
    return 1;
  }
  PoolRank pool_rank(rank, size, *std::move(store), hooks);
  const int code = rank == 0 ? pool_rank.ServeRoot() : pool_rank.Follow();
  if (code != 0) {
    MPI_Abort(MPI_COMM_WORLD, code);
    return code;
  }
  MPI_Finalize();
  return 0;
}

}  // namespace dpopt::optim::mpi_pool
