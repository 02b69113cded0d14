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
  // Rows per block. Sparse blocks stay in L1 between gather and scatter.
  // Dense rows are stored row-major (Dataset::DenseRows): a block of
  // kDenseBlock rows (12.8 KB at d = 100) stays in L1 between its scores
  // and its scatter, and the rows of the next block are prefetched.
  static constexpr int kSparseBlock = 64;
  static constexpr int64_t kSparseBlockEntries = 2048;
  static constexpr int kDenseBlock = 16;
  // Rows whose scores are computed together (independent sums, two per
  // SSE2 register).
  static constexpr int kDenseGroup = 8;
  // Sparse rows prefetched ahead (their row pointers twice as far). On a9a
  // with 325 random rows, 2, 4 and 8 did equally well within this VM's noise,
  // 16 worse; none was 2.5x slower.
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
    int64_t row[kMaxBlock];
    const double* x[kMaxBlock];  // dense: Dataset::dense_row(row[k])
    double score[kMaxBlock];
    double norm[kMaxBlock];  // kNorm 1: L2, 2: L1 (RowNormFor), 0: unset
  };

  // Calls consume(block) for consecutive blocks of the rows row_at(pos),
  // pos in [begin, end). Sparse rows: one pass over the CSR entries with the
  // rows kSparseAhead ahead prefetched. Dense rows (row-major): blocks of
  // kDenseBlock rows, the next block's rows prefetched, scores by
  // DenseScores (each the row-wise dot, x_i0 w_0 first). Scores start from
  // +0, so they equal
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
        finish();
      }
    } else {
      const double* base = data.dense_rows().data();
      // Rows of the next block: prefetched while this one is computed
      // (random rows of a large dataset are a cache miss each; in a full
      // pass the hardware streams them anyway).
      auto prefetch_block = [&](int64_t b) {
        const int64_t e = std::min<int64_t>(end, b + kDenseBlock);
        for (int64_t pos = b; pos < e; ++pos) {
          const int64_t i = row_at(pos);
          const double* x = base + i * d;
          for (int64_t j = 0; j < d; j += 8) __builtin_prefetch(x + j);
          if (d > 0) __builtin_prefetch(x + d - 1);
          __builtin_prefetch(labels + i);
          if constexpr (kNorm != 0) __builtin_prefetch(norms + i);
        }
      };
      for (int64_t b0 = begin; b0 < end; b0 += kDenseBlock) {
        const int n =
            static_cast<int>(std::min<int64_t>(kDenseBlock, end - b0));
        if (b0 + kDenseBlock < end) prefetch_block(b0 + kDenseBlock);
        blk.n = n;
        for (int k = 0; k < n; ++k) {
          const int64_t i = row_at(b0 + k);
          blk.row[k] = i;
          blk.x[k] = base + i * d;
          if constexpr (kNorm != 0) blk.norm[k] = norms[i];
        }
        DenseScores(blk.x, n, wp, d, blk.score);
        finish();
      }
    }
  }

  // score[k] = x_k0 w_0 + x_k1 w_1 + ... from +0, in that order, for the
  // rows x[0..n-1] (each d contiguous values): the order of Dataset::RowDot,
  // so equal to it bit for bit (up to the sign of a zero). The sums of
  // kDenseGroup rows run side by side (SSE2: two rows per register), which
  // changes no sum's order.
  static void DenseScores(const double* const* x, int n, const double* w,
                          int64_t d, double* score) {
    int k0 = 0;
#if defined(__SSE2__)
    for (; k0 + kDenseGroup <= n; k0 += kDenseGroup) {
      DenseScoresGroupSse2(x + k0, w, d, score + k0);
    }
#endif
    for (; k0 < n; ++k0) {
      const double* xr = x[k0];
      double s = 0.0;
      for (int64_t j = 0; j < d; ++j) s += xr[j] * w[j];
      score[k0] = s;
    }
  }

#if defined(__SSE2__)
  // kDenseGroup rows: register p holds the sums of rows 2p and 2p + 1.
  // Two columns at a time: each row's pair of values is loaded once and
  // split across the two registers' lanes (unpacklo / unpackhi).
  ABSL_ATTRIBUTE_ALWAYS_INLINE static inline void DenseScoresGroupSse2(
      const double* const* x, const double* w, int64_t d, double* score) {
    static_assert(kDenseGroup == 8);
    const double* x0 = x[0];
    const double* x1 = x[1];
    const double* x2 = x[2];
    const double* x3 = x[3];
    const double* x4 = x[4];
    const double* x5 = x[5];
    const double* x6 = x[6];
    const double* x7 = x[7];
    __m128d s0 = _mm_setzero_pd();
    __m128d s1 = _mm_setzero_pd();
    __m128d s2 = _mm_setzero_pd();
    __m128d s3 = _mm_setzero_pd();
    int64_t j = 0;
    for (; j + 2 <= d; j += 2) {
      const __m128d wa = _mm_set1_pd(w[j]);
      const __m128d wb = _mm_set1_pd(w[j + 1]);
      auto step = [&](__m128d& s, const double* xa, const double* xb) {
        const __m128d va = _mm_loadu_pd(xa + j);
        const __m128d vb = _mm_loadu_pd(xb + j);
        s = _mm_add_pd(s, _mm_mul_pd(_mm_unpacklo_pd(va, vb), wa));
        s = _mm_add_pd(s, _mm_mul_pd(_mm_unpackhi_pd(va, vb), wb));
      };
      step(s0, x0, x1);
      step(s1, x2, x3);
      step(s2, x4, x5);
      step(s3, x6, x7);
    }
    if (j < d) {
      const __m128d wa = _mm_set1_pd(w[j]);
      auto step = [&](__m128d& s, const double* xa, const double* xb) {
        s = _mm_add_pd(s, _mm_mul_pd(_mm_set_pd(xb[j], xa[j]), wa));
      };
      step(s0, x0, x1);
      step(s1, x2, x3);
      step(s2, x4, x5);
      step(s3, x6, x7);
    }
    _mm_storeu_pd(score, s0);
    _mm_storeu_pd(score + 2, s1);
    _mm_storeu_pd(score + 4, s2);
    _mm_storeu_pd(score + 6, s3);
  }
#endif

  // out_j += a[0] x[0]_j + a[1] x[1]_j + ... for each j, rows in order
  // (the order of adding the rows one by one), eight entries of `out` kept
  // in registers across the rows.
  static void ScatterDenseRows(const double* const* x, const double* a, int n,
                               int64_t d, double* out) {
    constexpr int64_t kLanes = 8;
    int64_t j0 = 0;
    for (; j0 + kLanes <= d; j0 += kLanes) {
      double acc[kLanes];
      for (int64_t t = 0; t < kLanes; ++t) acc[t] = out[j0 + t];
      for (int k = 0; k < n; ++k) {
        const double* xr = x[k] + j0;
        const double ak = a[k];
        for (int64_t t = 0; t < kLanes; ++t) acc[t] += ak * xr[t];
      }
      for (int64_t t = 0; t < kLanes; ++t) out[j0 + t] = acc[t];
    }
    for (; j0 < d; ++j0) {
      double acc = out[j0];
      for (int k = 0; k < n; ++k) acc += a[k] * x[k][j0];
      out[j0] = acc;
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
            if (!any_slow) {
              ScatterDenseRows(blk.x, a, n, d, op);
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
              const double* xr = blk.x[k];
              for (int64_t j = 0; j < d; ++j) op[j] += ak * xr[j];
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
