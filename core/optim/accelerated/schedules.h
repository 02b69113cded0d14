// Accelerated (Kuru, Birbil, Gurbuzbalaban, Yildirim, "Differentially Private
// Accelerated Optimization Algorithms", SIAM J. Optim. 2022): data-free
// schedules and budget arithmetic shared by the accelerated DP optimizers.
// Everything here is a pure function of PUBLIC constants (L, mu, c, T, n, m,
// d, epsilon, E0), so using it costs no privacy
// (docs/algorithms/accelerated.md).
//
// Indexing: steps are t = 1..T; vector entry [t-1] belongs to the update that
// produces x_t (the noise b_t is the noise of that update, as in the paper's
// (4.2)-(4.3) and the authors' MATLAB code, which this file calls "the
// authors' code": github.com/sibirbil/DPAccGradMethods).
#ifndef DPOPT_CORE_OPTIM_ACCELERATED_SCHEDULES_H_
#define DPOPT_CORE_OPTIM_ACCELERATED_SCHEDULES_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace dpopt::optim::accelerated {

// ---- Per-step privacy arithmetic (paper (3.3)-(3.5), Prop. 3.1). ----

// Amplification by subsampling at rate q (paper Thm A.3; BBG18):
// log(1 + q (e^{eps0} - 1)), computed as log1p(q expm1(eps0)).
// REQUIRES: eps0 >= 0, q in (0, 1].
double AmplifiedEpsilon(double eps0, double q);

// Inverse of AmplifiedEpsilon: the base epsilon eps0 whose
// amplification at rate q is eps_t, log1p(expm1(eps_t) / q).
// REQUIRES: eps_t >= 0, q in (0, 1].
double BaseEpsilon(double eps_t, double q);

// Paper (3.3): privacy loss of Laplace(b) on a size-m minibatch
// average with per-record L1 sensitivity S, n records:
// log1p((m/n) expm1(S / (b m))).
double EpsLoss(double sensitivity, double scale, double n, double m);

// Paper (3.4)-(3.5): the Laplace scale on the minibatch average that costs
// exactly eps_t: S / (m log1p((n/m) expm1(eps_t))).
double LaplaceScaleFor(double sensitivity, double eps_t, double n, double m);

// beta(alpha) = (1 - sqrt(mu alpha)) / (1 + sqrt(mu alpha)), the momentum of
// the paper's experiments (Sec. 5).
double MomentumForStep(double alpha, double mu);

// ---- Step-size / momentum schedules. ----

struct StepSchedule {
  std::vector<double> alpha;  // alpha_t
  std::vector<double> beta;   // beta_t
  std::vector<int> stage;     // s_t, 1-based (all 1 for single-stage methods)
  // True at the first step of every stage k >= 2: momentum restart
  // (x_prev := x, so z = x; as in the authors' code, not in the paper).
  std::vector<bool> restart;
  int64_t size() const { return static_cast<int64_t>(alpha.size()); }
};

// alpha_t = alpha, beta_t = beta, one stage, t = 1..steps.
// REQUIRES: steps >= 1.
StepSchedule ConstantSchedule(int64_t steps, double alpha, double beta);

// MASG first-stage length rule (the paper only says n_1 >= 1): the authors'
// code's ceil (the default) or their Fig. 2 script's floor.
enum class FirstStageRule { kCeil, kFloor };

struct MasgOptions {
  double smoothness = 0;        // L > 0 (public)
  double strong_convexity = 0;  // mu in (0, L] (public)
  double step_scale = 1;        // c in (0, 1]: alpha^(k) = c / (2^{2k} L)
  int p = 1;                    // C = ceil(sqrt(kappa) ln 2^{p+2}); [1, 10]
  FirstStageRule first_stage = FirstStageRule::kCeil;
  absl::Status Validate() const;
};

// Paper (4.7) + the authors' code: kappa = L/mu,
// n_1 = ceil(2 sqrt(kappa) ln sqrt(kappa)) (or floor), at least 1;
// C = ceil(sqrt(kappa) ln 2^{p+2}); n_k = 2^k C for k >= 2.
struct MasgStageLengths {
  int64_t first = 0;  // n_1
  int64_t unit = 0;   // C
  // n_k for k >= 1.
  int64_t Length(int k) const;
};
absl::StatusOr<MasgStageLengths> ComputeMasgStageLengths(
    const MasgOptions& options);

