#include "core/optim/update_rules.h"

#include <cmath>

namespace dpopt::optim {

void SoftThreshold(double t, Eigen::Ref<Eigen::VectorXd> w) {
  if (t <= 0) return;
  for (Eigen::Index j = 0; j < w.size(); ++j) {
    const double a = std::abs(w[j]) - t;
    w[j] = a > 0 ? std::copysign(a, w[j]) : 0.0;
  }
}

absl::Status MomentumProxStep::Options::Validate() const {
  if (!(std::isfinite(learning_rate) && learning_rate > 0)) {
    return absl::InvalidArgumentError("learning rate must be finite and > 0");
  }
  if (!(momentum >= 0 && momentum < 1)) {
    return absl::InvalidArgumentError("momentum must be in [0, 1)");
  }
  if (!(std::isfinite(l1) && l1 >= 0)) {
    return absl::InvalidArgumentError("l1 must be finite and >= 0");
  }
  return absl::OkStatus();
}

MomentumProxStep::MomentumProxStep(const Options& options, int64_t dimension)
    : options_(options), velocity_(Eigen::VectorXd::Zero(dimension)) {}

void MomentumProxStep::Apply(const Eigen::Ref<const Eigen::VectorXd>& g,
                             Eigen::VectorXd* w) {
  if (options_.momentum == 0) {
    w->noalias() -= options_.learning_rate * g;
  } else {
    velocity_ = options_.momentum * velocity_ + g;
    w->noalias() -= options_.learning_rate * velocity_;
  }
  SoftThreshold(options_.learning_rate * options_.l1, *w);
}

}  // namespace dpopt::optim
