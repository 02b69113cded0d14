#include "core/audit/statistics.h"

#include <cmath>
#include <cstdint>
#include <limits>

namespace dpopt::audit {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kTiny = 1e-300;
constexpr double kEps = 1e-15;
constexpr int kMaxIterations = 1000000;

double Guard(double v) { return std::abs(v) < kTiny ? kTiny : v; }

// Continued fraction for the incomplete beta function,
//   I_x(a,b) = x^a (1-x)^b / (a B(a,b)) * 1/(1+ d1/(1+ d2/(1+ ...)))
// with d_{2m+1} = -(a+m)(a+b+m) x / ((a+2m)(a+2m+1)) and
// d_{2m} = m(b-m) x / ((a+2m-1)(a+2m)) (Abramowitz and Stegun 26.5.8),
// evaluated with the modified Lentz method.
double BetaContinuedFraction(double a, double b, double x) {
  double c = 1;
  double d = 1 / Guard(1 - (a + b) * x / (a + 1));
  double h = d;
  for (int m = 1; m < kMaxIterations; ++m) {
    const double m2 = 2.0 * m;
    double coef = m * (b - m) * x / ((a + m2 - 1) * (a + m2));
    d = 1 / Guard(1 + coef * d);
    c = Guard(1 + coef / c);
    h *= d * c;
    coef = -(a + m) * (a + b + m) * x / ((a + m2) * (a + m2 + 1));
    d = 1 / Guard(1 + coef * d);
    c = Guard(1 + coef / c);
    const double delta = d * c;
    h *= delta;
    if (std::abs(delta - 1) < kEps) break;
  }
  return h;
}

}  // namespace

double RegularizedIncompleteBeta(double a, double b, double x) {
  if (!(a > 0) || !(b > 0) || !(x >= 0) || !(x <= 1)) return kNaN;
  if (x == 0) return 0;
  if (x == 1) return 1;
  const double log_front = std::lgamma(a + b) - std::lgamma(a) -
                           std::lgamma(b) + a * std::log(x) +
                           b * std::log1p(-x);
  const double front = std::exp(log_front);
  // The fraction converges fast for x < (a+1)/(a+b+2); otherwise use
  // I_x(a,b) = 1 - I_{1-x}(b,a).
  if (x < (a + 1) / (a + b + 2)) {
    return front * BetaContinuedFraction(a, b, x) / a;
  }
  return 1 - front * BetaContinuedFraction(b, a, 1 - x) / b;
}

double InverseRegularizedIncompleteBeta(double a, double b, double p,
                                        bool round_up) {
  if (!(a > 0) || !(b > 0) || !(p >= 0) || !(p <= 1)) return kNaN;
  double lo = 0;  // I_lo <= p
  double hi = 1;  // I_hi >= p
  for (int i = 0; i < 1100 && lo < hi; ++i) {
    const double mid = lo + (hi - lo) / 2;
    if (mid <= lo || mid >= hi) break;
    if (RegularizedIncompleteBeta(a, b, mid) < p) {
      lo = mid;
    } else {
      hi = mid;
    }
  }
  return round_up ? hi : lo;
}

double RegularizedGammaQ(double a, double x) {
  if (!(a > 0) || !(x >= 0)) return kNaN;
  if (x == 0) return 1;
  const double log_front = a * std::log(x) - x - std::lgamma(a);
  if (x < a + 1) {
    // Series: P(a,x) = e^-x x^a / Gamma(a+1) * sum_n x^n / ((a+1)...(a+n)).
    double term = 1 / a;
    double sum = term;
    for (int n = 1; n < kMaxIterations; ++n) {
      term *= x / (a + n);
      sum += term;
      if (std::abs(term) < std::abs(sum) * kEps) break;
    }
    return 1 - sum * std::exp(log_front);
  }
  // Continued fraction (Abramowitz and Stegun 6.5.31) for
  // Q(a,x) = e^-x x^a / Gamma(a) * 1/(x+1-a- 1(1-a)/(x+3-a-
  // 2(2-a)/(x+5-a-...))), modified Lentz.
  double b = x + 1 - a;
  double c = 1 / kTiny;
  double d = 1 / Guard(b);
  double h = d;
  for (int n = 1; n < kMaxIterations; ++n) {
    const double an = -n * (n - a);
    b += 2;
    d = 1 / Guard(an * d + b);
    c = Guard(b + an / c);
    const double delta = d * c;
    h *= delta;
    if (std::abs(delta - 1) < kEps) break;
  }
  return std::exp(log_front) * h;
}

double ChiSquareSurvival(double x, double degrees_of_freedom) {
  if (!(degrees_of_freedom > 0)) return kNaN;
  if (!(x > 0)) return 1;
  return RegularizedGammaQ(degrees_of_freedom / 2, x / 2);
}

// Lower: p_lo with P[Bin(n, p_lo) >= k] = alpha, i.e. I_{p_lo}(k, n-k+1) =
// alpha. Upper: p_hi with P[Bin(n, p_hi) <= k] = alpha, i.e.
// I_{p_hi}(k+1, n-k) = 1 - alpha (Clopper and Pearson 1934).
double ClopperPearsonLower(int64_t k, int64_t n, double alpha) {
  if (n <= 0 || k < 0 || k > n || !(alpha > 0) || !(alpha < 1)) return kNaN;
  if (k == 0) return 0;
  return InverseRegularizedIncompleteBeta(static_cast<double>(k),
                                          static_cast<double>(n - k + 1), alpha,
                                          /*round_up=*/false);
}

double ClopperPearsonUpper(int64_t k, int64_t n, double alpha) {
  if (n <= 0 || k < 0 || k > n || !(alpha > 0) || !(alpha < 1)) return kNaN;
  if (k == n) return 1;
  return InverseRegularizedIncompleteBeta(static_cast<double>(k + 1),
                                          static_cast<double>(n - k), 1 - alpha,
                                          /*round_up=*/true);
}

}  // namespace dpopt::audit
