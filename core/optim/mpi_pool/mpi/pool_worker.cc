#include "core/optim/mpi_pool/mpi/pool_worker.h"

#include <mpi.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/common/status_macros.h"
#include "core/optim/mpi_pool/protocol.h"
#include "core/optim/mpi_pool/shard_store.h"
#include "core/optim/objective.h"
#include "core/optim/row_sums.h"

namespace dpopt::optim::mpi_pool {
namespace {

constexpr int kChunkTag = 8100;
constexpr int kChunkReplyTag = 8101;

absl::Status Mpi(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(what, " failed"));
}

// Waits for a nonblocking MPI operation without occupying a core: Open MPI's
// blocking calls poll in a busy loop, so an idle pool waiting in MPI_Bcast
// would keep every rank at 100% CPU between requests. Here a rank polls for
// 0.5 ms, then every 0.1 ms (sleeping in between), then, after 100 ms idle,
// every 1 ms: a request after a long idle costs its ranks at most about 1 ms
// more, a busy pool about 0.1 ms.
absl::Status WaitQuietly(MPI_Request* request) {
  const auto start = std::chrono::steady_clock::now();
  for (;;) {
    int done = 0;
    if (MPI_Test(request, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS) {
      return absl::InternalError("an MPI wait failed");
    }
    if (done) return absl::OkStatus();
    const auto idle = std::chrono::steady_clock::now() - start;
    if (idle < std::chrono::microseconds(500)) continue;
    std::this_thread::sleep_for(idle < std::chrono::milliseconds(100)
                                    ? std::chrono::microseconds(100)
                                    : std::chrono::milliseconds(1));
  }
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
  std::unique_ptr<LocalRowSums> sums;
};

class PoolRank {
 public:
  PoolRank(int rank, int size, ShardStore store, const PoolWorkerHooks& hooks)
      : rank_(rank),
        size_(size),
        host_(HostName()),
        store_(std::move(store)),
        hooks_(hooks) {}

  // Rank 0 of a pool the server started: serves requests from standard
  // input until kShutdown or its end (the server is gone), then ends every
  // rank.
  int ServeRoot() {
    const Served served = Serve(STDIN_FILENO, STDOUT_FILENO);
    if (served != Served::kShutdown) {
      (void)Broadcast(ShutdownHeader(), "");
    }
    return served == Served::kFailed ? 1 : 0;
  }

  // Rank 0 of an operator's pool: serves one connection at a time on the
  // Unix socket `path` (mode 0600) until a kShutdown; a connection that ends
  // closes the jobs it opened on every rank.
  int ServeSocket(const std::string& path) {
    const int listener = Listen(path);
    if (listener < 0) {
      (void)Broadcast(ShutdownHeader(), "");
      return 1;
    }
    int code = 0;
    for (;;) {
      const int conn = accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
      if (conn < 0) {
        if (errno == EINTR) continue;
        code = 1;
        (void)Broadcast(ShutdownHeader(), "");
        break;
      }
      const Served served = Serve(conn, conn);
      close(conn);
      if (served == Served::kShutdown) break;
      if (served == Served::kFailed) {
        code = 1;
        (void)Broadcast(ShutdownHeader(), "");
        break;
      }
      CloseAllJobs();
    }
    close(listener);
    unlink(path.c_str());
    return code;
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
  enum class Served { kEnded, kShutdown, kFailed };

  static Header ShutdownHeader() {
    return {static_cast<uint32_t>(MessageType::kShutdown), 0, 0};
  }

  // Answers requests read from `in` on `out` until the end of `in`
  // (kEnded), a kShutdown (answered; kShutdown) or a broken stream or MPI
  // failure (kFailed).
  Served Serve(int in, int out) {
    MessageParser parser;
    char buf[65536];
    for (;;) {
      Message request;
      absl::StatusOr<bool> got = parser.Next(&request);
      if (!got.ok()) {
        std::fprintf(stderr, "dpopt-mpi-pool: %s\n",
                     std::string(got.status().message()).c_str());
        return Served::kEnded;  // a broken connection, not a broken pool
      }
      if (!*got) {
        // read(), not fread(): a request is answered as soon as it is
        // whole, not when a buffer is full.
        const ssize_t n = read(in, buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return Served::kEnded;
        parser.Append(absl::string_view(buf, static_cast<size_t>(n)));
        continue;
      }
      Header h{static_cast<uint32_t>(request.type), 0,
               static_cast<uint64_t>(request.payload.size())};
      std::string reply;
      if (request.type == MessageType::kPlaceChunk) {
        reply = RootChunk(request.payload);
      } else {
        if (!Broadcast(h, request.payload).ok()) return Served::kFailed;
        reply = Handle(h.type, request.payload);
      }
      if (!WriteAll(out, reply)) return Served::kEnded;
      if (request.type == MessageType::kShutdown) return Served::kShutdown;
    }
  }

  static bool WriteAll(int fd, const std::string& bytes) {
    size_t done = 0;
    while (done < bytes.size()) {
      const ssize_t w = write(fd, bytes.data() + done, bytes.size() - done);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) return false;
      done += static_cast<size_t>(w);
    }
    return true;
  }

  // A listening Unix socket at `path`, mode 0600; -1 on failure (printed).
  static int Listen(const std::string& path) {
    sockaddr_un addr = {};
    addr.sun_family = AF_UNIX;
    if (path.empty() || path.size() >= sizeof addr.sun_path) {
      std::fprintf(stderr, "dpopt-mpi-pool: bad --listen path\n");
      return -1;
    }
    std::memcpy(addr.sun_path, path.data(), path.size());
    const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    const mode_t old = umask(077);  // the socket file is created 0600
    const bool ok =
        fd >= 0 &&
        bind(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) == 0 &&
        chmod(path.c_str(), 0600) == 0 && listen(fd, 4) == 0;
    umask(old);
    if (!ok) {
      std::fprintf(stderr, "dpopt-mpi-pool: cannot listen on %s: %s\n",
                   path.c_str(), std::strerror(errno));
      if (fd >= 0) close(fd);
      return -1;
    }
    return fd;
  }

  // Closes every open job on every rank (rank 0 knows the same ids).
  void CloseAllJobs() {
    std::vector<uint64_t> ids;
    for (const auto& [id, job] : jobs_) ids.push_back(id);
    for (uint64_t id : ids) {
      const std::string payload = EncodeJobId(id);
      const Header h{static_cast<uint32_t>(MessageType::kCloseJob), 0,
                     static_cast<uint64_t>(payload.size())};
      if (!Broadcast(h, payload).ok()) return;
      Handle(h.type, payload);
    }
  }

  absl::Status Broadcast(Header h, const std::string& payload) {
    MPI_Request request;
    RETURN_IF_ERROR(
        Mpi(MPI_Ibcast(&h, sizeof h, MPI_BYTE, 0, MPI_COMM_WORLD, &request),
            "broadcast"));
    RETURN_IF_ERROR(WaitQuietly(&request));
    if (h.length == 0) return absl::OkStatus();
    // The root only reads the buffer (MPI's signature is not const).
    return Mpi(MPI_Bcast(const_cast<char*>(payload.data()),
                         static_cast<int>(payload.size()), MPI_BYTE, 0,
                         MPI_COMM_WORLD),
               "broadcast");
  }

  // Where the other ranks wait between requests (most of their time):
  // quietly, not spinning (WaitQuietly).
  absl::Status ReceiveBroadcast(Header* h, std::string* payload) {
    MPI_Request request;
    RETURN_IF_ERROR(
        Mpi(MPI_Ibcast(h, sizeof *h, MPI_BYTE, 0, MPI_COMM_WORLD, &request),
            "broadcast"));
    RETURN_IF_ERROR(WaitQuietly(&request));
    if (h->length > kMaxPayloadBytes) {
      return absl::DataLossError("broadcast too long");
    }
    payload->assign(h->length, '\0');
    if (h->length == 0) return absl::OkStatus();
    return Mpi(MPI_Bcast(payload->data(), static_cast<int>(h->length), MPI_BYTE,
                         0, MPI_COMM_WORLD),
               "broadcast");
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
    job.sums =
        std::make_unique<LocalRowSums>(*job.shard, *job.objective, *job.rng);
    jobs_[m.job_id] = std::move(job);
    return absl::OkStatus();
  }

  // Every rank computes its shard's part; rank 0 adds them in rank order.
  // Each rank sends width + 1 doubles: an ok flag, then its part (width:
  // p for gradient sums, 1 for a loss sum, 0 for a sample).
  std::string Sum(const std::string& payload) {
    absl::StatusOr<SumRequest> m = DecodeSumRequest(payload);
    Eigen::VectorXd mine;
    absl::Status s = m.status();
    // Every rank agrees on the width: it follows from the broadcast request.
    int64_t width = 0;
    if (m.ok()) {
      switch (m->kind) {
        case SumKind::kClippedGradient:
        case SumKind::kExactGradient:
          width = m->w.size();
          break;
        case SumKind::kClippedLoss:
          width = 1;
          break;
        case SumKind::kSampleForLosses:
          width = 0;
          break;
      }
    }
    if (s.ok()) s = ComputeMine(*m, &mine);
    ++sums_;
    if (hooks_.after_sum) hooks_.after_sum(rank_, sums_);
    std::vector<double> send(static_cast<size_t>(width + 1), 0.0);
    send[0] = s.ok() ? 1.0 : 0.0;
    if (s.ok()) std::copy(mine.data(), mine.data() + width, send.begin() + 1);
    std::vector<double> all(rank_ == 0 ? static_cast<size_t>(width + 1) * size_
                                       : 0);
    MPI_Request request;
    if (MPI_Igather(send.data(), static_cast<int>(width + 1), MPI_DOUBLE,
                    all.data(), static_cast<int>(width + 1), MPI_DOUBLE, 0,
                    MPI_COMM_WORLD, &request) != MPI_SUCCESS ||
        !WaitQuietly(&request).ok()) {
      return Error(absl::InternalError("gathering the sums failed"));
    }
    if (rank_ != 0) return "";
    if (!s.ok()) return Error(s);
    Eigen::VectorXd total = Eigen::VectorXd::Zero(width);
    for (int r = 0; r < size_; ++r) {
      const double* part = all.data() + static_cast<size_t>(r) * (width + 1);
      if (part[0] != 1.0) {
        return Error(absl::InternalError(
            absl::StrCat("rank ", r, " could not compute its sum")));
      }
      Eigen::Map<const Eigen::VectorXd> v(part + 1, width);
      if (r == 0) {
        total = v;
      } else {
        total += v;
      }
    }
    return EncodeMessage(MessageType::kSumReply, EncodeVector(total));
  }

  absl::Status ComputeMine(const SumRequest& m, Eigen::VectorXd* mine) {
    auto it = jobs_.find(m.job_id);
    if (it == jobs_.end()) return absl::FailedPreconditionError("job not open");
    Job& job = it->second;
    const int64_t p = job.objective->parameter_size();
    if (m.kind != SumKind::kSampleForLosses && m.w.size() != p) {
      return absl::InvalidArgumentError("iterate has the wrong size");
    }
    switch (m.kind) {
      case SumKind::kClippedGradient:
        return job.sums->ClippedSum(m.query, m.w, mine);
      case SumKind::kExactGradient:
        return job.sums->ExactSum(m.w, mine);
      case SumKind::kSampleForLosses:
        mine->resize(0);
        return job.sums->SampleForLosses(m.query.sampling_rate);
      case SumKind::kClippedLoss: {
        double sum = 0;
        RETURN_IF_ERROR(job.sums->ClippedLossSum(m.query.clip, m.w, &sum));
        *mine = Eigen::VectorXd::Constant(1, sum);
        return absl::OkStatus();
      }
    }
    return absl::InvalidArgumentError("bad sum kind");
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
  std::string store_dir, listen_path;
  for (int i = 1; i < argc; ++i) {
    const absl::string_view a = argv[i];
    if (a == "--identify") {
      std::printf("%s\n", hooks.identity.c_str());
      return 0;
    }
    if (absl::StartsWith(a, "--store=")) {
      store_dir = std::string(a.substr(8));
    } else if (absl::StartsWith(a, "--listen=")) {
      listen_path = std::string(a.substr(9));
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
  const int code = rank != 0             ? pool_rank.Follow()
                   : listen_path.empty() ? pool_rank.ServeRoot()
                                         : pool_rank.ServeSocket(listen_path);
  if (code != 0) {
    MPI_Abort(MPI_COMM_WORLD, code);
    return code;
  }
  MPI_Finalize();
  return 0;
}

}  // namespace dpopt::optim::mpi_pool
