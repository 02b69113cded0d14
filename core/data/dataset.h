// In-memory dataset: rows of features (dense or sparse) plus one label each.
// This is the only representation of private rows inside the engine; it never
// crosses the RPC boundary.
#ifndef DPOPT_CORE_DATA_DATASET_H_
#define DPOPT_CORE_DATA_DATASET_H_

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "Eigen/Dense"
#include "Eigen/SparseCore"
#include "absl/status/status.h"

namespace dpopt {

enum class LabelKind {
  kBinary = 0,      // labels in {-1, +1} (0/1 inputs are mapped to -1/+1)
  kMulticlass = 1,  // labels in {0, ..., num_classes - 1}
  kReal = 2,        // real-valued targets (least squares)
};

using SparseRows = Eigen::SparseMatrix<double, Eigen::RowMajor, int64_t>;
// Dense rows, stored row by row: x_i is the d contiguous values at
// data() + i * d. Both ways the kernels read a dataset are then contiguous:
// a sampled row (DP-SGD) is one run of 8d bytes instead of d values one
// column apart, and a full pass (DP-GD, evaluation) is one forward stream.
using DenseRows =
    Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
// A column-major view of DenseRows (no copy): (i, j) is x_ij. Its columns
// are strided; code that works column by column should copy it into an
// Eigen::MatrixXd (binding it to `const Eigen::MatrixXd&` does).
using DenseView = Eigen::Map<const Eigen::MatrixXd, Eigen::Unaligned,
                             Eigen::Stride<Eigen::Dynamic, Eigen::Dynamic>>;

class Dataset {
 public:
  Dataset() = default;
  // Copies x into row-major storage (the copy and x coexist until it
  // returns); DenseRowMajor takes the rows without a copy.
  static Dataset Dense(const Eigen::MatrixXd& x, Eigen::VectorXd y,
                       LabelKind kind, int num_classes = 2);
  static Dataset DenseRowMajor(DenseRows x, Eigen::VectorXd y, LabelKind kind,
                               int num_classes = 2);
  static Dataset Sparse(SparseRows x, Eigen::VectorXd y, LabelKind kind,
                        int num_classes = 2);

  int64_t rows() const { return labels_.size(); }
  int64_t dimension() const { return dimension_; }
  bool is_sparse() const { return sparse_; }
  LabelKind label_kind() const { return label_kind_; }
  int num_classes() const { return num_classes_; }
  const Eigen::VectorXd& labels() const { return labels_; }
  double label(int64_t i) const { return labels_[i]; }
  // The dense rows as stored (row-major); what the kernels read.
  const DenseRows& dense_rows() const { return dense_; }
  // x_i: dimension() contiguous values. REQUIRES: !is_sparse().
  const double* dense_row(int64_t i) const {
    return dense_.data() + i * dimension_;
  }
  // The same values as a column-major matrix view, without a copy.
  DenseView dense() const {
    return DenseView(dense_.data(), dense_.rows(), dense_.cols(),
                     Eigen::Stride<Eigen::Dynamic, Eigen::Dynamic>(
                         1, std::max<Eigen::Index>(dense_.cols(), 1)));
  }
  const SparseRows& sparse() const { return sparse_rows_; }

  // <x_i, w>. REQUIRES: w.size() == dimension(), w finite.
  // Total on finite rows: never NaN. When the direct sum overflows (rows with
  // entries near 1e308), it is recomputed on x_i / max|x_i| and w / max|w|
  // and rescaled, so the result is the correctly signed value, or +-Inf if
  // its magnitude exceeds the double range.
  double RowDot(int64_t i, const Eigen::Ref<const Eigen::VectorXd>& w) const;
  // out += scale * x_i. REQUIRES: out.size() == dimension().
  void AddScaledRow(int64_t i, double scale,
                    Eigen::Ref<Eigen::VectorXd> out) const;
  // out += scale * (x_i / divisor), dividing entry by entry (no overflow or
  // loss of precision for rows near the ends of the double range).
  // REQUIRES: divisor > 0, out.size() == dimension().
  void AddScaledRowOver(int64_t i, double scale, double divisor,
                        Eigen::Ref<Eigen::VectorXd> out) const;
  // ||x_i||_2, computed directly: may overflow to Inf or underflow to 0 for
  // rows near the ends of the double range (see RowScale for those).
  double RowNorm(int64_t i) const;
  // ||x_i||_2 (bitwise RowNorm(i)) and ||x_i||_1 (the sum of |x_ij| in
  // storage order, from +0) of every row, computed once when the dataset is
  // built (O(entries), whatever the values): per-example clipping reads them
  // instead of recomputing them each step.
  const Eigen::VectorXd& row_norms_l2() const { return row_norms_l2_; }
  const Eigen::VectorXd& row_norms_l1() const { return row_norms_l1_; }

  // Overflow-free description of a row: x_i = max_abs * u with
  // ||u||_inf = 1 (or x_i = 0 and max_abs = 0); l2 = ||u||_2 in [1, sqrt(d)],
  // l1 = ||u||_1 in [1, d]. Always finite for finite rows.
  struct RowScaleInfo {
    double max_abs = 0;
    double l2 = 0;
    double l1 = 0;
  };
  RowScaleInfo RowScale(int64_t i) const;

  // Checks labels against the label kind and all values for NaN/Inf.
  absl::Status Validate() const;

 private:
  int64_t dimension_ = 0;
  bool sparse_ = false;
  LabelKind label_kind_ = LabelKind::kBinary;
  int num_classes_ = 2;
  DenseRows dense_;
  SparseRows sparse_rows_;
  Eigen::VectorXd labels_;
  Eigen::VectorXd row_norms_l2_;
  Eigen::VectorXd row_norms_l1_;

  void ComputeRowNorms();
};

// The rows `rows` of `data`, in that order, as a new dataset (same kind,
// classes and dimension). REQUIRES: every index in [0, data.rows()).
Dataset SelectRows(const Dataset& data, const std::vector<int64_t>& rows);

}  // namespace dpopt

#endif  // DPOPT_CORE_DATA_DATASET_H_
