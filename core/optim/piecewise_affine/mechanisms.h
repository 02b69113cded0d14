// Piecewise-affine's four private mechanisms (Han, Topcu & Pappas 2014,
// Sec. 4; docs/algorithms/piecewise_affine.md) and the non-private
// baselines, as job algorithms (core/optim/algorithm.h). Every one is pure
// epsilon-DP under the l-infinity offset relation (the paper's eq. (4),
// privacy::Relation::kLinfOffsets) and charges the job's epsilon once (for
// Algorithm 2 as k exponential mechanisms, see below):
//
//   job type             mechanism (paper)               charged event
//   pa_perturb_problem   M_P (Sec. 4.1, Thm 16)          EpsilonDelta(eps, 0)
//   pa_perturb_solution  M_S (Sec. 4.2)                  EpsilonDelta(eps, 0)
//   pa_exponential       M_E (Sec. 4.3, Thm 19), exact   Exponential(eps)
//   pa_subgradient       Algorithm 2 (Sec. 4.4, Thm 15)  ExponentialMechanisms(
//                                                        eps, k)
//   pa_solve             non-private LP / subgradient    none (public only)
//
// Algorithm 2's charge is the job's epsilon, not a sum of k floats: its k
// selections run at rates computed from eps / k and rounded
// down, so their basic composition is at most eps. Each selection is an
// exponential mechanism at 2 rate Delta <= eps / k, hence (eps / k)-bounded
// range: the event ExponentialMechanisms(eps, k) is priced eps by basic
// composition and eps^2 / (8 k)-zCDP by an RDP filter (Cesar & Rogers
// 2021), never above the pure eps-DP price.
//
// Noise: vector Laplace through core/noise/vector_laplace.h (exact, on a
// power-of-two grid); selections through scores.h (exact softmax on integer
// scores). M_E samples the exponential mechanism over a fine lattice of the
// box P (2^20 points per axis) by rejection with exact acceptance
// probabilities, in a fixed public number of rounds: a finite exponential
// mechanism with scores -f (Lemma 18), mixed with a uniform fallback of
// probability <= 2^-80 / B, eps-DP in total (ExponentialPlan); it is refused
// before charging when the public bound B on its expected proposals exceeds
// the job's limit. There is no Metropolis
// sampler in the service (the paper's Sec. 5.1 sampler: a chain's law is
// only close to the target, so its guarantee is not certified).
#ifndef DPOPT_CORE_OPTIM_PIECEWISE_AFFINE_MECHANISMS_H_
#define DPOPT_CORE_OPTIM_PIECEWISE_AFFINE_MECHANISMS_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "Eigen/Dense"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/noise/random.h"
#include "core/noise/vector_laplace.h"
#include "core/optim/algorithm.h"
#include "core/optim/piecewise_affine/problem.h"
#include "core/optim/step_reporter.h"

