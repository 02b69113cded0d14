// The byte formats between the server and the MPI ranks of dp_dda (seed
// 004): the job (public parameters plus the nodes' shards) that the server
// writes to rank 0's standard input, and the frames rank 0 writes back on
// its standard output (trace points, the result, or an error). Fixed-width
// little-endian fields, each message closed by an FNV-1a checksum, so a
// truncated or corrupted stream is detected and fails the job.
//
// Only the public parameters and each node's own rows travel; secret seeds
// never do (every rank draws its nodes' noise from its own generator).
#ifndef DPOPT_CORE_OPTIM_DISTRIBUTED_DDA_WIRE_H_
#define DPOPT_CORE_OPTIM_DISTRIBUTED_DDA_WIRE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "Eigen/Dense"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/data/dataset.h"
#include "core/optim/model.h"
#include "core/optim/distributed_dda/dda_node.h"
#include "core/optim/distributed_dda/gossip.h"
#include "core/optim/distributed_dda/graph.h"
#include "core/optim/distributed_dda/schedule.h"

namespace dpopt::optim::distributed_dda {

class WireWriter {
 public:
  void U64(uint64_t v);
  void I64(int64_t v) { U64(static_cast<uint64_t>(v)); }
  void F64(double v);
  void F64s(const double* v, int64_t n);
  void Str(absl::string_view s);
  // Appends the checksum of everything written so far and returns the bytes.
  std::string Finish();
  const std::string& bytes() const { return out_; }

 private:
  std::string out_;
};

class WireReader {
 public:
  // Verifies and strips the trailing checksum. DATA_LOSS if it is wrong.
  static absl::StatusOr<WireReader> Open(absl::string_view bytes);
  absl::StatusOr<uint64_t> U64();
  absl::StatusOr<int64_t> I64();
  absl::StatusOr<double> F64();
  absl::Status F64s(double* v, int64_t n);
  absl::StatusOr<std::string> Str();
  bool done() const { return pos_ == data_.size(); }

 private:
  explicit WireReader(absl::string_view data) : data_(data) {}
  absl::Status Need(size_t n) const;
  absl::string_view data_;
  size_t pos_ = 0;
};

uint64_t Fnv1a(absl::string_view bytes);

// Everything every rank needs besides its shards. All public.
struct WorkerJob {
  ModelConfig model;
  int nodes = 1;
  int ranks = 1;
  int64_t iterations = 0;
  int64_t trace_every = 1;
  bool literal_inactive = false;
  double iota = 1;
  uint64_t public_seed = 0;
  GraphOptions graph;
  GossipOptions gossip;
  ScheduleOptions schedule;
  int64_t dimension = 0;
  // NodeParams without the plan, which each rank recomputes from
  // (sensitivity, noise multiplier, parameter size).
  NodeSampling sampling = NodeSampling::kWithoutReplacement;
  int64_t batch_size = 1;
  double poisson_rate = 0;
  double normalizer = 1;
  double clip_norm = 1;
  double sensitivity = 0;
  double noise_multiplier = 0;
  Regularizer h;
};

std::string EncodeWorkerJob(const WorkerJob& job);
absl::StatusOr<WorkerJob> DecodeWorkerJob(absl::string_view bytes);
std::string EncodeShard(const Dataset& shard);
absl::StatusOr<Dataset> DecodeShard(absl::string_view bytes);

// The job on rank 0's standard input: "DPDDA\x01\0\0", the header's length
// and bytes, then per node (in order) the shard's length and bytes.
std::string EncodeJobStream(const std::string& header,
                            const std::vector<std::string>& shards);

// Frames on rank 0's standard output: "DDAF" u32-type u64-length payload.
enum class FrameType : uint32_t { kTrace = 1, kDone = 2, kError = 3 };
struct Frame {
  FrameType type = FrameType::kTrace;
  std::string payload;  // checksummed WireWriter bytes
};
std::string EncodeFrame(FrameType type, const std::string& payload);

// Incremental parser of a byte stream of frames.
class FrameParser {
 public:
  void Append(absl::string_view bytes) {
    buffer_.append(bytes.data(), bytes.size());
  }
  // The next complete frame, nullopt-like: returns false if none yet.
  // DATA_LOSS on a malformed stream.
  absl::StatusOr<bool> Next(Frame* frame);

 private:
  std::string buffer_;
};

struct TraceFrame {
  int64_t step = 0;
  double theta_norm = 0;
  Eigen::VectorXd average;
};
struct DoneFrame {
  int64_t steps_done = 0;
  bool stopped = false;
  Eigen::VectorXd model;
  std::vector<Eigen::VectorXd> node_models;
};
std::string EncodeTrace(const TraceFrame& t);
absl::StatusOr<TraceFrame> DecodeTrace(absl::string_view payload);
std::string EncodeDone(const DoneFrame& d);
absl::StatusOr<DoneFrame> DecodeDone(absl::string_view payload);

}  // namespace dpopt::optim::distributed_dda

#endif  // DPOPT_CORE_OPTIM_DISTRIBUTED_DDA_WIRE_H_
