#include "core/privacy/rdp.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/common/status_macros.h"
#include "core/privacy/log_math.h"
#include "core/privacy/wor_gaussian.h"

namespace dpopt::privacy {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

bool IsInteger(double x) { return std::isfinite(x) && std::floor(x) == x; }

// log A_alpha for integer alpha (MTZ19 Sec. 3.3):
// A_alpha = sum_{i=0}^{alpha} C(alpha,i) q^i (1-q)^{alpha-i}
//           exp((i^2 - i) / (2 z^2)).
double LogAInt(double q, double z, double alpha) {
  const int64_t a = static_cast<int64_t>(alpha);
  double log_a = -kInf;
  const double log_q = std::log(q), log_1mq = std::log1p(-q);
  for (int64_t i = 0; i <= a; ++i) {
    const double di = static_cast<double>(i);
    const double log_coef =
        LogBinomial(alpha, di) + di * log_q + (alpha - di) * log_1mq;
    log_a = LogAdd(log_a, log_coef + (di * di - di) / (2 * z * z));
  }
  return log_a;
}

// log A_alpha for fractional alpha (MTZ19 Sec. 3.4): A = A0 + A1 with
//   A0 = sum_i C(alpha,i) q^i (1-q)^{alpha-i} e^{(i^2-i)/(2z^2)}
//        * 0.5 erfc((i - z0) / (sqrt(2) z)),
//   A1 = sum_i C(alpha,i) q^{alpha-i} (1-q)^i
//   e^{((alpha-i)^2-(alpha-i))/(2z^2)}
//        * 0.5 erfc((z0 - (alpha-i)) / (sqrt(2) z)),
//   z0 = z^2 log(1/q - 1) + 1/2.
// Terms are summed until both are below e^-30 (dp_accounting's stopping
// rule). With signed_series == false every term enters with |C(alpha, i)|.
double LogAFrac(double q, double z, double alpha, bool signed_series) {
  double log_a0 = -kInf, log_a1 = -kInf;
  const double z0 = z * z * std::log(1 / q - 1) + 0.5;
  const double log_q = std::log(q), log_1mq = std::log1p(-q);
  for (int64_t i = 0;; ++i) {
    const double di = static_cast<double>(i);
    const double log_coef = LogAbsBinomial(alpha, di);
    const bool negative = signed_series && BinomialIsNegative(alpha, di);
    const double j = alpha - di;
    const double log_t0 = log_coef + di * log_q + j * log_1mq;
    const double log_t1 = log_coef + j * log_q + di * log_1mq;
    const double log_e0 =
        std::log(0.5) + LogErfc((di - z0) / (std::sqrt(2.0) * z));
    const double log_e1 =
        std::log(0.5) + LogErfc((z0 - j) / (std::sqrt(2.0) * z));
    const double log_s0 = log_t0 + (di * di - di) / (2 * z * z) + log_e0;
    const double log_s1 = log_t1 + (j * j - j) / (2 * z * z) + log_e1;
    if (!negative) {
      log_a0 = LogAdd(log_a0, log_s0);
      log_a1 = LogAdd(log_a1, log_s1);
    } else {
      log_a0 = LogSub(log_a0, log_s0);
      log_a1 = LogSub(log_a1, log_s1);
    }
    if (std::max(log_s0, log_s1) < -30 || i > 100000) break;
  }
  return LogAdd(log_a0, log_a1);
}

// Amplification by subsampling for an arbitrary inner event, from its RDP
// curve eps(j) at integer orders j >= 2 and its pure-DP epsilon eps(inf).
// K(a) = (a - 1) eps'(a) is computed at integer orders:
//  * Poisson sampling (add/remove), Zhu & Wang 2019, Thm. 6:
//    e^{K(a)} <= (1-g)^{a-1} (a g - g + 1) + C(a,2) g^2 (1-g)^{a-2} e^{eps(2)}
//                + 3 sum_{l=3}^{a} C(a,l) (1-g)^{a-l} g^l e^{(l-1) eps(l)};
//  * sampling without replacement (replace-one), Wang, Balle,
//    Kasiviswanathan 2019, Thm. 9 (for a Gaussian inner event the tighter
//    Thm. 27 of wor_gaussian.h is used as well, and the minimum taken):
//    e^{K(a)} <= 1 + g^2 C(a,2) min{4 (e^{eps(2)} - 1),
//                                  e^{eps(2)} min{2, (e^{eps(inf)} - 1)^2}}
//                + sum_{j=3}^{a} g^j C(a,j) e^{(j-1) eps(j)}
//                  min{2, (e^{eps(inf)} - 1)^j}.
// Fractional orders interpolate K linearly between neighbouring integers
// (K(1) = 0): K is convex in a (it is the log of E_Q[(P/Q)^a]), so the chord
// is an upper bound. Order inf: a pure eps-DP inner event gives
// log(1 + g (e^eps - 1)) (Balle, Barthe, Gaboardi 2018, Thms. 8 and 9), whose
// randomized-response curve is also used at every order when smaller.
absl::StatusOr<std::vector<double>> GenericSampledRdp(
    const DpEvent& inner, double g, bool without_replacement,
    absl::Span<const double> orders) {
  double max_finite = 2;
  for (double a : orders) {
    if (std::isfinite(a)) max_finite = std::max(max_finite, std::ceil(a));
  }
  const int64_t n = static_cast<int64_t>(max_finite);
  std::vector<double> int_orders;
  for (int64_t j = 2; j <= n; ++j) int_orders.push_back(static_cast<double>(j));
  int_orders.push_back(kInf);
  ASSIGN_OR_RETURN(std::vector<double> in, ComputeRdp(inner, int_orders));
  const double eps_inf = in.back();
  auto eps_at = [&](int64_t j) { return in[j - 2]; };  // j >= 2

  const double log_g = std::log(g), log_1mg = std::log1p(-g);
  // log(e^{eps_inf} - 1), or +inf.
  const double log_em1_inf =
      std::isinf(eps_inf) ? kInf : std::log(std::expm1(eps_inf));
  // log k! table for the binomial coefficients.
  std::vector<double> log_fact(n + 1, 0.0);
  for (int64_t i = 1; i <= n; ++i) {
    log_fact[i] = log_fact[i - 1] + std::log(static_cast<double>(i));
  }
  auto log_binom = [&](int64_t a, int64_t l) {
    return log_fact[a] - log_fact[l] - log_fact[a - l];
  };
  // K[k] for k = 1..n, each a log-sum-exp of its terms.
  // Only the integer orders the requested orders need (floor and ceiling).
  std::vector<uint8_t> needed(n + 1, 0);
  for (double a : orders) {
    if (!std::isfinite(a)) continue;
    needed[static_cast<int64_t>(std::floor(a))] = 1;
    needed[static_cast<int64_t>(std::ceil(a))] = 1;
  }
  std::vector<double> k_int(n + 1, 0.0);
  std::vector<double> terms;
  terms.reserve(n + 2);
  for (int64_t a = 2; a <= n; ++a) {
    if (!needed[a]) continue;
    const double da = static_cast<double>(a);
    terms.clear();
    if (!without_replacement) {
      terms.push_back((da - 1) * log_1mg + std::log(da * g - g + 1));
      terms.push_back(log_binom(a, 2) + 2 * log_g + (da - 2) * log_1mg +
                      eps_at(2));
      for (int64_t l = 3; l <= a; ++l) {
        const double dl = static_cast<double>(l);
        terms.push_back(std::log(3.0) + log_binom(a, l) + (da - dl) * log_1mg +
                        dl * log_g + (dl - 1) * eps_at(l));
      }
    } else {
      const double e2 = eps_at(2);
      const double second =
          std::min(std::log(4.0) + std::log(std::expm1(e2)),
                   e2 + std::min(std::log(2.0), 2 * log_em1_inf));
      terms.push_back(0.0);
      terms.push_back(2 * log_g + log_binom(a, 2) + second);
      for (int64_t j = 3; j <= a; ++j) {
        const double dj = static_cast<double>(j);
        terms.push_back(dj * log_g + log_binom(a, j) + (dj - 1) * eps_at(j) +
                        std::min(std::log(2.0), dj * log_em1_inf));
      }
    }
    double m = -kInf;
    bool nan = false;
    for (double t : terms) {
      nan = nan || std::isnan(t);
      m = std::max(m, t);
    }
    double log_sum;
    if (nan || std::isinf(m)) {
      log_sum = nan || m > 0 ? kInf : -kInf;
    } else {
      long double acc = 0;
      for (double t : terms) acc += std::exp(t - m);
      log_sum = m + static_cast<double>(std::log(acc));
    }
    k_int[a] = std::max(0.0, log_sum);
  }
  // Pure-DP route.
  const double eps_pure =
      std::isinf(eps_inf) ? kInf : std::log1p(g * std::expm1(eps_inf));
  // Cap at the inner (unsampled) curve: Renyi divergence is jointly
  // quasi-convex (van Erven & Harremoes 2014, Thm. 13), so for the mixture
  // (1-g)P + gQ against P, in either order, D_a <= max(0, D_a(Q||P) or
  // D_a(P||Q)) <= eps_inner(a). Subsampling never costs more than the
  // mechanism itself, and long jobs keep a finite cost at every order.
  ASSIGN_OR_RETURN(std::vector<double> unsampled, ComputeRdp(inner, orders));
  std::vector<double> out;
  out.reserve(orders.size());
  for (size_t oi = 0; oi < orders.size(); ++oi) {
    const double a = orders[oi];
    double v;
    if (std::isinf(a)) {
      v = eps_pure;
    } else {
      const double lo = std::floor(a);
      const int64_t k = static_cast<int64_t>(lo);
      double kval;
      if (lo == a) {
        kval = k_int[k];
      } else {
        const double k_lo = k >= 2 ? k_int[k] : 0.0;
        const double k_hi = k_int[k + 1];
        kval = (lo + 1 - a) * k_lo + (a - lo) * k_hi;
      }
      v = kval / (a - 1);
      v = std::min(v, RdpPureDp(eps_pure, a));
    }
    v = std::min(v, unsampled[oi]);
    out.push_back(std::max(0.0, v));
  }
  return out;
}

// Poisson-sampled inner event, RDP at `alpha`, given the inner curve.
absl::StatusOr<std::vector<double>> PoissonSampledRdp(
    const DpEvent& event, absl::Span<const double> orders) {
  const double q = event.sampling_probability();
  const DpEvent& inner = event.inner();
  if (q == 0) return std::vector<double>(orders.size(), 0.0);
  if (q == 1) return ComputeRdp(inner, orders);
  if (inner.kind() == DpEvent::Kind::kGaussian) {
    std::vector<double> out;
    out.reserve(orders.size());
    for (double a : orders) {
      out.push_back(RdpPoissonSampledGaussian(q, inner.noise_multiplier(), a));
    }
    return out;
  }
  return GenericSampledRdp(inner, q, /*without_replacement=*/false, orders);
}

absl::StatusOr<std::vector<double>> SampledWithoutReplacementRdp(
    const DpEvent& event, absl::Span<const double> orders) {
  const double gamma = static_cast<double>(event.sample_size()) /
                       static_cast<double>(event.source_size());
  if (gamma == 0) return std::vector<double>(orders.size(), 0.0);
  if (gamma == 1) return ComputeRdp(event.inner(), orders);
  ASSIGN_OR_RETURN(std::vector<double> generic,
                   GenericSampledRdp(event.inner(), gamma,
                                     /*without_replacement=*/true, orders));
  if (event.inner().kind() == DpEvent::Kind::kGaussian) {
    // WBK19 Thm. 27 (core/privacy/wor_gaussian.h): the Gaussian-specific
    // bound, whose terms j >= 3 vanish as z grows (Thm. 9's do not). Both
    // are valid bounds, so their minimum is.
    const std::vector<double> gaussian = RdpSampledWithoutReplacementGaussian(
        gamma, event.inner().noise_multiplier(), orders);
    for (size_t i = 0; i < orders.size(); ++i) {
      generic[i] = std::min(generic[i], gaussian[i]);
    }
  }
  return generic;
}

}  // namespace

