// Exact selection on max-affine scores (piecewise-affine family): the
// exponential mechanism of Algorithm 1 (Han, Topcu & Pappas 2014, Sec. 4.4,
// with the paper's sign typo fixed: the subgradient is the MAXIMISING piece,
// so the weight is exp(+eps' s / (2 b_max)), not exp(-...)) and of M_E's
// sampler, on integer scores.
//
// Scores are real numbers s = c + b with c public (a_i^T x for a public
// point x, computed by the overflow-safe Dataset::RowDot) and b a private
// offset. They enter the mechanism as integers in units of a power-of-two
// grid g (about 2^-20 b_max):
//     psi(s) = clamp(round(fl(c + b) / g), -2^50, 2^50).
// Sensitivity in grid units: if every offset moves by at most b_max, psi
// moves by at most b_max / g + 3/2 (rounding to the grid: 1/2 each side;
// floating-point error of the sum below 2^-53 * 2^51 g = g / 4 each side;
// the clamp is 1-Lipschitz and absorbs overflow and +-Inf). We charge with
// sensitivity_units = b_max / g + 2. The maximum over pieces of such scores
// (M_E's f) has the same sensitivity (Lemma 18: max is 1-Lipschitz in the
// sup norm).
#ifndef DPOPT_CORE_OPTIM_PIECEWISE_AFFINE_SCORES_H_
#define DPOPT_CORE_OPTIM_PIECEWISE_AFFINE_SCORES_H_

#include <cstdint>
#include <vector>

#include "Eigen/Dense"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "core/data/dataset.h"
#include "core/noise/discrete_samplers.h"
#include "core/noise/random.h"

namespace dpopt::optim::piecewise_affine {

inline constexpr int64_t kMaxScoreUnits = int64_t{1} << 50;

struct ScoreGrid {
  double grid = 0;               // g = 2^(floor(log2 b_max) - 20)
  double sensitivity_units = 0;  // b_max / g + 2
};

// REQUIRES: b_max finite and > 0 (ProblemInfo::Validate checked it).
ScoreGrid MakeScoreGrid(double b_max);

// psi(c + b) (see the file comment). Total: never fails, for any doubles
// (NaN c counts as -Inf).
int64_t ScoreUnits(double c, double b, const ScoreGrid& grid);

// The exponential mechanism's rate per grid unit for a selection of budget
// `epsilon` (non-monotone scores: exp(epsilon s / (2 Delta)), McSherry &
// Talwar; the PLUS sign, see above), rounded DOWN to a dyadic rational.
// INVALID_ARGUMENT if epsilon is not finite and > 0, or so small that the
// rate underflows 2^-62 per unit.
absl::StatusOr<noise::Dyadic> SelectionRate(double epsilon,
                                            const ScoreGrid& grid);

// Exact softmax: returns i with probability proportional to
// exp(rate * scores[i]), by rejection from uniform proposals (accept with
// exact probability exp(-rate (max - scores[i]))): expected proposals
// <= scores.size(). REQUIRES: |scores[i]| <= 2^60, rate.exponent <= 62.
// Errors: INVALID_ARGUMENT (empty, out of range), the source's error.
absl::StatusOr<int64_t> SampleSoftmax(absl::Span<const int64_t> scores,
                                      noise::Dyadic rate,
                                      noise::RandomSource& rng);

// Algorithm 1 (Han, Topcu & Pappas 2014, Sec. 4.4): scores
// s_i = psi(a_i^T x + b_i) for every piece, then SampleSoftmax. Returns i*;
// the subgradient is a_{i*}.
absl::StatusOr<int64_t> PrivateSubgradientIndex(
    const Dataset& data, const Eigen::VectorXd& b, const Eigen::VectorXd& x,
    const ScoreGrid& grid, noise::Dyadic rate, noise::RandomSource& rng);

// The scores Algorithm 1 uses (for tests and the exact privacy ratio check).
std::vector<int64_t> PieceScores(const Dataset& data, const Eigen::VectorXd& b,
                                 const Eigen::VectorXd& x,
                                 const ScoreGrid& grid);

}  // namespace dpopt::optim::piecewise_affine

#endif  // DPOPT_CORE_OPTIM_PIECEWISE_AFFINE_SCORES_H_
