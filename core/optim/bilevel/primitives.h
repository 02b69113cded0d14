// Shared primitives of bilevel family (DP bilevel optimization, Kornowski
// 2024): total per-example clipping and the Euclidean projections the
// algorithms need.
#ifndef DPOPT_CORE_OPTIM_BILEVEL_PRIMITIVES_H_
#define DPOPT_CORE_OPTIM_BILEVEL_PRIMITIVES_H_

#include <algorithm>
#include <cstdint>

#include "Eigen/Dense"
#include "absl/status/status.h"
#include "core/optim/algorithm.h"

namespace dpopt::optim::bilevel {

// ||v||_2 without overflow or underflow (scaled by max |v_j|); +inf if some
// coordinate is not finite.
double SafeNorm(const Eigen::Ref<const Eigen::VectorXd>& v);

// Clip(v, C) := v * min(1, C / ||v||), total on every input:
// a vector with a non-finite coordinate (e.g. a gradient that overflowed on
// an extreme but finite row) becomes 0, so the result always has norm
// <= C (up to one rounding) and is finite. Replacing a record's vector by
// any bounded function of that record keeps the sensitivity bound.
// REQUIRES: C > 0 finite.
void SafeClip(double c, Eigen::Ref<Eigen::VectorXd> v);

// Projection onto the closed ball B(center, radius)
// (c + (z - c) min(1, R / ||z - c||)). REQUIRES: radius >= 0,
// center.size() == z.size().
void ProjectOntoBall(const Eigen::Ref<const Eigen::VectorXd>& center,
                     double radius, Eigen::Ref<Eigen::VectorXd> z);

// Closed convex sets X of the outer variable (the prox step of Algorithm 1).
enum class SetKind {
  kWhole,     // R^d (identity)
  kBox,       // [lower, upper]^d (coordinate clamp)
  kBall,      // B(center, radius) (radial scaling)
  kSimplex,   // {x >= 0, sum x = total} (sort-based projection)
  kHalfLine,  // [lower, inf)^d (coordinate clamp)
};

struct ConstraintSet {
  SetKind kind = SetKind::kWhole;
  double lower = 0;  // kBox, kHalfLine
  double upper = 0;  // kBox
  // kBall: center (empty = origin) and radius > 0.
  Eigen::VectorXd center;
  double radius = 0;
  double total = 1;  // kSimplex: total mass > 0

  // INVALID_ARGUMENT unless the set is a valid non-empty set in R^dimension
  // (finite bounds, lower <= upper, radius > 0, center of the right size,
  // total > 0).
  absl::Status Validate(int64_t dimension) const;
  // z <- Proj_X(z). REQUIRES: Validate(z.size()) is OK and z is finite.
  void Project(Eigen::Ref<Eigen::VectorXd> z) const;
  // Whether z is in X up to `tolerance` (absolute, per constraint).
  bool Contains(const Eigen::Ref<const Eigen::VectorXd>& z,
                double tolerance) const;
};

// Euclidean projection onto {x >= 0, sum x = total} (Held, Wolfe, Crowder
// 1974; the sort-based rule). REQUIRES: total > 0, z finite.
void ProjectOntoSimplex(double total, Eigen::Ref<Eigen::VectorXd> z);

// Public upper bound on the parameters of a model of the dataset (softmax
// has d x k, the others d plus an intercept), for work bounds.
inline int64_t ParameterBound(const PublicDatasetInfo& info) {
  return (info.dimension + 1) * std::max<int64_t>(2, info.num_classes);
}

}  // namespace dpopt::optim::bilevel

#endif  // DPOPT_CORE_OPTIM_BILEVEL_PRIMITIVES_H_
