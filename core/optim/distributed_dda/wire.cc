#include "core/optim/distributed_dda/wire.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/common/status_macros.h"

namespace dpopt::optim::distributed_dda {
namespace {

constexpr uint64_t kFnvOffset = 0xcbf29ce484222325ULL;
constexpr uint64_t kFnvPrime = 0x100000001b3ULL;
constexpr char kFrameMagic[4] = {'D', 'D', 'A', 'F'};
constexpr int64_t kMaxVector = 100'000'000;

absl::Status Corrupt(const std::string& what) {
  return absl::DataLossError(absl::StrCat("dp_dda worker stream: ", what));
}

void PutU64(std::string* out, uint64_t v) {
  char b[8];
  for (int i = 0; i < 8; ++i) b[i] = static_cast<char>((v >> (8 * i)) & 0xff);
  out->append(b, 8);
}

uint64_t GetU64(const char* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) {
    v |= static_cast<uint64_t>(static_cast<unsigned char>(p[i])) << (8 * i);
  }
  return v;
}

}  // namespace

void PutVector(WireWriter& w, const Eigen::VectorXd& v) {
  w.I64(v.size());
  w.F64s(v.data(), v.size());
}

absl::StatusOr<Eigen::VectorXd> GetVector(WireReader& r) {
  ASSIGN_OR_RETURN(int64_t n, r.I64());
  if (n < 0 || n > kMaxVector) return Corrupt("bad vector length");
  Eigen::VectorXd v(n);
  RETURN_IF_ERROR(r.F64s(v.data(), n));
  return v;
}

uint64_t Fnv1aExtend(uint64_t hash, absl::string_view bytes) {
  for (unsigned char c : bytes) {
    hash ^= c;
    hash *= kFnvPrime;
  }
  return hash;
}

uint64_t Fnv1a(absl::string_view bytes) {
  return Fnv1aExtend(kFnvOffset, bytes);
}

void WireWriter::U64(uint64_t v) { PutU64(&out_, v); }

void WireWriter::F64(double v) {
  uint64_t bits;
  std::memcpy(&bits, &v, 8);
  U64(bits);
}

void WireWriter::F64s(const double* v, int64_t n) {
  for (int64_t i = 0; i < n; ++i) F64(v[i]);
}

void WireWriter::Str(absl::string_view s) {
  U64(s.size());
  out_.append(s.data(), s.size());
}

std::string WireWriter::Finish() {
  const uint64_t sum = Fnv1a(out_);
  PutU64(&out_, sum);
  return std::move(out_);
}

absl::StatusOr<WireReader> WireReader::Open(absl::string_view bytes) {
  if (bytes.size() < 8) return Corrupt("message too short");
  const absl::string_view body = bytes.substr(0, bytes.size() - 8);
  if (GetU64(bytes.data() + body.size()) != Fnv1a(body)) {
    return Corrupt("checksum mismatch");
  }
  return WireReader(body);
}

absl::Status WireReader::Need(size_t n) const {
  if (data_.size() - pos_ < n) return Corrupt("message truncated");
  return absl::OkStatus();
}

absl::StatusOr<uint64_t> WireReader::U64() {
  RETURN_IF_ERROR(Need(8));
  const uint64_t v = GetU64(data_.data() + pos_);
  pos_ += 8;
  return v;
}

absl::StatusOr<int64_t> WireReader::I64() {
  ASSIGN_OR_RETURN(uint64_t v, U64());
  return static_cast<int64_t>(v);
}

absl::StatusOr<double> WireReader::F64() {
  ASSIGN_OR_RETURN(uint64_t bits, U64());
  double v;
  std::memcpy(&v, &bits, 8);
  return v;
}

