// Log-space arithmetic helpers for the accountants (internal).
#ifndef DPOPT_CORE_PRIVACY_LOG_MATH_H_
#define DPOPT_CORE_PRIVACY_LOG_MATH_H_

#include <algorithm>
#include <cmath>
#include <limits>

namespace dpopt::privacy {

// log(e^a + e^b).
inline double LogAdd(double a, double b) {
  if (a == -std::numeric_limits<double>::infinity()) return b;
  if (b == -std::numeric_limits<double>::infinity()) return a;
  const double m = std::max(a, b);
  return m + std::log1p(std::exp(std::min(a, b) - m));
}

// log(e^a - e^b); -inf when b >= a.
inline double LogSub(double a, double b) {
  if (b == -std::numeric_limits<double>::infinity()) return a;
  if (b >= a) return -std::numeric_limits<double>::infinity();
  return a + std::log(-std::expm1(b - a));
}

// log(erfc(x)) without underflow: direct for x < 25, otherwise the asymptotic
// expansion erfc(x) = e^{-x^2} / (x sqrt(pi)) (1 - 1/(2x^2) + 3/(4x^4)
// - 15/(8x^6) + ...) (Abramowitz & Stegun 7.1.23), accurate to ~1e-10
// relative there.
inline double LogErfc(double x) {
  if (x < 25) return std::log(std::erfc(x));
  const double x2 = x * x;
  const double series = 1 - 1 / (2 * x2) + 3 / (4 * x2 * x2) -
                        15 / (8 * x2 * x2 * x2) +
                        105 / (16 * x2 * x2 * x2 * x2);
  return -x2 - std::log(x) - 0.5 * std::log(3.14159265358979323846) +
         std::log(series);
}

// log |C(alpha, i)| for real alpha >= 0 and integer i >= 0 via log|Gamma|.
// REQUIRES: alpha - i + 1 is not a non-positive integer.
inline double LogAbsBinomial(double alpha, double i) {
  return std::lgamma(alpha + 1) - std::lgamma(i + 1) -
         std::lgamma(alpha - i + 1);
}

// log C(alpha, i) for 0 <= i <= alpha (positive coefficient).
inline double LogBinomial(double alpha, double i) {
  return LogAbsBinomial(alpha, i);
}

// Sign of C(alpha, i) = prod_{k<i} (alpha - k) / i!: negative iff an odd number
// of factors alpha - k (k = 0..i-1) are negative.
inline bool BinomialIsNegative(double alpha, double i) {
  if (std::floor(alpha) == alpha) return false;  // zero or positive
  const double negatives = std::max(0.0, i - std::ceil(alpha));
  return std::fmod(negatives, 2.0) == 1.0;
}

}  // namespace dpopt::privacy

#endif  // DPOPT_CORE_PRIVACY_LOG_MATH_H_
