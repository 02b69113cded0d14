// The byte formats between the server and the MPI ranks of dp_dda (seed
// 004): the job (public parameters plus the nodes' shards, in chunks of at
// most kMaxChunkBytes, encoded as they are written) that the server writes
// to rank 0's standard input, and the frames rank 0 writes back on
// its standard output (trace points, the result, or an error). Fixed-width
// little-endian fields, each message closed by an FNV-1a checksum, so a
// truncated or corrupted stream is detected and fails the job.
//
// Only the public parameters and each node's own rows travel; secret seeds
// never do (every rank draws its nodes' noise from its own generator).
#ifndef DPOPT_CORE_OPTIM_DISTRIBUTED_DDA_WIRE_H_
#define DPOPT_CORE_OPTIM_DISTRIBUTED_DDA_WIRE_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "Eigen/Dense"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/data/dataset.h"
#include "core/optim/distributed_dda/dda_node.h"
#include "core/optim/distributed_dda/gossip.h"
#include "core/optim/distributed_dda/graph.h"
#include "core/optim/distributed_dda/schedule.h"
#include "core/optim/model.h"

namespace dpopt::optim::distributed_dda {

// The job stream (public parameters and shards) travels from the server to
// rank 0, and from rank 0 to the other ranks, in chunks of at most this many
// bytes (a public constant): no transfer, buffer or MPI count depends on the
// size of a shard, which for sparse data depends on private nonzeros.
inline constexpr int64_t kMaxChunkBytes = int64_t{4} << 20;  // 4 MiB
inline constexpr int64_t kMinChunkBytes = 64;

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
// Fnv1a of a + b is Fnv1aExtend(Fnv1a(a), b); Fnv1a("") is kFnv1aEmpty.
uint64_t Fnv1aExtend(uint64_t hash, absl::string_view bytes);
inline constexpr uint64_t kFnv1aEmpty = 0xcbf29ce484222325ULL;

// A model's configuration (public) in wire fields. GetModel: DATA_LOSS on
// a bad loss kind or class count (the rest is checked by
// ModelConfig::Validate where it is used).
void PutModel(WireWriter& w, const ModelConfig& model);
absl::StatusOr<ModelConfig> GetModel(WireReader& r);
// A vector as its length and values. GetVector: DATA_LOSS past 10^8 values.
void PutVector(WireWriter& w, const Eigen::VectorXd& v);
absl::StatusOr<Eigen::VectorXd> GetVector(WireReader& r);

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

// Produces EncodeShard(rows `rows` of `data`) a piece at a time, reading the
// rows in place (no copy of the shard, no string holding all of it).
class ShardEncoder {
 public:
  // `data` and `rows` (nullptr: every row of `data`, in order) must outlive
  // the encoder.
  ShardEncoder(const Dataset& data, const std::vector<int64_t>* rows);
  // Appends the next bytes to *out until it holds at least `want` bytes or
  // the shard's bytes (checksum included) are all out; appends at most 16
  // bytes past `want`.
  void Fill(std::string* out, size_t want);
  bool done() const { return phase_ == kDone; }

 private:
  enum Phase { kFields, kLabels, kRows, kChecksum, kDone };
  int64_t RowOf(int64_t k) const { return rows_ ? (*rows_)[k] : k; }
  void Put(std::string* out, uint64_t v);
  void PutF64(std::string* out, double v);
  const Dataset& data_;
  const std::vector<int64_t>* rows_;
  int64_t m_;  // rows in the shard
  Phase phase_ = kFields;
  int64_t k_ = 0;  // field, label or row index in the shard
  int64_t j_ = 0;  // dense: the next column of row k_
  uint64_t hash_;
  // Sparse: the position in row k_ (empty: its count of nonzeros is next).
  std::optional<SparseRows::InnerIterator> it_;
};

// The job on rank 0's standard input, in chunks: "DPDDA\x02\0\0", the
// header's length (at most kMaxChunkBytes) and bytes, then per node (in
// order) its shard as chunks "u64 length, bytes" of 1 to kMaxChunkBytes
// bytes each, closed by a zero length. The concatenation of a node's chunks
// is EncodeShard(its rows). The writer produces the stream as it is read, a
// chunk at a time, so the whole stream is never held anywhere.
class JobStreamWriter {
 public:
  // `data` and `shards` (each node's rows of `data`) must outlive the
  // writer. REQUIRES: kMinChunkBytes <= chunk_bytes <= kMaxChunkBytes
  // and header.size() <= kMaxChunkBytes.
  JobStreamWriter(std::string header, const Dataset& data,
                  const std::vector<std::vector<int64_t>>& shards,
                  int64_t chunk_bytes);
  // Replaces *out with the next piece of the stream (at most chunk_bytes +
  // 16 bytes); false (and *out empty) once the stream is over.
  bool Next(std::string* out);

 private:
  std::string header_;
  const Dataset& data_;
  const std::vector<std::vector<int64_t>>& shards_;
  size_t chunk_;
  int node_ = -1;  // -1: the magic and header are next
  std::unique_ptr<ShardEncoder> encoder_;
  std::string pending_;  // shard bytes not yet in a chunk
  bool encoder_done_ = false;
};

// The whole stream of JobStreamWriter in one string (tests).
std::string EncodeJobStream(const std::string& header, const Dataset& data,
                            const std::vector<std::vector<int64_t>>& shards,
                            int64_t chunk_bytes);

// Splits a whole job stream of `nodes` shards into the header and each
// node's reassembled shard bytes, checking every length (tests; the worker
// reads the same format from its standard input). DATA_LOSS if malformed.
struct ParsedJobStream {
  std::string header;
  std::vector<std::string> shards;
  int64_t chunks = 0;          // shard chunks in the stream
  uint64_t largest_chunk = 0;  // bytes of the largest shard chunk
};
absl::StatusOr<ParsedJobStream> ParseJobStream(absl::string_view stream,
                                               int nodes);

// The stream's first 8 bytes.
inline constexpr char kJobStreamMagic[8] = {'D', 'P',    'D', 'D',
                                            'A', '\x02', 0,   0};
// Most bytes of one node's shard that a rank accepts (a corrupt stream
// cannot make a rank allocate more). The calibration's public bound on a
// shard (at most 1e8 values, 16 bytes each when sparse) is below it.
inline constexpr uint64_t kMaxShardBytes = uint64_t{1} << 34;

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
