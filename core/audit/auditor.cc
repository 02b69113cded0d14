#include "core/audit/auditor.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "core/audit/statistics.h"
#include "core/common/status_macros.h"

namespace dpopt::audit {
namespace {

absl::StatusOr<std::vector<double>> Run(const ScalarMechanism& mechanism,
                                        bool neighbour, int64_t trials,
                                        noise::RandomSource& rng) {
  std::vector<double> out;
  out.reserve(trials);
  for (int64_t i = 0; i < trials; ++i) {
    ASSIGN_OR_RETURN(const double x, mechanism(neighbour, rng));
    if (std::isnan(x)) {
      return absl::InvalidArgumentError("mechanism returned NaN");
    }
    out.push_back(x);
  }
  return out;
}

// Number of sorted values > t.
int64_t CountAbove(const std::vector<double>& sorted, double t) {
  return sorted.end() - std::upper_bound(sorted.begin(), sorted.end(), t);
}

struct Event {
  double threshold;
  bool upper_tail;
  bool swapped;
};

// Counts of the event among runs on D (first) and D' (second), roles swapped
// if requested.
std::pair<int64_t, int64_t> Counts(const Event& e,
                                   const std::vector<double>& d_sorted,
                                   const std::vector<double>& dp_sorted) {
  const std::vector<double>& a = e.swapped ? dp_sorted : d_sorted;
  const std::vector<double>& b = e.swapped ? d_sorted : dp_sorted;
  int64_t ka = CountAbove(a, e.threshold);
  int64_t kb = CountAbove(b, e.threshold);
  if (!e.upper_tail) {
    ka = static_cast<int64_t>(a.size()) - ka;
    kb = static_cast<int64_t>(b.size()) - kb;
  }
  return {ka, kb};
}

}  // namespace

absl::Status AuditOptions::Validate() const {
  if (selection_trials < 100 || evaluation_trials < 100) {
    return absl::InvalidArgumentError("audit needs >= 100 trials per phase");
  }
  if (!(confidence > 0 && confidence < 1)) {
    return absl::InvalidArgumentError("confidence must be in (0, 1)");
  }
  if (!(delta >= 0 && delta < 1)) {
    return absl::InvalidArgumentError("delta must be in [0, 1)");
  }
  if (max_thresholds < 1) {
    return absl::InvalidArgumentError("max_thresholds must be >= 1");
  }
  return absl::OkStatus();
}

double EpsilonLowerBound(int64_t k0, int64_t n0, int64_t k1, int64_t n1,
                         double delta, double confidence) {
  // Two one-sided intervals at (1 - confidence)/2 each: by the union bound
  // both hold with probability >= confidence.
  const double alpha = (1 - confidence) / 2;
  const double p0_lo = ClopperPearsonLower(k0, n0, alpha);
  const double p1_hi = ClopperPearsonUpper(k1, n1, alpha);
  const double numerator = p0_lo - delta;
  if (!(numerator > 0) || !(p1_hi > 0)) return 0;
  return std::max(0.0, std::log(numerator / p1_hi));
}

absl::StatusOr<AuditResult> AuditScalarMechanism(
    const ScalarMechanism& mechanism, const AuditOptions& options,
    noise::RandomSource& rng) {
  RETURN_IF_ERROR(options.Validate());

  // Phase 1: choose the event on selection runs.
  ASSIGN_OR_RETURN(std::vector<double> d,
                   Run(mechanism, false, options.selection_trials, rng));
  ASSIGN_OR_RETURN(std::vector<double> dp,
                   Run(mechanism, true, options.selection_trials, rng));
  std::sort(d.begin(), d.end());
  std::sort(dp.begin(), dp.end());
  std::vector<double> pooled(d);
  pooled.insert(pooled.end(), dp.begin(), dp.end());
  std::sort(pooled.begin(), pooled.end());
  std::vector<double> thresholds;
  const int64_t m = options.max_thresholds;
  for (int64_t i = 0; i <= m; ++i) {
    const size_t idx = static_cast<size_t>(std::min<double>(
        pooled.size() - 1, static_cast<double>(i) * (pooled.size() - 1) / m));
    if (thresholds.empty() || thresholds.back() != pooled[idx]) {
      thresholds.push_back(pooled[idx]);
    }
  }
  const int64_t n_sel = options.selection_trials;
  Event best{thresholds.front(), true, false};
  double best_bound = -1;
  for (double t : thresholds) {
    for (bool upper : {true, false}) {
      for (bool swapped : {false, true}) {
        const Event e{t, upper, swapped};
        const auto [k0, k1] = Counts(e, d, dp);
        if (k0 <= k1) continue;
        const double bound = EpsilonLowerBound(
            k0, n_sel, k1, n_sel, options.delta, options.confidence);
        if (bound > best_bound) {
          best_bound = bound;
          best = e;
        }
      }
    }
  }

  // Phase 2: fresh runs, fixed event.
  const int64_t n = options.evaluation_trials;
  ASSIGN_OR_RETURN(d, Run(mechanism, false, n, rng));
  ASSIGN_OR_RETURN(dp, Run(mechanism, true, n, rng));
  std::sort(d.begin(), d.end());
  std::sort(dp.begin(), dp.end());
  const auto [k0, k1] = Counts(best, d, dp);
  AuditResult result;
  result.threshold = best.threshold;
  result.upper_tail = best.upper_tail;
  result.swapped = best.swapped;
  result.count_d = k0;
  result.count_d_prime = k1;
  result.trials = n;
  result.epsilon_lower_bound =
      EpsilonLowerBound(k0, n, k1, n, options.delta, options.confidence);
  const double p0 = static_cast<double>(k0) / n - options.delta;
  const double p1 = static_cast<double>(k1) / n;
  if (p0 <= 0) {
    result.epsilon_estimate = 0;
  } else if (p1 == 0) {
    result.epsilon_estimate = std::numeric_limits<double>::infinity();
  } else {
    result.epsilon_estimate = std::max(0.0, std::log(p0 / p1));
  }
  return result;
}

}  // namespace dpopt::audit
