// Objective's batched kernels: the blocked, SSE2-selected loops over rows
// behind the gradient sums (objective_kernels.cc) and the loss and accuracy
// (objective.cc). One row partition and one summation order for any thread
// count. Internal to core/optim: include only from those two files.
#ifndef DPOPT_CORE_OPTIM_OBJECTIVE_KERNELS_H_
#define DPOPT_CORE_OPTIM_OBJECTIVE_KERNELS_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "absl/base/attributes.h"
#include "core/optim/clip_select.h"
#include "core/optim/loss_functions.h"
#include "core/optim/objective.h"
#include "core/optim/parallel.h"

namespace dpopt::optim {

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
            internal::ScalarCoefficient<kLoss, false>(
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
            sum += internal::ScalarCoefficient<kLoss, true>(
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

}  // namespace dpopt::optim

#endif  // DPOPT_CORE_OPTIM_OBJECTIVE_KERNELS_H_