// Stages laid back to back and truncated at `steps`:
// alpha^(1) = c/L, alpha^(k) = c/(2^{2k} L) (k >= 2), beta^(k) =
// beta(alpha^(k)), restart at the first step of every stage k >= 2.
// Errors: INVALID_ARGUMENT (options, steps < 1).
absl::StatusOr<StepSchedule> MasgSchedule(int64_t steps,
                                          const MasgOptions& options);

// ---- Noise dividing (paper Prop. 4.2, Remark 4.1, Thm 4.3). ----

// Constants of the bound used to choose T_final:
//   kReference: k_a = 1/2 in a~_{tau,t}, and 2^{s_tau} on the E0 term, as in
//               the authors' code (reproduces the published figures;
//               default);
//   kPaper:     k_a = 1 and 2^{s_tau - s_1}.
enum class TSelectConvention { kReference, kPaper };

struct NoiseDividingOptions {
  double smoothness = 0;        // L
  double strong_convexity = 0;  // mu
  TSelectConvention convention = TSelectConvention::kReference;
  // Exponent r of the allocation: budget share of step t is proportional to
  // a_t^r. 1/3 for pure-DP Laplace (Prop. 4.2); 1/2 for the Gaussian/zCDP
  // extension.
  double exponent = 1.0 / 3.0;
  // Noise term of the score is noise_unit * (sum_t a_t^r)^{1/r}:
  // d (S/(n eps))^2 for Laplace (Remark 4.1, eq. (4.6));
  // d S2^2 / (2 n^2 rho) for the Gaussian extension.
  double noise_unit = 0;
  // E0, the public guess of the initial Lyapunov error (experiments: 10).
  double initial_error = 10;
  absl::Status Validate() const;
};

// log a~_{tau,t} for t = 1..tau:
//   A_t = sum_{i=t+1..tau} ln(1 - sqrt(mu alpha_i)) + ln(k_a alpha_t (1 +
//         alpha_t L)) + (s_tau - s_t) ln 2.
// REQUIRES: 1 <= tau <= schedule.size(); mu alpha_t < 1.
std::vector<double> LogBoundWeights(const StepSchedule& schedule, int64_t tau,
                                    const NoiseDividingOptions& options);

// log a~_{tau,0} = sum_{i=1..tau} ln(1 - sqrt(mu alpha_i)) + k_0 ln 2 with
// k_0 = s_tau (reference) or s_tau - s_1 (paper).
double LogInitialWeight(const StepSchedule& schedule, int64_t tau,
                        const NoiseDividingOptions& options);

// Natural log of the bound (4.6) with horizon tau:
//   LSE( (1/r) LSE(r A) + ln noise_unit , ln E0 + A_0 ).
double LogBoundScore(const StepSchedule& schedule, int64_t tau,
                     const NoiseDividingOptions& options);

// T_final = smallest argmin over tau = 1..schedule.size() of LogBoundScore
// (Remark 4.1), in O(T^2) total with suffix sums.
// Errors: INVALID_ARGUMENT (options, empty schedule).
absl::StatusOr<int64_t> SelectFinalSteps(const StepSchedule& schedule,
                                         const NoiseDividingOptions& options);

// Budget shares w_t = a~_{T,t}^r / sum_j a~_{T,j}^r for t = 1..steps (the
// horizon is `steps`, i.e. T_final). Sum to 1 within rounding.
// (Prop. 4.2: eps_t = eps * w_t.)
// Errors: INVALID_ARGUMENT (options, steps outside [1, schedule.size()]).
absl::StatusOr<std::vector<double>> BudgetShares(
    const StepSchedule& schedule, int64_t steps,
    const NoiseDividingOptions& options);

}  // namespace dpopt::optim::accelerated

#endif  // DPOPT_CORE_OPTIM_ACCELERATED_SCHEDULES_H_