namespace dpopt::optim::piecewise_affine {

// M_P (Han, Topcu & Pappas 2014, Sec. 4.1): b~ = b + w,
// w ~ VL(m, eps / (sqrt(m) b_max)), then x~ = argmin_{x in P} f(x; b~) by
// the LP. Releases x~ (the model) and b~.
struct PerturbProblemOptions {
  // Also release the perturbed offsets b~ (free post-processing). Default on.
  bool release_offsets = true;
  absl::Status Validate() const { return absl::OkStatus(); }
};

// M_S (Han, Topcu & Pappas 2014, Sec. 4.2): x~ = x* + w, w ~ VL(d, lambda_S),
// x* the LP solution.
enum class SolutionNoise {
  kPaper,  // lambda_S = eps / (sqrt(d) Delta_S), the paper's (default)
  // lambda_S = eps / Delta_S, also eps-DP: Delta_S is already an L2
  // sensitivity, so the paper's extra sqrt(d) is not needed (Thm 9).
  kTight,
};
struct PerturbSolutionOptions {
  SolutionNoise noise = SolutionNoise::kPaper;
  // Project x~ onto P (default on; free post-processing the paper omits,
  // which keeps outputs feasible and Thm 17 valid). Off releases x* + w.
  bool project = true;
  absl::Status Validate() const { return absl::OkStatus(); }
};

// M_E (Han, Topcu & Pappas 2014, Sec. 4.3): exact exponential mechanism on
// P (a box), by rejection instead of the paper's Metropolis chain.
struct ExponentialOptions {
  // Refuse (before charging) when the public bound B on the expected number
  // of proposals, about exp(eps/(2 b_max) G R) (ExponentialPlan::
  // expected_proposals_bound), exceeds this. Every run makes
  // ceil(B (ln B + 56)) proposal rounds, whatever the data. Default 1e6; at
  // most 1e9.
  double max_expected_proposals = 1e6;
  absl::Status Validate() const;
};

// Algorithm 2 (Han, Topcu & Pappas 2014, Sec. 4.4): k steps
// x <- Pi_P(x - alpha g), g = a_{i*} from Algorithm 1 at eps / k.
enum class Readout {
  kLast,     // x^(k+1), the paper's output (default)
  kAverage,  // (1/k) sum_{i<=k} x^(i): Theorem 24's proof bounds it too
};
enum class StepRule {
  kConstant,    // alpha_i = scale R / (G sqrt(k)) (default)
  kDecreasing,  // alpha_i = scale R / (G sqrt(i))
};
struct SubgradientOptions {
  int64_t iterations = 100;  // k, in [1, 100000]
  Readout readout = Readout::kLast;
  StepRule step_rule = StepRule::kConstant;
  double step_scale = 1;  // > 0, finite
  // x^(1): empty = the centre of P (data-independent; the paper does not
  // state its start).
  std::vector<double> initial_point;
  // Project every iterate onto P (default on; the paper does not project).
  bool project = true;
  // Release every iterate x^(1..k+1) and the chosen indices (free
  // post-processing of the private index draws). Limited to
  // (k + 1) d <= 10^6 values.
  bool release_trace = true;
  absl::Status Validate() const;
};

// Non-private baselines (public datasets only): the LP optimum, or the
// regular subgradient method (true argmax piece, lowest index on ties).
enum class BaselineMethod { kLp, kSubgradient };
struct BaselineOptions {
  BaselineMethod method = BaselineMethod::kLp;
  SubgradientOptions subgradient;  // for kSubgradient
  absl::Status Validate() const;
};

std::unique_ptr<Algorithm> NewPerturbProblem(const PerturbProblemOptions& o);
std::unique_ptr<Algorithm> NewPerturbSolution(const PerturbSolutionOptions& o);
std::unique_ptr<Algorithm> NewExponential(const ExponentialOptions& o);
std::unique_ptr<Algorithm> NewSubgradient(const SubgradientOptions& o);
std::unique_ptr<Algorithm> NewBaseline(const BaselineOptions& o);

// ---------------------------------------------------------------------------
// The pieces below are what Run() executes; exposed for known-answer tests.

// Adds vector Laplace noise. Production: the exact sampler. Tests may pass
// a test-only implementation (NOT DP) to switch the noise off.
class OffsetNoise {
 public:
  virtual ~OffsetNoise() = default;
  virtual absl::Status Add(const noise::VectorLaplacePlan& plan,
                           noise::RandomSource& rng,
                           Eigen::Ref<Eigen::VectorXd> v) const = 0;
};
const OffsetNoise& SecureOffsetNoise();

// M_P's and M_S's noise plans (lambda_P = eps / (sqrt(m) b_max);
// lambda_S = eps / (sqrt(d) R) in paper mode, eps / R tight).
absl::StatusOr<noise::VectorLaplacePlan> PerturbProblemPlan(
    const ProblemInfo& info, double epsilon);
absl::StatusOr<noise::VectorLaplacePlan> PerturbSolutionPlan(
    const ProblemInfo& info, double epsilon, SolutionNoise mode);

struct PerturbProblemOutput {
  Eigen::VectorXd x;  // x~
  Eigen::VectorXd b_tilde;
  bool lp_fallback = false;  // the LP failed; x~ is P's centre
};
absl::StatusOr<PerturbProblemOutput> RunPerturbProblem(
    const ProblemInfo& info, const Dataset& data,
    const noise::VectorLaplacePlan& plan, const OffsetNoise& noise,
    noise::RandomSource& rng);

// M_S's private LP runs padded to a public time budget
// (common::RunPaddedTo): kLpBudgetFactor times the time of the LP of the
// same shape (the public slopes and P) with public probe offsets
// (ProbeOffsets), plus kLpBudgetFloor, timed in the same job just before.
// The job's run time then depends on the private offsets only if their LP
// takes longer than that budget (the simplex path, and so the solve time,
// depends on the offsets; the mechanism needs the true minimiser).
inline constexpr double kLpBudgetFactor = 4;
inline constexpr absl::Duration kLpBudgetFloor = absl::Milliseconds(5);
// m offsets in [-b_max, b_max] that depend on m and b_max only (a
// low-discrepancy sequence: spread, no generator).
Eigen::VectorXd ProbeOffsets(int64_t m, double b_max);
// Solves the probe LP and returns the budget.
absl::Duration PerturbSolutionLpBudget(const ProblemInfo& info,
                                       const Eigen::MatrixXd& slopes);

// M_S: x* (the LP on the true offsets, padded to `lp_budget`: the job passes
// PerturbSolutionLpBudget; known-answer tests and audits of the output's
// law pass absl::ZeroDuration(), no padding), plus noise. The padding ends
// early once `stop_requested` says so (a cancelled job).
absl::StatusOr<Eigen::VectorXd> RunPerturbSolution(
    const ProblemInfo& info, const Dataset& data,
    const noise::VectorLaplacePlan& plan, bool project,
    const OffsetNoise& noise, noise::RandomSource& rng,
    absl::Duration lp_budget,
    const std::function<bool()>& stop_requested = nullptr);

// M_E's plan, from public values only: score grid, rate (eps / (2 Delta)
// per unit), and the sampler's fixed amount of work.
//
// The sampler's run time does not depend on the offsets by construction:
//   1. Offsets are shifted by their maximum s (a constant shift of every
//      score leaves the exponential mechanism's law and its privacy
//      unchanged), so every score that can be the maximum somewhere in P is
//      within 3 G X of 0 (X = max_{x in P} ||x||_2): PlanExponential refuses
//      problems where that range is not representable in score units.
//   2. A certified lower bound F_lo <= min_P f comes from `certificate_steps`
//      (public) steps of the projected subgradient method from P's centre
//      with step R / (G sqrt(K)): the step-weighted average of the visited
//      pieces is a dual point whose value is within G R / sqrt(K) of min f
//      (weak duality makes it a lower bound for any run). No LP is solved.
//   3. Exactly `rounds` (public) proposal rounds are run, every one with the
//      same work (d lattice draws, m d multiply-adds, one exact Bernoulli);
//      the first accepted proposal is the sample. If no round accepts (each
//      round accepts with probability >= 1 / expected_proposals_bound, so
//      this happens with probability <= 2^-80 / expected_proposals_bound),
//      the sample is a uniform lattice point drawn in every run. That
//      mixture is pure epsilon-DP: the rate is set so that the
//      exponential mechanism's 2 rate Delta plus log((e^eps_em + 2^-80) /
//      (1 - 2^-80)) - eps_em stays <= eps.
// What remains data-dependent in the run time: each round's exact Bernoulli
// draw loops about rate (F(x) - F_lo) + 1 times in expectation (at most
// rate * spread_units + 1), so the total over the fixed rounds depends on
// the distribution of the scores over P; and floating-point operations
// whose latency depends on their operands (none on the hot path on x86-64
// with SSE2: no subnormals or divisions by data).
struct ExponentialPlan {
  double grid = 0;
  double sensitivity_units = 0;
  noise::Dyadic rate;
  double beta = 0;  // rate / grid: the inverse temperature actually used
  // Public bound B on 1 / (acceptance probability of one round).
  double expected_proposals_bound = 0;
  // Public bound on max F - F_lo over the lattice, in grid units.
  double spread_units = 0;
  // K: subgradient steps of the lower-bound certificate.
  int64_t certificate_steps = 0;
  // N = ceil(B (ln B + 56)): proposal rounds of every run.
  int64_t rounds = 0;
  int lattice_bits = 20;  // 2^20 lattice points per axis
};
// Errors: INVALID_ARGUMENT (P not a box, epsilon too small, scores out of
// the representable range), or OUT_OF_RANGE when the rounds would exceed
// 2^62.
absl::StatusOr<ExponentialPlan> PlanExponential(const ProblemInfo& info,
                                                double epsilon);

// What a run did (tests and diagnostics; never released).
struct ExponentialRunStats {
  int64_t first_accepted = 0;  // 1-based round of the sample; 0: fallback
  int64_t rounds = 0;          // rounds run (plan.rounds unless stopped)
  // F_lo g + s: the certified lower bound used, in units of f.
  double floor_value = 0;
};
// One sample. `stats` (optional) receives what the run did. `reporter`
// (optional) is asked whether to stop between rounds; a stop request ends
// the run with CANCELLED (nothing is released).
absl::StatusOr<Eigen::VectorXd> RunExponential(
    const ProblemInfo& info, const Dataset& data, const ExponentialPlan& plan,
    noise::RandomSource& rng, ExponentialRunStats* stats = nullptr,
    StepReporter* reporter = nullptr);

// Algorithm 2. `rate` is Algorithm 1's per-step rate; `private_selection`
// false runs the regular (non-private) subgradient method instead (public
// datasets / tests only). `reporter` (may be null) sees each iterate.
struct SubgradientTrace {
  std::vector<Eigen::VectorXd> iterates;  // x^(1), ..., x^(k+1)
  std::vector<int64_t> indices;           // i*_1, ..., i*_k
  Eigen::VectorXd last;
  Eigen::VectorXd average;
  bool cancelled = false;
};
double SubgradientStep(const ProblemInfo& info, const SubgradientOptions& o,
                       int64_t i);
absl::StatusOr<SubgradientTrace> RunSubgradient(
    const ProblemInfo& info, const Dataset& data, const SubgradientOptions& o,
    bool private_selection, double step_epsilon, noise::RandomSource* rng,
    StepReporter* reporter);

}  // namespace dpopt::optim::piecewise_affine

#endif  // DPOPT_CORE_OPTIM_PIECEWISE_AFFINE_MECHANISMS_H_
