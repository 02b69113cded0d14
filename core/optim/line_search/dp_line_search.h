// DP-BLSGD, DP-BLSGD-AC and DP-BLGD (line-search family, Chen & Lee 2022,
// Algorithms 1-3; docs/algorithms/line_search.md), with sound accounting
// (see "Deviations from the paper" below).
//
// One outer iteration t (the paper's Alg. 2, restructured):
//   check "gradient + one line search" fits the job filter, else STOP
//   (the paper checks only the gradient, and not before the first one)
//   g~ = (sum_{B} clip(grad, C_g) + N_Z(0, C_g^2/(2 rho_g) I)) / m + mu w
//       (PrivateGradientOracle: Poisson(q) batch, rounded Gaussian, m = qn)
//   loop:
//     eta = NOISYBTLS(fresh Poisson batch, w, g~, eta0, eps_BT | rho_BT,
//           C_obj) (LineSearchOracle; charged SparseVector(eps_BT) or
//           GaussianSparseVector(rho_BT, max_it), sampled)
//     if eta > 0: theta_bar update (eq. 7), w <- w - eta g~, break
//     DP-BLSGD(-AC): g2 = a second noisy gradient at the current rho_g on a
//       fresh batch; CHEB (Alg. 3) may raise rho_g or eps_BT by (1+xi) and
//       sets g~ <- (g~ + g2)/2; AC: at most one clip decay per iteration
//       when rho_g rose (Sec. 4.4).
//     DP-BLGD (q = 1; the paper does not spell it out, so it uses DP-AGD's
//       budget increase, Lee & Kifer 2018): rho_g <- (1+xi) rho_g; g2 drawn at
//       the increment rho_new - rho_old; g~ <- (rho_old/rho_new) g~ +
//       (1 - rho_old/rho_new) g2 (equals one release at rho_new).
//   every tau iterations: eta0 schedule (Sec. 4.2).
// Output: the last accepted iterate (w changes only when eta > 0).
//
// Privacy (sound accounting). Calibrate() reserves
//   R = SelfComposed(T, Composed{G(z), S(eps0)}),
//   G(z) = the inner Gaussian(z) of GaussianGradientEvent(q, C_g, z)
//          (one gradient release, reserved without amplification credit;
//          see ReservationEvent()), or with reserve_amplified the whole
//          PoissonSampled(q, Gaussian(z)) (tight sampled Gaussian, MTZ 2019),
//   S(e) = PoissonSampled(q, SparseVector(e))      (one line search),
//   or, with the Gaussian line search (line_search_noise = kGaussian),
//   S(r) = PoissonSampled(q, GaussianSparseVector(sqrt(3/(2r)), sqrt(3/r),
//          max_it)), RDP (4/3) alpha r + log(max_it + 1)/(alpha - 1) before
//          amplification (Zhu & Wang 2020 Thm 8),
// where T = planned_iterations and eps0 = line_search_share / z (the paper's
// split eps_BT = eps_iter, rho_g = eps_iter^2 / 2, Sec. 5.4), rho0 =
// eps0^2 / 2 for the Gaussian search (its zCDP equivalent); CHEB raises eps_BT
// or rho_BT by (1 + xi) alike. (PoissonSampled is dropped at q = 1.) The
// smallest z that makes R (epsilon, delta)-DP under the RDP accountant. The
// server charges R to the ledger. Run() charges every access to a
// JobPrivacyFilter over R (all-orders rule, job_filter.h) BEFORE it touches
// data; the run length, the number of searches and CHEB draws, and the budget
// increases are data-dependent, but the filter never lets the job's RDP
// exceed R(alpha) at any ledger order, and the job stops cleanly
// (SolveResult::budget_exhausted) when the next access cannot be paid.
// SolveResult::spent is the exact composition of what was released.
//
// Deviations from the paper (its accounting has gaps a ledger must not
// inherit): a fresh Poisson batch per access (the paper reuses the
// gradient's batch for every line search yet amplifies each access as if it
// had its own sample); the public normaliser m = q n instead of the realised
// |B|, which would reveal the batch size; the Armijo term scaled by m (the
// paper's f is a sum but g an average, so its literal Armijo term is |B|
// times too small); add/remove only; the pure-DP route for the Laplace SVT
// cost; the Gaussian SVT charged by Zhu & Wang 2020 Thm 8 rather than the
// paper's Thm 3, whose proof (Appendix B) drops the sum over the max_it + 1
// outcomes; no mode with the paper's own accounting.
#ifndef DPOPT_CORE_OPTIM_LINE_SEARCH_DP_LINE_SEARCH_H_
#define DPOPT_CORE_OPTIM_LINE_SEARCH_DP_LINE_SEARCH_H_

