#include "core/optim/dp_sgd.h"

#include <cmath>
#include <limits>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/common/status_macros.h"
#include "core/noise/vector_mechanisms.h"
#include "core/optim/objective.h"
#include "core/optim/poisson_sampler.h"
#include "core/optim/private_oracle.h"
#include "core/optim/release_budget.h"
#include "core/optim/solve_loop.h"
#include "core/optim/update_rules.h"
#include "core/privacy/accountant.h"
#include "core/privacy/privacy_filter.h"

namespace dpopt::optim {
namespace {

constexpr int64_t kMaxSteps = 1'000'000;
constexpr double kMaxClipNorm = 1e6;
constexpr double kMaxLearningRate = 1e6;

// One DP-SGD step: privatized gradient from the oracle, then the
// (post-processing) heavy-ball / proximal update.
class DpSgdMethod final : public IterativeMethod {
 public:
  DpSgdMethod(const GaussianGradientQuery& query,
              const MomentumProxStep::Options& rule, int64_t p)
      : query_(query), rule_(rule, p), w_(Eigen::VectorXd::Zero(p)) {}

  absl::Status Step(int64_t step, PrivateGradientOracle& oracle,
                    StepInfo* info) override {
    RETURN_IF_ERROR(oracle.GaussianGradient(query_, w_, &g_));
    info->noisy_gradient_norm = g_.norm();
    rule_.Apply(g_, &w_);
    return absl::OkStatus();
  }
  const Eigen::VectorXd& iterate() const override { return w_; }

 private:
  const GaussianGradientQuery query_;
  MomentumProxStep rule_;
  Eigen::VectorXd w_;
  Eigen::VectorXd g_;
};

class DpSgd final : public Algorithm {
 public:
  explicit DpSgd(const DpSgdOptions& options) : options_(options) {}

  std::string name() const override { return "dp_sgd"; }

  absl::StatusOr<Calibration> Calibrate(
      const PublicDatasetInfo& info,
      const PrivacyTarget& target) const override {
    RETURN_IF_ERROR(CheckPublicInfo(info, options_.model, true));
    RETURN_IF_ERROR(CheckPrivateTarget(target));
    RETURN_IF_ERROR(CheckRelation(
        info.relation,
        {privacy::Relation::kAddRemove, privacy::Relation::kReplaceOne},
        name()));
    ASSIGN_OR_RETURN(std::unique_ptr<Objective> objective,
                     Objective::Create(options_.model, info.dimension));
    const int64_t p = objective->parameter_size();
    const double q = options_.sampling_rate;
    const int64_t steps = options_.steps;
    const double clip = options_.clip_norm;

    Calibration c;
    const double epsilon = target.epsilon;
    const double delta = target.delta;
    const bool replace_one = info.relation == privacy::Relation::kReplaceOne;
    if (replace_one && q < 1.0) {
      // Poisson sampling is analysed under add/remove (docs/architecture.md,
      // invariant "one neighbouring relation per dataset"); the ledger has no
      // proven conversion of a sampled add/remove RDP curve to replace-one, so
      // refuse before anything is charged.
      return absl::FailedPreconditionError(
          "DP-SGD's Poisson subsampling is analysed under add/remove; this "
          "dataset is declared replace-one. Use dp_gd (full batch) or a "
          "dataset declared add/remove");
    }
    if (replace_one) {
      c.notes.push_back(
          "dataset is replace-one: the full-batch sum has sensitivity 2C; "
          "priced by the ledger's group-privacy conversion (noise "
          "multiplier halved)");
    }

    absl::Status event_error;
    // The event as the ledger prices it: on a replace-one dataset, converted
    // by ConvertToRelation (sensitivity doubles, so z halves).
    auto priced_event = [&](const privacy::DpEvent& e) -> privacy::DpEvent {
      if (!replace_one) return e;
      absl::StatusOr<privacy::DpEvent> converted = privacy::ConvertToRelation(
          e, privacy::Relation::kAddRemove, privacy::Relation::kReplaceOne);
      if (!converted.ok()) {
        if (event_error.ok()) event_error = converted.status();
        return privacy::DpEvent::EpsilonDelta(
            std::numeric_limits<double>::max(), 1.0);
      }
      return *std::move(converted);
    };
    auto make_event = [&](double z) -> privacy::DpEvent {
      absl::StatusOr<privacy::DpEvent> e =
          GaussianGradientEvent({q, clip, z}, p);
      if (!e.ok()) {
        // Never let an invalid z look cheap: record the error and return
        // the most expensive event; the error is returned below.
        if (event_error.ok()) event_error = e.status();
        return privacy::DpEvent::EpsilonDelta(
            std::numeric_limits<double>::max(), 1.0);
      }
      return privacy::DpEvent::SelfComposed(steps, *std::move(e));
    };
    auto make_priced = [&](double z) { return priced_event(make_event(z)); };
    ASSIGN_OR_RETURN(
        double z, privacy::CalibrateNoiseMultiplier(make_priced, epsilon, delta,
                                                    target.accountant));
    RETURN_IF_ERROR(event_error);
    c.event = make_event(z);
    RETURN_IF_ERROR(event_error);
    ASSIGN_OR_RETURN(privacy::EpsilonResult check,
                     privacy::ComputeEpsilon(priced_event(c.event), delta,
                                             target.accountant));
    RETURN_IF_ERROR(event_error);
    if (!(check.epsilon <= epsilon)) {
      return absl::InternalError("calibration overshot the privacy target");
    }
    ASSIGN_OR_RETURN(noise::GaussianPlan plan, noise::PlanGaussian(clip, z, p));

    c.noise_multiplier = z;
    c.steps = steps;
    // One pass over at most n rows per step (a Poisson batch is a subset).
    c.work_units = PassWork(static_cast<double>(steps), info.rows, p);
    c.sampling_rate = q;
    c.expected_batch_size = q * static_cast<double>(info.rows);
    // Calibration::noise_stddev: on each coordinate of the clipped sum.
    c.noise_stddev = plan.sigma;
    c.clip_norm = clip;
    c.rows = info.rows;
    c.dimension = info.dimension;
    c.relation = privacy::Relation::kAddRemove;
    c.notes.push_back(absl::StrFormat(
        "noise multiplier %.6g on the clipped sum (C = %g, grid %g); "
        "%s accountant: epsilon %.6g at delta %.3g",
        z, clip, plan.grid, privacy::AccountantName(target.accountant),
        check.epsilon, delta));
    if (c.expected_batch_size < 1) {
      c.notes.push_back(
          "expected batch size q * n is below 1: the gradient is mostly noise");
    }
    return c;
  }

