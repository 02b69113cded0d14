#include "core/optim/accelerated/schedules.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "core/common/status_macros.h"

namespace dpopt::optim::accelerated {
namespace {

constexpr double kLn2 = 0.69314718055994530942;
constexpr double kNegInf = -std::numeric_limits<double>::infinity();

bool FinitePositive(double x) { return std::isfinite(x) && x > 0; }

// log sum_i exp(v_i) (stable).
double LogSumExp(const std::vector<double>& v) {
  double m = kNegInf;
  for (double x : v) m = std::max(m, x);
  if (m == kNegInf) return kNegInf;
  double s = 0;
  for (double x : v) s += std::exp(x - m);
  return m + std::log(s);
}

double LogAdd(double a, double b) {
  const double m = std::max(a, b);
  if (m == kNegInf) return kNegInf;
  return m + std::log1p(std::exp(std::min(a, b) - m));
}

// Prefix sums P_i = sum_{j=1..i} ln(1 - sqrt(mu alpha_j)), P_0 = 0.
std::vector<double> LogContractionPrefix(const StepSchedule& s, double mu) {
  std::vector<double> p(s.size() + 1, 0.0);
  for (int64_t i = 0; i < s.size(); ++i) {
    p[i + 1] = p[i] + std::log1p(-std::sqrt(mu * s.alpha[i]));
  }
  return p;
}

// ln(k_a alpha_t (1 + alpha_t L)), k_a = 1/2 (reference) or 1 (paper).
double LogStepWeight(double alpha, const NoiseDividingOptions& o) {
  const double ka = o.convention == TSelectConvention::kReference ? 0.5 : 1.0;
  return std::log(ka * alpha * (1 + alpha * o.smoothness));
}

// A_t for t = 1..tau given the prefix sums (LogBoundWeights).
std::vector<double> WeightsFromPrefix(const StepSchedule& s, int64_t tau,
                                      const std::vector<double>& prefix,
                                      const NoiseDividingOptions& o) {
  std::vector<double> a(tau);
  const int s_tau = s.stage[tau - 1];
  for (int64_t t = 1; t <= tau; ++t) {
    a[t - 1] = (prefix[tau] - prefix[t]) + LogStepWeight(s.alpha[t - 1], o) +
               (s_tau - s.stage[t - 1]) * kLn2;
  }
  return a;
}

double InitialFromPrefix(const StepSchedule& s, int64_t tau,
                         const std::vector<double>& prefix,
                         const NoiseDividingOptions& o) {
  const int s_tau = s.stage[tau - 1];
  const int k0 = o.convention == TSelectConvention::kReference
                     ? s_tau
                     : s_tau - s.stage[0];
  return prefix[tau] + k0 * kLn2;
}

double ScoreFromWeights(const std::vector<double>& a, double log_a0,
                        const NoiseDividingOptions& o) {
  std::vector<double> ra(a.size());
  for (size_t i = 0; i < a.size(); ++i) ra[i] = o.exponent * a[i];
  const double noise = LogSumExp(ra) / o.exponent + std::log(o.noise_unit);
  return LogAdd(noise, std::log(o.initial_error) + log_a0);
}

absl::Status CheckSchedule(const StepSchedule& s, double mu) {
  if (s.size() < 1) return absl::InvalidArgumentError("empty schedule");
  if (static_cast<int64_t>(s.beta.size()) != s.size() ||
      static_cast<int64_t>(s.stage.size()) != s.size() ||
      static_cast<int64_t>(s.restart.size()) != s.size()) {
    return absl::InvalidArgumentError("inconsistent schedule");
  }
  for (double a : s.alpha) {
    if (!(FinitePositive(a) && mu * a < 1)) {
      return absl::InvalidArgumentError(
          "every step size must satisfy 0 < alpha < 1/mu");
    }
  }
  return absl::OkStatus();
}

}  // namespace

double AmplifiedEpsilon(double eps0, double q) {
  return std::log1p(q * std::expm1(eps0));
}

double BaseEpsilon(double eps_t, double q) {
  return std::log1p(std::expm1(eps_t) / q);
}

double EpsLoss(double sensitivity, double scale, double n, double m) {
  // Paper (3.3).
  return AmplifiedEpsilon(sensitivity / (scale * m), m / n);
}

double LaplaceScaleFor(double sensitivity, double eps_t, double n, double m) {
  // Paper (3.4)-(3.5), solved for b.
  return sensitivity / (m * BaseEpsilon(eps_t, m / n));
}

double MomentumForStep(double alpha, double mu) {
  // The momentum of the paper's Sec. 5.
  const double r = std::sqrt(mu * alpha);
  return (1 - r) / (1 + r);
}

StepSchedule ConstantSchedule(int64_t steps, double alpha, double beta) {
  StepSchedule s;
  s.alpha.assign(steps, alpha);
  s.beta.assign(steps, beta);
  s.stage.assign(steps, 1);
  s.restart.assign(steps, false);
  return s;
}

absl::Status MasgOptions::Validate() const {
  if (!FinitePositive(smoothness)) {
    return absl::InvalidArgumentError("MASG: L must be finite and > 0");
  }
  if (!(FinitePositive(strong_convexity) && strong_convexity <= smoothness)) {
    return absl::InvalidArgumentError("MASG: mu must be in (0, L]");
  }
  // Thm 4.3 needs alpha^(k) <= 1/L for every k, i.e. c <= 1.
  if (!(FinitePositive(step_scale) && step_scale <= 1)) {
    return absl::InvalidArgumentError("MASG: step scale c must be in (0, 1]");
  }
  if (p < 1 || p > 10) {
    return absl::InvalidArgumentError("MASG: p must be in [1, 10]");
  }
  return absl::OkStatus();
}

int64_t MasgStageLengths::Length(int k) const {
  return k == 1 ? first : (int64_t{1} << k) * unit;
}

absl::StatusOr<MasgStageLengths> ComputeMasgStageLengths(
    const MasgOptions& options) {
  RETURN_IF_ERROR(options.Validate());
  // Paper (4.7) and the authors' DP_NAG_LR.m (the paper only says
  // n_1 >= 1); kappa is not scaled by c.
  const double kappa = options.smoothness / options.strong_convexity;
  const double sk = std::sqrt(kappa);
  const double raw_first = 2 * sk * std::log(sk);
  MasgStageLengths out;
  out.first = static_cast<int64_t>(options.first_stage == FirstStageRule::kCeil
                                       ? std::ceil(raw_first)
                                       : std::floor(raw_first));
  out.first = std::max<int64_t>(out.first, 1);
  out.unit = static_cast<int64_t>(std::ceil(sk * (options.p + 2) * kLn2));
  out.unit = std::max<int64_t>(out.unit, 1);
  return out;
}

absl::StatusOr<StepSchedule> MasgSchedule(int64_t steps,
                                          const MasgOptions& options) {
  if (steps < 1) return absl::InvalidArgumentError("MASG: steps must be >= 1");
  ASSIGN_OR_RETURN(MasgStageLengths lengths, ComputeMasgStageLengths(options));
  StepSchedule s;
  s.alpha.reserve(steps);
  int k = 1;
  int64_t left_in_stage = lengths.Length(1);
  for (int64_t t = 1; t <= steps; ++t) {
    bool first_of_stage = false;
    if (left_in_stage == 0) {
      ++k;
      left_in_stage = lengths.Length(k);
      first_of_stage = true;
    }
    // alpha^(1) = c/L; alpha^(k) = c / (2^{2k} L) for k >= 2 ((4.7), scaled
    // by c as in the paper's Sec. 5).
    const double alpha = k == 1 ? options.step_scale / options.smoothness
                                : options.step_scale / (std::ldexp(1.0, 2 * k) *
                                                        options.smoothness);
    s.alpha.push_back(alpha);
    s.beta.push_back(MomentumForStep(alpha, options.strong_convexity));
    s.stage.push_back(k);
    s.restart.push_back(first_of_stage);
    --left_in_stage;
  }
  return s;
}

absl::Status NoiseDividingOptions::Validate() const {
  if (!FinitePositive(smoothness)) {
    return absl::InvalidArgumentError("noise dividing: L must be > 0");
  }
  if (!(FinitePositive(strong_convexity) && strong_convexity <= smoothness)) {
    return absl::InvalidArgumentError("noise dividing: mu must be in (0, L]");
  }
  if (!(exponent > 0 && exponent <= 1)) {
    return absl::InvalidArgumentError(
        "noise dividing: exponent must be in (0, 1]");
  }
  if (!FinitePositive(noise_unit)) {
    return absl::InvalidArgumentError(
        "noise dividing: noise unit must be finite and > 0");
  }
  if (!FinitePositive(initial_error)) {
    return absl::InvalidArgumentError(
        "noise dividing: the initial error guess E0 must be finite and > 0");
  }
  return absl::OkStatus();
}

std::vector<double> LogBoundWeights(const StepSchedule& schedule, int64_t tau,
                                    const NoiseDividingOptions& options) {
  const std::vector<double> prefix =
      LogContractionPrefix(schedule, options.strong_convexity);
  return WeightsFromPrefix(schedule, tau, prefix, options);
}

double LogInitialWeight(const StepSchedule& schedule, int64_t tau,
                        const NoiseDividingOptions& options) {
  const std::vector<double> prefix =
      LogContractionPrefix(schedule, options.strong_convexity);
  return InitialFromPrefix(schedule, tau, prefix, options);
}

double LogBoundScore(const StepSchedule& schedule, int64_t tau,
                     const NoiseDividingOptions& options) {
  const std::vector<double> prefix =
      LogContractionPrefix(schedule, options.strong_convexity);
  return ScoreFromWeights(WeightsFromPrefix(schedule, tau, prefix, options),
                          InitialFromPrefix(schedule, tau, prefix, options),
                          options);
}

absl::StatusOr<int64_t> SelectFinalSteps(const StepSchedule& schedule,
                                         const NoiseDividingOptions& options) {
  RETURN_IF_ERROR(options.Validate());
  RETURN_IF_ERROR(CheckSchedule(schedule, options.strong_convexity));
  const std::vector<double> prefix =
      LogContractionPrefix(schedule, options.strong_convexity);
  int64_t best = 1;
  double best_score = std::numeric_limits<double>::infinity();
  for (int64_t tau = 1; tau <= schedule.size(); ++tau) {
    const double score = ScoreFromWeights(
        WeightsFromPrefix(schedule, tau, prefix, options),
        InitialFromPrefix(schedule, tau, prefix, options), options);
    if (score < best_score) {  // strict: ties keep the smallest tau
      best_score = score;
      best = tau;
    }
  }
  return best;
}

absl::StatusOr<std::vector<double>> BudgetShares(
    const StepSchedule& schedule, int64_t steps,
    const NoiseDividingOptions& options) {
  RETURN_IF_ERROR(options.Validate());
  RETURN_IF_ERROR(CheckSchedule(schedule, options.strong_convexity));
  if (steps < 1 || steps > schedule.size()) {
    return absl::InvalidArgumentError(absl::StrCat("noise dividing: horizon ",
                                                   steps, " outside [1, ",
                                                   schedule.size(), "]"));
  }
  std::vector<double> a = LogBoundWeights(schedule, steps, options);
  for (double& x : a) x *= options.exponent;
  const double lse = LogSumExp(a);
  // Prop. 4.2: eps_t / eps = a_t^r / sum_j a_j^r (r = 1/3).
  std::vector<double> w(a.size());
  for (size_t i = 0; i < a.size(); ++i) w[i] = std::exp(a[i] - lse);
  return w;
}

}  // namespace dpopt::optim::accelerated