const std::vector<double>& DefaultRdpOrders() {
  static const std::vector<double>* orders = [] {
    auto* v = new std::vector<double>;
    for (int x = 1; x < 100; ++x) v->push_back(1 + x / 10.0);
    for (int a = 11; a < 64; ++a) v->push_back(a);
    for (double a : {128.0, 256.0, 512.0, 1024.0}) v->push_back(a);
    return v;
  }();
  return *orders;
}

absl::Status ValidateOrders(absl::Span<const double> orders) {
  for (double a : orders) {
    if (!(a > 1)) {
      return absl::InvalidArgumentError(
          absl::StrCat("RDP orders must be > 1, got ", a));
    }
  }
  return absl::OkStatus();
}

double RdpPoissonSampledGaussian(double q, double z, double alpha,
                                 bool signed_series) {
  if (q == 0) return 0;
  if (z == 0) return kInf;
  if (std::isinf(alpha)) return kInf;
  if (q == 1) return alpha / (2 * z * z);  // Mironov 2017, Prop. 7.
  const double log_a = IsInteger(alpha) ? LogAInt(q, z, alpha)
                                        : LogAFrac(q, z, alpha, signed_series);
  // eps(alpha) = log(A_alpha) / (alpha - 1) (MTZ19, Thm. 4); never negative.
  return std::max(0.0, log_a / (alpha - 1));
}

