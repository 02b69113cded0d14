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

#include <algorithm>
#include <functional>
#include <utility>

#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace dpopt::common {

// Runs `work()` and returns its result no earlier than `budget` after the
// call began (sleeping for the rest of the budget, without using a core).
// `stop_requested`, if set, is asked every kPadCheckInterval of the sleep:
// a cancelled job stops padding (its result is not released, so when it
// stops says nothing about the data).
inline constexpr absl::Duration kPadCheckInterval = absl::Milliseconds(50);

template <typename Work>
auto RunPaddedTo(absl::Duration budget, Work&& work,
                 const std::function<bool()>& stop_requested = nullptr) {
  const absl::Time deadline = absl::Now() + budget;
  auto result = std::forward<Work>(work)();
  for (absl::Duration left = deadline - absl::Now();
       left > absl::ZeroDuration(); left = deadline - absl::Now()) {
    if (stop_requested && stop_requested()) break;
    absl::SleepFor(std::min(left, kPadCheckInterval));
  }
  return result;
}

}  // namespace dpopt::common

#endif  // DPOPT_CORE_COMMON_PADDED_DURATION_H_
