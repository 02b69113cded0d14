#include "core/optim/mpi_pool/worker_pool.h"

#include <unistd.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "core/common/child_process.h"
#include "core/common/status_macros.h"
#include "core/optim/distributed_dda/wire.h"

namespace dpopt::optim::mpi_pool {

absl::Status WorkerPoolOptions::Validate() const {
  if (ranks < 1 || ranks > 1024) {
    return absl::InvalidArgumentError("pool ranks must be in [1, 1024]");
  }
  if (request_timeout <= absl::ZeroDuration() ||
      start_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("pool timeouts must be > 0");
  }
  if (!connect.empty()) return absl::OkStatus();
  if (mpirun.empty()) return absl::InvalidArgumentError("mpirun is required");
  if (worker.empty()) {
    return absl::InvalidArgumentError("the pool's worker program is required");
  }
  if (store_dir.empty() || store_dir[0] != '/') {
    return absl::InvalidArgumentError(
        "the pool's shard store must be an absolute path");
  }
  return absl::OkStatus();
}

// The RowSums of one job on the pool. Every call fails once the pool
// it was opened on has stopped (its ranks' state is gone).
class WorkerPool::PoolRowSums final : public RowSums {
 public:
  PoolRowSums(WorkerPool& pool, uint64_t job_id, uint64_t generation)
      : pool_(pool), job_id_(job_id), generation_(generation) {}
  ~PoolRowSums() override {
    absl::MutexLock lock(&pool_.mu_);
    if (pool_.channel_ != nullptr && pool_.generation_ == generation_) {
      (void)pool_.Call(MessageType::kCloseJob, EncodeJobId(job_id_));
    }
  }
  absl::Status ClippedSum(const ClippedSumQuery& query,
                          const Eigen::Ref<const Eigen::VectorXd>& w,
                          Eigen::VectorXd* sum) override {
    return Sum(SumKind::kClippedGradient, query, w, w.size(), sum);
  }
  absl::Status ExactSum(const Eigen::Ref<const Eigen::VectorXd>& w,
                        Eigen::VectorXd* sum) override {
    return Sum(SumKind::kExactGradient, {}, w, w.size(), sum);
  }
  absl::Status SampleForLosses(double sampling_rate) override {
    Eigen::VectorXd none;
    ClippedSumQuery query;
    query.sampling_rate = sampling_rate;
    return Sum(SumKind::kSampleForLosses, query, Eigen::VectorXd(), 0, &none);
  }
  absl::Status ClippedLossSum(double clip,
                              const Eigen::Ref<const Eigen::VectorXd>& v,
                              double* sum) override {
    Eigen::VectorXd one;
    ClippedSumQuery query;
    query.clip = clip;
    RETURN_IF_ERROR(Sum(SumKind::kClippedLoss, query, v, 1, &one));
    *sum = one[0];
    return absl::OkStatus();
  }

 private:
  // One request; the reply must hold `width` values.
  absl::Status Sum(SumKind kind, const ClippedSumQuery& query,
                   const Eigen::Ref<const Eigen::VectorXd>& w, int64_t width,
                   Eigen::VectorXd* sum) {
    SumRequest request;
    request.job_id = job_id_;
    request.kind = kind;
    request.query = query;
    request.w = w;
    absl::MutexLock lock(&pool_.mu_);
    if (pool_.channel_ == nullptr || pool_.generation_ != generation_) {
      return absl::UnavailableError(
          "the worker pool stopped while the job was running");
    }
    ASSIGN_OR_RETURN(Message reply,
                     pool_.Call(MessageType::kSum, EncodeSumRequest(request)));
    if (reply.type != MessageType::kSumReply) {
      pool_.StopLocked();
      return absl::UnavailableError("the worker pool answered out of turn");
    }
    ASSIGN_OR_RETURN(*sum, DecodeVector(reply.payload));
    if (sum->size() != width) {
      return absl::DataLossError("the worker pool's sum has the wrong size");
    }
    return absl::OkStatus();
  }