double RdpLaplace(double noise_multiplier, double alpha) {
  const double b = noise_multiplier;
  if (b == 0) return kInf;
  if (std::isinf(alpha)) return 1 / b;
  // Mironov 2017, Prop. 6 (Table II), for sensitivity 1 and scale b:
  // (1/(alpha-1)) log( alpha/(2alpha-1) e^{(alpha-1)/b}
  //                    + (alpha-1)/(2alpha-1) e^{-alpha/b} ).
  const double l1 = std::log(alpha / (2 * alpha - 1)) + (alpha - 1) / b;
  const double l2 = std::log((alpha - 1) / (2 * alpha - 1)) - alpha / b;
  return std::max(0.0, std::min(1 / b, LogAdd(l1, l2) / (alpha - 1)));
}

double RdpPureDp(double epsilon, double alpha) {
  if (epsilon == 0) return 0;
  if (std::isinf(epsilon) || std::isinf(alpha)) return epsilon;
  // D_alpha(RR_eps) = (1/(alpha-1)) [log(e^{alpha eps} + e^{(1-alpha) eps})
  //                                  - log(1 + e^eps)].
  const double v =
      (LogAdd(alpha * epsilon, (1 - alpha) * epsilon) - LogAdd(0.0, epsilon)) /
      (alpha - 1);
  return std::max(0.0, std::min({v, epsilon, alpha * epsilon * epsilon / 2}));
}

