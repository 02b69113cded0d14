#include "core/optim/line_search/cheb.h"

#include <algorithm>
#include <cmath>

namespace dpopt::optim::line_search {

double AngleDegrees(const Eigen::VectorXd& a, const Eigen::VectorXd& b) {
  const double na = a.norm(), nb = b.norm();
  if (!(na > 0) || !(nb > 0)) return 90;  // undefined angle: "no change"
  const double c = std::clamp(a.dot(b) / (na * nb), -1.0, 1.0);
  return std::acos(c) * 180.0 / 3.14159265358979323846;
}

absl::Status ChebOptions::Validate() const {
  if (!(std::isfinite(growth) && growth > 0 && growth <= 10)) {
    return absl::InvalidArgumentError("cheb growth (xi) must be in (0, 10]");
  }
  if (!(phi_min > 0 && phi_min < phi_max && std::isfinite(phi_max))) {
    return absl::InvalidArgumentError("need 0 < phi_min < phi_max");
  }
  return absl::OkStatus();
}

ChebOutcome Cheb(const Eigen::VectorXd& g2, double theta_bar,
                 const ChebOptions& options, Eigen::VectorXd* g,
                 double* rho_grad, double* eps_bt) {
  ChebOutcome out;
  out.angle = AngleDegrees(*g, g2);  // Alg. 3 step 4
  // Eq. (8): theta_max = phi_max theta_bar, theta_min = phi_min theta_bar.
  const double theta_max = options.phi_max * theta_bar;
  const double theta_min = options.phi_min * theta_bar;
  if (g->dot(g2) < 0 || out.angle > theta_max) {
    *rho_grad *= 1 + options.growth;  // noise dominates the gradient
    out.branch = ChebBranch::kRaiseGradient;
  } else if (out.angle < theta_min) {
    *eps_bt *= 1 + options.growth;  // the line search is too noisy
    out.branch = ChebBranch::kRaiseLineSearch;
  }
  *g = (*g + g2) / 2;  // Alg. 3 step 7: always, equal weights
  return out;
}

void AngleAverage::OnSuccessfulStep(const Eigen::VectorXd& g) {
  if (has_prev_) {
    theta_bar_ = psi_ * theta_bar_ + (1 - psi_) * AngleDegrees(g, prev_);
  }
  prev_ = g;
  has_prev_ = true;
}

void InitialStepSchedule::EndIteration(long long t) {
  if ((t + 1) % tau_ != 0) return;
  if (!selected_.empty()) {
    const double best = *std::max_element(selected_.begin(), selected_.end());
    eta0_ = std::min(varsigma_ * best, eta0_initial_);
  }
  selected_.clear();
}

bool ClipAdaptation::OnGradientBudgetRaised() {
  if (decayed_) return false;
  decayed_ = true;
  c_grad_ = std::max((1 - zeta_) * c_grad_, floor_ * c_grad0_);
  c_obj_ = std::max((1 - zeta_) * c_obj_, floor_ * c_obj0_);
  return true;
}

}  // namespace dpopt::optim::line_search