absl::Status WireReader::F64s(double* v, int64_t n) {
  RETURN_IF_ERROR(Need(static_cast<size_t>(n) * 8));
  for (int64_t i = 0; i < n; ++i) {
    ASSIGN_OR_RETURN(v[i], F64());
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> WireReader::Str() {
  ASSIGN_OR_RETURN(uint64_t n, U64());
  RETURN_IF_ERROR(Need(n));
  std::string s(data_.substr(pos_, n));
  pos_ += n;
  return s;
}

void PutModel(WireWriter& w, const ModelConfig& model) {
  w.U64(static_cast<uint64_t>(model.loss));
  w.F64(model.l2);
  w.F64(model.l1);
  w.I64(model.num_classes);
  w.F64(model.label_bound);
  w.F64(model.huber_width);
}

absl::StatusOr<ModelConfig> GetModel(WireReader& r) {
  ModelConfig model;
  ASSIGN_OR_RETURN(uint64_t loss, r.U64());
  if (loss > static_cast<uint64_t>(LossKind::kHuberizedHinge)) {
    return Corrupt("bad loss");
  }
  model.loss = static_cast<LossKind>(loss);
  ASSIGN_OR_RETURN(model.l2, r.F64());
  ASSIGN_OR_RETURN(model.l1, r.F64());
  ASSIGN_OR_RETURN(int64_t classes, r.I64());
  if (classes < 0 || classes > (int64_t{1} << 30))
    return Corrupt("bad classes");
  model.num_classes = static_cast<int>(classes);
  ASSIGN_OR_RETURN(model.label_bound, r.F64());
  ASSIGN_OR_RETURN(model.huber_width, r.F64());
  return model;
}

std::string EncodeWorkerJob(const WorkerJob& j) {
  WireWriter w;
  PutModel(w, j.model);
  w.I64(j.nodes);
  w.I64(j.ranks);
  w.I64(j.iterations);
  w.I64(j.trace_every);
  w.U64(j.literal_inactive);
  w.F64(j.iota);
  w.U64(j.public_seed);
  w.U64(static_cast<uint64_t>(j.graph.kind));
  w.F64(j.graph.radius);
  w.F64(j.graph.edge_probability);
  w.U64(static_cast<uint64_t>(j.gossip.activation));
  w.I64(j.gossip.edges_per_step);
  w.I64(j.gossip.active_nodes);
  w.F64(j.gossip.activation_probability);
  w.U64(j.gossip.all_nodes_compute);
  w.U64(static_cast<uint64_t>(j.schedule.weights));
  w.F64(j.schedule.gamma);
  w.F64(j.schedule.gamma_power);
  w.I64(j.dimension);
  w.U64(static_cast<uint64_t>(j.sampling));
  w.I64(j.batch_size);
  w.F64(j.poisson_rate);
  w.F64(j.normalizer);
  w.F64(j.clip_norm);
  w.F64(j.sensitivity);
  w.F64(j.noise_multiplier);
  w.F64(j.h.mu);
  w.F64(j.h.phi);
  return w.Finish();
}

absl::StatusOr<WorkerJob> DecodeWorkerJob(absl::string_view bytes) {
  ASSIGN_OR_RETURN(WireReader r, WireReader::Open(bytes));
  WorkerJob j;
  ASSIGN_OR_RETURN(j.model, GetModel(r));
  ASSIGN_OR_RETURN(int64_t nodes, r.I64());
  ASSIGN_OR_RETURN(int64_t ranks, r.I64());
  if (nodes < 1 || nodes > Graph::kMaxNodes || ranks < 1 || ranks > nodes) {
    return Corrupt("bad nodes or ranks");
  }
  j.nodes = static_cast<int>(nodes);
  j.ranks = static_cast<int>(ranks);
  ASSIGN_OR_RETURN(j.iterations, r.I64());
  ASSIGN_OR_RETURN(j.trace_every, r.I64());
  ASSIGN_OR_RETURN(uint64_t literal, r.U64());
  j.literal_inactive = literal != 0;
  ASSIGN_OR_RETURN(j.iota, r.F64());
  ASSIGN_OR_RETURN(j.public_seed, r.U64());
  ASSIGN_OR_RETURN(uint64_t gk, r.U64());
  if (gk > static_cast<uint64_t>(GraphKind::kErdosRenyi)) {
    return Corrupt("bad graph");
  }
  j.graph.kind = static_cast<GraphKind>(gk);
  ASSIGN_OR_RETURN(j.graph.radius, r.F64());
  ASSIGN_OR_RETURN(j.graph.edge_probability, r.F64());
  ASSIGN_OR_RETURN(uint64_t act, r.U64());
  if (act > static_cast<uint64_t>(Activation::kAll)) {
    return Corrupt("bad activation");
  }
  j.gossip.activation = static_cast<Activation>(act);
  ASSIGN_OR_RETURN(int64_t e, r.I64());
  ASSIGN_OR_RETURN(int64_t k, r.I64());
  j.gossip.edges_per_step = static_cast<int>(e);
  j.gossip.active_nodes = static_cast<int>(k);
  ASSIGN_OR_RETURN(j.gossip.activation_probability, r.F64());
  ASSIGN_OR_RETURN(uint64_t all, r.U64());
  j.gossip.all_nodes_compute = all != 0;
  ASSIGN_OR_RETURN(uint64_t ws, r.U64());
  j.schedule.weights =
      ws == 0 ? WeightSchedule::kUniform : WeightSchedule::kLinear;
  ASSIGN_OR_RETURN(j.schedule.gamma, r.F64());
  ASSIGN_OR_RETURN(j.schedule.gamma_power, r.F64());
  ASSIGN_OR_RETURN(j.dimension, r.I64());
  ASSIGN_OR_RETURN(uint64_t sampling, r.U64());
  j.sampling = sampling == 0 ? NodeSampling::kWithoutReplacement
                             : NodeSampling::kPoisson;
  ASSIGN_OR_RETURN(j.batch_size, r.I64());
  ASSIGN_OR_RETURN(j.poisson_rate, r.F64());
  ASSIGN_OR_RETURN(j.normalizer, r.F64());
  ASSIGN_OR_RETURN(j.clip_norm, r.F64());
  ASSIGN_OR_RETURN(j.sensitivity, r.F64());
  ASSIGN_OR_RETURN(j.noise_multiplier, r.F64());
  ASSIGN_OR_RETURN(j.h.mu, r.F64());
  ASSIGN_OR_RETURN(j.h.phi, r.F64());
  if (!r.done()) return Corrupt("trailing bytes in the job");
  return j;
}

ShardEncoder::ShardEncoder(const Dataset& data,
                           const std::vector<int64_t>* rows)
    : data_(data),
      rows_(rows),
      m_(rows ? static_cast<int64_t>(rows->size()) : data.rows()),
      hash_(kFnvOffset) {}

void ShardEncoder::Put(std::string* out, uint64_t v) {
  for (int i = 0; i < 8; ++i) {
    const unsigned char c = static_cast<unsigned char>((v >> (8 * i)) & 0xff);
    hash_ = (hash_ ^ c) * kFnvPrime;
    out->push_back(static_cast<char>(c));
  }
}

void ShardEncoder::PutF64(std::string* out, double v) {
  uint64_t bits;
  std::memcpy(&bits, &v, 8);
  Put(out, bits);
}

void ShardEncoder::Fill(std::string* out, size_t want) {
  const int64_t dim = data_.dimension();
  while (out->size() < want && phase_ != kDone) {
    switch (phase_) {
      case kFields: {
        const uint64_t fields[5] = {
            static_cast<uint64_t>(m_), static_cast<uint64_t>(dim),
            data_.is_sparse(), static_cast<uint64_t>(data_.label_kind()),
            static_cast<uint64_t>(static_cast<int64_t>(data_.num_classes()))};
        Put(out, fields[k_]);
        if (++k_ == 5) {
          phase_ = kLabels;
          k_ = 0;
        }
        break;
      }
      case kLabels:
        if (k_ == m_) {
          phase_ = kRows;
          k_ = 0;
          break;
        }
        PutF64(out, data_.label(RowOf(k_)));
        ++k_;
        break;
      case kRows: {
        if (k_ == m_) {
          phase_ = kChecksum;
          break;
        }
        const int64_t r = RowOf(k_);
        if (!data_.is_sparse()) {
          if (j_ < dim) {
            PutF64(out, data_.dense_row(r)[j_]);
            ++j_;
          } else {
            ++k_;
            j_ = 0;
          }
          break;
        }
        if (!it_.has_value()) {
          int64_t nnz = 0;
          for (SparseRows::InnerIterator c(data_.sparse(), r); c; ++c) ++nnz;
          Put(out, static_cast<uint64_t>(nnz));
          it_.emplace(data_.sparse(), r);
          break;
        }
        if (*it_) {
          Put(out, static_cast<uint64_t>(static_cast<int64_t>(it_->col())));
          PutF64(out, it_->value());
          ++*it_;
        } else {
          it_.reset();
          ++k_;
        }
        break;
      }
      case kChecksum: {
        const uint64_t sum = hash_;
        PutU64(out, sum);
        phase_ = kDone;
        break;
      }
      case kDone:
        break;
    }
  }
}

std::string EncodeShard(const Dataset& d) {
  std::string out;
  ShardEncoder e(d, nullptr);
  e.Fill(&out, std::numeric_limits<size_t>::max());
  return out;
}

absl::StatusOr<Dataset> DecodeShard(absl::string_view bytes) {
  ASSIGN_OR_RETURN(WireReader r, WireReader::Open(bytes));
  ASSIGN_OR_RETURN(int64_t rows, r.I64());
  ASSIGN_OR_RETURN(int64_t dim, r.I64());
  if (rows < 0 || dim < 1 || dim > 10'000'000) return Corrupt("bad shard");
  ASSIGN_OR_RETURN(uint64_t sparse, r.U64());
  ASSIGN_OR_RETURN(uint64_t kind, r.U64());
  if (kind > static_cast<uint64_t>(LabelKind::kReal)) {
    return Corrupt("bad label kind");
  }
  ASSIGN_OR_RETURN(int64_t classes, r.I64());
  Eigen::VectorXd y(rows);
  RETURN_IF_ERROR(r.F64s(y.data(), rows));
  const LabelKind lk = static_cast<LabelKind>(kind);
  if (!sparse) {
    if (rows > 0 && dim > kMaxVector / rows) return Corrupt("bad shard size");
    DenseRows x(rows, dim);
    for (int64_t i = 0; i < rows; ++i) {
      for (int64_t j = 0; j < dim; ++j) {
        ASSIGN_OR_RETURN(x(i, j), r.F64());
      }
    }
    if (!r.done()) return Corrupt("trailing bytes in a shard");
    return Dataset::DenseRowMajor(std::move(x), std::move(y), lk,
                                  static_cast<int>(classes));
  }
  std::vector<Eigen::Triplet<double, int64_t>> triplets;
  for (int64_t i = 0; i < rows; ++i) {
    ASSIGN_OR_RETURN(int64_t nnz, r.I64());
    if (nnz < 0 || nnz > dim) return Corrupt("bad row");
    for (int64_t k = 0; k < nnz; ++k) {
      ASSIGN_OR_RETURN(int64_t col, r.I64());
      ASSIGN_OR_RETURN(double v, r.F64());
      if (col < 0 || col >= dim) return Corrupt("bad column");
      triplets.emplace_back(i, col, v);
    }
  }
  if (!r.done()) return Corrupt("trailing bytes in a shard");
  SparseRows x(rows, dim);
  x.setFromTriplets(triplets.begin(), triplets.end());
  return Dataset::Sparse(std::move(x), std::move(y), lk,
                         static_cast<int>(classes));
}

JobStreamWriter::JobStreamWriter(
    std::string header, const Dataset& data,
    const std::vector<std::vector<int64_t>>& shards, int64_t chunk_bytes)
    : header_(std::move(header)),
      data_(data),
      shards_(shards),
      chunk_(static_cast<size_t>(chunk_bytes)) {}

bool JobStreamWriter::Next(std::string* out) {
  out->clear();
  if (node_ < 0) {
    out->assign(kJobStreamMagic, 8);
    PutU64(out, header_.size());
    out->append(header_);
    std::string().swap(header_);
    node_ = 0;
    return true;
  }
  if (node_ >= static_cast<int>(shards_.size())) return false;
  if (encoder_ == nullptr) {
    encoder_ = std::make_unique<ShardEncoder>(data_, &shards_[node_]);
    pending_.clear();
    pending_.reserve(chunk_ + 16);
  }
  if (pending_.size() < chunk_) encoder_->Fill(&pending_, chunk_);
  if (pending_.empty()) {  // the encoder is done: close the shard
    PutU64(out, 0);
    encoder_.reset();
    ++node_;
    return true;
  }
  const size_t n = std::min(chunk_, pending_.size());
  PutU64(out, n);
  out->append(pending_, 0, n);
  pending_.erase(0, n);
  return true;
}

std::string EncodeJobStream(const std::string& header, const Dataset& data,
                            const std::vector<std::vector<int64_t>>& shards,
                            int64_t chunk_bytes) {
  JobStreamWriter w(header, data, shards, chunk_bytes);
  std::string out, piece;
  while (w.Next(&piece)) out += piece;
  return out;
}

absl::StatusOr<ParsedJobStream> ParseJobStream(absl::string_view stream,
                                               int nodes) {
  ParsedJobStream p;
  size_t pos = 0;
  auto u64 = [&]() -> absl::StatusOr<uint64_t> {
    if (stream.size() - pos < 8) return Corrupt("the job stream ended early");
    const uint64_t v = GetU64(stream.data() + pos);
    pos += 8;
    return v;
  };
  auto bytes = [&](uint64_t n, std::string* out) -> absl::Status {
    if (n > kMaxChunkBytes) return Corrupt("a chunk is too large");
    if (stream.size() - pos < n) return Corrupt("the job stream ended early");
    out->append(stream.data() + pos, n);
    pos += n;
    return absl::OkStatus();
  };
  if (stream.size() < 8 || std::memcmp(stream.data(), kJobStreamMagic, 8)) {
    return Corrupt("not a dp_dda job stream");
  }
  pos = 8;
  ASSIGN_OR_RETURN(uint64_t h, u64());
  RETURN_IF_ERROR(bytes(h, &p.header));
  for (int i = 0; i < nodes; ++i) {
    std::string& s = p.shards.emplace_back();
    for (;;) {
      ASSIGN_OR_RETURN(uint64_t n, u64());
      if (n == 0) break;
      if (s.size() + n > kMaxShardBytes) return Corrupt("a shard is too large");
      RETURN_IF_ERROR(bytes(n, &s));
      ++p.chunks;
      p.largest_chunk = std::max(p.largest_chunk, n);
    }
  }
  if (pos != stream.size()) return Corrupt("trailing bytes in the job stream");
  return p;
}

std::string EncodeFrame(FrameType type, const std::string& payload) {
  std::string out(kFrameMagic, 4);
  const uint32_t t = static_cast<uint32_t>(type);
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>(t >> (8 * i)));
  PutU64(&out, payload.size());
  out += payload;
  return out;
}

absl::StatusOr<bool> FrameParser::Next(Frame* frame) {
  if (buffer_.size() < 16) {
    if (!buffer_.empty() &&
        buffer_.compare(0, std::min<size_t>(4, buffer_.size()), kFrameMagic,
                        std::min<size_t>(4, buffer_.size())) != 0) {
      return Corrupt("unexpected output");
    }
    return false;
  }
  if (buffer_.compare(0, 4, kFrameMagic, 4) != 0) {
    return Corrupt("unexpected output");
  }
  uint32_t t = 0;
  for (int i = 0; i < 4; ++i) {
    t |= static_cast<uint32_t>(static_cast<unsigned char>(buffer_[4 + i]))
         << (8 * i);
  }
  const uint64_t n = GetU64(buffer_.data() + 8);
  if (t < 1 || t > 3 || n > (uint64_t{1} << 34)) return Corrupt("bad frame");
  if (buffer_.size() < 16 + n) return false;
  frame->type = static_cast<FrameType>(t);
  frame->payload = buffer_.substr(16, n);
  buffer_.erase(0, 16 + n);
  return true;
}

std::string EncodeTrace(const TraceFrame& t) {
  WireWriter w;
  w.I64(t.step);
  w.F64(t.theta_norm);
  PutVector(w, t.average);
  return w.Finish();
}

absl::StatusOr<TraceFrame> DecodeTrace(absl::string_view payload) {
  ASSIGN_OR_RETURN(WireReader r, WireReader::Open(payload));
  TraceFrame t;
  ASSIGN_OR_RETURN(t.step, r.I64());
  ASSIGN_OR_RETURN(t.theta_norm, r.F64());
  ASSIGN_OR_RETURN(t.average, GetVector(r));
  if (!r.done()) return Corrupt("trailing bytes in a trace frame");
  return t;
}

std::string EncodeDone(const DoneFrame& d) {
  WireWriter w;
  w.I64(d.steps_done);
  w.U64(d.stopped);
  PutVector(w, d.model);
  w.I64(static_cast<int64_t>(d.node_models.size()));
  for (const Eigen::VectorXd& v : d.node_models) PutVector(w, v);
  return w.Finish();
}

absl::StatusOr<DoneFrame> DecodeDone(absl::string_view payload) {
  ASSIGN_OR_RETURN(WireReader r, WireReader::Open(payload));
  DoneFrame d;
  ASSIGN_OR_RETURN(d.steps_done, r.I64());
  ASSIGN_OR_RETURN(uint64_t stopped, r.U64());
  d.stopped = stopped != 0;
  ASSIGN_OR_RETURN(d.model, GetVector(r));
  ASSIGN_OR_RETURN(int64_t n, r.I64());
  if (n < 0 || n > Graph::kMaxNodes) return Corrupt("bad node count");
  for (int64_t i = 0; i < n; ++i) {
    ASSIGN_OR_RETURN(Eigen::VectorXd v, GetVector(r));
    d.node_models.push_back(std::move(v));
  }
  if (!r.done()) return Corrupt("trailing bytes in the result");
  return d;
}

}  // namespace dpopt::optim::distributed_dda
