#include "core/privacy/wor_gaussian.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "core/privacy/log_math.h"

namespace dpopt::privacy {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kLogTwoPi = 1.8378770664093454836;  // log(2 pi)
// Forward differences are used for j <= kMaxDifferenceOrder (even orders up
// to this value are integrated) and noise multipliers z >= kMinDifferenceZ.
constexpr int kMaxDifferenceOrder = 64;
constexpr double kMinDifferenceZ = 0.25;
constexpr double kStep = 0.05;

// log of (sum of exp(values)), -inf for an empty or all -inf input.
double LogSumExp(const std::vector<double>& values) {
  double m = -kInf;
  for (double v : values) m = std::max(m, v);
  if (!std::isfinite(m)) return m;
  double acc = 0;
  for (double v : values) acc += std::exp(v - m);
  return m + std::log(acc);
}

}  // namespace

std::vector<double> LogEvenForwardDifferences(double z, int count) {
  const double s = 1 / z;
  const double k_max = 2.0 * count;
  // Both one-sided peaks of the integrand lie in [-sqrt(K), K s + sqrt(K)]
  // (see the header); 40 more on each side leaves < e^-800 of the mass out.
  const double x_lo = -(std::sqrt(k_max) + 40);
  const double x_hi = k_max * s + std::sqrt(k_max) + 40;
  const int64_t points =
      static_cast<int64_t>(std::ceil((x_hi - x_lo) / kStep)) + 1;
  std::vector<double> log_phi(points), log_abs_y(points);
  for (int64_t i = 0; i < points; ++i) {
    const double x = x_lo + kStep * static_cast<double>(i);
    log_phi[i] = -0.5 * x * x - 0.5 * kLogTwoPi;
    // |exp(s x - s^2/2) - 1|, exactly 0 (log -inf) only at the zero.
    log_abs_y[i] = std::log(std::fabs(std::expm1(s * x - 0.5 * s * s)));
  }
  // Mass left of x_lo: the integrand is at most the normal density there
  // (|Y| <= 1 for x < s/2), so at most Phi(x_lo) <= phi(x_lo) / |x_lo|.
  const double log_left_tail =
      -0.5 * x_lo * x_lo - 0.5 * kLogTwoPi - std::log(-x_lo);
  std::vector<double> out(count);
  std::vector<double> terms(points);
  for (int c = 0; c < count; ++c) {
    const double k = 2.0 * (c + 1);
    double m = -kInf;
    for (int64_t i = 0; i < points; ++i) {
      terms[i] = log_phi[i] + k * log_abs_y[i];
      m = std::max(m, terms[i]);
    }
    double log_integral = LogSumExp(terms) + std::log(kStep);
    // Quadrature error (far below 1e-12 relative for this entire,
    // log-concave-by-side integrand at step 0.02) and the tails.
    log_integral += std::log1p(1e-9);
    log_integral = LogAdd(log_integral, log_left_tail);
    log_integral = LogAdd(log_integral, m - 700);
    out[c] = log_integral;
  }
  return out;
}

std::vector<double> RdpSampledWithoutReplacementGaussian(
    double gamma, double z, absl::Span<const double> orders) {
  std::vector<double> out(orders.size(), 0.0);
  if (gamma == 0) return out;
  for (size_t i = 0; i < orders.size(); ++i) {
    out[i] = (z == 0 || std::isinf(orders[i])) ? kInf : orders[i] / (2 * z * z);
  }
  if (gamma >= 1 || z == 0) return out;

  double max_finite = 2;
  for (double a : orders) {
    if (std::isfinite(a)) max_finite = std::max(max_finite, std::ceil(a));
  }
  const int64_t n = static_cast<int64_t>(max_finite);
  const double inv_z2 = 1 / (z * z);
  // log B_j for j = 2..n (index j).
  std::vector<double> log_b(n + 1, kInf);
  log_b[2] = std::min(std::log(4.0) + std::log(std::expm1(inv_z2)),
                      std::log(2.0) + inv_z2);
  std::vector<double> log_diff;  // log Delta^{2c+2} g, c = 0..
  if (z >= kMinDifferenceZ && n >= 3) {
    const int64_t j_max = std::min<int64_t>(n, kMaxDifferenceOrder);
    log_diff = LogEvenForwardDifferences(z, static_cast<int>((j_max + 1) / 2));
  }
  for (int64_t j = 3; j <= n; ++j) {
    const double dj = static_cast<double>(j);
    double v = std::log(2.0) + dj * (dj - 1) / 2 * inv_z2;
    if (j <= kMaxDifferenceOrder && !log_diff.empty()) {
      const int64_t lo = 2 * (j / 2), hi = 2 * ((j + 1) / 2);
      const double fd =
          std::log(4.0) + 0.5 * (log_diff[lo / 2 - 1] + log_diff[hi / 2 - 1]);
      v = std::min(v, fd);
    }
    log_b[j] = v;
  }
  std::vector<double> log_fact(n + 1, 0.0);
  for (int64_t i = 1; i <= n; ++i) {
    log_fact[i] = log_fact[i - 1] + std::log(static_cast<double>(i));
  }
  const double log_gamma = std::log(gamma);
  // cgf[a] = (a - 1) eps(a) for the integer orders the requested orders need
  // (each order's floor and ceiling), cgf[1] = 0.
  std::vector<uint8_t> needed(n + 1, 0);
  for (double a : orders) {
    if (!std::isfinite(a)) continue;
    needed[static_cast<int64_t>(std::floor(a))] = 1;
    needed[static_cast<int64_t>(std::ceil(a))] = 1;
  }
  std::vector<double> cgf(n + 1, 0.0);
  std::vector<double> terms;
  terms.reserve(n);
  for (int64_t a = 2; a <= n; ++a) {
    if (!needed[a]) continue;
    terms.clear();
    for (int64_t j = 2; j <= a; ++j) {
      terms.push_back(static_cast<double>(j) * log_gamma + log_fact[a] -
                      log_fact[j] - log_fact[a - j] + log_b[j]);
    }
    const double log_sum = LogSumExp(terms);
    cgf[a] = std::isnan(log_sum) ? kInf : LogAdd(0.0, log_sum);
  }
  for (size_t i = 0; i < orders.size(); ++i) {
    const double a = orders[i];
    if (std::isinf(a)) continue;  // +inf already
    const double lo = std::floor(a);
    const int64_t k = static_cast<int64_t>(lo);
    double c;
    if (lo == a) {
      c = cgf[k];
    } else {
      c = (lo + 1 - a) * cgf[k] + (a - lo) * cgf[k + 1];
    }
    out[i] = std::max(0.0, std::min(out[i], c / (a - 1)));
  }
  return out;
}

}  // namespace dpopt::privacy
