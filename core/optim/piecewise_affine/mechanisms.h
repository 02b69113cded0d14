// Piecewise-affine's four private mechanisms (Han, Topcu & Pappas 2014,
// Sec. 4; docs/algorithms/piecewise_affine.md) and the non-private
// baselines, as job algorithms (core/optim/algorithm.h). Every one is pure
// epsilon-DP under the l-infinity offset relation (the paper's eq. (4),
// privacy::Relation::kLinfOffsets) and charges exactly the job's epsilon,
// once:
//
//   job type             mechanism (paper)               charged event
//   pa_perturb_problem   M_P (Sec. 4.1, Thm 16)          EpsilonDelta(eps, 0)
//   pa_perturb_solution  M_S (Sec. 4.2)                  EpsilonDelta(eps, 0)
//   pa_exponential       M_E (Sec. 4.3, Thm 19), exact   Exponential(eps)
//   pa_subgradient       Algorithm 2 (Sec. 4.4, Thm 15)  EpsilonDelta(eps, 0)
//   pa_solve             non-private LP / subgradient    none (public only)
//
// Algorithm 2's charge is the job's epsilon, not a sum of k floats: its k
// selections run at rates computed from eps / k and rounded
// down, so their basic composition is at most eps.
//
// Noise: vector Laplace through core/noise/vector_laplace.h (exact, on a
// power-of-two grid); selections through scores.h (exact softmax on integer
// scores). M_E samples the exponential mechanism over a fine lattice of the
// box P (2^20 points per axis) by rejection with exact acceptance
// probabilities: a finite exponential mechanism with scores -f (Lemma 18),
// so exactly eps-DP; it is refused before charging when the public bound on
// its expected proposals exceeds the job's limit. There is no Metropolis
// sampler in the service (the paper's Sec. 5.1 sampler: a chain's law is
// only close to the target, so its guarantee is not certified).
#ifndef DPOPT_CORE_OPTIM_PIECEWISE_AFFINE_MECHANISMS_H_
#define DPOPT_CORE_OPTIM_PIECEWISE_AFFINE_MECHANISMS_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "Eigen/Dense"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/noise/random.h"
#include "core/noise/vector_laplace.h"
#include "core/optim/algorithm.h"
#include "core/optim/piecewise_affine/problem.h"

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
  // Refuse (before charging) when the public bound on the expected number
  // of proposals, exp(eps/(2 b_max) G R) up to grid terms, exceeds this.
  // Default 1e6; at most 1e9.
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

absl::StatusOr<Eigen::VectorXd> RunPerturbSolution(
    const ProblemInfo& info, const Dataset& data,
    const noise::VectorLaplacePlan& plan, bool project,
    const OffsetNoise& noise, noise::RandomSource& rng);

// M_E's plan: score grid, rate (eps / (2 Delta) per unit), and the public
// bound on the expected number of proposals.
struct ExponentialPlan {
  double grid = 0;
  double sensitivity_units = 0;
  noise::Dyadic rate;
  double beta = 0;  // rate / grid: the inverse temperature actually used
  double expected_proposals_bound = 0;
  int lattice_bits = 20;  // 2^20 lattice points per axis
};
absl::StatusOr<ExponentialPlan> PlanExponential(const ProblemInfo& info,
                                                double epsilon);
// One exact sample; *proposals (optional) receives the number of proposals.
absl::StatusOr<Eigen::VectorXd> RunExponential(const ProblemInfo& info,
                                               const Dataset& data,
                                               const ExponentialPlan& plan,
                                               noise::RandomSource& rng,
                                               int64_t* proposals = nullptr);

// Algorithm 2. `rate` is Algorithm 1's per-step rate; `private_selection`
// false runs the regular (non-private) subgradient method instead (public
// datasets / tests only). The callback (may be null) sees each iterate.
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
    IterationCallback* callback);

}  // namespace dpopt::optim::piecewise_affine

#endif  // DPOPT_CORE_OPTIM_PIECEWISE_AFFINE_MECHANISMS_H_
