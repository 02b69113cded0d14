#include "core/optim/distributed_dda/schedule.h"

#include <cmath>

namespace dpopt::optim::distributed_dda {

absl::Status ScheduleOptions::Validate() const {
  if (!std::isfinite(gamma) || gamma < 0) {
    return absl::InvalidArgumentError("gamma must be a finite number >= 0");
  }
  if (!(gamma_power >= 0 && gamma_power <= 1)) {
    return absl::InvalidArgumentError("gamma_power must be in [0, 1]");
  }
  return absl::OkStatus();
}

double Schedule::a(int64_t t) const {
  return options_.weights == WeightSchedule::kUniform ? 1.0
                                                      : static_cast<double>(t);
}

double Schedule::A(int64_t t) const {
  const double dt = static_cast<double>(t);
  return options_.weights == WeightSchedule::kUniform ? dt : dt * (dt + 1) / 2;
}

double Schedule::gamma(int64_t t) const {
  if (options_.gamma_power == 0) return options_.gamma;
  if (options_.gamma_power == 0.5) {
    return options_.gamma * std::sqrt(static_cast<double>(t));
  }
  return options_.gamma *
         std::pow(static_cast<double>(t), options_.gamma_power);
}

absl::Status Schedule::CheckWellPosed(const Regularizer& h, double iota) const {
  // Both terms are non-decreasing in t, so t = 1 decides.
  if (!(iota * h.mu * A(1) + gamma(1) > 0)) {
    return absl::InvalidArgumentError(
        "the primal map needs iota * l2 * A_t + gamma_t > 0: give the model "
        "an l2 term or set gamma > 0");
  }
  return absl::OkStatus();
}

void PrimalMap(const Eigen::VectorXd& z, double iota_a, double gamma,
               const Regularizer& h, Eigen::VectorXd* x) {
  const double denom = iota_a * h.mu + gamma;
  const double kappa = iota_a * h.phi;
  x->resize(z.size());
  if (kappa == 0) {
    *x = z / (-denom);
    return;
  }
  for (Eigen::Index i = 0; i < z.size(); ++i) {
    const double v = z[i];
    const double m = std::fabs(v) - kappa;
    (*x)[i] = m > 0 ? -std::copysign(m, v) / denom : 0.0;
  }
}

}  // namespace dpopt::optim::distributed_dda
