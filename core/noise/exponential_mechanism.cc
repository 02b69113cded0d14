#include "core/noise/exponential_mechanism.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "core/common/status_macros.h"

namespace dpopt::noise {
namespace {

constexpr int kGridBits = 20;
constexpr double kMaxGridUnits = 0x1.0p60;
constexpr double kRoundUp = 1 + 0x1.0p-48;
constexpr int kMaxRateExponent = 62;

}  // namespace

absl::Status ExponentialMechanismOptions::Validate() const {
  if (!std::isfinite(epsilon) || !(epsilon > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("epsilon must be positive and finite, got ", epsilon));
  }
  if (!std::isfinite(sensitivity) || !(sensitivity > 0) ||
      sensitivity < 0x1.0p-900 || sensitivity > 0x1.0p900) {
    return absl::InvalidArgumentError(absl::StrCat(
        "sensitivity must be positive, finite and in [2^-900, 2^900], got ",
        sensitivity));
  }
  return absl::OkStatus();
}

absl::StatusOr<PermuteAndFlipPlan> PlanPermuteAndFlip(
    const ExponentialMechanismOptions& options) {
  RETURN_IF_ERROR(options.Validate());
  PermuteAndFlipPlan plan;
  int e = 0;
  std::frexp(options.sensitivity, &e);
  plan.grid = std::ldexp(1.0, e - 1 - kGridBits);
  // Rounded scores of neighbours differ by <= Delta + g.
  plan.effective_sensitivity = (options.sensitivity + plan.grid) * kRoundUp;
  // McKenna and Sheldon 2020: exp(epsilon (q_r - q*) / (2 Delta)), or
  // / Delta for monotonic scores; per grid unit multiply by g. Rounded down.
  const double divisor = options.monotonic ? 1.0 : 2.0;
  const double rate = options.epsilon * plan.grid /
                      (divisor * plan.effective_sensitivity) / kRoundUp;
  plan.rate = RoundDownToDyadic(rate);
  if (plan.rate.mantissa == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("epsilon ", options.epsilon, " is too small"));
  }
  return plan;
}

absl::StatusOr<int64_t> PermuteAndFlipInteger(absl::Span<const int64_t> scores,
                                              Dyadic rate, RandomSource& rng) {
  if (scores.empty()) {
    return absl::InvalidArgumentError("no candidates to select from");
  }
  if (rate.exponent < 0 || rate.exponent > kMaxRateExponent ||
      rate.mantissa >= (uint64_t{1} << 62)) {
    return absl::InvalidArgumentError("rate out of range");
  }
  int64_t best = scores[0];
  for (int64_t q : scores) {
    if (q > (int64_t{1} << 60) || q < -(int64_t{1} << 60)) {
      return absl::InvalidArgumentError("score beyond 2^60 grid units");
    }
    best = std::max(best, q);
  }
  const uint128 den = static_cast<uint128>(1) << rate.exponent;
  std::vector<int64_t> order(scores.size());
  std::iota(order.begin(), order.end(), 0);
  RandomBits bits(rng);
  // McKenna and Sheldon 2020, Algorithm 1, with the permutation drawn lazily
  // (Fisher-Yates): visit a uniformly random unvisited candidate, accept it
  // with probability exp(-rate (q* - q_r)). The maximiser has probability 1.
  int64_t selected = -1;
  for (size_t i = 0; i < order.size() && bits.ok(); ++i) {
    const size_t j = i + bits.UniformInt(order.size() - i);
    std::swap(order[i], order[j]);
    const int64_t r = order[i];
    const uint64_t gap = static_cast<uint64_t>(best - scores[r]);  // < 2^61
    const uint128 num = static_cast<uint128>(gap) * rate.mantissa;
    if (BernoulliExpMinus(bits, num, den)) {
      selected = r;
      break;
    }
  }
  if (!bits.ok()) {
    absl::Status s = rng.status();
    return s.ok() ? absl::InternalError("random source failed") : s;
  }
  if (selected < 0) {
    return absl::InternalError("permute-and-flip accepted no candidate");
  }
  return selected;
}

absl::StatusOr<int64_t> PermuteAndFlip(
    absl::Span<const double> scores, const ExponentialMechanismOptions& options,
    RandomSource& rng) {
  ASSIGN_OR_RETURN(const PermuteAndFlipPlan plan, PlanPermuteAndFlip(options));
  if (scores.empty()) {
    return absl::InvalidArgumentError("no candidates to select from");
  }
  std::vector<int64_t> units(scores.size());
  for (size_t i = 0; i < scores.size(); ++i) {
    const double u = std::nearbyint(scores[i] / plan.grid);  // exact scaling
    if (!std::isfinite(u) || std::abs(u) > kMaxGridUnits) {
      return absl::InvalidArgumentError(absl::StrCat(
          "score ", i, " is not finite or too large for the sensitivity"));
    }
    units[i] = static_cast<int64_t>(u);
  }
  return PermuteAndFlipInteger(units, plan.rate, rng);
}

}  // namespace dpopt::noise
