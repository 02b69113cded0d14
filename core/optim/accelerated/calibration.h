// Accelerated: data-free calibration shared by the six accelerated DP
// optimizers (Kuru et al. 2022, Sec. 2-4; docs/algorithms/accelerated.md).
//
// Release model (docs/architecture.md, invariants "server-side sampling and
// clipping" and "one neighbouring relation per dataset"; the paper samples
// fixed-size batches without replacement under replace-one and bounds the
// sensitivity through the feature domain instead of clipping). Every step asks
// the PrivateGradientOracle for one noisy gradient at a public point:
//  * Laplace (pure epsilon-DP, the paper's mechanism): per-example gradients
//    are clipped in L1 to C by the server, summed, discrete Laplace noise is
//    added to the sum, and the sum is divided by the public expected batch
//    size m = q n.
//      - add/remove dataset (the service default): Poisson sampling at
//        q = m / n by the server; the sum has L1 sensitivity C, and a step
//        with base epsilon eps0 = 1 / scale_multiplier costs the amplified
//        eps_t = log1p(q expm1(eps0)) (BBG18 Thm 8 for Poisson under
//        add/remove, exact; the paper's (3.3) with S1 = C). We invert it
//        (as in (3.4)-(3.5)): eps0_t = log1p(expm1(eps_t) / q).
//      - replace-one dataset: full batch only (m = n; the oracle has no
//        fixed-size sampling without replacement, and a Poisson-sampled
//        add/remove event cannot be converted to replace-one by the ledger).
//        The sum then has L1 sensitivity 2C = S1 (paper (5.2)), so a step
//        with Laplace scale b = S1 / (n eps_t) on the average costs eps_t
//        (paper (3.4) with m = n). The event is recorded under replace-one:
//        DiscreteLaplace(1 / eps_t) relative to the replace-one effective
//        sensitivity 2C + g p <= 2 (C + g p); the oracle is asked for the
//        add/remove multiplier 2 / eps_t (group privacy, size 2).
//  * Gaussian (an extension, not in the paper): per-example L2
//    clipping to C and exactly sampled rounded Gaussian noise with multiplier
//    z_t, charged as Gaussian(z_t) (a post-processing of the continuous
//    Gaussian mechanism, noise/vector_mechanisms.h), the same relation
//    rules; (epsilon, delta) from the target's accountant.
//
// Budget split (the job's total epsilon):
//  * uniform (DP-GD, DP-HB, DP-NAG, DP-MASG): eps_t = eps / T (Prop. 3.1).
//  * noise dividing (-opt): T_final from the bound (Remark 4.1) and
//    eps_t = eps * a_t^{1/3} / sum_j a_j^{1/3} (Prop. 4.2; a_t from (4.3),
//    or Thm 4.3 for MASG). For m < n the same shares are used (Remark 4.2;
//    the paper calls the exact problem (4.4) intractable) and each eps_t is
//    inverted exactly, so the spend is exactly eps.
//    Gaussian: shares of rho proportional to a_t^{1/2} (minimising
//    sum_t a_t s_t^2 at fixed sum_t rho_t), i.e.
//    z_t proportional to (T w_t)^{-1/2}, with the common factor calibrated by
//    the accountant.
//
// The charged event is the composition of the per-step events (SelfComposed
// for uniform splits, Composed otherwise). For Laplace its pure-DP epsilon
// (ComputeEpsilon at delta = 0, the alpha = inf order) is exactly
// sum_t eps_t = eps.
#ifndef DPOPT_CORE_OPTIM_ACCELERATED_CALIBRATION_H_
#define DPOPT_CORE_OPTIM_ACCELERATED_CALIBRATION_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/optim/accelerated/schedules.h"
#include "core/optim/algorithm.h"
#include "core/optim/model.h"
#include "core/privacy/dp_event.h"
#include "core/privacy/privacy_filter.h"

