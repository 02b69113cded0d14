#include "core/optim/private_oracle.h"

#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/common/status_macros.h"
#include "core/optim/algorithm.h"

namespace dpopt::optim {
namespace {

class SecureNoiseAdder final : public NoiseAdder {
 public:
  absl::Status AddGaussian(const noise::GaussianPlan& plan,
                           noise::RandomSource& rng,
                           Eigen::Ref<Eigen::VectorXd> v) const override {
    return noise::AddGaussianNoise(plan, rng, v);
  }
  absl::Status AddLaplace(const noise::LaplacePlan& plan,
                          noise::RandomSource& rng,
                          Eigen::Ref<Eigen::VectorXd> v) const override {
    return noise::AddLaplaceNoise(plan, rng, v);
  }
};

bool FinitePositive(double x) { return std::isfinite(x) && x > 0; }

absl::Status CheckRate(double q) {
  if (!(q >= PoissonSampler::kMinRate && q <= 1)) {
    return absl::InvalidArgumentError("sampling rate must be in [1e-12, 1]");
  }
  return absl::OkStatus();
}

}  // namespace

const NoiseAdder& SecureNoise() {
  static const SecureNoiseAdder* const kNoise = new SecureNoiseAdder();
  return *kNoise;
}

const NoiseAdder& SolveContext::noise() const {
  return noise_for_testing_ != nullptr ? *noise_for_testing_ : SecureNoise();
}

absl::Status GaussianGradientQuery::Validate() const {
  RETURN_IF_ERROR(CheckRate(sampling_rate));
  if (!FinitePositive(clip_norm)) {
    return absl::InvalidArgumentError("clip norm must be finite and > 0");
  }
  if (!FinitePositive(noise_multiplier)) {
    return absl::InvalidArgumentError(
        "noise multiplier must be finite and > 0");
  }
  return absl::OkStatus();
}

absl::Status LaplaceGradientQuery::Validate() const {
  RETURN_IF_ERROR(CheckRate(sampling_rate));
  if (!FinitePositive(clip_norm)) {
    return absl::InvalidArgumentError("clip norm must be finite and > 0");
  }
  if (!FinitePositive(scale_multiplier)) {
    return absl::InvalidArgumentError(
        "scale multiplier must be finite and > 0");
  }
  return absl::OkStatus();
}

absl::StatusOr<privacy::DpEvent> GaussianGradientEvent(
    const GaussianGradientQuery& query, int64_t parameter_size) {
  RETURN_IF_ERROR(query.Validate());
  // Validates the plan (grid, dimension). The release is a post-processing
  // of the continuous Gaussian mechanism with sensitivity
  // plan.effective_sensitivity and sigma >= z times it
  // (noise/vector_mechanisms.h), so it is charged as Gaussian(z).
  RETURN_IF_ERROR(noise::PlanGaussian(query.clip_norm, query.noise_multiplier,
                                      parameter_size)
                      .status());
  privacy::DpEvent inner = privacy::DpEvent::Gaussian(query.noise_multiplier);
  if (query.sampling_rate == 1.0) return inner;
  return privacy::DpEvent::PoissonSampled(query.sampling_rate,
                                          std::move(inner));
}

absl::StatusOr<privacy::DpEvent> LaplaceGradientEvent(
    const LaplaceGradientQuery& query, int64_t parameter_size) {
  RETURN_IF_ERROR(query.Validate());
  // Validates the plan (grid, dimension) even though the event only needs
  // the multiplier: the release is (1 / scale_multiplier)-DP.
  ASSIGN_OR_RETURN(noise::LaplacePlan plan,
                   noise::PlanLaplace(query.clip_norm, query.scale_multiplier,
                                      parameter_size));
  (void)plan;
  privacy::DpEvent inner =
      privacy::DpEvent::DiscreteLaplace(query.scale_multiplier);
  if (query.sampling_rate == 1.0) return inner;
  return privacy::DpEvent::PoissonSampled(query.sampling_rate,
                                          std::move(inner));
}

absl::StatusOr<std::unique_ptr<PrivateGradientOracle>>
PrivateGradientOracle::Create(const Dataset& data, const Objective& objective,
                              int64_t public_rows, noise::RandomSource& rng,
                              const NoiseAdder& noise, ReleaseBudget& budget) {
  RETURN_IF_ERROR(objective.CheckDataset(data));
  return Create(std::make_unique<LocalRowSums>(data, objective, rng), objective,
                public_rows, rng, noise, budget);
}

absl::StatusOr<std::unique_ptr<RowSums>> OpenRunRows(const Dataset& data,
                                                     const Objective& objective,
                                                     SolveContext& context) {
  if (context.rng == nullptr) {
    return absl::FailedPreconditionError("no random source");
  }
  if (context.remote_rows != nullptr) {
    return context.remote_rows->Open(objective);
  }
  RETURN_IF_ERROR(objective.CheckDataset(data));
  return std::make_unique<LocalRowSums>(data, objective, *context.rng);
}

absl::StatusOr<std::unique_ptr<PrivateGradientOracle>>
PrivateGradientOracle::Create(const Dataset& data, const Objective& objective,
                              int64_t public_rows, SolveContext& context,
                              ReleaseBudget& budget) {
  ASSIGN_OR_RETURN(std::unique_ptr<RowSums> sums,
                   OpenRunRows(data, objective, context));
  return Create(std::move(sums), objective, public_rows, *context.rng,
                context.noise(), budget);
}

absl::StatusOr<std::unique_ptr<PrivateGradientOracle>>
PrivateGradientOracle::Create(std::unique_ptr<RowSums> sums,
                              const Objective& objective, int64_t public_rows,
                              noise::RandomSource& rng, const NoiseAdder& noise,
                              ReleaseBudget& budget) {
  if (public_rows < 1) {
    return absl::InvalidArgumentError("public row count must be >= 1");
  }
  RowSums& borrowed = *sums;
  return std::unique_ptr<PrivateGradientOracle>(new PrivateGradientOracle(
      std::move(sums), borrowed, objective, public_rows, rng, noise, budget));
}

absl::StatusOr<std::unique_ptr<PrivateGradientOracle>>
PrivateGradientOracle::Create(RowSums& sums, const Objective& objective,
                              int64_t public_rows, noise::RandomSource& rng,
                              const NoiseAdder& noise, ReleaseBudget& budget) {
  if (public_rows < 1) {
    return absl::InvalidArgumentError("public row count must be >= 1");
  }
  return std::unique_ptr<PrivateGradientOracle>(new PrivateGradientOracle(
      nullptr, sums, objective, public_rows, rng, noise, budget));
}

PrivateGradientOracle::PrivateGradientOracle(
    std::unique_ptr<RowSums> owned, RowSums& sums, const Objective& objective,
    int64_t public_rows, noise::RandomSource& rng, const NoiseAdder& noise,
    ReleaseBudget& budget)
    : owned_sums_(std::move(owned)),
      sums_(sums),
      objective_(objective),
      public_rows_(public_rows),
      rng_(rng),
      noise_(noise),
      budget_(budget),
      sum_(objective.parameter_size()) {}

absl::StatusOr<const PrivateGradientOracle::GaussianRelease*>
PrivateGradientOracle::GaussianReleaseFor(const GaussianGradientQuery& query) {
  // Exact comparison: a query that differs in any bit is planned anew.
  if (gaussian_ != nullptr &&
      gaussian_->query.sampling_rate == query.sampling_rate &&
      gaussian_->query.clip_norm == query.clip_norm &&
      gaussian_->query.noise_multiplier == query.noise_multiplier) {
    return gaussian_.get();
  }
  const int64_t p = objective_.parameter_size();
  ASSIGN_OR_RETURN(privacy::DpEvent event, GaussianGradientEvent(query, p));
  ASSIGN_OR_RETURN(
      noise::GaussianPlan plan,
      noise::PlanGaussian(query.clip_norm, query.noise_multiplier, p));
  gaussian_ = std::make_unique<GaussianRelease>(
      GaussianRelease{query, std::move(event), plan});
  return gaussian_.get();
}

absl::Status PrivateGradientOracle::GaussianGradient(
    const GaussianGradientQuery& query,
    const Eigen::Ref<const Eigen::VectorXd>& w, Eigen::VectorXd* g) {
  if (w.size() != objective_.parameter_size()) {
    return absl::InvalidArgumentError("iterate has the wrong size");
  }
  ASSIGN_OR_RETURN(const GaussianRelease* release, GaussianReleaseFor(query));
  RETURN_IF_ERROR(budget_.Charge(release->event));  // before any data access
  RETURN_IF_ERROR(sums_.ClippedSum(
      {query.sampling_rate, Objective::ClipNorm::kL2, query.clip_norm}, w,
      &sum_));
  RETURN_IF_ERROR(noise_.AddGaussian(release->plan, rng_, sum_));
  RETURN_IF_ERROR(rng_.status());
  // Normalise by the public expected batch size q * n (post-processing).
  *g = sum_ / (query.sampling_rate * static_cast<double>(public_rows_));
  objective_.AddSmoothRegularizerGradient(w, *g);
  return absl::OkStatus();
}

absl::Status PrivateGradientOracle::LaplaceGradient(
    const LaplaceGradientQuery& query,
    const Eigen::Ref<const Eigen::VectorXd>& w, Eigen::VectorXd* g) {
  if (w.size() != objective_.parameter_size()) {
    return absl::InvalidArgumentError("iterate has the wrong size");
  }
  const int64_t p = objective_.parameter_size();
  ASSIGN_OR_RETURN(privacy::DpEvent event, LaplaceGradientEvent(query, p));
  ASSIGN_OR_RETURN(
      noise::LaplacePlan plan,
      noise::PlanLaplace(query.clip_norm, query.scale_multiplier, p));
  RETURN_IF_ERROR(budget_.Charge(event));
  RETURN_IF_ERROR(sums_.ClippedSum(
      {query.sampling_rate, Objective::ClipNorm::kL1, query.clip_norm}, w,
      &sum_));
  RETURN_IF_ERROR(noise_.AddLaplace(plan, rng_, sum_));
  RETURN_IF_ERROR(rng_.status());
  *g = sum_ / (query.sampling_rate * static_cast<double>(public_rows_));
  objective_.AddSmoothRegularizerGradient(w, *g);
  return absl::OkStatus();
}

absl::Status PrivateGradientOracle::ExactGradient(
    const Eigen::Ref<const Eigen::VectorXd>& w, Eigen::VectorXd* g) {
  if (w.size() != objective_.parameter_size()) {
    return absl::InvalidArgumentError("iterate has the wrong size");
  }
  RETURN_IF_ERROR(budget_.Charge(privacy::DpEvent::NoOp()));
  RETURN_IF_ERROR(sums_.ExactSum(w, &sum_));
  *g = sum_ / static_cast<double>(public_rows_);
  objective_.AddSmoothRegularizerGradient(w, *g);
  return absl::OkStatus();
}

}  // namespace dpopt::optim
