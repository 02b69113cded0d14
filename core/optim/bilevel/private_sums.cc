#include "core/optim/bilevel/private_sums.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "core/common/status_macros.h"
#include "core/noise/exponential_mechanism.h"
#include "core/noise/vector_mechanisms.h"

namespace dpopt::optim::bilevel {

absl::StatusOr<std::unique_ptr<PrivateSumOracle>> PrivateSumOracle::Create(
    const Dataset& data, privacy::Relation relation, noise::RandomSource& rng,
    const NoiseAdder& noise, ReleaseBudget& budget) {
  RETURN_IF_ERROR(data.Validate());
  return std::unique_ptr<PrivateSumOracle>(
      new PrivateSumOracle(data, relation, rng, noise, budget));
}

absl::Status PrivateSumOracle::Sample(double q) {
  if (sampler_ == nullptr || sampler_rate_ != q) {
    sampler_ = std::make_unique<PoissonSampler>(q, rng_);
    sampler_rate_ = q;
  }
  return sampler_->Sample(data_.rows(), &batch_);
}

absl::Status PrivateSumOracle::NoisySum(const PlannedMechanism& mechanism,
                                        double scale,
                                        const ContributionSource& source,
                                        Eigen::VectorXd* out) {
  const int64_t d = source.dimension();
  if (d != mechanism.dimension) {
    return absl::InvalidArgumentError(
        absl::StrCat(mechanism.name, ": source has dimension ", d,
                     ", mechanism expects ", mechanism.dimension));
  }
  const double needed = RelationFactor(relation_) * source.bound();
  if (!(mechanism.sensitivity >= needed * (1 - 1e-12))) {
    return absl::FailedPreconditionError(absl::StrCat(
        mechanism.name, ": planned sensitivity ", mechanism.sensitivity,
        " does not cover the contributions' bound ", needed));
  }
  const double q = mechanism.sampling_rate;
  const double z = mechanism.NoiseMultiplier(scale);
  ASSIGN_OR_RETURN(privacy::DpEvent event, mechanism.ReleaseEvent(scale));
  ASSIGN_OR_RETURN(noise::GaussianPlan plan,
                   noise::PlanGaussian(mechanism.sensitivity / q, z, d));
  // Totality (docs/architecture.md, invariant "outcomes depend only on
  // what was charged"): the clipped sum is at most rows * bound / q in
  // norm whatever the rows are; refuse (before charging, from public values)
  // a plan whose grid could not represent that, so no row can make the
  // noise step fail.
  const double max_units =
      static_cast<double>(data_.rows()) * source.bound() / q / plan.grid;
  if (!(max_units < 0x1.0p61)) {
    return absl::FailedPreconditionError(absl::StrCat(
        mechanism.name, ": noise multiplier ", z,
        " is too small for the noise grid; use a smaller epsilon"));
  }
  RETURN_IF_ERROR(budget_.Charge(event));  // before any data access
  ++releases_;
  RETURN_IF_ERROR(Sample(q));
  Eigen::VectorXd sum = Eigen::VectorXd::Zero(d);
  for (int64_t i : batch_) source.AddClipped(data_, i, sum, scratch_);
  if (q != 1.0)
    sum /= q;  // public normaliser (post-processing order kept:
               // the plan's sensitivity is already / q)
  RETURN_IF_ERROR(noise_.AddGaussian(plan, rng_, sum));
  RETURN_IF_ERROR(rng_.status());
  source.AddPublic(sum);
  *out = std::move(sum);
  return absl::OkStatus();
}

absl::StatusOr<int64_t> PrivateSumOracle::ReportNoisyMin(
    const ContributionSource& scores, double epsilon, double score_sensitivity,
    bool monotonic) {
  noise::ExponentialMechanismOptions options;
  options.epsilon = epsilon;
  options.sensitivity = score_sensitivity;
  options.monotonic = monotonic;
  RETURN_IF_ERROR(options.Validate());
  const privacy::DpEvent event = privacy::DpEvent::Exponential(epsilon);
  RETURN_IF_ERROR(event.Validate());
  RETURN_IF_ERROR(budget_.Charge(event));  // before any data access
  ++releases_;
  Eigen::VectorXd sum = Eigen::VectorXd::Zero(scores.dimension());
  for (int64_t i = 0; i < data_.rows(); ++i) {
    scores.AddClipped(data_, i, sum, scratch_);
  }
  scores.AddPublic(sum);
  // Permute-and-flip maximises: negate the losses.
  const Eigen::VectorXd negated = -sum;
  ASSIGN_OR_RETURN(
      int64_t index,
      noise::PermuteAndFlip(absl::MakeConstSpan(negated.data(), negated.size()),
                            options, rng_));
  RETURN_IF_ERROR(rng_.status());
  return index;
}

absl::Status PrivateSumOracle::ExactSum(const ContributionSource& source,
                                        Eigen::VectorXd* out) {
  RETURN_IF_ERROR(budget_.Charge(privacy::DpEvent::NoOp()));
  ++releases_;
  Eigen::VectorXd sum = Eigen::VectorXd::Zero(source.dimension());
  for (int64_t i = 0; i < data_.rows(); ++i) {
    source.AddUnclipped(data_, i, sum, scratch_);
  }
  source.AddPublic(sum);
  *out = std::move(sum);
  return absl::OkStatus();
}

}  // namespace dpopt::optim::bilevel
