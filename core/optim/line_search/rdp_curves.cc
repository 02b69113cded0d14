#include "core/optim/line_search/rdp_curves.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/privacy/rdp.h"

namespace dpopt::optim::line_search {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

double LogAdd(double a, double b) {
  if (a == -kInf) return b;
  if (b == -kInf) return a;
  const double m = std::max(a, b);
  return m + std::log1p(std::exp(std::min(a, b) - m));
}

double LogBinom(int64_t n, int64_t k) {
  return std::lgamma(n + 1.0) - std::lgamma(k + 1.0) - std::lgamma(n - k + 1.0);
}

// log[ a/(2a-1) e^{(a-1)x} + (a-1)/(2a-1) e^{-a x} ]: one bracket of eq. (4).
double LogLaplaceBracket(double a, double x) {
  return LogAdd(std::log(a / (2 * a - 1)) + (a - 1) * x,
                std::log((a - 1) / (2 * a - 1)) - a * x);
}

}  // namespace

double Eq4LaplaceSvt(double alpha, double eps1, double eps2) {
  // Paper eq. (4): the second bracket has 2 eps2 (query noise scale 1/eps2
  // against a shift of 2 Delta).
  return (LogLaplaceBracket(alpha, eps1) + LogLaplaceBracket(alpha, 2 * eps2)) /
         (alpha - 1);
}

double PureToRdp(double epsilon, double alpha) {
  return privacy::RdpPureDp(epsilon, alpha);
}

double SampledGaussianRdp(double q, double rho, int64_t alpha) {
  if (q >= 1) return alpha * rho;
  if (q <= 0) return 0;
  // SGM_q[rho](alpha), log-sum-exp with lgamma binomials.
  double log_sum = -kInf;
  for (int64_t l = 0; l <= alpha; ++l) {
    const double term = LogBinom(alpha, l) + (alpha - l) * std::log1p(-q) +
                        l * std::log(q) +
                        static_cast<double>(l) * (l - 1) * rho;
    log_sum = LogAdd(log_sum, term);
  }
  return std::max(0.0, log_sum / (alpha - 1));
}

double ZhuWangAmplified(double q, const std::function<double(int64_t)>& eps,
                        int64_t alpha) {
  if (q >= 1) return eps(alpha);
  // ZW_q[eps](alpha) (Chen & Lee 2022, Lemma 4; Zhu & Wang 2019):
  // (1-q)^{a-1}(1+(a-1)q) + C(a,2) q^2 (1-q)^{a-2} e^{eps(2)}
  //   + 3 sum_{l=3..a} C(a,l) q^l (1-q)^{a-l} e^{(l-1) eps(l)}.
  const double lq = std::log(q), l1q = std::log1p(-q);
  const double a = static_cast<double>(alpha);
  double log_sum = (a - 1) * l1q + std::log1p((a - 1) * q);
  log_sum =
      LogAdd(log_sum, LogBinom(alpha, 2) + 2 * lq + (a - 2) * l1q + eps(2));
  for (int64_t l = 3; l <= alpha; ++l) {
    log_sum = LogAdd(log_sum, std::log(3.0) + LogBinom(alpha, l) + l * lq +
                                  (alpha - l) * l1q + (l - 1) * eps(l));
  }
  return std::max(0.0, log_sum / (a - 1));
}

double CappedAmplified(double q, const std::function<double(int64_t)>& eps,
                       int64_t alpha) {
  // No amplification at q = 1 (ZW would add log 3 / (alpha - 1) there).
  if (q >= 1) return eps(alpha);
  return std::min(eps(alpha), ZhuWangAmplified(q, eps, alpha));
}

double PaperGaussianSvt(double alpha, double sigma1, double sigma2) {
  // Paper Thm 3: alpha (4 s1^2 + s2^2) / (2 s1^2 s2^2).
  return alpha / 2 * (1 / (sigma1 * sigma1) + 4 / (sigma2 * sigma2));
}

double SoundGaussianSvt(double alpha, double sigma1, double sigma2, int64_t k) {
  // Zhu & Wang 2020 Thm 8; the one copy of the formula lives in
  // core/privacy (k outcomes = max_queries + 1).
  return privacy::RdpGaussianSparseVector(sigma1, sigma2, k - 1, alpha);
}

double SoundLaplaceSvtRaw(double alpha, double eps_bt, int64_t max_it) {
  // raw(alpha) of the Laplace NOISYBTLS: the min of valid bounds.
  const double repaired =
      Eq4LaplaceSvt(alpha, eps_bt / 2, eps_bt / 4) +
      std::log(static_cast<double>(max_it + 1)) / (alpha - 1);
  return std::min({eps_bt, PureToRdp(eps_bt, alpha), repaired});
}

}  // namespace dpopt::optim::line_search
