#include "core/optim/objective.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "absl/base/attributes.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/common/status_macros.h"
#include "core/optim/clip_select.h"
#include "core/optim/parallel.h"

namespace dpopt::optim {
namespace {

constexpr int64_t kMaxDimension = 10'000'000;

using internal::kHighNorm;
using internal::kLowNorm;
using internal::LogisticDerivative;  // branch-free (clip_select.h)

// log(1 + exp(-m)), stable for large |m|.
double LogisticLoss(double m) {
  return m > 0 ? std::log1p(std::exp(-m)) : -m + std::log1p(std::exp(m));
}

// The losses with one score (every loss but softmax): from the score
// s = <w, x_i> and the effective label y, writes the gradient coefficient
// to *c and returns the loss (0 unless kWantLoss). The single definition of
// these losses, used by ExampleCoefficients and the batched kernels.
template <LossKind kLoss, bool kWantLoss>
inline double ScalarCoefficient(double huber_width, double s, double y,
                                double* c) {
  if constexpr (kLoss == LossKind::kLogistic) {
    const double m = y * s;
    *c = y * LogisticDerivative(m);
    return kWantLoss ? LogisticLoss(m) : 0.0;
  } else if constexpr (kLoss == LossKind::kHinge) {
    const double m = y * s;
    *c = m < 1.0 ? -y : 0.0;
    return std::max(0.0, 1.0 - m);
  } else if constexpr (kLoss == LossKind::kHuberizedHinge) {
    const double h = huber_width;
    const double m = y * s;
    if (m > 1.0 + h) {
      *c = 0.0;
      return 0.0;
    }
    if (m < 1.0 - h) {
      *c = -y;
      return 1.0 - m;
    }
    const double r = 1.0 + h - m;
    *c = -y * r / (2.0 * h);
    return r * r / (4.0 * h);
  } else {
    static_assert(kLoss == LossKind::kLeastSquares);
    const double r = s - y;  // may be +-Inf, never NaN
    constexpr double kMax = std::numeric_limits<double>::max();
    *c = std::clamp(r, -kMax, kMax);  // finite; clipping bounds it
    return 0.5 * r * r;
  }
}

}  // namespace

std::string LossName(LossKind loss) {
  switch (loss) {
    case LossKind::kLogistic:
      return "logistic";
    case LossKind::kSoftmax:
      return "softmax";
    case LossKind::kLeastSquares:
      return "least_squares";
    case LossKind::kHinge:
      return "hinge";
    case LossKind::kHuberizedHinge:
      return "huberized_hinge";
  }
  return "unknown";
}

absl::StatusOr<LossKind> ParseLoss(absl::string_view name) {
  for (LossKind k :
       {LossKind::kLogistic, LossKind::kSoftmax, LossKind::kLeastSquares,
        LossKind::kHinge, LossKind::kHuberizedHinge}) {
    if (name == LossName(k)) return k;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown loss \"", name, "\""));
}

LabelKind RequiredLabelKind(LossKind loss) {
  switch (loss) {
    case LossKind::kSoftmax:
      return LabelKind::kMulticlass;
    case LossKind::kLeastSquares:
      return LabelKind::kReal;
    default:
      return LabelKind::kBinary;
  }
}

