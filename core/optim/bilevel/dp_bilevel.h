// DP bilevel optimization (Kornowski 2024; docs/algorithms/bilevel.md):
// Algorithm 1 (full batch, job type "dp_bilevel") and Algorithms 3-4
// (mini-batch with server-side Poisson sampling, "dp_bilevel_minibatch") on
// a catalogue problem (bilevel_problem.h).
//
// For t = 0..T-1 (Algorithm 1, penalty form Eq. (3)):
//   1. y~_t    = inner solve of g_S(x_t, .)            per-example vector
//                Clip(grad_y g_i, C_gy) / n
//   2. y~lam_t = inner solve of f_S + lambda g_S        per-example vector
//                (Clip(grad_y f_i, C_fy) + lambda Clip(grad_y g_i, C_gy)) / n
//   3. g~_t = (1/n) sum Clip(v_i, C_out) + public part + N(0, sigma^2 I),
//      v_i = grad_x f_i(x_t, y~lam) + lambda (grad_x g_i(x_t, y~lam) -
//      grad_x g_i(x_t, y~))
//   4. x_{t+1} = Proj_X(x_t - eta g~_t)
// Output (step 5): t_out = argmin_t ||x_{t+1} - x_t|| (smallest t on ties),
// x_out = x_{t_out} (post-processing of released iterates). Released (step
// 6): x_out, t_out, {x_t}, {g~_t}, y~_{t_out}, y~lam_{t_out}, lambda, eta.
//
// Inner solves: DP-Loc-GD (dp_loc_gd.h), practical mode by default. Mini-
// batch: each inner step uses a fresh Poisson(q_in) batch and the outer
// gradient a Poisson(q_out) batch, normalised by the public expected size
// (never the paper's with-replacement sampling: a record drawn k times
// moves the batch k times, which its Lemma 2.3 as printed does not cover).
//
// Privacy: every release is a Gaussian mechanism; the job's
// event is Composed{SelfComposed(T K1, G(z1)), SelfComposed(T K2, G(z2)),
// SelfComposed(T, G(z_out))} (PoissonSampled around G in mini-batch),
// z_j = s sqrt(R_j / w_j) with the budget split w (accounting.h), s
// calibrated to the target by the privacy core (zCDP/RDP composition, or
// PLD), or in closed form; never the paper's split. Sensitivities: 2C/n for
// a replace-one dataset, C/n for add/remove (the event is analysed natively
// under the dataset's relation); mini-batch needs add/remove. With w_out = 0
// the outer step adds no noise and is charged nothing, which is allowed only
// for problems whose outer vector has no per-example part (its sensitivity
// is 0, as in the paper's Sec. 7 application); otherwise INVALID_ARGUMENT.
//
// Naive mode (NON-PRIVATE; the paper's Sec. 3 warning): exact inner solves (no
// clipping, no noise) and no outer noise, i.e. the non-private penalty method,
// which is what the naive "DP" method releases when its computed outer
// sensitivity is 0 (Example 3.1). Calibrate() refuses it unless the target is
// non-private (public datasets only, decided by the server).
#ifndef DPOPT_CORE_OPTIM_BILEVEL_DP_BILEVEL_H_
#define DPOPT_CORE_OPTIM_BILEVEL_DP_BILEVEL_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "Eigen/Dense"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/optim/algorithm.h"
#include "core/optim/bilevel/accounting.h"
#include "core/optim/bilevel/bilevel_problem.h"
#include "core/optim/bilevel/dp_loc_gd.h"
#include "core/optim/bilevel/primitives.h"

