#include "core/data/dataset.h"

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "absl/strings/str_format.h"

namespace dpopt {

Dataset Dataset::Dense(const Eigen::MatrixXd& x, Eigen::VectorXd y,
                       LabelKind kind, int num_classes) {
  return DenseRowMajor(DenseRows(x), std::move(y), kind, num_classes);
}

Dataset Dataset::DenseRowMajor(DenseRows x, Eigen::VectorXd y, LabelKind kind,
                               int num_classes) {
  Dataset d;
  d.dimension_ = x.cols();
  d.sparse_ = false;
  d.label_kind_ = kind;
  d.num_classes_ = num_classes;
  d.dense_ = std::move(x);
  d.labels_ = std::move(y);
  d.ComputeRowNorms();
  return d;
}

Dataset Dataset::Sparse(SparseRows x, Eigen::VectorXd y, LabelKind kind,
                        int num_classes) {
  Dataset d;
  d.dimension_ = x.cols();
  d.sparse_ = true;
  d.label_kind_ = kind;
  d.num_classes_ = num_classes;
  x.makeCompressed();
  d.sparse_rows_ = std::move(x);
  d.labels_ = std::move(y);
  d.ComputeRowNorms();
  return d;
}

void Dataset::ComputeRowNorms() {
  if (sparse_) {
    const int64_t n = sparse_rows_.rows();
    row_norms_l2_.resize(n);
    row_norms_l1_.resize(n);
    for (int64_t i = 0; i < n; ++i) {
      double q = 0.0;
      double a = 0.0;
      for (SparseRows::InnerIterator it(sparse_rows_, i); it; ++it) {
        q += it.value() * it.value();
        a += std::abs(it.value());
      }
      row_norms_l2_[i] = std::sqrt(q);
      row_norms_l1_[i] = a;
    }
    return;
  }
  // Row by row, each sum adding x_i0, x_i1, ... in order from +0.
  const int64_t n = dense_.rows();
  const int64_t d = dimension_;
  row_norms_l2_.resize(n);
  row_norms_l1_.resize(n);
  for (int64_t i = 0; i < n; ++i) {
    const double* x = dense_row(i);
    double q = 0.0;
    double a = 0.0;
    for (int64_t j = 0; j < d; ++j) {
      q += x[j] * x[j];
      a += std::abs(x[j]);
    }
    row_norms_l2_[i] = std::sqrt(q);
    row_norms_l1_[i] = a;
  }
}

double Dataset::RowDot(int64_t i,
                       const Eigen::Ref<const Eigen::VectorXd>& w) const {
  double s = 0.0;
  if (!sparse_) {
    // x_i0 w_0 + x_i1 w_1 + ... in order (Eigen's dot would vectorize the
    // contiguous row and add in another order).
    const double* x = dense_row(i);
    if (dimension_ > 0) s = x[0] * w[0];
    for (int64_t j = 1; j < dimension_; ++j) s += x[j] * w[j];
  } else {
    for (SparseRows::InnerIterator it(sparse_rows_, i); it; ++it) {
      s += it.value() * w[it.index()];
    }
  }
  if (std::isfinite(s)) return s;  // no partial sum overflowed
  // Overflow (Inf, or NaN from Inf - Inf): t = <x / M, w / W> is a sum of
  // terms in [-1, 1], hence finite; <x, w> = t * W * M.
  const double m = RowScale(i).max_abs;
  const double wmax = w.lpNorm<Eigen::Infinity>();
  if (m == 0 || wmax == 0) return 0.0;
  double t = 0.0;
  if (!sparse_) {
    for (int64_t j = 0; j < dimension_; ++j) {
      t += (dense_(i, j) / m) * (w[j] / wmax);
    }
  } else {
    for (SparseRows::InnerIterator it(sparse_rows_, i); it; ++it) {
      t += (it.value() / m) * (w[it.index()] / wmax);
    }
  }
  if (t == 0) return 0.0;
  return (t * wmax) * m;  // saturates to +-Inf, never NaN
}

void Dataset::AddScaledRowOver(int64_t i, double scale, double divisor,
                               Eigen::Ref<Eigen::VectorXd> out) const {
  if (!sparse_) {
    for (int64_t j = 0; j < dimension_; ++j) {
      out[j] += scale * (dense_(i, j) / divisor);
    }
    return;
  }
  for (SparseRows::InnerIterator it(sparse_rows_, i); it; ++it) {
    out[it.index()] += scale * (it.value() / divisor);
  }
}

Dataset::RowScaleInfo Dataset::RowScale(int64_t i) const {
  RowScaleInfo r;
  auto visit = [&](auto&& f) {
    if (!sparse_) {
      for (int64_t j = 0; j < dimension_; ++j) f(dense_(i, j));
    } else {
      for (SparseRows::InnerIterator it(sparse_rows_, i); it; ++it) {
        f(it.value());
      }
    }
  };
  visit([&](double v) { r.max_abs = std::max(r.max_abs, std::abs(v)); });
  if (r.max_abs == 0) return r;
  double sq = 0.0;
  double abs_sum = 0.0;
  visit([&](double v) {
    const double u = v / r.max_abs;  // in [-1, 1]
    sq += u * u;
    abs_sum += std::abs(u);
  });
  r.l2 = std::sqrt(sq);
  r.l1 = abs_sum;
  return r;
}

void Dataset::AddScaledRow(int64_t i, double scale,
                           Eigen::Ref<Eigen::VectorXd> out) const {
  if (!sparse_) {
    const double* x = dense_row(i);
    for (int64_t j = 0; j < dimension_; ++j) out[j] += scale * x[j];
    return;
  }
  for (SparseRows::InnerIterator it(sparse_rows_, i); it; ++it) {
    out[it.index()] += scale * it.value();
  }
}

double Dataset::RowNorm(int64_t i) const {
  double s = 0.0;
  if (!sparse_) {
    // In order from x_i0^2 (Eigen's norm would vectorize the row).
    const double* x = dense_row(i);
    if (dimension_ > 0) s = x[0] * x[0];
    for (int64_t j = 1; j < dimension_; ++j) s += x[j] * x[j];
    return std::sqrt(s);
  }
  for (SparseRows::InnerIterator it(sparse_rows_, i); it; ++it) {
    s += it.value() * it.value();
  }
  return std::sqrt(s);
}

absl::Status Dataset::Validate() const {
  const int64_t n = rows();
  if (n == 0) return absl::InvalidArgumentError("dataset has no rows");
  if (sparse_ ? sparse_rows_.rows() != n : dense_.rows() != n) {
    return absl::InvalidArgumentError("feature and label row counts differ");
  }
  if (sparse_) {
    const double* v = sparse_rows_.valuePtr();
    for (int64_t k = 0; k < sparse_rows_.nonZeros(); ++k) {
      if (!std::isfinite(v[k])) {
        return absl::InvalidArgumentError("feature value is NaN or Inf");
      }
    }
  } else if (!dense_.allFinite()) {
    return absl::InvalidArgumentError("feature value is NaN or Inf");
  }
  for (int64_t i = 0; i < n; ++i) {
    const double y = labels_[i];
    if (!std::isfinite(y)) {
      return absl::InvalidArgumentError(
          absl::StrFormat("row %d: label is NaN or Inf", i + 1));
    }
    switch (label_kind_) {
      case LabelKind::kBinary:
        if (y != 1.0 && y != -1.0) {
          return absl::InvalidArgumentError(absl::StrFormat(
              "row %d: binary label must be -1 or +1 (0/1 are mapped)", i + 1));
        }
        break;
      case LabelKind::kMulticlass:
        if (y < 0 || y >= num_classes_ || y != std::floor(y)) {
          return absl::InvalidArgumentError(absl::StrFormat(
              "row %d: class label must be an integer in [0, %d)", i + 1,
              num_classes_));
        }
        break;
      case LabelKind::kReal:
        break;
    }
  }
  return absl::OkStatus();
}

Dataset SelectRows(const Dataset& data, const std::vector<int64_t>& rows) {
  const int64_t m = static_cast<int64_t>(rows.size());
  Eigen::VectorXd y(m);
  for (int64_t k = 0; k < m; ++k) y[k] = data.label(rows[k]);
  if (!data.is_sparse()) {
    DenseRows x(m, data.dimension());
    for (int64_t k = 0; k < m; ++k) x.row(k) = data.dense_rows().row(rows[k]);
    return Dataset::DenseRowMajor(std::move(x), std::move(y), data.label_kind(),
                                  data.num_classes());
  }
  std::vector<Eigen::Triplet<double, int64_t>> triplets;
  for (int64_t k = 0; k < m; ++k) {
    for (SparseRows::InnerIterator it(data.sparse(), rows[k]); it; ++it) {
      triplets.emplace_back(k, it.col(), it.value());
    }
  }
  SparseRows x(m, data.dimension());
  x.setFromTriplets(triplets.begin(), triplets.end());
  return Dataset::Sparse(std::move(x), std::move(y), data.label_kind(),
                         data.num_classes());
}

}  // namespace dpopt
