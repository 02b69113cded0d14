// Accelerated's six accelerated DP optimizers as one Algorithm each (Kuru,
// Birbil, Gurbuzbalaban & Yildirim 2022, Sec. 3-5;
// docs/algorithms/accelerated.md):
//
//   accel_dp_gd        DP-GD / DP-SGD (the paper's baseline, Sec. 5):
//                        x_t = x_{t-1} - alpha g_t(x_{t-1})
//   accel_dp_hb        DP heavy ball, the "smoothing approach" (Sec. 3, (3.1)):
//                        x_t = x_{t-1} - alpha g_t(x_{t-1})
//                              + beta (x_{t-1} - x_{t-2})
//   accel_dp_nag       DP-NAG (Sec. 4, (4.1)):
//                        z_t = x_{t-1} + beta (x_{t-1} - x_{t-2}),
//                        x_t = z_t - alpha g_t(z_t)
//   accel_dp_nag_opt   DP-NAG with the noise-dividing split and T_final
//                      (Sec. 4.1, Prop. 4.2, Remark 4.1)
//   accel_dp_masg      multistage NAG (Sec. 4.2, (4.7)) with momentum restarts
//   accel_dp_masg_opt  MASG with the noise-dividing split (Thm 4.3)
//
// with x_{-1} := x_0, g_t the privatized (minibatch) gradient
// from the PrivateGradientOracle, and alpha_t, beta_t, the noise of every
// step and T_final fixed by Calibrate() from public inputs (calibration.h).
// The updates only see privatized gradients: post-processing.
#ifndef DPOPT_CORE_OPTIM_ACCELERATED_ACCELERATED_H_
#define DPOPT_CORE_OPTIM_ACCELERATED_ACCELERATED_H_

#include <memory>

#include "absl/status/statusor.h"
#include "core/optim/accelerated/calibration.h"
#include "core/optim/algorithm.h"

namespace dpopt::optim::accelerated {

// name() == MethodName(options.method). Calibrate() returns MakePlan()'s
// event, relation, T_final (steps) and public notes; Run() re-derives the
// schedule from the options and the calibration, checks that the charged
// event is exactly the composition of the releases it will make, and runs.
// Errors: INVALID_ARGUMENT if options.Validate() fails.
absl::StatusOr<std::unique_ptr<Algorithm>> NewAcceleratedAlgorithm(
    const AcceleratedOptions& options);

}  // namespace dpopt::optim::accelerated

#endif  // DPOPT_CORE_OPTIM_ACCELERATED_ACCELERATED_H_
