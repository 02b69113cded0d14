#include "core/data/dataset.h"

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
  return d;
}

double Dataset::RowDot(int64_t i,
                       const Eigen::Ref<const Eigen::VectorXd>& w) const {
  if (!sparse_) return dense_.row(i).dot(w);
  double s = 0.0;
  for (SparseRows::InnerIterator it(sparse_rows_, i); it; ++it) {
    s += it.value() * w[it.index()];
  }
  return s;
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
