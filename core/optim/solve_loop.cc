#include "core/optim/solve_loop.h"

#include "core/common/status_macros.h"
#include "core/optim/step_reporter.h"

namespace dpopt::optim {

absl::Status SolveLoop::Options::Validate() const {
  if (max_steps < 1 || max_steps > 1'000'000) {
    return absl::InvalidArgumentError("steps must be in [1, 1000000]");
  }
  return absl::OkStatus();
}

absl::StatusOr<SolveResult> SolveLoop::Run(const Options& options,
                                           IterativeMethod& method,
                                           PrivateGradientOracle& oracle,
                                           const ReleaseBudget& budget,
                                           IterationCallback* callback) {
  RETURN_IF_ERROR(options.Validate());
  SolveResult result;
  StepReporter reporter(callback, options.max_steps);
  for (int64_t t = 0; t < options.max_steps; ++t) {
    StepInfo info;
    const absl::Status s = method.Step(t, oracle, &info);
    if (absl::IsResourceExhausted(s)) {
      result.budget_exhausted = true;
      break;
    }
    RETURN_IF_ERROR(s);
    result.steps_done = t + 1;
    if (!reporter.Report(result.steps_done, method.iterate(),
                         info.noisy_gradient_norm)) {
      result.cancelled = result.steps_done < options.max_steps;
      break;
    }
  }
  const Objective& objective = oracle.objective();
  result.model.weights = method.iterate();
  result.model.dimension = objective.dimension();
  result.model.num_classes = objective.config().loss == LossKind::kSoftmax
                                 ? objective.config().num_classes
                                 : 2;
  result.model.loss = objective.config().loss;
  result.spent = budget.Spent();
  return result;
}

}  // namespace dpopt::optim