double RdpExponentialMechanisms(double epsilon, int64_t count, double alpha) {
  const double pure = RdpPureDp(epsilon, alpha);
  if (std::isinf(alpha) || std::isinf(epsilon) || count < 1) return pure;
  const double k = static_cast<double>(count);
  // zCDP: rho = count (epsilon / count)^2 / 8 = epsilon^2 / (8 count), and
  // rho-zCDP is alpha rho at every order (Cesar & Rogers 2021; Bun & Steinke
  // 2016, Def. 1.1).
  const double zcdp = alpha * epsilon * epsilon / (8 * k);
  // Each share is (epsilon / count)-DP: count times its pure-DP curve.
  const double shares = k * RdpPureDp(epsilon / k, alpha);
  return std::min({zcdp, pure, shares});
}

double RdpGaussianSparseVector(double zt, double zq, int64_t max_queries,
                               double alpha) {
  if (zt == 0 || zq == 0 || std::isinf(alpha)) return kInf;
  // Zhu & Wang 2020, Thm 8 (the Gaussian NOISYBTLS's raw(alpha)).
  const double k = static_cast<double>(max_queries) + 1;
  return alpha / (zt * zt) + 2 * alpha / (zq * zq) + std::log(k) / (alpha - 1);
}

double DiscreteGaussianTau(double sigma_in_grid_units) {
  const double pi = 3.14159265358979323846;
  const double s = sigma_in_grid_units;
  return 10 * std::exp(-2 * pi * pi * s * s * 0.5);
}

