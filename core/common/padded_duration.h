// Padding a computation whose run time may depend on private data to a
// public time budget, so that its observable duration is
//     max(budget, its own duration):
// the same for every dataset whenever the computation ends within the
// budget. What remains observable is only how far a computation runs past
// its budget, so the budget should be a generous public bound on the
// computation (see its callers for how each is chosen and what they
// document).
#ifndef DPOPT_CORE_COMMON_PADDED_DURATION_H_
#define DPOPT_CORE_COMMON_PADDED_DURATION_H_

#include <utility>

#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace dpopt::common {

// Runs `work()` and returns its result no earlier than `budget` after the
// call began (sleeping for the rest of the budget, without using a core).
template <typename Work>
auto RunPaddedTo(absl::Duration budget, Work&& work) {
  const absl::Time deadline = absl::Now() + budget;
  auto result = std::forward<Work>(work)();
  const absl::Duration left = deadline - absl::Now();
  if (left > absl::ZeroDuration()) absl::SleepFor(left);
  return result;
}

}  // namespace dpopt::common

#endif  // DPOPT_CORE_COMMON_PADDED_DURATION_H_
