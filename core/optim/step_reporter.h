// The one path through which an algorithm's Run() reports progress and asks
// whether to stop. IterationCallback's methods are private to this class, so
// no algorithm can record a trace point or skip the cancellation check in a
// way of its own.
//
// Two calls:
//   - Report(): after a completed step (1-based), with the privatized
//     iterate; records a trace point (the server decides which steps it
//     keeps) and returns false when the run must stop.
//   - StopRequested(): cheap, records nothing. Every loop whose unit of work
//     between two Report() calls can exceed about 100 ms (an inner solve, a
//     rejection sampler's proposals, the passes between two trace points)
//     calls it at least once per ~100 ms of work and stops when it is true.
// Once either call has answered "stop", stopped() stays true.
#ifndef DPOPT_CORE_OPTIM_STEP_REPORTER_H_
#define DPOPT_CORE_OPTIM_STEP_REPORTER_H_

#include <cstdint>

#include "Eigen/Dense"
#include "core/optim/algorithm.h"

namespace dpopt::optim {

class StepReporter final {
 public:
  // `callback` may be null (nothing recorded, never stops). `total_steps` is
  // the planned number of steps (an upper bound), >= 1.
  StepReporter(IterationCallback* callback, int64_t total_steps)
      : callback_(callback), total_steps_(total_steps) {}
  StepReporter(const SolveContext& context, int64_t total_steps)
      : StepReporter(context.callback, total_steps) {}

  StepReporter(const StepReporter&) = delete;
  StepReporter& operator=(const StepReporter&) = delete;

  // Step `step` (1-based) is complete; `iterate` and `noisy_gradient_norm`
  // are privatized. Returns false if the run must stop now.
  bool Report(int64_t step, const Eigen::VectorXd& iterate,
              double noisy_gradient_norm = 0);

  // True once the run must stop. Cheap: an atomic read in the server.
  bool StopRequested();

  bool stopped() const { return stopped_; }
  int64_t total_steps() const { return total_steps_; }

 private:
  IterationCallback* callback_;
  int64_t total_steps_;
  bool stopped_ = false;
};

}  // namespace dpopt::optim

#endif  // DPOPT_CORE_OPTIM_STEP_REPORTER_H_
