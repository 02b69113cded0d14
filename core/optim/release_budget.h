// Job-internal privacy budget: every noisy release an oracle makes is charged
// here BEFORE the data is touched. The solve loop owns one per run.
//
// PlannedReleases is the budget of fixed-schedule algorithms (DP-GD/DP-SGD,
// the accelerated methods): it admits exactly the releases the calibration
// planned. Adaptive algorithms (line-search family's line search) implement
// ReleaseBudget with a privacy filter over the job's reservation; when it
// returns RESOURCE_EXHAUSTED the solve loop stops cleanly.
#ifndef DPOPT_CORE_OPTIM_RELEASE_BUDGET_H_
#define DPOPT_CORE_OPTIM_RELEASE_BUDGET_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "core/privacy/dp_event.h"

namespace dpopt::optim {

class ReleaseBudget {
 public:
  virtual ~ReleaseBudget() = default;
  // Records `event` as spent if it fits. RESOURCE_EXHAUSTED (nothing
  // recorded) if it does not; FAILED_PRECONDITION if the event was never
  // planned.
  virtual absl::Status Charge(const privacy::DpEvent& event) = 0;
  // Composition of everything charged so far (NoOp if nothing).
  virtual privacy::DpEvent Spent() const = 0;
};

// Admits up to `count` releases of each planned event, compared exactly
// (DpEvent::operator==).
class PlannedReleases final : public ReleaseBudget {
 public:
  PlannedReleases() = default;
  // Adds `count` allowed releases of `event`.
  void Allow(const privacy::DpEvent& event, int64_t count);

  absl::Status Charge(const privacy::DpEvent& event) override;
  privacy::DpEvent Spent() const override;

 private:
  struct Entry {
    privacy::DpEvent event;
    int64_t allowed = 0;
    int64_t used = 0;
  };
  std::vector<Entry> entries_;
};

// No limit; records what was charged. Only for non-private runs whose
// calibration event is NoOp (public data).
class UnlimitedNoOpBudget final : public ReleaseBudget {
 public:
  // FAILED_PRECONDITION unless `event` is NoOp.
  absl::Status Charge(const privacy::DpEvent& event) override;
  privacy::DpEvent Spent() const override { return privacy::DpEvent::NoOp(); }
};

}  // namespace dpopt::optim

#endif  // DPOPT_CORE_OPTIM_RELEASE_BUDGET_H_
