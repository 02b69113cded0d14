// Privacy cost as a value: a composable, serializable DP event tree, after
// dp_accounting's dp_event.py (docs/architecture.md, convention "privacy cost
// is a value"). The ledger stores the event's JSON so costs can be recomputed
// with a better accountant later.
//
// Parameters are relative to the mechanism's sensitivity (noise multipliers),
// so one event describes a mechanism independently of the clipping norm.
#ifndef DPOPT_CORE_PRIVACY_DP_EVENT_H_
#define DPOPT_CORE_PRIVACY_DP_EVENT_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace dpopt::privacy {

class DpEvent {
 public:
  enum class Kind {
    kNoOp,
    kGaussian,          // noise_multiplier = sigma / L2 sensitivity
    kLaplace,           // noise_multiplier = b / L1 sensitivity
    kDiscreteGaussian,  // noise_multiplier, sigma_in_grid_units, dimension
    kDiscreteLaplace,   // noise_multiplier = b / effective L1 sensitivity
    kExponential,       // epsilon (exponential mechanism / report-noisy-max)
    // count adaptive exponential mechanisms, epsilon in total (see
    // ExponentialMechanisms()).
    kExponentialMechanisms,
    kSparseVector,  // AboveThreshold: epsilon (pure), see privacy docs
    // Gaussian AboveThreshold, cutoff 1: threshold_noise_multiplier,
    // query_noise_multiplier, max_queries (see GaussianSparseVector()).
    kGaussianSparseVector,
    kEpsilonDelta,               // mechanism known only by its (epsilon, delta)
    kPoissonSampled,             // sampling_probability, inner
    kSampledWithoutReplacement,  // source_size, sample_size, inner
    kSelfComposed,               // count, inner
    kComposed,                   // events
  };

  DpEvent();  // NoOp.

  static DpEvent NoOp();
  static DpEvent Gaussian(double noise_multiplier);
  static DpEvent Laplace(double noise_multiplier);
  static DpEvent DiscreteGaussian(double noise_multiplier,
                                  double sigma_in_grid_units,
                                  int64_t dimension);
  static DpEvent DiscreteLaplace(double noise_multiplier);
  static DpEvent Exponential(double epsilon);
  // `count` adaptively chosen exponential mechanisms, each
  // (epsilon / count)-DP with the standard analysis: sampling
  // prop. to exp(eps' u / (2 Delta)) for scores u of sensitivity Delta (or
  // exp(eps' u / Delta) for monotone scores), so that each is also
  // (epsilon / count)-bounded range (Durfee & Rogers 2019). Pricing:
  //  * basic composition: (epsilon, 0), pure epsilon-DP (the sum of the
  //    count shares);
  //  * RDP: per order alpha the minimum of alpha epsilon^2 / (8 count)
  //    (an eps'-bounded-range mechanism is (eps'^2 / 8)-zCDP, Cesar & Rogers
  //    2021; zCDP composes by adding rho and rho-zCDP is
  //    (alpha, rho alpha)-RDP, Bun & Steinke 2016, Def. 1.1) and the pure-DP
  //    curves RdpPureDp(epsilon, alpha) and count RdpPureDp(epsilon / count,
  //    alpha); epsilon at alpha = inf;
  //  * PLD: as SelfComposed(count, Exponential(epsilon / count)), the
  //    randomized-response pair of each pure share composed.
  // Only for selections whose epsilon-DP proof is the exponential
  // mechanism's (each share must be (epsilon / count)-bounded range), not for
  // other pure-DP selections. Validate(): epsilon finite and >= 0,
  // 1 <= count <= 10^9.
  static DpEvent ExponentialMechanisms(double epsilon, int64_t count);
  static DpEvent SparseVector(double epsilon);
  // AboveThreshold (sparse vector test) with cutoff c = 1 and Gaussian noise:
  // threshold noise N(0, (threshold_noise_multiplier * Delta)^2), fresh query
  // noise N(0, (query_noise_multiplier * Delta)^2) per query, queries of
  // sensitivity Delta that need NOT be monotone, and at most max_queries
  // queries before it halts (it may halt with "none above"). Priced by
  // RdpGaussianSparseVector (core/privacy/rdp.h; Zhu & Wang, NeurIPS 2020,
  // Thm 8, with k = max_queries + 1 outcomes). Validate(): both multipliers
  // finite and > 0, 1 <= max_queries <= 10^6.
  static DpEvent GaussianSparseVector(double threshold_noise_multiplier,
                                      double query_noise_multiplier,
                                      int64_t max_queries);
  static DpEvent EpsilonDelta(double epsilon, double delta);
  static DpEvent PoissonSampled(double sampling_probability, DpEvent inner);
  static DpEvent SampledWithoutReplacement(int64_t source_size,
                                           int64_t sample_size, DpEvent inner);
  static DpEvent SelfComposed(int64_t count, DpEvent inner);
  static DpEvent Composed(std::vector<DpEvent> events);

  Kind kind() const { return kind_; }
  double noise_multiplier() const { return noise_multiplier_; }
  double sigma_in_grid_units() const { return sigma_in_grid_units_; }
  double threshold_noise_multiplier() const {
    return threshold_noise_multiplier_;
  }
  double query_noise_multiplier() const { return query_noise_multiplier_; }
  int64_t max_queries() const { return max_queries_; }
  int64_t dimension() const { return dimension_; }
  double epsilon() const { return epsilon_; }
  double delta() const { return delta_; }
  double sampling_probability() const { return sampling_probability_; }
  int64_t source_size() const { return source_size_; }
  int64_t sample_size() const { return sample_size_; }
  int64_t count() const { return count_; }
  // REQUIRES: kind() is one of the wrappers.
  const DpEvent& inner() const { return events_.front(); }
  const std::vector<DpEvent>& events() const { return events_; }

  // Checks parameter ranges recursively (INVALID_ARGUMENT on violation).
  absl::Status Validate() const;

  // Stable JSON, e.g. {"self_composed":{"count":2000,"event":
  // {"poisson_sampled":{"sampling_probability":0.01,"event":
  // {"gaussian":{"noise_multiplier":1.1}}}}}}
  std::string ToJson() const;
  static absl::StatusOr<DpEvent> FromJson(absl::string_view json);

  bool operator==(const DpEvent& other) const;

 private:
  Kind kind_ = Kind::kNoOp;
  double noise_multiplier_ = 0;
  double sigma_in_grid_units_ = 0;
  double threshold_noise_multiplier_ = 0;
  double query_noise_multiplier_ = 0;
  int64_t max_queries_ = 0;
  int64_t dimension_ = 0;
  double epsilon_ = 0;
  double delta_ = 0;
  double sampling_probability_ = 0;
  int64_t source_size_ = 0;
  int64_t sample_size_ = 0;
  int64_t count_ = 0;
  std::vector<DpEvent> events_;
};

}  // namespace dpopt::privacy

#endif  // DPOPT_CORE_PRIVACY_DP_EVENT_H_
