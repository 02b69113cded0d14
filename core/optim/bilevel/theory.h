// The theory calculator of bilevel family: parameters of Algorithm 1 by
// Theorem 4.1 of Kornowski 2024, with every constant its proof fixes and the
// unknown O-constants set to 1, and corrected exponents (the paper's
// Eqs. (12) and (16) have ell^{3/2} where the algebra gives ell^{5/2}, so
// K2 = Delta^{1/6} ell^{5/6} kappa^{11/6}). Pure arithmetic on public
// inputs: it never sees data and costs no privacy.
//
// For a target stationarity alpha:
//   ell = max(L0^f, L1^f, L0^g, L1^g, L2^g), kappa = ell / mu_g
//   lambda_min = max(2 L1^f/mu_g, 2 L1^g/mu_g, L0^f/L0^g, L1^f/L1^g)
//   alpha_max  = ell kappa^3 min(1/(2 kappa), L0^g/L0^f, L1^g/L1^f,
//                                Delta_F/(ell kappa))        (Thm 4.1 pre.)
//   lambda(alpha) = max(lambda_min, 2 ell kappa^3 / alpha)
//   L_out = ell (1 + kappa)^3, eta = 1 / (2 L_out)           (Prop. 4.6)
//   T(alpha) = ceil((256/3) L_out (Delta_F + 2 ell kappa / lambda) / alpha^2)
//   sigma(alpha): the outer noise of the zCDP split (accounting.h),
//     sigma = (2 C_out / n) / sqrt(2 w_out rho / T), rho = rho(eps, delta)
//   R^(1)_M, R^(2)_M: the paper-mode radii recursion (dp_loc_gd.h) run M
//     rounds (T_GD = n^2, failure budget gamma / (4T) per solve) for the
//     two inner solves of Algorithm 1 with their zCDP noise sigma_GD,j
//   beta(alpha) = (L1^f + lambda L1^g) R^(2)_M + lambda L1^g R^(1)_M
//   a_sigma = sigma (sqrt(dx) + sqrt(2 ln(2T / gamma)))
//   feasible iff alpha <= alpha_max, 16 beta <= alpha, 16 a_sigma <= alpha.
// TheoryCalculator returns the smallest feasible alpha (log-grid scan, then
// bisection); when none is feasible it says "n too small for the theory"
// and the caller uses the practical defaults (dp_bilevel.h). With unit
// constants
// (ell = kappa = 1, Delta_F = 1, dx = dy = 2, epsilon 1, delta 1e-6) the
// theory first becomes feasible near n = 1e9: its 16x margins and the
// paper-mode inner solves are very conservative, which is why jobs use the
// practical defaults and this calculator is a library (tests, planning).
//
// Clip norms are the defaults of dp_bilevel.h (C_gy = L0^g, C_fy = L0^f,
// C_out = L0^f + 2 L1^g L0^f / mu_g) and sensitivities 2C/n (replace-one,
// the paper's relation; pass relation_factor 1 for add/remove).
#ifndef DPOPT_CORE_OPTIM_BILEVEL_THEORY_H_
#define DPOPT_CORE_OPTIM_BILEVEL_THEORY_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/optim/bilevel/accounting.h"
#include "core/optim/bilevel/bilevel_problem.h"

namespace dpopt::optim::bilevel {

struct TheoryInputs {
  ProblemConstants constants;
  // Delta_F >= F(x0) - inf_X F (Assumption 2.5(ii)), > 0.
  double initial_gap = 1;
  int64_t rows = 0;  // n in [1, 3e9] (T_GD = n^2 must fit in 64 bits)
  int64_t dx = 1;
  int64_t dy = 1;
  double epsilon = 1;          // > 0
  double delta = 1e-6;         // in (0, 1)
  double failure = 0.05;       // gamma in (0, 1)
  BudgetSplit split;           // outer share must be > 0
  double relation_factor = 2;  // 2 (replace-one) or 1 (add/remove)
  // INVALID_ARGUMENT for values outside the documented ranges.
  absl::Status Validate() const;
};

// Every quantity of the calculator at one alpha.
struct TheoryPoint {
  double alpha = 0;
  double lambda = 0;
  double eta = 0;
  double smoothness_out = 0;  // L_out
  int64_t outer_iterations = 0;
  double sigma = 0;           // outer noise std per coordinate
  int64_t inner_rounds1 = 0;  // M of solve 1 and solve 2
  int64_t inner_rounds2 = 0;
  double sigma_inner1 = 0;  // sigma_GD of solve 1 and solve 2
  double sigma_inner2 = 0;
  double radius_inner1 = 0;  // R^(1)_M
  double radius_inner2 = 0;  // R^(2)_M
  double bias = 0;           // beta(alpha)
  double noise_bound = 0;    // a_sigma
  bool feasible = false;     // alpha <= alpha_max, 16 beta, 16 a_sigma <= alpha
};

struct TheoryResult {
  double lambda_min = 0;
  double alpha_max = 0;
  // The smallest feasible alpha and its parameters (feasible == false: no
  // alpha in (0, alpha_max] is feasible; `point` is then alpha_max's).
  TheoryPoint point;
  bool feasible = false;
  std::string message;  // "n too small for the theory ..." when infeasible
};

// lambda_min and alpha_max of the inputs (lambda_min as in dp_bilevel.h).
double TheoryLambdaMin(const ProblemConstants& k);
double TheoryAlphaMax(const ProblemConstants& k, double initial_gap);

// The calculator's quantities at `alpha` > 0 (also when infeasible).
absl::StatusOr<TheoryPoint> EvaluateTheory(const TheoryInputs& inputs,
                                           double alpha);

// The smallest feasible alpha. INVALID_ARGUMENT for
// bad inputs; an infeasible n is a result (feasible == false), not an error.
absl::StatusOr<TheoryResult> TheoryCalculator(const TheoryInputs& inputs);

}  // namespace dpopt::optim::bilevel

#endif  // DPOPT_CORE_OPTIM_BILEVEL_THEORY_H_
