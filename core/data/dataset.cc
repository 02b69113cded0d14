#include "core/data/dataset.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_format.h"

namespace dpopt {

Dataset Dataset::Dense(Eigen::MatrixXd x, Eigen::VectorXd y, LabelKind kind,
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
  // Column by column (the storage is column-major): each row's sums still
  // add x_i0, x_i1, ... in order from +0, as the row-wise loops would.
  const int64_t n = dense_.rows();
  row_norms_l2_ = Eigen::VectorXd::Zero(n);
  row_norms_l1_ = Eigen::VectorXd::Zero(n);
  for (int64_t j = 0; j < dense_.cols(); ++j) {
    const double* col = dense_.col(j).data();
    for (int64_t i = 0; i < n; ++i) {
      row_norms_l2_[i] += col[i] * col[i];
      row_norms_l1_[i] += std::abs(col[i]);
    }
  }
  row_norms_l2_ = row_norms_l2_.cwiseSqrt();
}

double Dataset::RowDot(int64_t i,
                       const Eigen::Ref<const Eigen::VectorXd>& w) const {
  double s = 0.0;
  if (!sparse_) {
    s = dense_.row(i).dot(w);
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
    out.noalias() += scale * dense_.row(i).transpose();
    return;
  }
  for (SparseRows::InnerIterator it(sparse_rows_, i); it; ++it) {
    out[it.index()] += scale * it.value();
  }
}

double Dataset::RowNorm(int64_t i) const {
  if (!sparse_) return dense_.row(i).norm();
  double s = 0.0;
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

}  // namespace dpopt
