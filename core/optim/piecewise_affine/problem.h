// Piecewise-affine (Han, Topcu & Pappas 2014;
// docs/algorithms/piecewise_affine.md):
// the max-affine problem
//     minimise f(x; b) = max_i (a_i^T x + b_i)   subject to x in P,
// its public description, and the deterministic helpers every mechanism
// shares (evaluation, projection onto P).
//
// Data layout (a "max-affine" dataset): row i of the stored dataset holds
// the PUBLIC slopes a_i (the features, m rows x d columns, dense) and the
// PRIVATE offset b_i (the real label). P, b_max and everything derived from
// them and from the slopes are public and stored with the dataset as
// ProblemInfo (JSON). The neighbouring relation is the paper's l-infinity
// relation (eq. (4)): every b_i may move by up to b_max at once
// (privacy::Relation::kLinfOffsets), never mixed with add/remove or
// replace-one.
#ifndef DPOPT_CORE_OPTIM_PIECEWISE_AFFINE_PROBLEM_H_
#define DPOPT_CORE_OPTIM_PIECEWISE_AFFINE_PROBLEM_H_

#include <cstdint>
#include <string>
#include <vector>

#include "Eigen/Dense"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/data/dataset.h"

namespace dpopt::optim::piecewise_affine {

// Limits checked at import (the slopes and P are public, so refusing them
// reveals nothing): they keep every LP well scaled and every computation
// on private offsets finite.
inline constexpr int64_t kMaxPieces = 100000;   // m (can be 2^d: Example 6)
inline constexpr int64_t kMaxDimension = 1000;  // d
inline constexpr int64_t kMaxConstraintRows = 10000;
inline constexpr double kMaxCoefficient = 1e9;  // |a_ij|, |l_j|, |H|, |h|
inline constexpr double kMinBMax = 1e-100;
inline constexpr double kMaxBMax = 1e100;

// The representable range of the private mechanisms' integer scores and
// offsets (scores.h: +-2^50 units of g >= 2^-21 b_max; the offset noise's
// clamp at 2^50 of its grid >= 2^-22 b_max). Offsets must satisfy
// |b_i| <= kMaxOffsetRatio b_max, checked at import (CheckOffsets: the
// curator's own data, told only to the curator), and the public slopes and
// P must satisfy G X <= kMaxScoreRangeRatio b_max with X = max_{x in P}
// ||x||_2, checked before charging (CheckScoreRange). Then every score
// |a_i^T x + b_i| / g stays below 2^49 and no clamp is ever reached: the
// mechanisms never optimise a silently clamped problem.
inline constexpr double kMaxOffsetRatio = 0x1.0p27;
inline constexpr double kMaxScoreRangeRatio = 0x1.0p27;

// P = {x : lower <= x <= upper, H x <= h}: a box (required, so P is
// bounded; the paper's Remark 20 claims more than holds for unbounded P)
// intersected with optional half-spaces.
struct Polytope {
  std::vector<double> lower;     // size d
  std::vector<double> upper;     // size d
  int64_t rows = 0;              // number of half-spaces
  std::vector<double> h_matrix;  // rows x d, row-major
  std::vector<double> h_vector;  // rows

  int64_t dimension() const { return static_cast<int64_t>(lower.size()); }
  bool is_box() const { return rows == 0; }
  // INVALID_ARGUMENT naming the offending field: sizes, finiteness,
  // lower < upper, |coefficients| <= kMaxCoefficient, rows <= limit.
  absl::Status Validate(int64_t dimension) const;
  // Hx <= h + tol and lower - tol <= x <= upper + tol.
  bool Contains(const Eigen::VectorXd& x, double tol) const;
};

// What the curator declares with the data.
struct ProblemDeclaration {
  double b_max = 0;  // public adjacency radius (the paper's eq. (4)), > 0
  Polytope polytope;
};

// Public description stored with the dataset (JSON) and used by Calibrate.
struct ProblemInfo {
  double b_max = 0;
  Polytope polytope;
  int64_t pieces = 0;     // m
  int64_t dimension = 0;  // d
  // G = max_i ||a_i||_2, the Lipschitz constant of f (public slopes).
  double slope_norm_bound = 0;
  // A box containing P (the declared box, tightened by 2d LPs when P has
  // half-spaces), its diameter R = ||upper - lower||_2 (an
  // upper bound on diam(P)), and an interior point (the box centre, or the
  // Chebyshev centre of P) with the radius of a ball around it inside P.
  std::vector<double> bbox_lower;
  std::vector<double> bbox_upper;
  double diameter = 0;
  std::vector<double> center;
  double chebyshev_radius = 0;

  std::string ToJson() const;
  static absl::StatusOr<ProblemInfo> FromJson(const std::string& json);
  // Checks the structure again (sizes, finiteness, R > 0). DATA_LOSS-free:
  // INVALID_ARGUMENT on a malformed description.
  absl::Status Validate() const;

  Eigen::VectorXd Center() const;
};

// Builds the public description at import: validates the declaration and
// the slopes (row-major m x d, finite, |a_ij| <= kMaxCoefficient), checks
// that P has a non-empty interior (M_E needs a density on P) and computes G,
// the bounding box, R and the centre (LPs through lp.h when P has half-spaces).
// Looks only at slopes, never at offsets. INVALID_ARGUMENT on bad input.
absl::StatusOr<ProblemInfo> DescribeProblem(const ProblemDeclaration& decl,
                                            const double* slopes, int64_t m,
                                            int64_t d);

// The slopes and offsets of a loaded max-affine dataset, checked against
// the description: dense, m x d, every offset finite with |b_i| <=
// kMaxOffsetRatio b_max (true of every imported dataset). INVALID_ARGUMENT
// otherwise.
absl::Status CheckData(const Dataset& data, const ProblemInfo& info);

// Import-time check of the offsets (m values): finite, |b_i| <=
// kMaxOffsetRatio b_max. INVALID_ARGUMENT naming the first bad row
// otherwise (the curator's import only).
absl::Status CheckOffsets(const double* offsets, int64_t m, double b_max);

// max_{x in P} ||x||_2 over P's bounding box (public).
double MaxPointNorm(const ProblemInfo& info);

// Public: G X <= kMaxScoreRangeRatio b_max. INVALID_ARGUMENT otherwise.
absl::Status CheckScoreRange(const ProblemInfo& info);

// f(x; b) = max_i (a_i^T x + b_i), with overflow-safe dot products (never
// NaN on finite input; may be +-Inf). Harness / public datasets only: the
// service never releases f on private offsets.
double Evaluate(const Dataset& data, const Eigen::VectorXd& b,
                const Eigen::VectorXd& x);

// Euclidean projection onto P (post-processing, data-free).
// Boxes: clipping. Half-spaces: Dykstra's alternating projections (at most
// 10000 sweeps, stopping at 1e-12 changes), then, if a constraint is still
// violated, the point is pulled towards the interior centre until it is
// feasible, so the result is always in P (up to round-off).
Eigen::VectorXd ProjectOntoPolytope(const ProblemInfo& info,
                                    const Eigen::VectorXd& x);

}  // namespace dpopt::optim::piecewise_affine

#endif  // DPOPT_CORE_OPTIM_PIECEWISE_AFFINE_PROBLEM_H_