double RdpDiscreteGaussian(double noise_multiplier, double sigma_in_grid_units,
                           int64_t dimension, double alpha) {
  const double z = noise_multiplier;
  if (z == 0 || std::isinf(alpha)) return kInf;
  return alpha / (2 * z * z) + static_cast<double>(dimension) *
                                   DiscreteGaussianTau(sigma_in_grid_units);
}

absl::StatusOr<std::vector<double>> ComputeRdp(
    const DpEvent& event, absl::Span<const double> orders) {
  RETURN_IF_ERROR(event.Validate());
  RETURN_IF_ERROR(ValidateOrders(orders));
  using K = DpEvent::Kind;
  std::vector<double> out(orders.size(), 0.0);
  switch (event.kind()) {
    case K::kNoOp:
      return out;
    case K::kGaussian: {
      const double z = event.noise_multiplier();
      for (size_t i = 0; i < orders.size(); ++i) {
        // Mironov 2017, Prop. 7: alpha / (2 z^2).
        out[i] =
            (z == 0 || std::isinf(orders[i])) ? kInf : orders[i] / (2 * z * z);
      }
      return out;
    }
    case K::kLaplace:
      for (size_t i = 0; i < orders.size(); ++i) {
        out[i] = RdpLaplace(event.noise_multiplier(), orders[i]);
      }
      return out;
    case K::kDiscreteGaussian:
      for (size_t i = 0; i < orders.size(); ++i) {
        out[i] = RdpDiscreteGaussian(event.noise_multiplier(),
                                     event.sigma_in_grid_units(),
                                     event.dimension(), orders[i]);
      }
      return out;
    case K::kDiscreteLaplace: {
      // Discrete Laplace with scale b on an integer query of sensitivity
      // Delta is (Delta / b)-DP (CKS20, Sec. 2 / Ghosh et al. 2009).
      const double b = event.noise_multiplier();
      const double eps = b == 0 ? kInf : 1 / b;
      for (size_t i = 0; i < orders.size(); ++i) {
        out[i] = RdpPureDp(eps, orders[i]);
      }
      return out;
    }
    case K::kExponential:
    case K::kSparseVector:
      for (size_t i = 0; i < orders.size(); ++i) {
        out[i] = RdpPureDp(event.epsilon(), orders[i]);
      }
      return out;
    case K::kExponentialMechanisms:
      for (size_t i = 0; i < orders.size(); ++i) {
        out[i] =
            RdpExponentialMechanisms(event.epsilon(), event.count(), orders[i]);
      }
      return out;
    case K::kGaussianSparseVector:
      for (size_t i = 0; i < orders.size(); ++i) {
        out[i] = RdpGaussianSparseVector(event.threshold_noise_multiplier(),
                                         event.query_noise_multiplier(),
                                         event.max_queries(), orders[i]);
      }
      return out;
    case K::kEpsilonDelta:
      if (event.delta() > 0) {
        return absl::UnimplementedError(
            "RDP accountant cannot price an (epsilon, delta) event with "
            "delta > 0; use the PLD accountant or the basic filter");
      }
      for (size_t i = 0; i < orders.size(); ++i) {
        out[i] = RdpPureDp(event.epsilon(), orders[i]);
      }
      return out;
    case K::kPoissonSampled:
      return PoissonSampledRdp(event, orders);
    case K::kSampledWithoutReplacement:
      return SampledWithoutReplacementRdp(event, orders);
    case K::kSelfComposed: {
      if (event.count() == 0) return out;
      ASSIGN_OR_RETURN(std::vector<double> inner,
                       ComputeRdp(event.inner(), orders));
      for (size_t i = 0; i < orders.size(); ++i) {
        out[i] = inner[i] * static_cast<double>(event.count());
      }
      return out;
    }
    case K::kComposed:
      for (const DpEvent& c : event.events()) {
        ASSIGN_OR_RETURN(std::vector<double> r, ComputeRdp(c, orders));
        for (size_t i = 0; i < orders.size(); ++i) out[i] += r[i];
      }
      return out;
  }
  return absl::InvalidArgumentError("unknown DpEvent kind");
}

