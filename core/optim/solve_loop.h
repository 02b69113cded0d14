// The non-virtual solve loop of the fixed-schedule gradient methods (dp_gd,
// dp_sgd, gd, the accelerated and line-search families; docs/architecture.md,
// conventions "one driver" and "update rules are post-processing"). It owns
// step counting and the job-internal budget (through the oracle it drives),
// and reports every step through a StepReporter (core/optim/step_reporter.h),
// the path every algorithm uses for the trace and cancellation; an
// IterativeMethod only asks the oracle for privatized quantities and updates
// its iterate (post-processing). One step is one gradient pass, so the loop
// checks for a stop request after every pass.
#ifndef DPOPT_CORE_OPTIM_SOLVE_LOOP_H_
#define DPOPT_CORE_OPTIM_SOLVE_LOOP_H_

#include <cstdint>

#include "Eigen/Dense"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/optim/algorithm.h"
#include "core/optim/private_oracle.h"
#include "core/optim/release_budget.h"

namespace dpopt::optim {

struct StepInfo {
  // ||noisy gradient||_2 used by this step (post-processing), for the trace.
  double noisy_gradient_norm = 0;
};

// One optimizer's update logic. Implementations see the data only through
// the PrivateGradientOracle, so their update rules are post-processing.
class IterativeMethod {
 public:
  virtual ~IterativeMethod() = default;
  // Performs step number `step` (0-based). On error the iterate must be left
  // unchanged. RESOURCE_EXHAUSTED (from the oracle's budget) makes the loop
  // stop cleanly with SolveResult::budget_exhausted; any other error fails
  // the run.
  virtual absl::Status Step(int64_t step, PrivateGradientOracle& oracle,
                            StepInfo* info) = 0;
  // The current (privatized) iterate.
  virtual const Eigen::VectorXd& iterate() const = 0;
};

class SolveLoop final {
 public:
  struct Options {
    // Number of steps to run (the schedule's upper bound). [1, 10^6].
    int64_t max_steps = 0;
    absl::Status Validate() const;
  };

  // Runs `method` for up to options.max_steps steps. After every completed
  // step it reports the privatized iterate through a StepReporter on
  // `callback` (may be null); a stop request stops the loop (cancelled =
  // true) before the next step (a stop request after the last planned step is
  // not counted as a cancellation). Stops cleanly when the budget refuses a
  // release (budget_exhausted = true). Returns the last iterate as the model
  // and budget.Spent() as `spent`. Errors: INVALID_ARGUMENT (options), or the
  // first non-budget error of a step (e.g. the rng's failure); then nothing
  // more is published.
  static absl::StatusOr<SolveResult> Run(const Options& options,
                                         IterativeMethod& method,
                                         PrivateGradientOracle& oracle,
                                         const ReleaseBudget& budget,
                                         IterationCallback* callback);
};

}  // namespace dpopt::optim

#endif  // DPOPT_CORE_OPTIM_SOLVE_LOOP_H_
