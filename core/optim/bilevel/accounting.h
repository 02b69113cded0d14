// Privacy accounting of bilevel family (Kornowski 2024;
// docs/algorithms/bilevel.md).
//
// Every noisy release of the bilevel algorithms is a Gaussian mechanism (the
// exactly sampled rounded Gaussian of noise::AddGaussianNoise, charged as
// Gaussian(z) by post-processing). A job is a list of PlannedMechanisms
// (inner solve 1, inner solve 2, outer gradient, ...), mechanism j released
// R_j times with noise multiplier
//   z_j(s) = s * sqrt(R_j / w_j),
// where w_j is its budget share and s one scalar. With zCDP each release
// costs 1/(2 z_j^2) = w_j / (2 s^2 R_j), mechanism j costs w_j / (2 s^2), and
// the job costs 1 / (2 s^2) when the shares sum to 1: the split
// rho_j = w_j rho (the paper splits its budget in equal thirds). The job's
// DpEvent is
//   Composed{ SelfComposed(R_j, [PoissonSampled(q_j,] Gaussian(z_j)[)]) }_j
// and s is calibrated to the (epsilon, delta) target either
//  * by the privacy core (CalibrationMode::kAccountant, the default): the
//    smallest s whose event is (epsilon, delta)-DP under the job's
//    accountant (RDP: for unsampled Gaussians exactly zCDP composition with
//    the improved RDP conversion, slightly less noise than the closed form;
//    PLD; both price Poisson sampling, Algorithms 3-4), or
//  * in closed form (CalibrationMode::kZcdpClosedForm, full batch only):
//    rho = rho(epsilon, delta) = (sqrt(ln(1/delta) + epsilon) -
//    sqrt(ln(1/delta)))^2 and s = 1 / sqrt(2 rho).
// The paper's own split (per call (eps/sqrt(18T), delta/(3(T+1))) with
// advanced composition, its Lemma 2.1) does not compose to epsilon: per
// iteration (eps/sqrt(2T), delta/(T+1)) gives eps sqrt(ln((T+1)/delta)) +
// eps^2 in total. It is never used to charge; PaperLiteralSigma and
// AdvancedCompositionSigma below only reproduce comparison numbers.
#ifndef DPOPT_CORE_OPTIM_BILEVEL_ACCOUNTING_H_
#define DPOPT_CORE_OPTIM_BILEVEL_ACCOUNTING_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/optim/algorithm.h"
#include "core/privacy/dp_event.h"

namespace dpopt::optim::bilevel {

// Budget split w = (w_out, w_in1, w_in2) between the outer gradient and the
// two inner solves (the paper: equal thirds).
struct BudgetSplit {
  double outer = 1.0 / 3;
  double inner1 = 1.0 / 3;
  double inner2 = 1.0 / 3;
  // INVALID_ARGUMENT unless all are finite, outer >= 0, inner1 > 0,
  // inner2 > 0 and the sum is 1 (to 1e-9).
  absl::Status Validate() const;
};

// zCDP <-> (epsilon, delta) (Bun & Steinke 2016, Prop. 1.3).
// REQUIRES: epsilon > 0, 0 < delta < 1, rho >= 0.
double ZcdpFromEpsilonDelta(double epsilon, double delta);
double EpsilonFromZcdp(double rho, double delta);

// Lemma 2.2 of the paper: sigma = sqrt(2 ln(5 / (4 delta))) * sensitivity /
// epsilon for an (epsilon, delta)-DP Gaussian mechanism (epsilon, delta in
// (0, 1)). Used only for comparison numbers.
double Lemma22Sigma(double sensitivity, double epsilon, double delta);
// The paper's literal per-call calibration of the outer noise: Lemma 2.2 at
// (epsilon / sqrt(18 T), delta / (3 (T + 1))). NOT how jobs are
// calibrated (that split does not compose to epsilon with Lemma 2.1).
double PaperLiteralSigma(double sensitivity, double epsilon, double delta,
                         int64_t outer_iterations);
// zCDP of the paper-literal calibration: 3T Gaussian calls, each
// sensitivity^2 / (2 sigma^2): under zCDP accounting the paper's
// calibration is private, and conservative (about 0.33 epsilon at
// epsilon = 1, delta = 1e-5, T = 100).
double PaperLiteralZcdp(double epsilon, double delta, int64_t outer_iterations);
// A corrected advanced-composition split: delta1 = delta /
// (T + 1), eps1 the root of a eps1 + 2T eps1^2 = epsilon with a = sqrt(2T
// ln(1/delta1)), per call (eps1/3, delta1/3) through Lemma 2.2.
double AdvancedCompositionSigma(double sensitivity, double epsilon,
                                double delta, int64_t outer_iterations);

enum class CalibrationMode { kAccountant, kZcdpClosedForm };

// One Gaussian mechanism of a job, fully determined by public inputs.
struct PlannedMechanism {
  std::string name;
  // Number of releases over the whole job, in [1, 10^8].
  int64_t releases = 0;
  // Budget share w_j > 0.
  double weight = 0;
  // Poisson rate of each release (1 = full batch).
  double sampling_rate = 1;
  // L2 sensitivity of one (unsampled) release under the dataset's relation,
  // in the units of the released vector (> 0).
  double sensitivity = 0;
  // Dimension of the released vector (>= 1).
  int64_t dimension = 0;

  absl::Status Validate() const;
  // z_j(s) = s * sqrt(releases / weight).
  double NoiseMultiplier(double scale) const;
  // Standard deviation of the noise per coordinate: z_j(s) * sensitivity
  // (before the grid's rounding is added; see noise::PlanGaussian).
  double NominalSigma(double scale) const;
  // The noise sampler's standard deviation per coordinate of one release
  // (the clipped sum / sampling_rate): noise::PlanGaussian(sensitivity /
  // sampling_rate, z_j(s), dimension).sigma, the value PrivateSumOracle
  // adds.
  absl::StatusOr<double> NoiseStddev(double scale) const;
  // The DpEvent of ONE release at scale s (as the oracle charges it).
  absl::StatusOr<privacy::DpEvent> ReleaseEvent(double scale) const;
};

// Composed{SelfComposed(R_j, ReleaseEvent_j(s))}. INVALID_ARGUMENT for an
// empty list or invalid mechanisms.
// `fixed` events (e.g. a selection's Exponential(epsilon)) are appended
// unchanged.
absl::StatusOr<privacy::DpEvent> JobEvent(
    const std::vector<PlannedMechanism>& mechanisms, double scale,
    const std::vector<privacy::DpEvent>& fixed = {});

// The scale s (see the header comment). kZcdpClosedForm requires every
// sampling_rate == 1 and the weights to sum to 1. Errors: INVALID_ARGUMENT
// (bad target or mechanisms), OUT_OF_RANGE (unreachable target), the
// accountant's errors. The returned s is verified: the job's event is
// (epsilon, delta)-DP under target.accountant.
// With `fixed` events (kAccountant only), s is calibrated for the
// composition of the mechanisms and the fixed events.
absl::StatusOr<double> CalibrateScale(
    const std::vector<PlannedMechanism>& mechanisms,
    const PrivacyTarget& target, CalibrationMode mode,
    const std::vector<privacy::DpEvent>& fixed = {});

// Sensitivity factor of a clipped sum under `relation`: 1 (add/remove: one
// record's bounded contribution appears or disappears) or 2 (replace-one:
// one contribution is replaced by another).
double RelationFactor(privacy::Relation relation);

}  // namespace dpopt::optim::bilevel

#endif  // DPOPT_CORE_OPTIM_BILEVEL_ACCOUNTING_H_
