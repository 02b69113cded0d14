// The byte format between the server and rank 0 of an MPI worker pool
// (docs/scale-out.md). The server writes requests, rank 0 answers each with
// exactly one reply, in order. A message is a frame:
//   "DPPL" u32-type u64-length payload
// whose payload is checksummed WireWriter bytes (fixed-width little-endian
// fields closed by an FNV-1a checksum; distributed_dda/wire.h), so a
// truncated or corrupted stream is detected and ends the connection.
//
// What crosses: public parameters (dataset ids, shapes, the model, sampling
// rates, clip norms, privatized iterates), each rank's shard once when a
// dataset is placed, and the ranks' clipped gradient sums on their way to the
// noise, which the server adds. Never a secret seed, never a noisy-release's
// noise.
#ifndef DPOPT_CORE_OPTIM_MPI_POOL_PROTOCOL_H_
#define DPOPT_CORE_OPTIM_MPI_POOL_PROTOCOL_H_

#include <cstdint>
#include <string>
#include <vector>

#include "Eigen/Dense"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/data/dataset.h"
#include "core/optim/model.h"
#include "core/optim/row_sums.h"

namespace dpopt::optim::mpi_pool {

enum class MessageType : uint32_t {
  // Requests (server -> rank 0).
  kHello = 1,       // -> kHelloReply
  kPlaceBegin = 2,  // PlaceBegin -> kOk
  kPlaceChunk = 3,  // PlaceChunk -> kOk
  kPlaceEnd = 4,    // (dataset id) -> kRankReports
  kDrop = 5,        // (dataset id) -> kRankReports
  kOpenJob = 6,     // OpenJob -> kOk
  kSum = 7,         // SumRequest -> kSumReply
  kCloseJob = 8,    // (job id) -> kOk
  kShutdown = 9,    // -> kOk, then the pool exits
  // Replies (rank 0 -> server).
  kOk = 100,
  kError = 101,  // a status code and a message (never data)
  kHelloReply = 102,
  kRankReports = 103,
  kSumReply = 104,
};

// Bytes of one frame's payload the reader accepts (a corrupt stream cannot
// make either side allocate more): a shard chunk, or a sum of 10^7
// parameters.
inline constexpr uint64_t kMaxPayloadBytes = uint64_t{96} << 20;
// Shards travel in chunks of at most this many bytes, a public constant (no
// transfer depends on a shard's size but its count of chunks).
inline constexpr int64_t kShardChunkBytes = int64_t{4} << 20;

struct Message {
  MessageType type = MessageType::kOk;
  std::string payload;  // checksummed WireWriter bytes; may be empty for kOk
};

std::string EncodeMessage(MessageType type, const std::string& payload);

// Incremental parser of a byte stream of messages.
class MessageParser {
 public:
  void Append(absl::string_view bytes) {
    buffer_.append(bytes.data(), bytes.size());
  }
  // Takes the next complete message: true if one was taken, false if none
  // is complete yet. DATA_LOSS on a malformed stream.
  absl::StatusOr<bool> Next(Message* message);

 private:
  std::string buffer_;
};

struct HelloReply {
  int ranks = 0;
  // The pool's identity ("dpopt-mpi-pool: secure generators" in
  // production; the test pool says it is not private).
  std::string identity;
};

// A dataset's public shape, sent before its shards.
struct PlaceBegin {
  std::string dataset_id;  // the server's id; a file name on every rank
  int64_t rows = 0;
  int64_t dimension = 0;
};

struct PlaceChunk {
  std::string dataset_id;
  int rank = 0;
  std::string bytes;  // the next piece of distributed_dda::EncodeShard(shard)
};

// One rank's answer to kPlaceEnd or kDrop.
struct RankReport {
  int rank = 0;
  std::string host;
  bool ok = false;
  // kPlaceEnd: rows stored; kDrop: 1 if a shard was deleted, 0 if none was
  // there.
  int64_t count = 0;
  std::string message;  // when !ok: what failed (no data)
};

struct OpenJob {
  uint64_t job_id = 0;
  std::string dataset_id;
  ModelConfig model;
  int64_t dimension = 0;
};

// What a kSum request asks every rank for (RowSums' methods). The reply is
// a kSumReply vector: the gradient sums' p values, the loss sum's one value,
// or no value after a sample for losses.
enum class SumKind : uint32_t {
  kClippedGradient = 0,  // ClippedSum(query, w)
  kExactGradient = 1,    // ExactSum(w) (non-private runs)
  kSampleForLosses = 2,  // SampleForLosses(query.sampling_rate)
  kClippedLoss = 3,      // ClippedLossSum(query.clip, w)
};

struct SumRequest {
  uint64_t job_id = 0;
  SumKind kind = SumKind::kClippedGradient;
  ClippedSumQuery query;
  Eigen::VectorXd w;
};

struct ErrorReply {
  int code = 13;  // absl::StatusCode
  std::string message;
};

std::string EncodeId(absl::string_view id);
absl::StatusOr<std::string> DecodeId(absl::string_view payload);
std::string EncodeJobId(uint64_t job_id);
absl::StatusOr<uint64_t> DecodeJobId(absl::string_view payload);
std::string EncodeHelloReply(const HelloReply& m);
absl::StatusOr<HelloReply> DecodeHelloReply(absl::string_view payload);
std::string EncodePlaceBegin(const PlaceBegin& m);
absl::StatusOr<PlaceBegin> DecodePlaceBegin(absl::string_view payload);
std::string EncodePlaceChunk(const PlaceChunk& m);
absl::StatusOr<PlaceChunk> DecodePlaceChunk(absl::string_view payload);
std::string EncodeRankReports(const std::vector<RankReport>& m);
absl::StatusOr<std::vector<RankReport>> DecodeRankReports(
    absl::string_view payload);
std::string EncodeOpenJob(const OpenJob& m);
absl::StatusOr<OpenJob> DecodeOpenJob(absl::string_view payload);
std::string EncodeSumRequest(const SumRequest& m);
absl::StatusOr<SumRequest> DecodeSumRequest(absl::string_view payload);
std::string EncodeVector(const Eigen::VectorXd& v);
absl::StatusOr<Eigen::VectorXd> DecodeVector(absl::string_view payload);
std::string EncodeError(const absl::Status& status);
// The status an error reply carries (never OK).
absl::Status DecodeError(absl::string_view payload);

// A dataset id is safe as a file name on every rank: 1-64 characters of
// [A-Za-z0-9_-]. INVALID_ARGUMENT otherwise.
absl::Status CheckDatasetId(absl::string_view id);

}  // namespace dpopt::optim::mpi_pool

#endif  // DPOPT_CORE_OPTIM_MPI_POOL_PROTOCOL_H_
