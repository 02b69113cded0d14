#include "core/optim/piecewise_affine/scores.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"

namespace dpopt::optim::piecewise_affine {

ScoreGrid MakeScoreGrid(double b_max) {
  int e = 0;
  std::frexp(b_max, &e);  // b_max in [2^(e-1), 2^e)
  ScoreGrid g;
  g.grid = std::ldexp(1.0, e - 1 - 20);
  g.sensitivity_units = b_max / g.grid + 2;  // exact scaling, then + 2
  return g;
}

int64_t ScoreUnits(double c, double b, const ScoreGrid& grid) {
  if (std::isnan(c)) c = -std::numeric_limits<double>::infinity();
  const double s = (c + b) / grid.grid;  // +-Inf when it overflows
  const double limit = static_cast<double>(kMaxScoreUnits);
  if (!(s < limit)) return s > 0 ? kMaxScoreUnits : -kMaxScoreUnits;
  if (!(s > -limit)) return -kMaxScoreUnits;
  return static_cast<int64_t>(std::nearbyint(s));
}

absl::StatusOr<noise::Dyadic> SelectionRate(double epsilon,
                                            const ScoreGrid& grid) {
  if (!std::isfinite(epsilon) || !(epsilon > 0)) {
    return absl::InvalidArgumentError("selection epsilon must be finite > 0");
  }
  // exp(epsilon * s / (2 Delta)) per unit of s (s in grid units).
  const double rate = epsilon / (2 * grid.sensitivity_units) * (1 - 0x1.0p-40);
  if (!std::isfinite(rate) || !(rate > 0)) {
    return absl::InvalidArgumentError("selection rate out of range");
  }
  noise::Dyadic d = noise::RoundDownToDyadic(std::min(rate, 0x1.0p30));
  if (d.mantissa == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "epsilon ", epsilon, " is too small for an exact selection"));
  }
  return d;
}

absl::StatusOr<int64_t> SampleSoftmax(absl::Span<const int64_t> scores,
                                      noise::Dyadic rate,
                                      noise::RandomSource& rng) {
  if (scores.empty()) {
    return absl::InvalidArgumentError("no candidates to select from");
  }
  if (rate.exponent < 0 || rate.exponent > 62 ||
      rate.mantissa >= (uint64_t{1} << 40)) {
    return absl::InvalidArgumentError("selection rate out of range");
  }
  int64_t best = scores[0];
  for (int64_t q : scores) {
    if (q > (int64_t{1} << 60) || q < -(int64_t{1} << 60)) {
      return absl::InvalidArgumentError("score beyond 2^60 grid units");
    }
    best = std::max(best, q);
  }
  const noise::uint128 den = static_cast<noise::uint128>(1) << rate.exponent;
  noise::RandomBits bits(rng);
  while (bits.ok()) {
    const int64_t r = static_cast<int64_t>(bits.UniformInt(scores.size()));
    const uint64_t gap = static_cast<uint64_t>(best - scores[r]);  // < 2^61
    // gap * mantissa < 2^101 <= 2^126: BernoulliExpMinus's range.
    const noise::uint128 num = static_cast<noise::uint128>(gap) * rate.mantissa;
    if (noise::BernoulliExpMinus(bits, num, den) && bits.ok()) return r;
  }
  absl::Status s = rng.status();
  return s.ok() ? absl::InternalError("random source failed") : s;
}

std::vector<int64_t> PieceScores(const Dataset& data, const Eigen::VectorXd& b,
                                 const Eigen::VectorXd& x,
                                 const ScoreGrid& grid) {
  std::vector<int64_t> scores(data.rows());
  for (int64_t i = 0; i < data.rows(); ++i) {
    scores[i] = ScoreUnits(data.RowDot(i, x), b[i], grid);
  }
  return scores;
}

absl::StatusOr<int64_t> PrivateSubgradientIndex(
    const Dataset& data, const Eigen::VectorXd& b, const Eigen::VectorXd& x,
    const ScoreGrid& grid, noise::Dyadic rate, noise::RandomSource& rng) {
  const std::vector<int64_t> scores = PieceScores(data, b, x, grid);
  return SampleSoftmax(scores, rate, rng);
}

}  // namespace dpopt::optim::piecewise_affine
