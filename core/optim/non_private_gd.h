// Non-private full-batch (proximal) gradient descent, for baselines on
// PUBLIC datasets only: the server decides that a dataset is public and only
// then sets PrivacyTarget::non_private. Its event is NoOp; its oracle uses
// exact gradients, which only the NoOp budget admits.
//   w_{t+1} = prox_{lr l1 ||.||_1}(w_t - lr grad F_smooth(w_t)),  w_0 = 0.
#ifndef DPOPT_CORE_OPTIM_NON_PRIVATE_GD_H_
#define DPOPT_CORE_OPTIM_NON_PRIVATE_GD_H_

#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/optim/algorithm.h"
#include "core/optim/model.h"

namespace dpopt::optim {

struct GdOptions {
  int64_t steps = 0;         // [1, 10^6]
  double learning_rate = 0;  // (0, 10^6]
  ModelConfig model;
  absl::Status Validate() const;  // INVALID_ARGUMENT outside the ranges
};

// name() == "gd". Calibrate() requires target.non_private (INVALID_ARGUMENT
// otherwise) and returns the NoOp event.
absl::StatusOr<std::unique_ptr<Algorithm>> NewNonPrivateGd(
    const GdOptions& options);

}  // namespace dpopt::optim

#endif  // DPOPT_CORE_OPTIM_NON_PRIVATE_GD_H_
