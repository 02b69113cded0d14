#include "core/privacy/pld.h"

#include "absl/status/status.h"

namespace dpopt::privacy {

absl::StatusOr<EpsilonResult> ComputeEpsilonPld(const DpEvent& event,
                                                double delta) {
  return absl::UnimplementedError("PLD accountant: not implemented yet");
}

absl::StatusOr<double> ComputeDeltaPld(const DpEvent& event, double epsilon) {
  return absl::UnimplementedError("PLD accountant: not implemented yet");
}

}  // namespace dpopt::privacy
