// The one, non-virtual solve loop (docs/architecture.md, conventions "one solve
// loop" and "update rules are post-processing"). It owns step counting, the
// job-internal budget (through the oracle it drives), cancellation and the
// trace; an IterativeMethod only asks the oracle for privatized quantities and
// updates its iterate (post-processing).
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
  // step it calls callback->OnIteration (if callback != null) with the
  // privatized iterate; `false` stops the loop (cancelled = true) before the
  // next step (a stop request after the last planned step is not counted
  // as a cancellation). Stops cleanly when the budget refuses a release
  // (budget_exhausted = true). Returns the last iterate as the model and
  // budget.Spent() as `spent`.
  // Errors: INVALID_ARGUMENT (options), or the first non-budget error of a
  // step (e.g. the rng's failure); then nothing more is published.
  static absl::StatusOr<SolveResult> Run(const Options& options,
                                         IterativeMethod& method,
                                         PrivateGradientOracle& oracle,
                                         const ReleaseBudget& budget,
                                         IterationCallback* callback);
};

}  // namespace dpopt::optim

#endif  // DPOPT_CORE_OPTIM_SOLVE_LOOP_H_
