// The vector Laplace ("l2-Laplace", K-norm with the Euclidean ball)
// mechanism of Han, Topcu & Pappas 2014, Theorem 9: noise w in R^n with
// density proportional to exp(-lambda ||w||_2), which is epsilon-DP for a
// query of L2 sensitivity Delta when lambda = epsilon / Delta. Sampled
// exactly on a power-of-two grid, with no floating-point noise value
// (docs/architecture.md, invariant "secure noise only"; Mironov 2012 for why
// textbook floating-point noise leaks).
//
// Construction (ours; the paper, Sec. 5.1, samples a Gamma radius and a
// Gaussian direction in floating point, which is not secure):
//
//  1. Gaussian scale mixture. If G ~ Gamma((n + 1) / 2, 1) and Z ~ N(0, I_n)
//     are independent, Y = sqrt(2 G) Z / lambda has density proportional to
//     exp(-lambda ||y||_2). Proof: with W = 2 G / lambda^2 ~ Gamma((n+1)/2,
//     rate lambda^2/2), the density of Y at ||y|| = r is proportional to
//       int_0^inf w^(-n/2) exp(-r^2/(2w)) w^((n+1)/2 - 1) exp(-lambda^2 w/2) dw
//     = int_0^inf w^(-1/2) exp(-r^2/(2w) - lambda^2 w/2) dw
//     = sqrt(2 pi) / lambda * exp(-lambda r),
//     by int_0^inf w^(-1/2) exp(-a/w - b w) dw = sqrt(pi/b) exp(-2 sqrt(ab)).
//     (n = 1 is the classical Laplace = Gaussian scale mixture.)
//  2. G is a sum of (n + 1)/2 exact Exp(1) variates when n is odd, and of n/2
//     of them plus Z_0^2 / 2 when n is even. Exp(1) = k + x with k geometric
//     and x a lazily drawn uniform accepted by von Neumann's (1951) chain
//     (Karney 2016, Algorithm E's approach); Z_j, Z_0 are Karney's exact
//     normals (ExactStandardNormal). Every variate is an integer plus a
//     uniform real whose binary digits are drawn only when needed.
//  3. The released noise is g K with K_j = round(Y_j / g). With beta = lambda
//     g (a dyadic rational M 2^-F), |K_j| = t iff
//       beta^2 (t - 1/2)^2 < 2 G Z_j^2 < beta^2 (t + 1/2)^2,
//     a comparison of rationals: the digits drawn so far bound G and Z_j in
//     dyadic intervals, both sides are evaluated exactly in GMP integers, and
//     more digits are drawn until the interval decides t (almost always at
//     the first 64 digits). No square root, no rounding error.
//  4. Privacy: the value v is first rounded to the grid, round_g(v), whose
//     L2 sensitivity is at most Delta + g sqrt(n). Because round_g(v)/g is an
//     integer vector, round_g(v) + g K = g round(round_g(v)/g + Y/g), a
//     post-processing of the continuous mechanism round_g(v) + Y. With
//     lambda = epsilon / (Delta + g sqrt(n)) (rounded down through beta) that
//     mechanism is epsilon-DP by Theorem 9, so the release is epsilon-DP.
//
// Truncation: Karney's normals are conditioned on |Z| < 64 and each
// exponential on being < 2000; the excluded mass is below n exp(-1900) in
// total variation (as for every exact sampler in core/noise).
//
// Cost: about (3n/2) exact variates and n GMP comparisons (~200-bit
// integers). The run time depends only on the random draws, not on v.
#ifndef DPOPT_CORE_NOISE_VECTOR_LAPLACE_H_
#define DPOPT_CORE_NOISE_VECTOR_LAPLACE_H_

#include <cstdint>
#include <vector>

#include "Eigen/Dense"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/noise/discrete_samplers.h"
#include "core/noise/random.h"
#include "core/noise/rounded_gaussian.h"

namespace dpopt::noise {

struct VectorLaplacePlan {
  double l2_sensitivity = 0;  // Delta, as declared by the caller
  double epsilon = 0;         // target of the release
  int64_t dimension = 0;      // n
  double grid = 0;            // g, a power of two
  // Delta + g sqrt(n), rounded up.
  double effective_sensitivity = 0;
  // beta = lambda g, rounded DOWN to a dyadic M 2^-F (2^23 <= M < 2^24).
  Dyadic beta;
  // The exact rate sampled, beta / g <= epsilon / effective_sensitivity.
  double lambda = 0;
  // E ||w||_2 = n / lambda and E w_j^2 = (n + 1) / lambda^2 (Theorem 9's
  // moments), for display.
  double expected_norm = 0;
  double coordinate_stddev = 0;
};

// Chooses the grid (the power of two nearest below 2^-20 Delta / sqrt(n), so
// that rounding adds at most a relative 2^-20 to the sensitivity) and the
// rate. Errors: INVALID_ARGUMENT unless Delta and epsilon are finite and
// positive, Delta / epsilon is in [2^-900, 2^900], and 1 <= n <= 2^20.
absl::StatusOr<VectorLaplacePlan> PlanVectorLaplace(double l2_sensitivity,
                                                    double epsilon,
                                                    int64_t dimension);

// Exact Exp(1) = integer_part + fraction (von Neumann 1951; Karney 2016),
// conditioned on being < kMaxInteger + 1. Reuses its buffers.
class ExactExponential {
 public:
  static constexpr uint32_t kMaxInteger = 1999;
  // Draws a fresh variate into (k, x); x keeps its digits until reused.
  uint32_t Draw(RandomBits& bits, LazyUniform& x);

 private:
  // True with probability exp(-x): the length of the descending chain
  // x > U_1 > U_2 > ... is even.
  bool Accept(RandomBits& bits, LazyUniform& x);
  LazyUniform a_;
  LazyUniform b_;
};

// Samples K in Z^n with K_j = round(Y_j / g), Y ~ density prop. to
// exp(-lambda ||y||_2) (see the file comment). `out` is resized to n.
// Returns the source's error if it failed (then `out` must not be used).
absl::Status SampleVectorLaplaceUnits(const VectorLaplacePlan& plan,
                                      RandomSource& rng,
                                      std::vector<int64_t>* out);

// v <- round_g(v) + g K. REQUIRES: v.size() == plan.dimension.
// INVALID_ARGUMENT (before drawing anything) if some |v_j| / g exceeds 2^51
// or is not finite: callers clamp first (clamping is 1-Lipschitz, so it
// keeps the sensitivity). Coordinates whose noisy value would pass 2^53 grid
// units (probability below exp(-1000)) are clamped there, post-processing.
// If the random source fails, returns its error and sets v to NaN.
absl::Status AddVectorLaplaceNoise(const VectorLaplacePlan& plan,
                                   RandomSource& rng,
                                   Eigen::Ref<Eigen::VectorXd> v);

}  // namespace dpopt::noise

#endif  // DPOPT_CORE_NOISE_VECTOR_LAPLACE_H_
