#include "core/optim/mpi_pool/protocol.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "core/common/status_macros.h"
#include "core/optim/distributed_dda/wire.h"

namespace dpopt::optim::mpi_pool {
namespace {

using distributed_dda::GetModel;
using distributed_dda::GetVector;
using distributed_dda::PutModel;
using distributed_dda::PutVector;
using distributed_dda::WireReader;
using distributed_dda::WireWriter;

constexpr char kMagic[4] = {'D', 'P', 'P', 'L'};
constexpr size_t kHeaderBytes = 16;
constexpr int kMaxRanks = 1 << 16;

absl::Status Corrupt(absl::string_view what) {
  return absl::DataLossError(absl::StrCat("worker pool stream: ", what));
}

bool KnownType(uint32_t t) {
  return (t >= 1 && t <= 9) || (t >= 100 && t <= 104);
}

absl::Status CheckDone(const WireReader& r) {
  return r.done() ? absl::OkStatus() : Corrupt("trailing bytes");
}

}  // namespace

std::string EncodeMessage(MessageType type, const std::string& payload) {
  std::string out(kMagic, 4);
  const uint32_t t = static_cast<uint32_t>(type);
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>(t >> (8 * i)));
  const uint64_t n = payload.size();
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>(n >> (8 * i)));
  out += payload;
  return out;
}

absl::StatusOr<bool> MessageParser::Next(Message* message) {
  const size_t have = std::min<size_t>(4, buffer_.size());
  if (buffer_.compare(0, have, kMagic, have) != 0) {
    return Corrupt("unexpected bytes");
  }
  if (buffer_.size() < kHeaderBytes) return false;
  uint32_t t = 0;
  uint64_t n = 0;
  for (int i = 0; i < 4; ++i) {
    t |= static_cast<uint32_t>(static_cast<unsigned char>(buffer_[4 + i]))
         << (8 * i);
  }
  for (int i = 0; i < 8; ++i) {
    n |= static_cast<uint64_t>(static_cast<unsigned char>(buffer_[8 + i]))
         << (8 * i);
  }
  if (!KnownType(t)) return Corrupt("unknown message type");
  if (n > kMaxPayloadBytes) return Corrupt("message too long");
  if (buffer_.size() < kHeaderBytes + n) return false;
  message->type = static_cast<MessageType>(t);
  message->payload = buffer_.substr(kHeaderBytes, n);
  buffer_.erase(0, kHeaderBytes + n);
  return true;
}

absl::Status CheckDatasetId(absl::string_view id) {
  if (id.empty() || id.size() > 64) {
    return absl::InvalidArgumentError("dataset id must have 1-64 characters");
  }
  for (char c : id) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                    (c >= '0' && c <= '9') || c == '_' || c == '-';
    if (!ok) {
      return absl::InvalidArgumentError(
          "dataset id may hold only letters, digits, '_' and '-'");
    }
  }
  return absl::OkStatus();
}

std::string EncodeId(absl::string_view id) {
  WireWriter w;
  w.Str(id);
  return w.Finish();
}

absl::StatusOr<std::string> DecodeId(absl::string_view payload) {
  ASSIGN_OR_RETURN(WireReader r, WireReader::Open(payload));
  ASSIGN_OR_RETURN(std::string id, r.Str());
  RETURN_IF_ERROR(CheckDone(r));
  RETURN_IF_ERROR(CheckDatasetId(id));
  return id;
}

std::string EncodeJobId(uint64_t job_id) {
  WireWriter w;
  w.U64(job_id);
  return w.Finish();
}

absl::StatusOr<uint64_t> DecodeJobId(absl::string_view payload) {
  ASSIGN_OR_RETURN(WireReader r, WireReader::Open(payload));
  ASSIGN_OR_RETURN(uint64_t id, r.U64());
  RETURN_IF_ERROR(CheckDone(r));
  return id;
}

std::string EncodeHelloReply(const HelloReply& m) {
  WireWriter w;
  w.I64(m.ranks);
  w.Str(m.identity);
  return w.Finish();
}

