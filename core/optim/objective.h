// Objective: per-example losses and gradients of linear models, the
// regularizer, and evaluation (loss, accuracy) on a dataset.
//
// Every supported loss is a function of the k = outputs() scores
// s_j = <w_j, x> (k = 1 except softmax, where k = num_classes). Hence the
// per-example gradient has the form
//   grad_w loss(w; x_i, y_i) = c_i (outer) x_i,   c_i in R^k,
// i.e. block j of the gradient is c_ij * x_i, and its L2 norm is
// ||c_i||_2 * ||x_i||_2. The private gradient oracle uses this to clip
// per-example gradients without materializing them (fast on sparse rows).
//
// Objective holds no data; it is immutable and thread-compatible.
#ifndef DPOPT_CORE_OPTIM_OBJECTIVE_H_
#define DPOPT_CORE_OPTIM_OBJECTIVE_H_

#include <cstdint>
#include <memory>

#include "Eigen/Dense"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "core/data/dataset.h"
#include "core/optim/model.h"

namespace dpopt::optim {

class Objective {
 public:
  // Errors: INVALID_ARGUMENT if config.Validate() fails or dimension is not
  // in [1, 10^7].
  static absl::StatusOr<std::unique_ptr<Objective>> Create(
      const ModelConfig& config, int64_t dimension);

  const ModelConfig& config() const { return config_; }
  int64_t dimension() const { return dimension_; }
  // Number of scores k (1, or num_classes for softmax).
  int outputs() const { return outputs_; }
  // d, or num_classes * d for softmax.
  int64_t parameter_size() const { return outputs_ * dimension_; }

  // OK if `data` can be used with this objective: dimension matches, label
  // kind matches the loss, labels are in range, all values finite.
  // INVALID_ARGUMENT otherwise. Messages never contain row values.
  absl::Status CheckDataset(const Dataset& data) const;

  // --- Per-example API (used by the private gradient oracle). -------------
  // REQUIRES for all: 0 <= i < data.rows(), w.size() == parameter_size(),
  // CheckDataset(data) is OK.

  // loss(w; x_i, y_i) (no regularizer).
  double ExampleLoss(const Dataset& data, int64_t i,
                     const Eigen::Ref<const Eigen::VectorXd>& w) const;
  // Writes the gradient coefficients c_i (size outputs()) and returns
  // loss(w; x_i, y_i). For the hinge loss c_i is a subgradient. Total on
  // finite input: c_i is always finite and the loss is never NaN (it is
  // +Inf where the exact value exceeds the double range; scores that
  // overflow are taken at their limit, e.g. softmax of +Inf scores is
  // uniform over them).
  double ExampleCoefficients(const Dataset& data, int64_t i,
                             const Eigen::Ref<const Eigen::VectorXd>& w,
                             Eigen::Ref<Eigen::VectorXd> c) const;
  // out += scale * (c (outer) x_i). REQUIRES: c.size() == outputs(),
  // out.size() == parameter_size().
  void AddScaledExampleGradient(const Dataset& data, int64_t i,
                                const Eigen::Ref<const Eigen::VectorXd>& c,
                                double scale,
                                Eigen::Ref<Eigen::VectorXd> out) const;
  // Per-example clipping, total on finite input (docs/architecture.md,
  // invariant "outcomes depend only on what was charged"): whether a job
  // succeeds must never depend on the rows. Adds
  //   clip_C(grad_i(w)) = grad_i(w) * min(1, C / ||grad_i(w)||)
  // to `out`, in the L2 or L1 norm. For every finite row (entries up to
  // +-1.8e308, subnormals, -0) and finite w the added vector is finite with
  // norm <= C (up to the rounding of a few floating-point operations): rows
  // whose norm overflows or underflows are handled as x_i = M u_i with
  // M = max|x_ij| and ||u_i||_inf = 1 (Dataset::RowScale).
  // `row_norm` is ||x_i|| in the same norm as computed directly (callers
  // cache it; Inf, 0 or extreme values select the overflow-free path).
  // `c` is scratch of size outputs(). REQUIRES: clip finite and > 0.
  enum class ClipNorm { kL2, kL1 };
  void AddClippedExampleGradient(const Dataset& data, int64_t i,
                                 const Eigen::Ref<const Eigen::VectorXd>& w,
                                 ClipNorm norm, double clip, double row_norm,
                                 Eigen::Ref<Eigen::VectorXd> c,
                                 Eigen::Ref<Eigen::VectorXd> out) const;

