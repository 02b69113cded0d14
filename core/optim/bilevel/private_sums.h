// PrivateSumOracle: the only place where the bilevel algorithms touch
// private rows (the counterpart of core/optim/private_oracle.h for bilevel
// problems, whose per-example vectors are not gradients of one Objective).
//
// A ContributionSource defines, at the current (public, privatized) point,
// one bounded vector c_i per record: a clipped per-example vector times the
// record's PUBLIC weight (1/n, 1/n_tr, lambda/n_tr, ...), with
// ||c_i|| <= bound() for every finite row (clipping makes privacy hold
// whatever the true Lipschitz constants are), plus a data-free part added
// after the noise.
//
// NoisySum(mechanism, s, source) releases, for the mechanism's Poisson rate q
// (q = 1: every row, no draws),
//   (1/q) sum_{i in B} c_i  +  N_Z(0, sigma^2 I)  +  public part,
// with B ~ Poisson(q), sigma = z * (mechanism.sensitivity / q) and
// z = mechanism.NoiseMultiplier(s), through NoiseAdder::AddGaussian (the
// exact rounded Gaussian on a power-of-two grid; the rounding is in the
// plan's sensitivity), after charging mechanism.ReleaseEvent(s) to the run's
// ReleaseBudget, BEFORE reading any row. Sensitivity: under add/remove the
// sum moves by one c_i (<= bound); under replace-one by two (<= 2 bound); the
// oracle checks mechanism.sensitivity >= RelationFactor * bound.
#ifndef DPOPT_CORE_OPTIM_BILEVEL_PRIVATE_SUMS_H_
#define DPOPT_CORE_OPTIM_BILEVEL_PRIVATE_SUMS_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "Eigen/Dense"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/data/dataset.h"
#include "core/noise/random.h"
#include "core/optim/bilevel/accounting.h"
#include "core/optim/poisson_sampler.h"
#include "core/optim/private_oracle.h"
#include "core/optim/release_budget.h"
#include "core/privacy/privacy_filter.h"

namespace dpopt::optim::bilevel {

class ContributionSource {
 public:
  virtual ~ContributionSource() = default;
  // Size of the released vector.
  virtual int64_t dimension() const = 0;
  // Public bound on ||c_i|| for every finite row (> 0).
  virtual double bound() const = 0;
  // out += c_i. Must be total: finite and of norm <= bound() for every
  // finite row (use SafeClip). `scratch` is caller-owned workspace.
  virtual void AddClipped(const Dataset& data, int64_t i,
                          Eigen::Ref<Eigen::VectorXd> out,
                          Eigen::VectorXd& scratch) const = 0;
  // out += the same contribution WITHOUT clipping (the non-private penalty
  // method; public datasets and tests only).
  virtual void AddUnclipped(const Dataset& data, int64_t i,
                            Eigen::Ref<Eigen::VectorXd> out,
                            Eigen::VectorXd& scratch) const = 0;
  // out += the data-free part (zero sensitivity, added after the noise).
  virtual void AddPublic(Eigen::Ref<Eigen::VectorXd> out) const = 0;
};

class PrivateSumOracle {
 public:
  // `data` rows are read only by NoisySum/ExactSum. All references must
  // outlive the oracle. Errors: INVALID_ARGUMENT if the data has a
  // non-finite value.
  static absl::StatusOr<std::unique_ptr<PrivateSumOracle>> Create(
      const Dataset& data, privacy::Relation relation, noise::RandomSource& rng,
      const NoiseAdder& noise, ReleaseBudget& budget);

  // See the header comment. Errors: INVALID_ARGUMENT (dimension mismatch),
  // FAILED_PRECONDITION (the mechanism's sensitivity does not cover the
  // source's bound), the budget's error (nothing read, *out untouched), the
  // rng's error (*out must not be published).
  absl::Status NoisySum(const PlannedMechanism& mechanism, double scale,
                        const ContributionSource& source, Eigen::VectorXd* out);

  // Private selection (report-noisy-min): the index j minimising the score
  // sum_i c_ij (+ public part) over every row, chosen by the exponential
  // mechanism (permute-and-flip, noise::PermuteAndFlip) with `epsilon`,
  // after charging DpEvent::Exponential(epsilon). `score_sensitivity` is
  // the largest change of any one score between neighbours (public; at
  // least RelationFactor * source.bound() is NOT required here: the caller
  // states the L-infinity sensitivity of its bounded scores); `monotonic`
  // that all scores move in the same direction between neighbours.
  // Errors: the budget's, the mechanism's, the rng's.
  absl::StatusOr<int64_t> ReportNoisyMin(const ContributionSource& scores,
                                         double epsilon,
                                         double score_sensitivity,
                                         bool monotonic);

  // NON-PRIVATE: *out = sum_i unclipped c_i + public, every row, no noise.
  // Charges DpEvent::NoOp(), which only UnlimitedNoOpBudget accepts (runs
  // calibrated as non-private: public datasets, decided by the server).
  absl::Status ExactSum(const ContributionSource& source, Eigen::VectorXd* out);

  // Number of NoisySum/ExactSum calls so far (public: the schedule is fixed).
  int64_t releases() const { return releases_; }

 private:
  PrivateSumOracle(const Dataset& data, privacy::Relation relation,
                   noise::RandomSource& rng, const NoiseAdder& noise,
                   ReleaseBudget& budget)
      : data_(data),
        relation_(relation),
        rng_(rng),
        noise_(noise),
        budget_(budget) {}
  absl::Status Sample(double q);

  const Dataset& data_;
  const privacy::Relation relation_;
  noise::RandomSource& rng_;
  const NoiseAdder& noise_;
  ReleaseBudget& budget_;
  std::unique_ptr<PoissonSampler> sampler_;
  double sampler_rate_ = 0;
  std::vector<int64_t> batch_;
  Eigen::VectorXd scratch_;
  int64_t releases_ = 0;
};

}  // namespace dpopt::optim::bilevel

#endif  // DPOPT_CORE_OPTIM_BILEVEL_PRIVATE_SUMS_H_