  absl::StatusOr<SolveResult> Run(const Dataset& data,
                                  const Calibration& calibration,
                                  SolveContext& context) const override {
    if (context.rng == nullptr) {
      return absl::FailedPreconditionError("no random source");
    }
    if (calibration.steps != options_.steps ||
        calibration.sampling_rate != options_.sampling_rate ||
        calibration.clip_norm != options_.clip_norm) {
      return absl::FailedPreconditionError(
          "calibration was not made for this algorithm's parameters");
    }
    ASSIGN_OR_RETURN(std::unique_ptr<Objective> objective,
                     Objective::Create(options_.model, calibration.dimension));
    const int64_t p = objective->parameter_size();
    const GaussianGradientQuery query{calibration.sampling_rate,
                                      calibration.clip_norm,
                                      calibration.noise_multiplier};
    ASSIGN_OR_RETURN(privacy::DpEvent step_event,
                     GaussianGradientEvent(query, p));
    // The release schedule must be exactly what was charged.
    if (!(privacy::DpEvent::SelfComposed(calibration.steps, step_event) ==
          calibration.event)) {
      return absl::FailedPreconditionError(
          "calibration event does not match the planned releases");
    }
    PlannedReleases budget;
    budget.Allow(step_event, calibration.steps);
    ASSIGN_OR_RETURN(std::unique_ptr<PrivateGradientOracle> oracle,
                     PrivateGradientOracle::Create(
                         data, *objective, calibration.rows, context, budget));
    DpSgdMethod method(
        query, {options_.learning_rate, options_.momentum, options_.model.l1},
        p);
    return SolveLoop::Run({calibration.steps}, method, *oracle, budget,
                          context.callback);
  }

 private:
  const DpSgdOptions options_;
};

}  // namespace

absl::Status DpSgdOptions::Validate() const {
  if (!(sampling_rate >= PoissonSampler::kMinRate && sampling_rate <= 1)) {
    return absl::InvalidArgumentError("sampling_rate must be in [1e-12, 1]");
  }
  if (steps < 1 || steps > kMaxSteps) {
    return absl::InvalidArgumentError(
        absl::StrCat("steps must be in [1, ", kMaxSteps, "]"));
  }
  if (!(clip_norm > 0 && clip_norm <= kMaxClipNorm)) {
    return absl::InvalidArgumentError("clip_norm must be in (0, 1e6]");
  }
  if (!(learning_rate > 0 && learning_rate <= kMaxLearningRate)) {
    return absl::InvalidArgumentError("learning_rate must be in (0, 1e6]");
  }
  if (!(momentum >= 0 && momentum < 1)) {
    return absl::InvalidArgumentError("momentum must be in [0, 1)");
  }
  return model.Validate();
}

absl::StatusOr<std::unique_ptr<Algorithm>> NewDpSgd(
    const DpSgdOptions& options) {
  RETURN_IF_ERROR(options.Validate());
  return std::unique_ptr<Algorithm>(new DpSgd(options));
}

}  // namespace dpopt::optim