  WorkerPool& pool_;
  const uint64_t job_id_;
  const uint64_t generation_;
};

class WorkerPool::PoolRows final : public RemoteRows {
 public:
  PoolRows(WorkerPool& pool, std::string dataset_id, uint64_t job_id)
      : pool_(pool), dataset_id_(std::move(dataset_id)), job_id_(job_id) {}
  absl::StatusOr<std::unique_ptr<RowSums>> Open(
      const Objective& objective) override {
    RETURN_IF_ERROR(CheckDatasetId(dataset_id_));
    RETURN_IF_ERROR(pool_.EnsureStarted());
    OpenJob open;
    open.job_id = job_id_;
    open.dataset_id = dataset_id_;
    open.model = objective.config();
    open.dimension = objective.dimension();
    absl::MutexLock lock(&pool_.mu_);
    if (pool_.channel_ == nullptr) {
      return absl::UnavailableError("the worker pool stopped");
    }
    const absl::StatusOr<Message> reply =
        pool_.Call(MessageType::kOpenJob, EncodeOpenJob(open));
    if (!reply.ok()) {
      // Ranks that opened it forget it (no-op where it is not open).
      if (pool_.channel_ != nullptr) {
        (void)pool_.Call(MessageType::kCloseJob, EncodeJobId(job_id_));
      }
      return reply.status();
    }
    return std::unique_ptr<RowSums>(
        new PoolRowSums(pool_, job_id_, pool_.generation_));
  }

