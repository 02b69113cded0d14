// Update rules: pure functions of privatized gradients and public
// hyper-parameters, hence post-processing (docs/architecture.md, convention
// "update rules are post-processing"; after ensmallen's
// sgd/update_policies). They never see data.
#ifndef DPOPT_CORE_OPTIM_UPDATE_RULES_H_
#define DPOPT_CORE_OPTIM_UPDATE_RULES_H_

#include "Eigen/Dense"
#include "absl/status/status.h"

namespace dpopt::optim {

// Soft thresholding, the proximal map of t ||.||_1:
//   w_j <- sign(w_j) max(|w_j| - t, 0).   REQUIRES: t >= 0.
void SoftThreshold(double t, Eigen::Ref<Eigen::VectorXd> w);

// Proximal (heavy-ball) gradient step with step size eta, momentum beta and
// L1 strength l1:
//   v <- beta v + g;   w <- prox_{eta l1 ||.||_1}(w - eta v).
// beta = 0, l1 = 0 is plain gradient descent w <- w - eta g.
class MomentumProxStep {
 public:
  struct Options {
    double learning_rate = 0;  // eta, finite, > 0
    double momentum = 0;       // beta in [0, 1)
    double l1 = 0;             // >= 0
    absl::Status Validate() const;
  };
  // REQUIRES: options.Validate() is OK, dimension >= 1.
  MomentumProxStep(const Options& options, int64_t dimension);

  // REQUIRES: g.size() == w->size() == dimension.
  void Apply(const Eigen::Ref<const Eigen::VectorXd>& g, Eigen::VectorXd* w);

 private:
  Options options_;
  Eigen::VectorXd velocity_;
};

}  // namespace dpopt::optim

#endif  // DPOPT_CORE_OPTIM_UPDATE_RULES_H_
