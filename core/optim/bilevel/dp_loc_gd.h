// The strongly convex inner solver of bilevel family (Kornowski 2024,
// Algorithms 2 and 4; docs/algorithms/bilevel.md): DP-Loc-GD (Algorithm 2;
// Algorithm 4 with Poisson batches), a practical mode, and the exact
// (non-private) mode of the naive penalty method.
//
// Every step asks the PrivateSumOracle for one privatized direction
//   u + nu = (clipped per-example sum + Gaussian noise) + public gradient
// and takes a projected step; everything else is post-processing.
//  * kPaper (Alg. 2): for m = 0..M-1, for t = 0..T_GD-1:
//      y^m_{t+1} = Proj_{B(y^m_0, R_m)}(y^m_t - eta_t (u + nu)),
//      eta_t = 1 / (mu (t + 1)) (restarting every round);
//    y^{m+1}_0 = (1/T_GD) sum_{t=0}^{T_GD-1} y^m_t (includes y^m_0, excludes
//    y^m_{T_GD}; the paper writes 1/T, meaning T_GD); output y^M_0.
//    M = max(1, ceil(log2(ln(max(e^2, mu eps' n / L))))) (the paper's
//    log2 ln(mu eps' n / L) can be fractional or <= 0), T_GD = n^2 unless
//    set, radii from an explicit form of the Theta~ recursion of the proof
//    of Thm A.1 (our constants):
//      gap_m = 2 R_m (sigma + 2L [minibatch]) sqrt(2 ln(4M/gamma)/T_GD)
//            + H (L^2 + sigma^2 (sqrt(d) + sqrt(2 ln(2 M T_GD/gamma)))^2)
//              / (mu T_GD),                      H = 1 + ln T_GD,
//      R_{m+1} = min(2 R_m, sqrt(2 gap_m / mu)).
//  * kPractical (the default; T_GD = n^2 costs O(n^3) per-example gradients
//    per solve, infeasible beyond toy n, and the paper allows any DP
//    strongly convex solver with the optimal rate, Appendix A): M = 1,
//    constant step 1/beta, T_GD = ceil(2 (beta/mu) ln(max(e, n))), projection
//    onto B(y0, R0), output the mean of the last ceil(T_GD/2) iterates.
//  * kExact: NON-PRIVATE. Plain projected GD with step 1/beta and no
//    clipping or noise (PrivateSumOracle::ExactSum) for
//    ceil(40 beta/mu) + 100 steps (error factor <= e^-40); the last iterate.
//    Only for the naive mode on public data and for tests.
// The plan (M, T_GD, steps, radii) depends only on public inputs and the
// calibrated noise, so it costs no privacy.
#ifndef DPOPT_CORE_OPTIM_BILEVEL_DP_LOC_GD_H_
#define DPOPT_CORE_OPTIM_BILEVEL_DP_LOC_GD_H_

#include <cstdint>
#include <vector>

#include "Eigen/Dense"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/optim/bilevel/accounting.h"
#include "core/optim/bilevel/private_sums.h"
#include "core/optim/step_reporter.h"

namespace dpopt::optim::bilevel {

enum class InnerMode { kPractical, kPaper, kExact };

struct InnerSolverOptions {
  InnerMode mode = InnerMode::kPractical;
  // kPaper: M (0 = the PaperRounds formula). In [0, 64].
  int64_t rounds = 0;
  // kPaper: T_GD per round (0 = n^2); kPractical: T_GD (0 = the formula
  // above). In [0, 10^6]. The product with the rounds is at most 10^6.
  int64_t steps = 0;
  // gamma, the failure probability used by the paper radii (not an input
  // in the paper; it only enters log factors), in (0, 1).
  double failure_probability = 0.05;
  absl::Status Validate() const;
};

// Public description of one strongly convex inner ERM h = (1/n) sum h_i
// [+ h_pub]: strong convexity mu, smoothness beta, a bound L on the full
// step direction over the ball (the clip bound of the per-example part plus
// any public gradient), the radius R0 of a ball around y0 that contains the
// minimiser, and the dimension.
struct InnerProblem {
  double mu = 0;
  double beta = 0;
  double lipschitz = 0;
  double radius = 0;
  int64_t dimension = 0;
  absl::Status Validate() const;
};

struct InnerPlan {
  InnerMode mode = InnerMode::kPractical;
  int64_t rounds = 1;
  int64_t steps = 0;          // per round
  double step_size = 0;       // kPractical / kExact: 1 / beta
  std::vector<double> radii;  // R_0..R_{M-1}
  int64_t averaged = 0;       // kPractical: ceil(steps / 2)
  double mu = 0;              // for the paper step sizes
  // kPractical / kExact: center of the projection ball (empty = y0). Lets
  // warm-started solves keep projecting onto a ball known to contain the
  // minimiser.
  Eigen::VectorXd center;
  // Noisy releases of one solve (0 for kExact).
  int64_t releases() const {
    return mode == InnerMode::kExact ? 0 : rounds * steps;
  }
};

// M = max(1, ceil(log2(ln(max(e^2, mu eps' n / L))))) (Thm 8.2's
// M = log2 ln(mu eps' n / L), made an integer >= 1).
int64_t PaperRounds(double mu, double per_call_epsilon, double rows,
                    double lipschitz);

// The plan of one solve from public inputs. `per_call_epsilon` is the
// epsilon' of the paper's M formula (only used by kPaper; any positive
// public value, e.g. the zCDP-equivalent epsilon of the call's share).
// Errors: INVALID_ARGUMENT for bad options/problem or a plan over 10^6
// steps (kPaper with T_GD = n^2 on a large n: set `steps`).
absl::StatusOr<InnerPlan> PlanInnerSolve(const InnerSolverOptions& options,
                                         const InnerProblem& problem,
                                         int64_t rows, double per_call_epsilon);

// kPaper radii from the recursion above, for the per-coordinate noise std
// `sigma` of one released direction (public: from the calibration) and the
// failure budget gamma_in of this solve. R_0 = problem.radius.
void SetPaperRadii(const InnerProblem& problem, double sigma, bool minibatch,
                   double gamma_in, InnerPlan* plan);

// The source of the released direction at a point y.
class InnerSource : public ContributionSource {
 public:
  virtual void SetPoint(const Eigen::VectorXd& y) = 0;
};

// Every iterate of a solve (tests; post-processing of the releases).
struct InnerTrace {
  std::vector<std::vector<Eigen::VectorXd>> rounds;  // y^m_0..y^m_{T_GD}
  std::vector<Eigen::VectorXd> round_starts;         // y^0_0..y^M_0
};

// Runs the plan from y0 with `mechanism` at noise scale `scale` (ignored for
// kExact). `trace` may be null. `reporter` (may be null) is asked whether to
// stop before every step (one pass over the rows); a stop request ends the
// solve with CANCELLED. Errors: the oracle's (budget, rng, plan).
absl::StatusOr<Eigen::VectorXd> RunInnerSolve(
    const InnerPlan& plan, const PlannedMechanism& mechanism, double scale,
    PrivateSumOracle& oracle, InnerSource& source, const Eigen::VectorXd& y0,
    InnerTrace* trace, StepReporter* reporter);

}  // namespace dpopt::optim::bilevel

#endif  // DPOPT_CORE_OPTIM_BILEVEL_DP_LOC_GD_H_
