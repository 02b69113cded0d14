#include "core/optim/step_reporter.h"

namespace dpopt::optim {

bool StepReporter::Report(int64_t step, const Eigen::VectorXd& iterate,
                          double noisy_gradient_norm) {
  if (stopped_) return false;
  if (callback_ == nullptr) return true;
  const IterationSummary summary{step, total_steps_, iterate,
                                 noisy_gradient_norm};
  if (!callback_->OnIteration(summary)) stopped_ = true;
  return !stopped_;
}

bool StepReporter::StopRequested() {
  if (!stopped_ && callback_ != nullptr && callback_->StopRequested()) {
    stopped_ = true;
  }
  return stopped_;
}

}  // namespace dpopt::optim
