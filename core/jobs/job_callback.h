// Bridges a job's CancellationToken and trace sink to an algorithm's
// IterationCallback (called only through optim::StepReporter): every privatized per-iteration summary goes to the sink
// (e.g. the job store / Watch stream), and the algorithm stops (between
// steps, or inside a long step through optim::StepReporter::StopRequested)
// once the token is cancelled.
#ifndef DPOPT_CORE_JOBS_JOB_CALLBACK_H_
#define DPOPT_CORE_JOBS_JOB_CALLBACK_H_

#include <functional>
#include <utility>

#include "core/jobs/job_runner.h"
#include "core/optim/algorithm.h"

namespace dpopt::jobs {

class JobIterationCallback final : public optim::IterationCallback {
 public:
  // Receives privatized summaries only; may be empty. Runs on the job's
  // worker thread; the summary's iterate reference is valid only during the
  // call (copy what you keep).
  using Sink = std::function<void(const optim::IterationSummary&)>;

  JobIterationCallback(CancellationToken token, Sink sink)
      : token_(std::move(token)), sink_(std::move(sink)) {}

  // Forwards to the sink, then returns false (stop) iff cancelled.
  bool OnIteration(const optim::IterationSummary& summary) override {
    if (sink_) sink_(summary);
    return !token_.cancelled();
  }
  bool StopRequested() override { return token_.cancelled(); }

 private:
  CancellationToken token_;
  Sink sink_;
};

}  // namespace dpopt::jobs

#endif  // DPOPT_CORE_JOBS_JOB_CALLBACK_H_