absl::StatusOr<HelloReply> DecodeHelloReply(absl::string_view payload) {
  ASSIGN_OR_RETURN(WireReader r, WireReader::Open(payload));
  HelloReply m;
  ASSIGN_OR_RETURN(int64_t ranks, r.I64());
  if (ranks < 1 || ranks > kMaxRanks) return Corrupt("bad rank count");
  m.ranks = static_cast<int>(ranks);
  ASSIGN_OR_RETURN(m.identity, r.Str());
  RETURN_IF_ERROR(CheckDone(r));
  return m;
}

std::string EncodePlaceBegin(const PlaceBegin& m) {
  WireWriter w;
  w.Str(m.dataset_id);
  w.I64(m.rows);
  w.I64(m.dimension);
  return w.Finish();
}

absl::StatusOr<PlaceBegin> DecodePlaceBegin(absl::string_view payload) {
  ASSIGN_OR_RETURN(WireReader r, WireReader::Open(payload));
  PlaceBegin m;
  ASSIGN_OR_RETURN(m.dataset_id, r.Str());
  ASSIGN_OR_RETURN(m.rows, r.I64());
  ASSIGN_OR_RETURN(m.dimension, r.I64());
  RETURN_IF_ERROR(CheckDone(r));
  RETURN_IF_ERROR(CheckDatasetId(m.dataset_id));
  if (m.rows < 0 || m.dimension < 1) return Corrupt("bad dataset shape");
  return m;
}

std::string EncodePlaceChunk(const PlaceChunk& m) {
  WireWriter w;
  w.Str(m.dataset_id);
  w.I64(m.rank);
  w.Str(m.bytes);
  return w.Finish();
}

absl::StatusOr<PlaceChunk> DecodePlaceChunk(absl::string_view payload) {
  ASSIGN_OR_RETURN(WireReader r, WireReader::Open(payload));
  PlaceChunk m;
  ASSIGN_OR_RETURN(m.dataset_id, r.Str());
  ASSIGN_OR_RETURN(int64_t rank, r.I64());
  if (rank < 0 || rank >= kMaxRanks) return Corrupt("bad rank");
  m.rank = static_cast<int>(rank);
  ASSIGN_OR_RETURN(m.bytes, r.Str());
  RETURN_IF_ERROR(CheckDone(r));
  RETURN_IF_ERROR(CheckDatasetId(m.dataset_id));
  if (static_cast<int64_t>(m.bytes.size()) > kShardChunkBytes) {
    return Corrupt("shard chunk too long");
  }
  return m;
}

std::string EncodeRankReports(const std::vector<RankReport>& m) {
  WireWriter w;
  w.I64(static_cast<int64_t>(m.size()));
  for (const RankReport& r : m) {
    w.I64(r.rank);
    w.Str(r.host);
    w.U64(r.ok);
    w.I64(r.count);
    w.Str(r.message);
  }
  return w.Finish();
}

absl::StatusOr<std::vector<RankReport>> DecodeRankReports(
    absl::string_view payload) {
  ASSIGN_OR_RETURN(WireReader r, WireReader::Open(payload));
  ASSIGN_OR_RETURN(int64_t n, r.I64());
  if (n < 1 || n > kMaxRanks) return Corrupt("bad report count");
  std::vector<RankReport> out(static_cast<size_t>(n));
  for (RankReport& report : out) {
    ASSIGN_OR_RETURN(int64_t rank, r.I64());
    if (rank < 0 || rank >= n) return Corrupt("bad rank");
    report.rank = static_cast<int>(rank);
    ASSIGN_OR_RETURN(report.host, r.Str());
    ASSIGN_OR_RETURN(uint64_t ok, r.U64());
    report.ok = ok != 0;
    ASSIGN_OR_RETURN(report.count, r.I64());
    ASSIGN_OR_RETURN(report.message, r.Str());
  }
  RETURN_IF_ERROR(CheckDone(r));
  return out;
}

std::string EncodeOpenJob(const OpenJob& m) {
  WireWriter w;
  w.U64(m.job_id);
  w.Str(m.dataset_id);
  PutModel(w, m.model);
  w.I64(m.dimension);
  return w.Finish();
}

