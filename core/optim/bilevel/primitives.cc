#include "core/optim/bilevel/primitives.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <vector>

#include "absl/strings/str_cat.h"

namespace dpopt::optim::bilevel {

double SafeNorm(const Eigen::Ref<const Eigen::VectorXd>& v) {
  // Fast path: no overflow, no underflow of the squared sum.
  const double s2 = v.squaredNorm();
  if (std::isfinite(s2) && s2 > 1e-290) return std::sqrt(s2);
  double m = 0;
  for (Eigen::Index j = 0; j < v.size(); ++j) {
    const double a = std::abs(v[j]);
    if (!std::isfinite(a)) return std::numeric_limits<double>::infinity();
    m = std::max(m, a);
  }
  if (m == 0) return 0;
  double s = 0;
  for (Eigen::Index j = 0; j < v.size(); ++j) {
    const double r = v[j] / m;  // in [-1, 1]
    s += r * r;                 // <= size, no overflow
  }
  return m * std::sqrt(s);  // may round to +inf only if the norm is > DBL_MAX
}

void SafeClip(double c, Eigen::Ref<Eigen::VectorXd> v) {
  const double norm = SafeNorm(v);
  if (!std::isfinite(norm)) {
    // Non-finite coordinate, or a norm beyond the double range: a bounded
    // (zero) replacement that depends on this record only.
    bool finite = true;
    for (Eigen::Index j = 0; j < v.size(); ++j) {
      finite = finite && std::isfinite(v[j]);
    }
    if (!finite) {
      v.setZero();
      return;
    }
    // All finite but the norm overflows: scale by the max first.
    const double m = v.cwiseAbs().maxCoeff();
    v /= m;  // entries in [-1, 1]
    const double r = v.norm();
    v *= c / r;
    return;
  }
  if (norm > c) v *= c / norm;
}

void ProjectOntoBall(const Eigen::Ref<const Eigen::VectorXd>& center,
                     double radius, Eigen::Ref<Eigen::VectorXd> z) {
  Eigen::VectorXd d = z - center;
  const double norm = SafeNorm(d);
  if (norm > radius) {
    if (!std::isfinite(norm)) {
      SafeClip(radius, d);
    } else {
      d *= radius / norm;
    }
    z = center + d;
  }
}

void ProjectOntoSimplex(double total, Eigen::Ref<Eigen::VectorXd> z) {
  const Eigen::Index d = z.size();
  if (d == 0) return;
  std::vector<double> u(z.data(), z.data() + d);
  std::sort(u.begin(), u.end(), std::greater<double>());
  double cumulative = 0;
  double theta = 0;
  for (Eigen::Index j = 0; j < d; ++j) {
    cumulative += u[j];
    const double t = (cumulative - total) / static_cast<double>(j + 1);
    if (u[j] - t > 0) theta = t;
  }
  for (Eigen::Index j = 0; j < d; ++j) z[j] = std::max(z[j] - theta, 0.0);
}

absl::Status ConstraintSet::Validate(int64_t dimension) const {
  auto finite = [](double v) { return std::isfinite(v); };
  switch (kind) {
    case SetKind::kWhole:
      return absl::OkStatus();
    case SetKind::kBox:
      if (!finite(lower) || !finite(upper) || !(lower <= upper)) {
        return absl::InvalidArgumentError(
            "box: lower and upper must be finite with lower <= upper");
      }
      return absl::OkStatus();
    case SetKind::kHalfLine:
      if (!finite(lower)) {
        return absl::InvalidArgumentError("half-line: lower must be finite");
      }
      return absl::OkStatus();
    case SetKind::kBall:
      if (!(finite(radius) && radius > 0)) {
        return absl::InvalidArgumentError("ball: radius must be finite > 0");
      }
      if (center.size() != 0 && center.size() != dimension) {
        return absl::InvalidArgumentError(
            absl::StrCat("ball: center has ", center.size(),
                         " coordinates, expected ", dimension));
      }
      if (center.size() != 0 && !center.allFinite()) {
        return absl::InvalidArgumentError("ball: center must be finite");
      }
      return absl::OkStatus();
    case SetKind::kSimplex:
      if (!(finite(total) && total > 0)) {
        return absl::InvalidArgumentError("simplex: total must be finite > 0");
      }
      return absl::OkStatus();
  }
  return absl::InvalidArgumentError("unknown constraint set");
}

void ConstraintSet::Project(Eigen::Ref<Eigen::VectorXd> z) const {
  switch (kind) {
    case SetKind::kWhole:
      return;
    case SetKind::kBox:
      z = z.cwiseMax(lower).cwiseMin(upper);
      return;
    case SetKind::kHalfLine:
      z = z.cwiseMax(lower);
      return;
    case SetKind::kBall:
      if (center.size() == 0) {
        ProjectOntoBall(Eigen::VectorXd::Zero(z.size()), radius, z);
      } else {
        ProjectOntoBall(center, radius, z);
      }
      return;
    case SetKind::kSimplex:
      ProjectOntoSimplex(total, z);
      return;
  }
}

bool ConstraintSet::Contains(const Eigen::Ref<const Eigen::VectorXd>& z,
                             double tolerance) const {
  switch (kind) {
    case SetKind::kWhole:
      return true;
    case SetKind::kBox:
      return (z.array() >= lower - tolerance).all() &&
             (z.array() <= upper + tolerance).all();
    case SetKind::kHalfLine:
      return (z.array() >= lower - tolerance).all();
    case SetKind::kBall: {
      const double r = center.size() == 0 ? z.norm() : (z - center).norm();
      return r <= radius + tolerance;
    }
    case SetKind::kSimplex:
      return (z.array() >= -tolerance).all() &&
             std::abs(z.sum() - total) <= tolerance;
  }
  return false;
}

}  // namespace dpopt::optim::bilevel