absl::Status ModelConfig::Validate() const {
  if (!std::isfinite(l2) || l2 < 0) {
    return absl::InvalidArgumentError("l2 must be finite and >= 0");
  }
  if (!std::isfinite(l1) || l1 < 0) {
    return absl::InvalidArgumentError("l1 must be finite and >= 0");
  }
  if (!std::isfinite(label_bound) || label_bound < 0) {
    return absl::InvalidArgumentError("label_bound must be finite and >= 0");
  }
  switch (loss) {
    case LossKind::kSoftmax:
      if (num_classes < 2 || num_classes > 1000) {
        return absl::InvalidArgumentError(
            "softmax needs num_classes in [2, 1000]");
      }
      break;
    case LossKind::kLeastSquares:
      break;
    case LossKind::kHuberizedHinge:
      if (!(huber_width > 0 && huber_width <= 1)) {
        return absl::InvalidArgumentError("huber_width must be in (0, 1]");
      }
      [[fallthrough]];
    case LossKind::kLogistic:
    case LossKind::kHinge:
      if (num_classes != 2) {
        return absl::InvalidArgumentError(absl::StrCat(
            LossName(loss), " is a binary loss: num_classes must be 2"));
      }
      break;
    default:
      return absl::InvalidArgumentError("unknown loss");
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Objective>> Objective::Create(
    const ModelConfig& config, int64_t dimension) {
  RETURN_IF_ERROR(config.Validate());
  if (dimension < 1 || dimension > kMaxDimension) {
    return absl::InvalidArgumentError(
        absl::StrCat("dimension must be in [1, ", kMaxDimension, "]"));
  }
  return std::unique_ptr<Objective>(new Objective(config, dimension));
}

Objective::Objective(const ModelConfig& config, int64_t dimension)
    : config_(config),
      dimension_(dimension),
      outputs_(config.loss == LossKind::kSoftmax ? config.num_classes : 1) {}

absl::Status Objective::CheckDataset(const Dataset& data) const {
  if (data.dimension() != dimension_) {
    return absl::InvalidArgumentError(
        absl::StrFormat("dataset dimension %d does not match the model's %d",
                        data.dimension(), dimension_));
  }
  const LabelKind want = RequiredLabelKind(config_.loss);
  if (data.label_kind() != want) {
    return absl::InvalidArgumentError(absl::StrCat(
        "loss ", LossName(config_.loss), " does not fit the dataset's labels"));
  }
  if (want == LabelKind::kMulticlass &&
      data.num_classes() != config_.num_classes) {
    return absl::InvalidArgumentError(
        absl::StrFormat("model has %d classes, dataset has %d",
                        config_.num_classes, data.num_classes()));
  }
  RETURN_IF_ERROR(data.Validate());
  // Dataset::Validate checks label ranges for its kind; re-check what the
  // losses rely on, without echoing values.
  const Eigen::VectorXd& y = data.labels();
  for (int64_t i = 0; i < y.size(); ++i) {
    const double v = y[i];
    bool ok = std::isfinite(v);
    if (want == LabelKind::kBinary) ok = ok && (v == 1.0 || v == -1.0);
    if (want == LabelKind::kMulticlass) {
      ok = ok && v >= 0 && v < config_.num_classes && v == std::floor(v);
    }
    if (!ok) {
      return absl::InvalidArgumentError(absl::StrCat(
          "a label is out of range for loss ", LossName(config_.loss)));
    }
  }
  return absl::OkStatus();
}

double Objective::EffectiveLabel(const Dataset& data, int64_t i) const {
  const double y = data.label(i);
  if (config_.loss == LossKind::kLeastSquares && config_.label_bound > 0) {
    return std::clamp(y, -config_.label_bound, config_.label_bound);
  }
  return y;
}

double Objective::ExampleCoefficients(
    const Dataset& data, int64_t i, const Eigen::Ref<const Eigen::VectorXd>& w,
    Eigen::Ref<Eigen::VectorXd> c) const {
  const double y = EffectiveLabel(data, i);
  const double h = config_.huber_width;
  switch (config_.loss) {
    case LossKind::kLogistic:
      return ScalarCoefficient<LossKind::kLogistic, true>(h, data.RowDot(i, w),
                                                          y, &c[0]);
    case LossKind::kHinge:
      return ScalarCoefficient<LossKind::kHinge, true>(h, data.RowDot(i, w), y,
                                                       &c[0]);
    case LossKind::kHuberizedHinge:
      return ScalarCoefficient<LossKind::kHuberizedHinge, true>(
          h, data.RowDot(i, w), y, &c[0]);
    case LossKind::kLeastSquares:
      return ScalarCoefficient<LossKind::kLeastSquares, true>(
          h, data.RowDot(i, w), y, &c[0]);
    case LossKind::kSoftmax: {
      // loss = logsumexp(s) - s_y; c = softmax(s) - e_y.
      const int k = outputs_;
      for (int j = 0; j < k; ++j) {
        c[j] = data.RowDot(i, w.segment(j * dimension_, dimension_));
      }
      const int label = static_cast<int>(y);
      const double score_y = c[label];
      const double mx = c.maxCoeff();
      if (!std::isfinite(mx)) {
        // Scores are +-Inf only when <w_j, x> overflows (RowDot never gives
        // NaN). Take the limit: softmax is uniform over the maximal scores.
        int ties = 0;
        for (int j = 0; j < k; ++j) ties += (c[j] == mx);
        const bool label_is_max = score_y == mx;
        for (int j = 0; j < k; ++j) c[j] = c[j] == mx ? 1.0 / ties : 0.0;
        c[label] -= 1.0;
        return label_is_max ? std::log(static_cast<double>(ties))
                            : std::numeric_limits<double>::infinity();
      }
      double z = 0.0;
      for (int j = 0; j < k; ++j) {
        c[j] = std::exp(c[j] - mx);
        z += c[j];
      }
      c /= z;
      c[label] -= 1.0;
      return mx + std::log(z) - score_y;
    }
  }
  return std::numeric_limits<double>::quiet_NaN();
}

double Objective::ExampleLoss(
    const Dataset& data, int64_t i,
    const Eigen::Ref<const Eigen::VectorXd>& w) const {
  Eigen::VectorXd c(outputs_);
  return ExampleCoefficients(data, i, w, c);
}

void Objective::AddScaledExampleGradient(
    const Dataset& data, int64_t i, const Eigen::Ref<const Eigen::VectorXd>& c,
    double scale, Eigen::Ref<Eigen::VectorXd> out) const {
  for (int j = 0; j < outputs_; ++j) {
    const double a = scale * c[j];
    if (a != 0.0) {
      data.AddScaledRow(i, a, out.segment(j * dimension_, dimension_));
    }
  }
}

void Objective::AddClippedExampleGradient(
    const Dataset& data, int64_t i, const Eigen::Ref<const Eigen::VectorXd>& w,
    ClipNorm norm, double clip, double row_norm, Eigen::Ref<Eigen::VectorXd> c,
    Eigen::Ref<Eigen::VectorXd> out) const {
  ExampleCoefficients(data, i, w, c);  // finite
  // ||c (outer) x|| = ||c|| ||x|| in both norms. ||c|| is finite: |c_j| <= 1
  // except least squares, where c has one entry.
  const double c_norm = outputs_ == 1           ? std::abs(c[0])
                        : norm == ClipNorm::kL2 ? c.norm()
                                                : c.lpNorm<1>();
  if (c_norm == 0) return;
  // Direct path: the row's norm is far from overflow and underflow, so the
  // coefficients below stay normal numbers and every product is bounded by
  // the clip norm.
  if (row_norm >= kLowNorm && row_norm <= kHighNorm) {
    const double g_norm = c_norm * row_norm;  // may be +Inf: then clipped
    if (g_norm <= clip) {
      AddScaledExampleGradient(data, i, c, 1.0, out);
      return;
    }
    for (int j = 0; j < outputs_; ++j) {
      const double a = clip * (c[j] / c_norm) / row_norm;
      if (a != 0.0) {
        data.AddScaledRow(i, a, out.segment(j * dimension_, dimension_));
      }
    }
    return;
  }
  // Overflow-free path: x = M u, ||x|| = M ||u|| with ||u|| in [1, d].
  const Dataset::RowScaleInfo r = data.RowScale(i);
  if (r.max_abs == 0) return;  // zero row: zero gradient
  const double u_norm = norm == ClipNorm::kL2 ? r.l2 : r.l1;
  const double g_norm = (c_norm * u_norm) * r.max_abs;  // may be +Inf
  if (g_norm <= clip) {
    // Every |c_j x_ik| <= g_norm <= clip: finite.
    AddScaledExampleGradient(data, i, c, 1.0, out);
    return;
  }
  for (int j = 0; j < outputs_; ++j) {
    // clip * (c_j / ||c||) * u / ||u||, with u = x / M formed entry by entry.
    const double a = clip * (c[j] / c_norm) / u_norm;
    if (a != 0.0) {
      data.AddScaledRowOver(i, a, r.max_abs,
                            out.segment(j * dimension_, dimension_));
    }
  }
}

// ---------------------------------------------------------------------------
// Batched kernels.

struct Objective::Kernels {
  // What a row's coefficient c_i becomes before out += a_i * x_i.
  enum class Mode {
    kScaled,  // a_i = scale * c_i
    kClipL2,  // clip_C in the L2 norm (as AddClippedExampleGradient)
    kClipL1,  // clip_C in the L1 norm
  };
  static constexpr int kMaxBlock = 256;
  // Rows per block. Sparse blocks stay in L1 between gather and scatter;
  // contiguous dense blocks are swept column by column, 2 KB per column;
  // scattered dense rows go in small blocks (each row touches d lines).
  static constexpr int kSparseBlock = 64;
  static constexpr int64_t kSparseBlockEntries = 2048;
  static constexpr int kDenseBlock = 256;
  static constexpr int kDenseRowBlock = 4;
  // Sparse rows prefetched ahead (their row pointers twice as far). On a9a
  // with 325 random rows, 2, 4 and 8 did equally well within this VM's noise,
  // 16 worse; none was 2.5x slower. Dense rows need none: the loads of a
  // strided row are independent and already overlap.
  static constexpr int kSparseAhead = 4;

  // ||x_i|| in the clipping norm (computed once per dataset, see
  // Dataset::row_norms_l2).
  static double RowNormFor(const Dataset& data, int64_t i, Mode mode) {
    return mode == Mode::kClipL2 ? data.row_norms_l2()[i]
                                 : data.row_norms_l1()[i];
  }
  // The cached norms for kNorm (1: L2, 2: L1), or null (0: none needed).
  template <int kNorm>
  static const double* CachedNorms(const Dataset& data) {
    if constexpr (kNorm == 1) return data.row_norms_l2().data();
    if constexpr (kNorm == 2) return data.row_norms_l1().data();
    return nullptr;
  }

  // Sparse rows: the CSR arrays.
  struct Csr {
    Csr() = default;
    explicit Csr(const SparseRows& x)
        : outer(x.outerIndexPtr()),
          nnz(x.innerNonZeroPtr()),
          inner(x.innerIndexPtr()),
          value(x.valuePtr()) {}
    int64_t begin(int64_t i) const { return outer[i]; }
    int64_t end(int64_t i) const {
      return nnz == nullptr ? outer[i + 1] : outer[i] + nnz[i];
    }
    const int64_t* outer = nullptr;
    const int64_t* nnz = nullptr;  // null when compressed (always, Dataset)
    const int64_t* inner = nullptr;
    const double* value = nullptr;
  };

  // Must be inlined: GCC 12 finds a function whose only effects are
  // prefetches free of side effects and deletes calls to it before inlining
  // (until this was always_inline, the row prefetches were missing from the
  // binary; `objdump -d` of objective.cc.o shows them now).
  ABSL_ATTRIBUTE_ALWAYS_INLINE static inline void PrefetchSparseRow(
      const Csr& x, int64_t i) {
    constexpr int64_t kLine = 8;      // doubles (or int64s) per cache line
    constexpr int64_t kMaxLines = 8;  // longer rows: the hardware streams
    const int64_t b = x.begin(i);
    const int64_t e = std::min(x.end(i), b + kLine * kMaxLines);
    for (int64_t k = b; k < e; k += kLine) {
      __builtin_prefetch(x.value + k);
      __builtin_prefetch(x.inner + k);
    }
    if (e > b) {
      __builtin_prefetch(x.value + e - 1);
      __builtin_prefetch(x.inner + e - 1);
    }
  }

  // Scores <w, x_i> (bitwise Dataset::RowDot) and norms of a block of rows.
  struct Block {
    int n = 0;
    bool contiguous = false;  // dense, and row[k] == row[0] + k
    int64_t row[kMaxBlock];
    double score[kMaxBlock];
    double norm[kMaxBlock];  // kNorm 1: L2, 2: L1 (RowNormFor), 0: unset
  };

  // Calls consume(block) for consecutive blocks of the rows row_at(pos),
  // pos in [begin, end). Sparse rows: one pass over the CSR entries with the
  // rows kSparseAhead ahead prefetched. Dense rows: a contiguous block is
  // swept column by column (the storage is column-major), which adds the
  // same products in the same order as the row-wise dot (x_i0 w_0 first);
  // other blocks row by row. Scores start from +0, so they equal
  // Dataset::RowDot bit for bit (up to the sign of a zero); norms are read
  // from the dataset's cache.
  template <bool kSparse, int kNorm, typename RowAt, typename Consume>
  static void ForEachBlock(const Dataset& data, const RowAt& row_at,
                           int64_t begin, int64_t end,
                           const Eigen::Ref<const Eigen::VectorXd>& w,
                           Consume&& consume) {
    const double* wp = w.data();
    const int64_t d = data.dimension();
    const double* norms = CachedNorms<kNorm>(data);
    const double* labels = data.labels().data();
    Block blk;
    // Overflow: Dataset::RowDot recomputes the same sum, then rescales.
    auto finish = [&] {
      for (int k = 0; k < blk.n; ++k) {
        if (!std::isfinite(blk.score[k])) {
          blk.score[k] = data.RowDot(blk.row[k], w);
        }
      }
      consume(blk);
    };
    if constexpr (kSparse) {
      const Csr csr(data.sparse());
      int64_t pos = begin;
      while (pos < end) {
        // Up to kSparseBlock rows and about kSparseBlockEntries entries, so
        // the block is still in L1 when it is scattered.
        int n = 0;
        int64_t entries = 0;
        for (; n < kSparseBlock && pos < end && entries < kSparseBlockEntries;
             ++n, ++pos) {
          if (pos + 2 * kSparseAhead < end) {
            __builtin_prefetch(csr.outer + row_at(pos + 2 * kSparseAhead));
          }
          if (pos + kSparseAhead < end) {
            const int64_t ahead = row_at(pos + kSparseAhead);
            PrefetchSparseRow(csr, ahead);
            // The row's label and cached norm (read when the block is
            // consumed) are random accesses too.
            __builtin_prefetch(labels + ahead);
            if constexpr (kNorm != 0) __builtin_prefetch(norms + ahead);
          }
          const int64_t i = row_at(pos);
          double s = 0.0;
          const int64_t b = csr.begin(i);
          const int64_t e = csr.end(i);
          for (int64_t t = b; t < e; ++t) {
            s += csr.value[t] * wp[csr.inner[t]];
          }
          blk.row[n] = i;
          blk.score[n] = s;
          if constexpr (kNorm != 0) blk.norm[n] = norms[i];
          entries += e - b;
        }
        blk.n = n;
        blk.contiguous = false;
        finish();
      }
    } else {
      const Eigen::MatrixXd& dense = data.dense();
      const int64_t ld = dense.outerStride();
      int64_t ids[kDenseBlock];
      for (int64_t b0 = begin; b0 < end; b0 += kDenseBlock) {
        const int n =
            static_cast<int>(std::min<int64_t>(kDenseBlock, end - b0));
        bool contiguous = true;
        for (int k = 0; k < n; ++k) {
          ids[k] = row_at(b0 + k);
          contiguous = contiguous && ids[k] == ids[0] + k;
        }
        if (contiguous) {
          blk.n = n;
          blk.contiguous = true;
          for (int k = 0; k < n; ++k) {
            blk.row[k] = ids[k];
            blk.score[k] = 0.0;
            if constexpr (kNorm != 0) blk.norm[k] = norms[ids[k]];
          }
          for (int64_t j = 0; j < d; ++j) {
            const double* col = &dense(blk.row[0], j);
            const double wj = wp[j];
            for (int k = 0; k < n; ++k) blk.score[k] += col[k] * wj;
          }
          finish();
          continue;
        }
        // Scattered rows: small blocks, row by row, one strided pass each
        // (the same sequential sum as Eigen's dot of a row: the tests check
        // it), so the rows are still cached when they are scattered.
        for (int k0 = 0; k0 < n; k0 += kDenseRowBlock) {
          blk.n = std::min(kDenseRowBlock, n - k0);
          blk.contiguous = false;
          for (int k = 0; k < blk.n; ++k) {
            const int64_t i = ids[k0 + k];
            const double* x = &dense(i, 0);
            double s = 0.0;
            for (int64_t j = 0; j < d; ++j) s += x[j * ld] * wp[j];
            blk.row[k] = i;
            blk.score[k] = s;
            if constexpr (kNorm != 0) blk.norm[k] = norms[i];
          }
          finish();
        }
      }
    }
  }

  // out += a[k] x_rows[k] for k = 0..n-1 in order (sparse rows).
  static void ScatterSparseRows(const Csr& csr, const int64_t* rows,
                                const double* a, int n, double* out) {
    const int64_t* const outer = csr.outer;
    const int64_t* const inner = csr.inner;
    const double* const value = csr.value;
    for (int k = 0; k < n; ++k) {
      const int64_t i = rows[k];
      const double ak = a[k];
      const int64_t e = csr.end(i);
      for (int64_t t = outer[i]; t < e; ++t) out[inner[t]] += ak * value[t];
    }
  }

  // One-score losses: out += a_i x_i for the rows, in order.
  template <LossKind kLoss, bool kSparse, int kNorm, typename RowAt>
  static void GradientRows(const Objective& obj, const Dataset& data,
                           const RowAt& row_at, int64_t begin, int64_t end,
                           const Eigen::Ref<const Eigen::VectorXd>& w,
                           Mode mode, double param,
                           Eigen::Ref<Eigen::VectorXd> out) {
    const double huber_width = obj.config_.huber_width;
    double* op = out.data();
    Csr csr;
    if constexpr (kSparse) csr = Csr(data.sparse());
    const Eigen::MatrixXd& dense = data.dense();
    const int64_t d = data.dimension();
    double coef[kMaxBlock];
    double a[kMaxBlock];
    bool slow[kMaxBlock];
    ForEachBlock<kSparse, kNorm>(
        data, row_at, begin, end, w, [&](const Block& blk) {
          const int n = blk.n;
          bool any_slow = false;
          for (int k = 0; k < n; ++k) {
            ScalarCoefficient<kLoss, false>(
                huber_width, blk.score[k], obj.EffectiveLabel(data, blk.row[k]),
                &coef[k]);
          }
          if (mode == Mode::kScaled) {
            for (int k = 0; k < n; ++k) a[k] = param * coef[k];
          } else {
            // As AddClippedExampleGradient with one output, without
            // branches on values (clip_select.h). Rows with a norm out of
            // range (empty, huge, tiny) take the slow path below.
            any_slow =
                internal::ClipCoefficients(coef, blk.norm, n, param, a, slow);
          }
          if constexpr (!kSparse) {
            if (blk.contiguous && !any_slow) {
              // Column sweep: out_j += a_k x_kj for k in order, as row by row.
              for (int64_t j = 0; j < d; ++j) {
                const double* col = &dense(blk.row[0], j);
                double acc = op[j];
                for (int k = 0; k < n; ++k) acc += a[k] * col[k];
                op[j] = acc;
              }
              return;
            }
          }
          if constexpr (kSparse) {
            if (!any_slow) {
              // The common case, in a loop without the slow path's call
              // (with it, GCC kept the CSR pointers on the stack and
              // reloaded them for every nonzero).
              ScatterSparseRows(csr, blk.row, a, n, op);
              return;
            }
          }
          for (int k = 0; k < n; ++k) {
            const int64_t i = blk.row[k];
            if (any_slow && slow[k]) {  // slow[] is set only when clipping
              double c_buf[1];
              Eigen::Map<Eigen::VectorXd> c(c_buf, 1);
              obj.AddClippedExampleGradient(
                  data, i, w,
                  mode == Mode::kClipL2 ? ClipNorm::kL2 : ClipNorm::kL1, param,
                  blk.norm[k], c, out);
              continue;
            }
            const double ak = a[k];
            if constexpr (kSparse) {
              const int64_t e = csr.end(i);
              for (int64_t t = csr.begin(i); t < e; ++t) {
                op[csr.inner[t]] += ak * csr.value[t];
              }
            } else {
              out.noalias() += ak * dense.row(i).transpose();
            }
          }
        });
  }

  // One-score losses: the sum of the rows' losses, in order from 0.
  template <LossKind kLoss, bool kSparse>
  static double LossRows(const Objective& obj, const Dataset& data,
                         int64_t begin, int64_t end,
                         const Eigen::Ref<const Eigen::VectorXd>& w) {
    const double huber_width = obj.config_.huber_width;
    double sum = 0.0;
    ForEachBlock<kSparse, 0>(
        data, [](int64_t pos) { return pos; }, begin, end, w,
        [&](const Block& blk) {
          for (int k = 0; k < blk.n; ++k) {
            double c;
            sum += ScalarCoefficient<kLoss, true>(
                huber_width, blk.score[k], obj.EffectiveLabel(data, blk.row[k]),
                &c);
          }
        });
    return sum;
  }

  // Binary losses: rows with sign(<w, x_i>) == y_i (0 counts as +1).
  template <bool kSparse>
  static int64_t CorrectRows(const Dataset& data, int64_t begin, int64_t end,
                             const Eigen::Ref<const Eigen::VectorXd>& w) {
    int64_t correct = 0;
    ForEachBlock<kSparse, 0>(
        data, [](int64_t pos) { return pos; }, begin, end, w,
        [&](const Block& blk) {
          for (int k = 0; k < blk.n; ++k) {
            const double pred = blk.score[k] >= 0 ? 1.0 : -1.0;
            correct += (pred == data.label(blk.row[k]));
          }
        });
    return correct;
  }

  // Softmax: the per-example calls, row by row (norms on the fly).
  template <typename RowAt>
  static void VectorRows(const Objective& obj, const Dataset& data,
                         const RowAt& row_at, int64_t begin, int64_t end,
                         const Eigen::Ref<const Eigen::VectorXd>& w, Mode mode,
                         double param, Eigen::Ref<Eigen::VectorXd> out) {
    Eigen::VectorXd c(obj.outputs_);
    for (int64_t pos = begin; pos < end; ++pos) {
      const int64_t i = row_at(pos);
      if (mode == Mode::kScaled) {
        obj.ExampleCoefficients(data, i, w, c);
        obj.AddScaledExampleGradient(data, i, c, param, out);
      } else {
        obj.AddClippedExampleGradient(
            data, i, w, mode == Mode::kClipL2 ? ClipNorm::kL2 : ClipNorm::kL1,
            param, RowNormFor(data, i, mode), c, out);
      }
    }
  }

  // f(std::integral_constant<LossKind, L>) for the one-score loss L;
  // false for softmax.
  template <typename F>
  static bool VisitScalarLoss(LossKind loss, F&& f) {
    using K = LossKind;
    switch (loss) {
      case K::kLogistic:
        f(std::integral_constant<K, K::kLogistic>());
        return true;
      case K::kHinge:
        f(std::integral_constant<K, K::kHinge>());
        return true;
      case K::kHuberizedHinge:
        f(std::integral_constant<K, K::kHuberizedHinge>());
        return true;
      case K::kLeastSquares:
        f(std::integral_constant<K, K::kLeastSquares>());
        return true;
      case K::kSoftmax:
        return false;
    }
    return false;
  }

  // f(std::bool_constant<data.is_sparse()>).
  template <typename F>
  static void VisitLayout(const Dataset& data, F&& f) {
    if (data.is_sparse()) {
      f(std::true_type());
    } else {
      f(std::false_type());
    }
  }

  // Accumulates rows row_at(pos), pos in [begin, end), into out.
  template <typename RowAt>
  static void Rows(const Objective& obj, const Dataset& data,
                   const RowAt& row_at, int64_t begin, int64_t end,
                   const Eigen::Ref<const Eigen::VectorXd>& w, Mode mode,
                   double param, Eigen::Ref<Eigen::VectorXd> out) {
    const bool scalar = VisitScalarLoss(obj.config_.loss, [&](auto loss) {
      VisitLayout(data, [&](auto sparse) {
        constexpr LossKind kLoss = decltype(loss)::value;
        constexpr bool kSparse = decltype(sparse)::value;
        switch (mode) {
          case Mode::kScaled:
            return GradientRows<kLoss, kSparse, 0>(obj, data, row_at, begin,
                                                   end, w, mode, param, out);
          case Mode::kClipL2:
            return GradientRows<kLoss, kSparse, 1>(obj, data, row_at, begin,
                                                   end, w, mode, param, out);
          case Mode::kClipL1:
            return GradientRows<kLoss, kSparse, 2>(obj, data, row_at, begin,
                                                   end, w, mode, param, out);
        }
      });
    });
    if (!scalar) VectorRows(obj, data, row_at, begin, end, w, mode, param, out);
  }
};

template <typename RowAt>
void Objective::ClippedSum(const Dataset& data, const RowAt& row_at,
                           int64_t count,
                           const Eigen::Ref<const Eigen::VectorXd>& w,
                           ClipNorm norm, double clip,
                           Eigen::Ref<Eigen::VectorXd> out) const {
  const Kernels::Mode mode =
      norm == ClipNorm::kL2 ? Kernels::Mode::kClipL2 : Kernels::Mode::kClipL1;
  const Chunking chunking = ChunkRows(count, dimension_, parameter_size());
  ChunkedVectorSum(
      chunking, GetParallelOptions().threads,
      [&](int64_t chunk, Eigen::Ref<Eigen::VectorXd> acc) {
        Kernels::Rows(*this, data, row_at, chunking.begin(chunk),
                      chunking.end(chunk), w, mode, clip, acc);
      },
      out);
}

void Objective::AddClippedGradientSum(
    const Dataset& data, absl::Span<const int64_t> rows,
    const Eigen::Ref<const Eigen::VectorXd>& w, ClipNorm norm, double clip,
    Eigen::Ref<Eigen::VectorXd> out) const {
  const auto row_at = [rows](int64_t pos) { return rows[pos]; };
  ClippedSum(data, row_at, static_cast<int64_t>(rows.size()), w, norm, clip,
             out);
}

void Objective::AddClippedGradientSum(
    const Dataset& data, const Eigen::Ref<const Eigen::VectorXd>& w,
    ClipNorm norm, double clip, Eigen::Ref<Eigen::VectorXd> out) const {
  const auto row_at = [](int64_t pos) { return pos; };
  ClippedSum(data, row_at, data.rows(), w, norm, clip, out);
}

void Objective::AddGradientSum(const Dataset& data,
                               const Eigen::Ref<const Eigen::VectorXd>& w,
                               double scale,
                               Eigen::Ref<Eigen::VectorXd> out) const {
  const auto row_at = [](int64_t pos) { return pos; };
  const Chunking chunking =
      ChunkRows(data.rows(), dimension_, parameter_size());
  ChunkedVectorSum(
      chunking, GetParallelOptions().threads,
      [&](int64_t chunk, Eigen::Ref<Eigen::VectorXd> acc) {
        Kernels::Rows(*this, data, row_at, chunking.begin(chunk),
                      chunking.end(chunk), w, Kernels::Mode::kScaled, scale,
                      acc);
      },
      out);
}

Eigen::VectorXd Objective::ExampleGradient(
    const Dataset& data, int64_t i,
    const Eigen::Ref<const Eigen::VectorXd>& w) const {
  Eigen::VectorXd c(outputs_);
  ExampleCoefficients(data, i, w, c);
  Eigen::VectorXd g = Eigen::VectorXd::Zero(parameter_size());
  AddScaledExampleGradient(data, i, c, 1.0, g);
  return g;
}

double Objective::Regularizer(
    const Eigen::Ref<const Eigen::VectorXd>& w) const {
  return 0.5 * config_.l2 * w.squaredNorm() + config_.l1 * w.lpNorm<1>();
}

void Objective::AddSmoothRegularizerGradient(
    const Eigen::Ref<const Eigen::VectorXd>& w,
    Eigen::Ref<Eigen::VectorXd> out) const {
  if (config_.l2 != 0.0) out.noalias() += config_.l2 * w;
}

double Objective::Loss(const Dataset& data,
                       const Eigen::Ref<const Eigen::VectorXd>& w) const {
  const Chunking chunking =
      ChunkRows(data.rows(), dimension_, parameter_size());
  const double sum = ChunkedScalarSum(
      chunking, GetParallelOptions().threads, [&](int64_t chunk) {
        const int64_t begin = chunking.begin(chunk);
        const int64_t end = chunking.end(chunk);
        double s = 0.0;
        const bool scalar =
            Kernels::VisitScalarLoss(config_.loss, [&](auto loss) {
              Kernels::VisitLayout(data, [&](auto sparse) {
                s = Kernels::LossRows<decltype(loss)::value,
                                      decltype(sparse)::value>(*this, data,
                                                               begin, end, w);
              });
            });
        if (!scalar) {
          Eigen::VectorXd c(outputs_);
          for (int64_t i = begin; i < end; ++i) {
            s += ExampleCoefficients(data, i, w, c);
          }
        }
        return s;
      });
  return sum / static_cast<double>(data.rows()) + Regularizer(w);
}

Eigen::VectorXd Objective::SmoothGradient(
    const Dataset& data, const Eigen::Ref<const Eigen::VectorXd>& w) const {
  Eigen::VectorXd g = Eigen::VectorXd::Zero(parameter_size());
  AddGradientSum(data, w, 1.0 / static_cast<double>(data.rows()), g);
  AddSmoothRegularizerGradient(w, g);
  return g;
}

double Objective::Accuracy(const Dataset& data,
                           const Eigen::Ref<const Eigen::VectorXd>& w) const {
  if (config_.loss == LossKind::kLeastSquares || data.rows() == 0) {
    return std::numeric_limits<double>::quiet_NaN();
  }
  const Chunking chunking =
      ChunkRows(data.rows(), dimension_, parameter_size());
  // Counts below 2^53: exact in any order.
  const double correct = ChunkedScalarSum(
      chunking, GetParallelOptions().threads, [&](int64_t chunk) {
        int64_t n = 0;
        if (config_.loss != LossKind::kSoftmax) {
          Kernels::VisitLayout(data, [&](auto sparse) {
            n = Kernels::CorrectRows<decltype(sparse)::value>(
                data, chunking.begin(chunk), chunking.end(chunk), w);
          });
          return static_cast<double>(n);
        }
        for (int64_t i = chunking.begin(chunk); i < chunking.end(chunk); ++i) {
          int best = 0;
          double best_score = -std::numeric_limits<double>::infinity();
          for (int j = 0; j < outputs_; ++j) {
            const double s =
                data.RowDot(i, w.segment(j * dimension_, dimension_));
            if (s > best_score) {
              best_score = s;
              best = j;
            }
          }
          n += (best == static_cast<int>(data.label(i)));
        }
        return static_cast<double>(n);
      });
  return correct / static_cast<double>(data.rows());
}

}  // namespace dpopt::optim
