// RDP of the Gaussian mechanism on a sample drawn WITHOUT replacement, under
// the replace-one relation: Wang, Balle & Kasiviswanathan, "Subsampled Renyi
// Differential Privacy and Analytical Moments Accountant" (AISTATS 2019,
// arXiv 1808.00087), Theorem 27 (their Gaussian specialisation of Thm. 9
// through ternary |chi|^j divergences). Used by
// ComputeRdp(SampledWithoutReplacement(n, m, Gaussian(z))) (rdp.h) and by
// distributed-DDA family's visible-activation accounting
// (core/optim/distributed_dda/accounting.h).
//
// For integer alpha >= 2, sampling ratio gamma = m / n and noise multiplier
// z (sigma / replace-one sensitivity), with g(x) = exp(x (x - 1) / (2 z^2))
// and Delta^k g its k-th forward difference at 0:
//   eps(alpha) = log(1 + gamma^2 C(alpha,2) min{4 (e^{1/z^2} - 1),
//                                               2 e^{1/z^2}}
//                    + sum_{j=3..alpha} gamma^j C(alpha,j)
//                        min{4 sqrt(Delta^{2 floor(j/2)} g
//                                   Delta^{2 ceil(j/2)} g),
//                            2 e^{j (j - 1) / (2 z^2)}}) / (alpha - 1).
// Fractional orders interpolate (alpha - 1) eps(alpha) linearly between the
// neighbouring integers (WBK19, Cor. 10; convexity of the CGF).
//
// The forward differences are computed without cancellation: for Gaussians
// P = N(1, z^2), Q = N(0, z^2) the identity
//   Delta^k g(0) = sum_i C(k,i) (-1)^{k-i} E_Q[(P/Q)^i] = E_Q[(P/Q - 1)^k]
//                = E[(exp(X/z - 1/(2 z^2)) - 1)^k],  X ~ N(0, 1),
// turns each even-order difference into the integral of a NON-NEGATIVE
// function, computed by the trapezoid rule in log space (the alternating sum
// loses every digit for z >~ 5 already at k ~ 20). The integrand is entire
// and log-concave on each side of its zero (curvature of its logarithm
// about 1 to 2 at the peaks), so the trapezoid rule with step 0.05 over
// [-(sqrt(K)+40), K/z + sqrt(K) + 40] has an error far below 1e-12 relative
// (exponentially small in 1/step for integrands analytic in a strip;
// checked against the 80-digit values in the test); the result is inflated by a
// factor (1 + 1e-9) and the mass outside the interval (at most exp(-800)
// relative, plus Phi(x_lo) on the left where the integrand is <= the normal
// density) is added, so it is an upper bound. The forward-difference branch is
// used for j <= 64 and z >= 0.25; beyond, the second branch 2 e^{j(j-1)/(2
// z^2)} (always valid).
#ifndef DPOPT_CORE_PRIVACY_WOR_GAUSSIAN_H_
#define DPOPT_CORE_PRIVACY_WOR_GAUSSIAN_H_

#include <vector>

#include "absl/types/span.h"

namespace dpopt::privacy {

// Upper bounds on log Delta^k g(0) = log E[(exp(X/z - 1/(2z^2)) - 1)^k] for
// k = 2, 4, ..., 2 * count (entry i is k = 2 (i + 1)). REQUIRES: z > 0,
// count >= 1.
std::vector<double> LogEvenForwardDifferences(double z, int count);

// The RDP curve of SampledWithoutReplacement(gamma, Gaussian(z)) at
// `orders` (each > 1 or +inf; +inf gives +inf), never above the unsampled
// alpha / (2 z^2). gamma in [0, 1], z >= 0 (z == 0 gives +inf unless
// gamma == 0).
std::vector<double> RdpSampledWithoutReplacementGaussian(
    double gamma, double z, absl::Span<const double> orders);

}  // namespace dpopt::privacy

#endif  // DPOPT_CORE_PRIVACY_WOR_GAUSSIAN_H_