absl::StatusOr<EpsilonResult> RdpToEpsilon(absl::Span<const double> orders,
                                           absl::Span<const double> rdp,
                                           double delta) {
  if (!(delta >= 0 && delta <= 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("delta must be in [0, 1], got ", delta));
  }
  if (orders.size() != rdp.size() || orders.empty()) {
    return absl::InvalidArgumentError(
        "orders and rdp must have the same, non-zero length");
  }
  RETURN_IF_ERROR(ValidateOrders(orders));
  EpsilonResult best{kInf, orders[0]};
  for (size_t i = 0; i < orders.size(); ++i) {
    const double a = orders[i], r = rdp[i];
    if (!(r >= 0)) {
      return absl::InvalidArgumentError(
          absl::StrCat("RDP values must be >= 0, got ", r));
    }
    double eps;
    if (std::isinf(r)) {
      eps = kInf;
    } else if (std::isinf(a)) {
      eps = r;  // alpha = inf: eps-DP with delta = 0.
    } else if (delta * delta + std::expm1(-r) > 0) {
      // KL bound: delta >= sqrt(1 - exp(-KL)) and KL <= eps(alpha).
      eps = 0;
    } else if (a > 1.01 && delta > 0) {
      // BBGHS20 Prop. 12 / CKS20 Eq. 20:
      // eps = r + log1p(-1/a) - log(delta * a) / (a - 1).
      eps = r + std::log1p(-1 / a) - std::log(delta * a) / (a - 1);
    } else {
      eps = kInf;
    }
    if (eps < best.epsilon) best = {eps, a};
  }
  best.epsilon = std::max(0.0, best.epsilon);
  return best;
}

absl::StatusOr<DeltaResult> RdpToDelta(absl::Span<const double> orders,
                                       absl::Span<const double> rdp,
                                       double epsilon) {
  if (!(epsilon >= 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("epsilon must be >= 0, got ", epsilon));
  }
  if (orders.size() != rdp.size() || orders.empty()) {
    return absl::InvalidArgumentError(
        "orders and rdp must have the same, non-zero length");
  }
  RETURN_IF_ERROR(ValidateOrders(orders));
  double best_log = kInf, best_order = orders[0];
  for (size_t i = 0; i < orders.size(); ++i) {
    const double a = orders[i], r = rdp[i];
    if (!(r >= 0)) {
      return absl::InvalidArgumentError(
          absl::StrCat("RDP values must be >= 0, got ", r));
    }
    double log_delta;
    if (std::isinf(r)) {
      log_delta = 0;
    } else if (std::isinf(a)) {
      log_delta = r <= epsilon ? -kInf : 0;
    } else {
      // KL bound delta <= sqrt(1 - exp(-KL)).
      log_delta = r == 0 ? -kInf : 0.5 * std::log(-std::expm1(-r));
      if (a > 1.01) {
        // Inverse of BBGHS20 Prop. 12:
        // log delta = (a-1)(r - eps + log1p(-1/a)) - log(a).
        log_delta =
            std::min(log_delta, (a - 1) * (r - epsilon + std::log1p(-1 / a)) -
                                    std::log(a));
      }
    }
    if (log_delta < best_log) {
      best_log = log_delta;
      best_order = a;
    }
  }
  return DeltaResult{std::min(1.0, std::exp(best_log)), best_order};
}

absl::StatusOr<EpsilonResult> ComputeEpsilonRdp(
    const DpEvent& event, double delta, absl::Span<const double> orders) {
  ASSIGN_OR_RETURN(std::vector<double> rdp, ComputeRdp(event, orders));
  return RdpToEpsilon(orders, rdp, delta);
}

}  // namespace dpopt::privacy