namespace dpopt::optim::accelerated {

enum class Method { kGd, kHeavyBall, kNag, kNagOpt, kMasg, kMasgOpt };
enum class NoiseFamily { kLaplace, kGaussian };

// "accel_dp_gd", "accel_dp_hb", "accel_dp_nag", "accel_dp_nag_opt",
// "accel_dp_masg", "accel_dp_masg_opt".
std::string MethodName(Method method);
bool IsNoiseDividing(Method method);
bool IsMultistage(Method method);

// Options of one job. Every value is public (client-declared or server
// policy); nothing here may be derived from private rows (the paper's
// experiments compute L from the data; here L and mu are public inputs).
struct AcceleratedOptions {
  Method method = Method::kGd;
  NoiseFamily noise = NoiseFamily::kLaplace;
  // T for the uniform methods, T_max for the -opt methods. [1, 10^6].
  int64_t steps = 0;
  // Expected minibatch size m, in [1, n]; 0 means full batch (m = n).
  int64_t batch_size = 0;
  // Per-example clipping bound C enforced by the server: L1 for Laplace, L2
  // for Gaussian. (0, 10^6].
  double clip_norm = 0;
  // Public smoothness L of the objective. (0, 10^6]. Required.
  double smoothness = 0;
  // Public strong-convexity constant mu in (0, L]; 0 means model.l2 (a valid
  // public lower bound for the regularised convex losses).
  double strong_convexity = 0;
  // c in alpha = c / L (paper Sec. 5). (0, 1] for MASG (Thm 4.3), (0, 2)
  // else.
  double step_scale = 1;
  // Explicit alpha for GD, HB and NAG; 0 means c / L. Must be < 1/mu.
  double learning_rate = 0;
  // HB and NAG momentum beta in [0, 1); negative means beta(alpha)
  // (MomentumForStep, as in the paper's Sec. 5).
  double momentum = -1;
  // -opt only: E0 (> 0), T selection on/off, constants
  // (TSelectConvention).
  double initial_error = 10;
  bool select_steps = true;
  TSelectConvention convention = TSelectConvention::kReference;
  // MASG only.
  int masg_p = 1;
  FirstStageRule first_stage = FirstStageRule::kCeil;
  // x0 (public); empty means the zero vector. Size = parameter size.
  std::vector<double> initial_point;
  ModelConfig model;

  // INVALID_ARGUMENT for any value outside the ranges above, options that do
  // not apply to `method` being set (e.g. learning_rate for MASG), or an L1
  // regulariser (these methods have no proximal step).
  absl::Status Validate() const;
};

// Everything Calibrate() decides. Public; derived from public inputs only.
struct Plan {
  StepSchedule schedule;  // alpha_t, beta_t, s_t, restart_t for t = 1..steps
  int64_t steps = 0;      // T_final (= T for uniform methods)
  double smoothness = 0;
  double strong_convexity = 0;
  double sampling_rate = 1;  // q = m / n
  double expected_batch_size = 0;
  privacy::Relation relation = privacy::Relation::kAddRemove;
  // Laplace: eps_t under `relation` (sum = epsilon). Gaussian: the share of
  // the budget of step t (uniform: 1/T).
  std::vector<double> step_share;
  // The multiplier the oracle is asked for at step t (add/remove: Laplace
  // scale / effective L1 sensitivity, or Gaussian z_t).
  std::vector<double> oracle_multiplier;
  // Per-step event as charged (under `relation`).
  std::vector<privacy::DpEvent> step_events;
  // Composition of step_events: what the ledger is charged.
  privacy::DpEvent event;
  std::vector<std::string> notes;
};

// Calibrates `options` for a dataset with public metadata `info` and the
// target. Errors: INVALID_ARGUMENT (options, info, target: e.g. m > n,
// m < n on a replace-one dataset, x0 of the wrong size, Gaussian without
// delta, PLD for Laplace), OUT_OF_RANGE (target unreachable).
absl::StatusOr<Plan> MakePlan(const AcceleratedOptions& options,
                              const PublicDatasetInfo& info,
                              const PrivacyTarget& target);

// The step schedule of `options` over `steps` steps (data-free).
absl::StatusOr<StepSchedule> MakeSchedule(const AcceleratedOptions& options,
                                          double mu, int64_t steps);

// The per-step events of a charged event: SelfComposed(k, e) -> k copies of
// e, Composed -> its members. INVALID_ARGUMENT for other shapes.
absl::StatusOr<std::vector<privacy::DpEvent>> FlattenStepEvents(
    const privacy::DpEvent& event);

}  // namespace dpopt::optim::accelerated

#endif  // DPOPT_CORE_OPTIM_ACCELERATED_CALIBRATION_H_
