// Special functions and exact confidence intervals used by the empirical
// privacy auditor and by the statistical tests of the samplers.
//
// All functions are pure and deterministic; they return NaN for arguments
// outside their domain (documented per function) rather than failing.
#ifndef DPOPT_CORE_AUDIT_STATISTICS_H_
#define DPOPT_CORE_AUDIT_STATISTICS_H_

#include <cstdint>

namespace dpopt::audit {

// Regularized incomplete beta I_x(a, b) = B(x; a, b) / B(a, b).
// REQUIRES: a > 0, b > 0, 0 <= x <= 1. Relative accuracy about
// 1e-15 * (a + b) (cancellation in the lgamma prefactor): ~1e-13 for
// a + b <= 100, ~1e-11 for a + b = 1e4.
double RegularizedIncompleteBeta(double a, double b, double x);

// The x in [0, 1] with I_x(a, b) = p, by bisection (monotone, robust).
// `round_up` selects the end of the final bracket: true returns an x with
// I_x(a, b) >= p, false one with I_x(a, b) <= p (up to the accuracy of
// RegularizedIncompleteBeta). REQUIRES: a > 0, b > 0, 0 <= p <= 1.
double InverseRegularizedIncompleteBeta(double a, double b, double p,
                                        bool round_up);

// Regularized upper incomplete gamma Q(a, x) = Gamma(a, x) / Gamma(a).
// REQUIRES: a > 0, x >= 0.
double RegularizedGammaQ(double a, double x);

// P[chi^2_k > x], the p-value of a chi-square statistic with k degrees of
// freedom. REQUIRES: k > 0.
double ChiSquareSurvival(double x, double degrees_of_freedom);

// One-sided Clopper-Pearson bounds for a binomial proportion from k successes
// in n trials: P[p < lower] <= alpha and P[p > upper] <= alpha, exactly (not
// asymptotically). Rounded outwards. REQUIRES: 0 <= k <= n, n > 0,
// 0 < alpha < 1.
double ClopperPearsonLower(int64_t k, int64_t n, double alpha);
double ClopperPearsonUpper(int64_t k, int64_t n, double alpha);

}  // namespace dpopt::audit

#endif  // DPOPT_CORE_AUDIT_STATISTICS_H_
