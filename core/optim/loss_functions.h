// The losses with one score, defined once: used by Objective's per-example
// methods (objective.cc) and by the batched kernels (objective_kernels.h).
// Internal to core/optim.
#ifndef DPOPT_CORE_OPTIM_LOSS_FUNCTIONS_H_
#define DPOPT_CORE_OPTIM_LOSS_FUNCTIONS_H_

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/optim/clip_select.h"
#include "core/optim/model.h"

namespace dpopt::optim::internal {

// log(1 + exp(-m)), stable for large |m|.
inline double LogisticLoss(double m) {
  return m > 0 ? std::log1p(std::exp(-m)) : -m + std::log1p(std::exp(m));
}

// The losses with one score (every loss but softmax): from the score
// s = <w, x_i> and the effective label y, writes the gradient coefficient
// to *c and returns the loss (0 unless kWantLoss). The single definition of
// these losses, used by ExampleCoefficients and the batched kernels.
template <LossKind kLoss, bool kWantLoss>
inline double ScalarCoefficient(double huber_width, double s, double y,
                                double* c) {
  if constexpr (kLoss == LossKind::kLogistic) {
    const double m = y * s;
    *c = y * LogisticDerivative(m);
    return kWantLoss ? LogisticLoss(m) : 0.0;
  } else if constexpr (kLoss == LossKind::kHinge) {
    const double m = y * s;
    *c = m < 1.0 ? -y : 0.0;
    return std::max(0.0, 1.0 - m);
  } else if constexpr (kLoss == LossKind::kHuberizedHinge) {
    const double h = huber_width;
    const double m = y * s;
    if (m > 1.0 + h) {
      *c = 0.0;
      return 0.0;
    }
    if (m < 1.0 - h) {
      *c = -y;
      return 1.0 - m;
    }
    const double r = 1.0 + h - m;
    *c = -y * r / (2.0 * h);
    return r * r / (4.0 * h);
  } else {
    static_assert(kLoss == LossKind::kLeastSquares);
    const double r = s - y;  // may be +-Inf, never NaN
    constexpr double kMax = std::numeric_limits<double>::max();
    *c = std::clamp(r, -kMax, kMax);  // finite; clipping bounds it
    return 0.5 * r * r;
  }
}

}  // namespace dpopt::optim::internal

#endif  // DPOPT_CORE_OPTIM_LOSS_FUNCTIONS_H_