  // --- Batched kernels (the oracles' hot paths). ---------------------------
  // Both compute the same sums as the per-example calls above, row by row in
  // the listed order, but gather the scores and norms of a block of rows
  // first (sparse rows straight from the CSR arrays, the next rows
  // prefetched; dense rows, stored row-major, in blocks of 16 with the next
  // block prefetched, eight dots side by side), then the coefficients with the
  // loss dispatched once per block (softmax: per example), then scatter. Sparse
  // rows stay sparse and nothing is allocated per row.
  //
  // Timing: the work is proportional to the entries of the listed rows
  // (nonzeros for sparse data) whatever their values: zero coefficients are
  // added, not skipped. The exceptions, as in the per-example calls: a row
  // whose score overflows (recomputed rescaled by Dataset::RowDot), or whose
  // norm is outside [2^-500, 2^400] (the per-example overflow-free path),
  // costs a few more passes over that row; libm's exp/log1p take slightly
  // value-dependent time.
  //
  // Sums over more rows than one chunk (parallel.h: ChunkRows, about 2^16
  // dense entries) are split into fixed chunks of consecutive positions and
  // run on up to GetParallelOptions().threads threads: chunk 0 is added to
  // `out` row by row, every other chunk c into its own zeroed partial P_c,
  // then out += P_1, out += P_2, ... in chunk order. The result is bitwise
  // independent of the thread count. With one chunk it is bitwise the loop
  // of per-example calls, except that -0 entries of `out` may become +0
  // (rows with a zero coefficient add +-0 instead of being skipped).

  // out += sum over k of clip_C(grad_{rows[k]}(w)) as AddClippedExampleGradient
  // computes it, with ||x_i|| = Dataset::row_norms_l2()[i] or
  // row_norms_l1()[i] (computed once per dataset; the L2 one is bitwise
  // Dataset::RowNorm, the L1 one the sum of |x_ij| in storage order, which
  // for dense rows is Eigen's lpNorm<1>: tested).
  // REQUIRES: as AddClippedExampleGradient; 0 <= rows[k] < data.rows()
  // (rows may repeat, any order).
  void AddClippedGradientSum(const Dataset& data,
                             absl::Span<const int64_t> rows,
                             const Eigen::Ref<const Eigen::VectorXd>& w,
                             ClipNorm norm, double clip,
                             Eigen::Ref<Eigen::VectorXd> out) const;
  // The same sum over every row of `data` in order (rows = 0, 1, ..., n-1),
  // bitwise: the full batch of DP-GD, without an index list to follow.
  void AddClippedGradientSum(const Dataset& data,
                             const Eigen::Ref<const Eigen::VectorXd>& w,
                             ClipNorm norm, double clip,
                             Eigen::Ref<Eigen::VectorXd> out) const;
  // out += scale * sum_i grad_i(w) over every row of `data` (unclipped;
  // each row as AddScaledExampleGradient(c_i, scale)).
  void AddGradientSum(const Dataset& data,
                      const Eigen::Ref<const Eigen::VectorXd>& w, double scale,
                      Eigen::Ref<Eigen::VectorXd> out) const;

  // The full per-example gradient (convenience; allocates).
  Eigen::VectorXd ExampleGradient(
      const Dataset& data, int64_t i,
      const Eigen::Ref<const Eigen::VectorXd>& w) const;

  // --- Regularizer (data-independent). ------------------------------------
  // (l2/2) ||w||^2 + l1 ||w||_1.
  double Regularizer(const Eigen::Ref<const Eigen::VectorXd>& w) const;
  // out += l2 * w (the smooth part; L1 is handled by proximal steps).
  void AddSmoothRegularizerGradient(const Eigen::Ref<const Eigen::VectorXd>& w,
                                    Eigen::Ref<Eigen::VectorXd> out) const;

  // --- Whole-dataset, NON-PRIVATE evaluation. ------------------------------
  // Never publish these on private data: for evaluation on public datasets,
  // tests and non-private baselines only. Chunked and multi-threaded like the
  // batched kernels (same partition, sums added in chunk order): bitwise
  // independent of the thread count; with one chunk (ChunkRows: e.g. up to
  // 533 rows at d = 123) bitwise the plain sequential sums.

  // (1/rows) sum_i loss_i + Regularizer(w).
  double Loss(const Dataset& data,
              const Eigen::Ref<const Eigen::VectorXd>& w) const;
  // (1/rows) sum_i grad loss_i + l2 * w (subgradient for hinge; excludes L1).
  Eigen::VectorXd SmoothGradient(
      const Dataset& data, const Eigen::Ref<const Eigen::VectorXd>& w) const;
  // Fraction of rows classified correctly: binary losses predict
  // sign(<w, x>) (0 counts as +1), softmax predicts argmax_j <w_j, x> (lowest
  // index on ties). Least squares is not a classifier: returns NaN.
  double Accuracy(const Dataset& data,
                  const Eigen::Ref<const Eigen::VectorXd>& w) const;

 private:
  Objective(const ModelConfig& config, int64_t dimension);
  struct Kernels;  // objective.cc
  friend struct Kernels;
  // Label used by the loss (clipped for least squares).
  double EffectiveLabel(const Dataset& data, int64_t i) const;
  // The clipped sums over rows row_at(0), ..., row_at(count - 1).
  template <typename RowAt>
  void ClippedSum(const Dataset& data, const RowAt& row_at, int64_t count,
                  const Eigen::Ref<const Eigen::VectorXd>& w, ClipNorm norm,
                  double clip, Eigen::Ref<Eigen::VectorXd> out) const;

  ModelConfig config_;
  int64_t dimension_;
  int outputs_;
};

}  // namespace dpopt::optim

#endif  // DPOPT_CORE_OPTIM_OBJECTIVE_H_
