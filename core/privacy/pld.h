// Privacy loss distribution (PLD) accountant.
#ifndef DPOPT_CORE_PRIVACY_PLD_H_
#define DPOPT_CORE_PRIVACY_PLD_H_

#include "absl/status/statusor.h"
#include "core/privacy/accountant.h"
#include "core/privacy/dp_event.h"

namespace dpopt::privacy {

// Epsilon / delta of `event` under the PLD accountant (see ComputeEpsilon).
absl::StatusOr<EpsilonResult> ComputeEpsilonPld(const DpEvent& event,
                                                double delta);
absl::StatusOr<double> ComputeDeltaPld(const DpEvent& event, double epsilon);

}  // namespace dpopt::privacy

#endif  // DPOPT_CORE_PRIVACY_PLD_H_
