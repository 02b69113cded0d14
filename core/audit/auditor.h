// Empirical privacy auditing: a statistical LOWER bound on the epsilon of a
// mechanism, from running it many times on two neighbouring inputs D and D'
// (a threshold test with Clopper-Pearson intervals, as in Jagielski, Ullman,
// Oprea 2020, "Auditing Differentially Private Machine Learning", and
// DP-Auditorium, Kong et al. 2024).
//
// If M is (epsilon, delta)-DP then for every event S,
//   P[M(D) in S] <= e^epsilon P[M(D') in S] + delta,
// so epsilon >= ln((p0 - delta) / p1) with p0 = P[M(D) in S],
// p1 = P[M(D') in S]. The auditor:
//  1. runs M on D and D' `selection_trials` times each and picks the event
//     S = {x > t} or {x <= t} (and which input plays D) that maximises the
//     bound on these samples;
//  2. runs M `evaluation_trials` more times on each input, counts S, and
//     reports ln((p0_lo - delta) / p1_hi), with one-sided Clopper-Pearson
//     bounds p0_lo, p1_hi each at level (1 - confidence)/2.
// Because S is fixed before the evaluation runs, the reported bound is a
// valid lower bound on the true epsilon with probability >= `confidence`.
// So a bound ABOVE a mechanism's claimed epsilon proves (at that confidence)
// that the claim is false; a bound below it proves nothing beyond "not
// caught". The auditor is a test tool: it is not part of any privacy
// guarantee and must be driven by the test generator, not the server.
#ifndef DPOPT_CORE_AUDIT_AUDITOR_H_
#define DPOPT_CORE_AUDIT_AUDITOR_H_

#include <cstdint>
#include <functional>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/noise/random.h"

namespace dpopt::audit {

struct AuditOptions {
  // Runs per input used to choose the event. >= 100.
  int64_t selection_trials = 20000;
  // Fresh runs per input used for the bound. >= 100.
  int64_t evaluation_trials = 200000;
  // Probability that the reported bound does not exceed the true epsilon.
  // In (0, 1).
  double confidence = 0.99;
  // The delta of the (epsilon, delta) claim being audited. In [0, 1).
  double delta = 0;
  // Number of candidate thresholds (quantiles of the selection runs). >= 1.
  int max_thresholds = 200;

  // INVALID_ARGUMENT on a bad field.
  absl::Status Validate() const;
};

// One run of the mechanism under test on D (neighbour == false) or on D'
// (neighbour == true), reduced to a scalar statistic of its output (e.g. a
// coordinate, a projection, or the index a selection returns). An error
// aborts the audit and is returned.
using ScalarMechanism = std::function<absl::StatusOr<double>(
    bool neighbour, noise::RandomSource& rng)>;

struct AuditResult {
  // Holds with probability >= confidence; 0 when nothing can be certified.
  double epsilon_lower_bound = 0;
  // ln((p0_hat - delta) / p1_hat) on the evaluation runs (may be +inf or 0).
  double epsilon_estimate = 0;
  // The event: {x > threshold} if upper_tail, else {x <= threshold}; `swapped`
  // means D' played the role of D in the inequality above.
  double threshold = 0;
  bool upper_tail = true;
  bool swapped = false;
  // Evaluation counts of the event (for the roles after swapping).
  int64_t count_d = 0;
  int64_t count_d_prime = 0;
  int64_t trials = 0;
};

// ln((p0_lo - delta) / p1_hi) with p0_lo the one-sided Clopper-Pearson lower
// bound of k0/n0 and p1_hi the upper bound of k1/n1, each at level
// (1 - confidence)/2; 0 when that is not positive. REQUIRES: valid counts,
// 0 < confidence < 1, 0 <= delta < 1.
double EpsilonLowerBound(int64_t k0, int64_t n0, int64_t k1, int64_t n1,
                         double delta, double confidence);

// Runs the audit described above. Errors: INVALID_ARGUMENT for bad options,
// or any error the mechanism returns.
absl::StatusOr<AuditResult> AuditScalarMechanism(
    const ScalarMechanism& mechanism, const AuditOptions& options,
    noise::RandomSource& rng);

}  // namespace dpopt::audit

#endif  // DPOPT_CORE_AUDIT_AUDITOR_H_
