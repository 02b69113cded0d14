// The exponential mechanism, implemented exactly as permute-and-flip
// (McKenna and Sheldon 2020, Algorithm 1), which is distributed identically
// to report-noisy-max with exponential noise (Ding, Kifer, Saghafian, Wang,
// Wang 2021).
//
// Given scores q_1..q_k with sensitivity Delta (each score changes by at most
// Delta between neighbouring datasets), permute-and-flip visits the
// candidates in a uniformly random order and returns the first r accepted
// with probability exp(-rate * (q* - q_r)), q* = max q; the maximiser is
// always accepted, so it stops within k steps. With rate = epsilon/(2 Delta)
// the selection is epsilon-DP; when the scores are monotonic (between any two
// neighbours all scores move in the same direction) rate = epsilon/Delta
// suffices (McKenna and Sheldon 2020, Theorem 1). Charge
// DpEvent::Exponential(epsilon).
//
// Exactness: real scores are rounded to a power-of-two grid g (about
// 2^-20 Delta), and the rounding is folded into the sensitivity,
// Delta_eff = Delta + g (each rounded score moves by <= g/2, so a difference
// of two neighbours' scores grows by <= g). The acceptance rate per grid unit,
// epsilon * g / (2 Delta_eff) (or / Delta_eff), is rounded DOWN to a dyadic
// rational, which only adds privacy. All acceptance trials are exact
// Bernoulli(exp(-n/d)) draws in integer arithmetic (Canonne, Kamath, Steinke
// 2020, Algorithm 1).
#ifndef DPOPT_CORE_NOISE_EXPONENTIAL_MECHANISM_H_
#define DPOPT_CORE_NOISE_EXPONENTIAL_MECHANISM_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "core/noise/discrete_samplers.h"
#include "core/noise/random.h"

namespace dpopt::noise {

struct ExponentialMechanismOptions {
  // Privacy parameter of one selection. Must be positive and finite.
  double epsilon = 0;
  // Delta: the largest change of any single score between neighbours. Must
  // be positive and finite.
  double sensitivity = 0;
  // True only if, between any two neighbours, all scores move in the same
  // direction; then the exponent uses epsilon/Delta instead of
  // epsilon/(2 Delta). Setting it for non-monotonic scores doubles the
  // privacy loss.
  bool monotonic = false;

  // INVALID_ARGUMENT on a bad field.
  absl::Status Validate() const;
};

// Returns the index in [0, scores.size()) of the selected candidate.
// Errors: INVALID_ARGUMENT for bad options, an empty list, or a non-finite
// score or one beyond 2^60 grid units (checked before any randomness is
// drawn); the random source's error if it fails (then nothing was selected).
absl::StatusOr<int64_t> PermuteAndFlip(
    absl::Span<const double> scores, const ExponentialMechanismOptions& options,
    RandomSource& rng);

// The integer core: scores in grid units, acceptance probability
// exp(-(q* - q_r) * rate) with rate = rate.mantissa / 2^rate.exponent.
// REQUIRES: rate.exponent <= 62; |scores| <= 2^60. Exposed for tests and for
// callers that already hold integer scores; the caller is responsible for the
// privacy calibration of `rate`.
absl::StatusOr<int64_t> PermuteAndFlipInteger(absl::Span<const int64_t> scores,
                                              Dyadic rate, RandomSource& rng);

// The acceptance rate per grid unit PermuteAndFlip uses for `options`, and
// the grid it rounds scores to (exposed for tests).
struct PermuteAndFlipPlan {
  double grid = 0;                   // power of two
  double effective_sensitivity = 0;  // Delta + grid, rounded up
  Dyadic rate;  // <= epsilon * grid / ((monotonic ? 1 : 2) * Delta_eff)
};
absl::StatusOr<PermuteAndFlipPlan> PlanPermuteAndFlip(
    const ExponentialMechanismOptions& options);

}  // namespace dpopt::noise

#endif  // DPOPT_CORE_NOISE_EXPONENTIAL_MECHANISM_H_