namespace dpopt::optim::bilevel {

struct DpBilevelOptions {
  ProblemOptions problem;
  // X (default R^dx).
  ConstraintSet outer_set;
  // x0 (empty = 0; projected onto X) and y0 (empty = 0).
  std::vector<double> initial_outer;
  std::vector<double> initial_inner;
  // R_Y with y*(x) in B(y0, R_Y) (0 = 2 C_gy / mu_g, Remark 2.7).
  double inner_radius = 0;
  // lambda (0 = max(lambda_min, 10 kappa)); must be >= lambda_min =
  // max(2L1^f/mu_g, 2L1^g/mu_g, L0^f/L0^g, L1^f/L1^g): the union of the
  // paper's conditions (its Lemmas 8.1 and 4.4 state 2L1^g/mu_g, but the
  // strong convexity of f + lambda g needs 2L1^f/mu_g, as in Lemma 4.3).
  double penalty = 0;
  // eta (0 = 1 / (2 ell (1 + kappa)^3), a proxy for 1 / (2 x the O(ell
  // kappa^3) smoothness of L*_lambda)).
  double outer_step = 0;
  // T in [1, 10000].
  int64_t outer_iterations = 20;
  // Clip norms (0 = the defaults: C_gy = L0^g, C_fy = L0^f,
  // C_out = L0^f + 2 L1^g L0^f / mu_g). In [0, 1e6].
  double clip_gy = 0;
  double clip_fy = 0;
  double clip_out = 0;
  BudgetSplit split;
  InnerSolverOptions inner;
  // Poisson rates (Algorithms 3-4); 1 = full batch (Algorithm 1). The
  // minibatch job type's default is kDefaultMinibatchSamplingRate.
  static constexpr double kDefaultMinibatchSamplingRate = 0.1;
  double inner_sampling_rate = 1;
  double outer_sampling_rate = 1;
  CalibrationMode calibration = CalibrationMode::kAccountant;
  // Start each inner solve from the previous released solution (free: they
  // are released outputs; the paper restarts from y0).
  bool warm_start = false;
  // NON-PRIVATE naive penalty method (public datasets only).
  bool naive = false;

  bool minibatch() const {
    return inner_sampling_rate < 1 || outer_sampling_rate < 1;
  }
  // INVALID_ARGUMENT for values outside the documented ranges.
  absl::Status Validate() const;
};

// Everything public that the options and the dataset's public facts
// determine (shared by Calibrate and Run).
struct BilevelPlan {
  std::unique_ptr<BilevelProblem> problem;
  int64_t rows = 0;
  double lambda = 0;
  double lambda_min = 0;
  double eta = 0;
  double clip_gy = 0;
  double clip_fy = 0;
  double clip_out = 0;
  double radius_y = 0;
  Eigen::VectorXd x0;
  Eigen::VectorXd y0;
  InnerProblem inner1;
  InnerProblem inner2;
  InnerPlan plan1;
  InnerPlan plan2;
  // inner1, inner2 and (if the outer share is > 0) outer. Empty in naive
  // mode.
  std::vector<PlannedMechanism> mechanisms;
  bool noisy_outer = false;
};

// Errors: INVALID_ARGUMENT (options do not fit the dataset, lambda below
// lambda_min, zero outer share with a per-example outer vector, ...),
// FAILED_PRECONDITION (mini-batch on a replace-one dataset).
absl::StatusOr<BilevelPlan> MakeBilevelPlan(const DpBilevelOptions& options,
                                            int64_t rows, int64_t dimension,
                                            privacy::Relation relation,
                                            const PrivacyTarget& target);

// Per-run values for tests (post-processing of the releases).
struct BilevelTrace {
  std::vector<Eigen::VectorXd> x;         // x_0..x_T
  std::vector<Eigen::VectorXd> gradient;  // g~_0..g~_{T-1}
  std::vector<Eigen::VectorXd> y;         // y~_0..y~_{T-1}
  std::vector<Eigen::VectorXd> y_lambda;  // y~lam_0..y~lam_{T-1}
  int64_t t_out = 0;
  std::vector<InnerTrace> inner1;  // only if record_inner
  std::vector<InnerTrace> inner2;
  bool record_inner = false;
};

// name(): "dp_bilevel" (full batch) or "dp_bilevel_minibatch".
absl::StatusOr<std::unique_ptr<Algorithm>> NewDpBilevel(
    const DpBilevelOptions& options);

// Algorithm::Run with an optional trace (tests). Same contract.
absl::StatusOr<SolveResult> RunDpBilevel(const DpBilevelOptions& options,
                                         const Dataset& data,
                                         const Calibration& calibration,
                                         SolveContext& context,
                                         BilevelTrace* trace);

// t_out = argmin_{0 <= t < T} ||x_{t+1} - x_t|| (smallest t on ties;
// Algorithm 1's output rule). REQUIRES: x.size() >= 2.
int64_t OutputIndex(const std::vector<Eigen::VectorXd>& x);

}  // namespace dpopt::optim::bilevel

#endif  // DPOPT_CORE_OPTIM_BILEVEL_DP_BILEVEL_H_
