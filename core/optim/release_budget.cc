#include "core/optim/release_budget.h"

#include "absl/strings/str_cat.h"

namespace dpopt::optim {

void PlannedReleases::Allow(const privacy::DpEvent& event, int64_t count) {
  for (Entry& e : entries_) {
    if (e.event == event) {
      e.allowed += count;
      return;
    }
  }
  entries_.push_back(Entry{event, count, 0});
}

absl::Status PlannedReleases::Charge(const privacy::DpEvent& event) {
  for (Entry& e : entries_) {
    if (e.event == event) {
      if (e.used >= e.allowed) {
        return absl::ResourceExhaustedError(
            absl::StrCat("job budget: all ", e.allowed,
                         " planned releases of this mechanism are spent"));
      }
      ++e.used;
      return absl::OkStatus();
    }
  }
  return absl::FailedPreconditionError(
      "job budget: release of a mechanism that was not calibrated");
}

privacy::DpEvent PlannedReleases::Spent() const {
  std::vector<privacy::DpEvent> parts;
  for (const Entry& e : entries_) {
    if (e.used == 0) continue;
    parts.push_back(e.used == 1
                        ? e.event
                        : privacy::DpEvent::SelfComposed(e.used, e.event));
  }
  if (parts.empty()) return privacy::DpEvent::NoOp();
  if (parts.size() == 1) return parts.front();
  return privacy::DpEvent::Composed(std::move(parts));
}

absl::Status UnlimitedNoOpBudget::Charge(const privacy::DpEvent& event) {
  if (event.kind() != privacy::DpEvent::Kind::kNoOp) {
    return absl::FailedPreconditionError(
        "a non-private budget cannot pay for a private release");
  }
  return absl::OkStatus();
}

}  // namespace dpopt::optim
