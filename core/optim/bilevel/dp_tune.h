// dp_tune_regularization: private regularization tuning as a bilevel
// problem (Kornowski 2024, Sec. 7, with the sign of its update corrected;
// docs/algorithms/bilevel.md).
//
// Upper level: the validation loss f(omega, theta) = (1/n_val) sum_val
// loss_i(theta); lower level: g(omega, theta) = (1/n_tr) sum_tr
// loss_i(theta) + sum_k omega_k R_k(theta), R_k = 1/2 ||theta_{G_k}||^2 (one
// weight, or one weight per feature group G_k). The split is server-side
// (tuning.h). For t = 0..T-1:
//   1. theta_t     = DP-GD on g(omega_t, .)            c_i = Clip(grad, C)/n_tr
//   2. theta^lam_t = DP-GD on f + lambda g(omega_t, .)  c_i = Clip(grad, C) *
//                    (1/n_val for validation rows, lambda/n_tr for training)
//   3. omega_{t+1} = Proj_[w_min, w_max](omega_t - eta (d_t + nu_t)),
//      d_t,k = lambda (R_k(theta^lam_t) - R_k(theta_t))
//      (the paper's closed form N(R(theta^lam) - R(theta), .) has the sign
//      flipped and would ascend F; its argmin form above it is right)
// Output: t_out = argmin_t ||omega_{t+1} - omega_t||, the LATEST such t on
// ties (TuneOutputIndex), omega_out = omega_{t_out}, the model
// theta_{t_out}. Ties happen when the weights stop moving (e.g. held at an
// end of the box): the inner problems are then the same at every tied t, and
// with warm starts the latest theta has had the most DP-GD steps on them
// (the earliest, Algorithm 1's rule, returned theta_1 after 2 x inner.steps
// steps whenever the weight reached the box at the first step).
// Post-processing of the released omega_t, so privacy is unchanged.
//
// Privacy. Given the released theta_t and theta^lam_t, d_t contains no data
// (its sensitivity is 0), so by default nu_t = 0, the outer
// step is post-processing and the whole budget goes to the inner solves
// (split (0, 1/2, 1/2)). With paper_outer_noise, nu_t ~ N(0, sigma^2 I) is
// added as in the paper, calibrated as a Gaussian mechanism of sensitivity
// RelationFactor * outer_clip / n with budget share w_out (default split
// thirds): sound, and wasteful by design. Sensitivities of the inner
// releases (per-record public weights, record in exactly one part):
// RelationFactor * C / n_tr and RelationFactor * C * max(1/n_val,
// lambda/n_tr). Calibration as in dp_bilevel (accounting.h).
//
// Inner solves: constant step 1/beta_t with beta_t = beta_loss + max omega_t
// (solve 2: beta_loss (1 + lambda) + lambda max omega_t; public, from the
// released omega_t), a fixed number of steps (`inner.steps`, default 50),
// projection onto the ball of radius sqrt(2 loss(0) / w_min) (solve 2:
// sqrt(2 loss(0) (1 + lambda) / (lambda w_min))) around 0 that contains the
// minimiser, warm starts from the previous released solutions by default.
#ifndef DPOPT_CORE_OPTIM_BILEVEL_DP_TUNE_H_
#define DPOPT_CORE_OPTIM_BILEVEL_DP_TUNE_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "Eigen/Dense"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/optim/algorithm.h"
#include "core/optim/bilevel/accounting.h"
#include "core/optim/bilevel/dp_loc_gd.h"
#include "core/optim/bilevel/tuning.h"

namespace dpopt::optim::bilevel {

struct DpTuneOptions {
  TuningCommon common;
  // One group id per parameter (0..G-1), empty = one L2 weight.
  std::vector<int> feature_groups;
  // omega_0 per group (empty = 1, clamped into the box).
  std::vector<double> initial_weights;
  // lambda > 0 (default 10), in (0, 1e6].
  double penalty = 10;
  // eta > 0 (default 1), in (0, 1e6].
  double outer_step = 1;
  // T in [1, 1000].
  int64_t outer_iterations = 20;
  // Add the paper's outer noise (budget share w_out > 0).
  bool paper_outer_noise = false;
  // Sensitivity clip of the paper-faithful outer noise (0 = clip_norm).
  double outer_clip = 0;
  // Default (0, 1/2, 1/2), or the thirds with paper_outer_noise.
  std::optional<BudgetSplit> split;
  // Practical mode only; steps default 50.
  InnerSolverOptions inner;
  bool warm_start = true;
  CalibrationMode calibration = CalibrationMode::kAccountant;

  BudgetSplit EffectiveSplit() const;
  absl::Status Validate() const;
};

// Per-run values for tests (post-processing of the releases).
struct TuneTrace {
  std::vector<Eigen::VectorXd> weights;     // omega_0..omega_T
  std::vector<Eigen::VectorXd> directions;  // d_t + nu_t
  std::vector<Eigen::VectorXd> theta;       // theta_0..theta_{T-1}
  std::vector<Eigen::VectorXd> theta_lambda;
  int64_t t_out = 0;
};

// t_out = argmin_{0 <= t < T} ||omega_{t+1} - omega_t||, the largest t on
// ties. REQUIRES: omegas.size() >= 2.
int64_t TuneOutputIndex(const std::vector<Eigen::VectorXd>& omegas);

// name(): "dp_tune_regularization".
absl::StatusOr<std::unique_ptr<Algorithm>> NewDpTune(
    const DpTuneOptions& options);

absl::StatusOr<SolveResult> RunDpTune(const DpTuneOptions& options,
                                      const Dataset& data,
                                      const Calibration& calibration,
                                      SolveContext& context, TuneTrace* trace);

}  // namespace dpopt::optim::bilevel

#endif  // DPOPT_CORE_OPTIM_BILEVEL_DP_TUNE_H_