absl::StatusOr<OpenJob> DecodeOpenJob(absl::string_view payload) {
  ASSIGN_OR_RETURN(WireReader r, WireReader::Open(payload));
  OpenJob m;
  ASSIGN_OR_RETURN(m.job_id, r.U64());
  ASSIGN_OR_RETURN(m.dataset_id, r.Str());
  ASSIGN_OR_RETURN(m.model, GetModel(r));
  ASSIGN_OR_RETURN(m.dimension, r.I64());
  RETURN_IF_ERROR(CheckDone(r));
  RETURN_IF_ERROR(CheckDatasetId(m.dataset_id));
  return m;
}

std::string EncodeSumRequest(const SumRequest& m) {
  WireWriter w;
  w.U64(m.job_id);
  w.U64(static_cast<uint64_t>(m.kind));
  w.F64(m.query.sampling_rate);
  w.U64(m.query.norm == Objective::ClipNorm::kL1);
  w.F64(m.query.clip);
  PutVector(w, m.w);
  return w.Finish();
}

absl::StatusOr<SumRequest> DecodeSumRequest(absl::string_view payload) {
  ASSIGN_OR_RETURN(WireReader r, WireReader::Open(payload));
  SumRequest m;
  ASSIGN_OR_RETURN(m.job_id, r.U64());
  ASSIGN_OR_RETURN(uint64_t kind, r.U64());
  if (kind > static_cast<uint64_t>(SumKind::kClippedLoss)) {
    return Corrupt("bad sum kind");
  }
  m.kind = static_cast<SumKind>(kind);
  ASSIGN_OR_RETURN(m.query.sampling_rate, r.F64());
  ASSIGN_OR_RETURN(uint64_t l1, r.U64());
  m.query.norm = l1 != 0 ? Objective::ClipNorm::kL1 : Objective::ClipNorm::kL2;
  ASSIGN_OR_RETURN(m.query.clip, r.F64());
  ASSIGN_OR_RETURN(m.w, GetVector(r));
  RETURN_IF_ERROR(CheckDone(r));
  const bool rate_ok = m.query.sampling_rate >= PoissonSampler::kMinRate &&
                       m.query.sampling_rate <= 1;
  const bool clip_ok = std::isfinite(m.query.clip) && m.query.clip > 0;
  switch (m.kind) {
    case SumKind::kClippedGradient:
      if (!rate_ok || !clip_ok) return Corrupt("bad sum query");
      break;
    case SumKind::kSampleForLosses:
      if (!rate_ok) return Corrupt("bad sampling rate");
      break;
    case SumKind::kClippedLoss:
      if (!clip_ok) return Corrupt("bad clip");
      break;
    case SumKind::kExactGradient:
      break;
  }
  return m;
}

std::string EncodeVector(const Eigen::VectorXd& v) {
  WireWriter w;
  PutVector(w, v);
  return w.Finish();
}

absl::StatusOr<Eigen::VectorXd> DecodeVector(absl::string_view payload) {
  ASSIGN_OR_RETURN(WireReader r, WireReader::Open(payload));
  ASSIGN_OR_RETURN(Eigen::VectorXd v, GetVector(r));
  RETURN_IF_ERROR(CheckDone(r));
  return v;
}

std::string EncodeError(const absl::Status& status) {
  WireWriter w;
  w.I64(static_cast<int64_t>(status.code()));
  w.Str(status.message());
  return w.Finish();
}

absl::Status DecodeError(absl::string_view payload) {
  absl::StatusOr<WireReader> r = WireReader::Open(payload);
  if (!r.ok()) return r.status();
  absl::StatusOr<int64_t> code = r->I64();
  absl::StatusOr<std::string> message = r->Str();
  if (!code.ok() || !message.ok()) return Corrupt("bad error reply");
  if (*code <= 0 || *code > 16) return Corrupt("bad error code");
  return absl::Status(static_cast<absl::StatusCode>(*code),
                      absl::StrCat("worker pool: ", *message));
}

}  // namespace dpopt::optim::mpi_pool