 private:
  WorkerPool& pool_;
  const std::string dataset_id_;
  const uint64_t job_id_;
};

WorkerPool::WorkerPool(WorkerPoolOptions options)
    : options_(std::move(options)) {}

WorkerPool::~WorkerPool() {
  absl::MutexLock lock(&mu_);
  // A pool the server started ends with it; an operator's pool stays up
  // (closing the connection closes this server's jobs on it).
  if (channel_ != nullptr && options_.connect.empty()) {
    (void)Call(MessageType::kShutdown, "", absl::Seconds(5));
  }
  StopLocked();
}

void WorkerPool::Stop() {
  absl::MutexLock lock(&mu_);
  StopLocked();
}

void WorkerPool::StopLocked() {
  if (channel_ != nullptr) channel_->Close();
  channel_.reset();
  parser_ = MessageParser();
}

absl::Status WorkerPool::EnsureStarted() {
  absl::MutexLock lock(&mu_);
  if (channel_ != nullptr) return absl::OkStatus();
  return StartLocked();
}

absl::Status WorkerPool::StartLocked() {
  RETURN_IF_ERROR(options_.Validate());
  if (!options_.connect.empty()) {
    ASSIGN_OR_RETURN(channel_, ConnectUnixSocket(options_.connect));
  } else {
    RETURN_IF_ERROR(SpawnLocked());
  }
  parser_ = MessageParser();
  ++generation_;
  return CheckHelloLocked();
}

absl::Status WorkerPool::SpawnLocked() {
  std::vector<std::string> argv = {options_.mpirun, "-np",
                                   absl::StrCat(options_.ranks)};
  if (!options_.hostfile.empty()) {
    argv.push_back("--hostfile");
    argv.push_back(options_.hostfile);
  }
  for (const auto& a : options_.mpirun_args) argv.push_back(a);
  argv.push_back(options_.worker);
  argv.push_back(absl::StrCat("--store=", options_.store_dir));
  for (const auto& a : options_.worker_args) argv.push_back(a);
  std::vector<std::string> env;
  if (geteuid() == 0) {
    env.push_back("OMPI_ALLOW_RUN_AS_ROOT=1");
    env.push_back("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1");
  }
  ASSIGN_OR_RETURN(channel_, ChildProcess::Spawn(argv, env));
  return absl::OkStatus();
}

absl::Status WorkerPool::CheckHelloLocked() {
  const absl::StatusOr<Message> hello =
      Call(MessageType::kHello, "", options_.start_timeout);
  absl::Status status = hello.status();
  if (status.ok()) {
    absl::StatusOr<HelloReply> h =
        hello->type == MessageType::kHelloReply
            ? DecodeHelloReply(hello->payload)
            : absl::DataLossError("the worker pool did not say hello");
    status = h.status();
    if (status.ok() && h->ranks != options_.ranks) {
      status = absl::FailedPreconditionError(absl::StrCat(
          "the worker pool has ", h->ranks, " ranks, not ", options_.ranks));
    }
    if (status.ok() && !options_.allow_testing_worker &&
        h->identity != kProductionPoolIdentity) {
      status = absl::FailedPreconditionError(absl::StrCat(
          "refusing a worker pool that is not dpopt-mpi-pool: it says \"",
          h->identity, "\""));
    }
  }
  if (!status.ok()) {
    StopLocked();
    return absl::Status(
        status.code(),
        absl::StrCat("starting the worker pool (", options_.mpirun, " ",
                     options_.worker, "): ", status.message()));
  }
  return absl::OkStatus();
}

absl::StatusOr<Message> WorkerPool::Call(MessageType type,
                                         const std::string& payload) {
  return Call(type, payload, options_.request_timeout);
}

absl::StatusOr<Message> WorkerPool::Call(MessageType type,
                                         const std::string& payload,
                                         absl::Duration timeout) {
  if (channel_ == nullptr) {
    return absl::UnavailableError("the worker pool is not running");
  }
  const absl::Time deadline = absl::Now() + timeout;
  absl::Status s = channel_->Write(EncodeMessage(type, payload), deadline);
  Message reply;
  while (s.ok()) {
    absl::StatusOr<bool> got = parser_.Next(&reply);
    if (!got.ok()) {
      s = got.status();
      break;
    }
    if (*got) break;
    std::string bytes;
    s = channel_->ReadSome(&bytes, deadline);
    if (s.ok()) parser_.Append(bytes);
  }
  if (!s.ok()) {
    // A pool that does not answer, answers garbage or has exited is ended:
    // its ranks' state (open jobs) is gone with it.
    StopLocked();
    return absl::UnavailableError(absl::StrCat("worker pool: ", s.message()));
  }
  if (reply.type == MessageType::kError) return DecodeError(reply.payload);
  return reply;
}

absl::StatusOr<std::vector<RankReport>> WorkerPool::Place(
    absl::string_view dataset_id, const Dataset& data) {
  RETURN_IF_ERROR(CheckDatasetId(dataset_id));
  // One placement at a time; its requests take the pool one at a time, so
  // running jobs' sums go on between its chunks.
  absl::MutexLock place_lock(&place_mu_);
  RETURN_IF_ERROR(EnsureStarted());
  uint64_t generation = 0;
  {
    absl::MutexLock lock(&mu_);
    generation = generation_;
  }
  auto call = [&](MessageType type,
                  const std::string& payload) -> absl::StatusOr<Message> {
    absl::MutexLock lock(&mu_);
    if (channel_ == nullptr || generation_ != generation) {
      return absl::UnavailableError(
          "the worker pool stopped during the placement");
    }
    absl::StatusOr<Message> reply = Call(type, payload);
    if (reply.ok() && type == MessageType::kPlaceEnd &&
        reply->type != MessageType::kRankReports) {
      StopLocked();
      return absl::UnavailableError("the worker pool answered out of turn");
    }
    return reply;
  };
  const std::string id(dataset_id);
  PlaceBegin begin{id, data.rows(), data.dimension()};
  RETURN_IF_ERROR(
      call(MessageType::kPlaceBegin, EncodePlaceBegin(begin)).status());
  const int k = options_.ranks;
  for (int r = 0; r < k; ++r) {
    std::vector<int64_t> rows;
    for (int64_t i = ShardBegin(data.rows(), k, r);
         i < ShardBegin(data.rows(), k, r + 1); ++i) {
      rows.push_back(i);
    }
    distributed_dda::ShardEncoder encoder(data, &rows);
    // Fill appends at most 16 bytes past what it is asked for.
    const size_t want = static_cast<size_t>(kShardChunkBytes) - 16;
    while (!encoder.done()) {
      PlaceChunk chunk{id, r, {}};
      encoder.Fill(&chunk.bytes, want);
      if (chunk.bytes.empty()) break;
      RETURN_IF_ERROR(
          call(MessageType::kPlaceChunk, EncodePlaceChunk(chunk)).status());
    }
  }
  ASSIGN_OR_RETURN(Message reply, call(MessageType::kPlaceEnd, EncodeId(id)));
  ASSIGN_OR_RETURN(std::vector<RankReport> reports,
                   DecodeRankReports(reply.payload));
  for (const RankReport& r : reports) {
    if (!r.ok) {
      // No rank keeps a part of a placement that failed somewhere.
      (void)call(MessageType::kDrop, EncodeId(id));
      return absl::InternalError(
          absl::StrCat("placing the dataset failed on rank ", r.rank, " (",
                       r.host, "): ", r.message));
    }
  }
  return reports;
}

absl::StatusOr<std::vector<RankReport>> WorkerPool::Drop(
    absl::string_view dataset_id) {
  RETURN_IF_ERROR(CheckDatasetId(dataset_id));
  RETURN_IF_ERROR(EnsureStarted());
  absl::MutexLock lock(&mu_);
  if (channel_ == nullptr) return absl::UnavailableError("pool stopped");
  ASSIGN_OR_RETURN(Message reply,
                   Call(MessageType::kDrop, EncodeId(dataset_id)));
  if (reply.type != MessageType::kRankReports) {
    StopLocked();
    return absl::UnavailableError("the worker pool answered out of turn");
  }
  return DecodeRankReports(reply.payload);
}

std::unique_ptr<RemoteRows> WorkerPool::RowsFor(std::string dataset_id,
                                                uint64_t job_id) {
  return std::make_unique<PoolRows>(*this, std::move(dataset_id), job_id);
}

}  // namespace dpopt::optim::mpi_pool