#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/optim/algorithm.h"
#include "core/optim/line_search/cheb.h"
#include "core/optim/line_search/svt_line_search.h"
#include "core/optim/model.h"

namespace dpopt::optim::line_search {

enum class Variant { kBlsgd, kBlsgdAc, kBlgd };

struct DpLineSearchOptions {
  Variant variant = Variant::kBlsgd;
  // Poisson rate q in [1e-12, 1] (paper 0.1); must be 1 for DP-BLGD.
  double sampling_rate = 0.1;
  // Per-example gradient clip C_g (paper 3) and loss clip C_obj (paper 1),
  // both in (0, 1e6]. Enforced by the server.
  double clip_grad = 3;
  double clip_obj = 1;
  // T: the reservation pays for T ideal iterations (one gradient and one
  // line search each) at the initial budgets; in [1, 10^5].
  int64_t planned_iterations = 50;
  // Hard cap on outer iterations (public); 0 means 20 T. In [0, 10^6].
  int64_t max_iterations = 0;
  // eps_BT0 = line_search_share * sqrt(2 rho_g0) (paper: 1). In (0, 100].
  double line_search_share = 1.0;
  LineSearchOptions line_search;      // eta0 2, beta 0.8, max_it 15, c_A 0.5
  ChebOptions cheb;                   // xi 0.3, phi_max 1.1, phi_min 0.5
  double angle_decay = 0.8;           // psi in [0, 1)
  int step_schedule_period = 10;      // tau >= 1
  double step_schedule_factor = 1.2;  // varsigma >= 1
  double clip_decay = 0.05;           // zeta in [0, 1) (AC only)
  // Noise of the line search's sparse-vector test (paper Thm 1 Laplace or
  // Thm 3 Gaussian calibration; charged as in svt_line_search.h).
  SvtNoiseKind line_search_noise = SvtNoiseKind::kLaplace;
  // Reserve each planned gradient at its Poisson-amplified cost instead of
  // the unsampled one (see ReservationEvent()).
  bool reserve_amplified = false;
  ModelConfig model;

  // INVALID_ARGUMENT for values outside the ranges above.
  absl::Status Validate() const;
  int64_t EffectiveMaxIterations() const {
    return max_iterations > 0 ? max_iterations : 20 * planned_iterations;
  }
};

// Public per-run counters (all post-processing of released values).
struct LineSearchRunStats {
  int64_t iterations = 0;      // outer iterations started
  int64_t accepted_steps = 0;  // iterations that moved w
  int64_t gradient_releases = 0;
  int64_t line_searches = 0;
  int64_t cheb_raise_gradient = 0;
  int64_t cheb_raise_line_search = 0;
  int64_t cheb_no_change = 0;
  int64_t clip_decays = 0;
  double final_rho_grad = 0;
  double final_eps_bt = 0;  // Laplace line search
  double final_rho_bt = 0;  // Gaussian line search
  double final_clip_grad = 0;
  double final_clip_obj = 0;
  double final_eta0 = 0;
  double final_theta_bar = 0;
};

// name(): "dp_blsgd", "dp_blsgd_ac" or "dp_blgd".
// Errors: INVALID_ARGUMENT if options are invalid.
absl::StatusOr<std::unique_ptr<Algorithm>> NewDpLineSearch(
    const DpLineSearchOptions& options);

// The reservation event for noise multiplier z (see above) on p parameters.
absl::StatusOr<privacy::DpEvent> ReservationEvent(
    const DpLineSearchOptions& options, double z, int64_t parameter_size);

// The run itself, with the sparse-vector noise injected (Algorithm::Run uses
// SecureSvtNoise() and context.noise()). Exposed for tests and for counters;
// `stats` may be null. Same contract as Algorithm::Run.
absl::StatusOr<SolveResult> RunDpLineSearch(const DpLineSearchOptions& options,
                                            const Dataset& data,
                                            const Calibration& calibration,
                                            SolveContext& context,
                                            const SvtNoise& svt_noise,
                                            LineSearchRunStats* stats);

}  // namespace dpopt::optim::line_search

#endif  // DPOPT_CORE_OPTIM_LINE_SEARCH_DP_LINE_SEARCH_H_
