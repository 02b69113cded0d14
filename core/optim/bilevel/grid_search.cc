#include "core/optim/bilevel/grid_search.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/common/status_macros.h"
#include "core/optim/bilevel/accounting.h"
#include "core/optim/bilevel/primitives.h"
#include "core/optim/bilevel/private_sums.h"
#include "core/optim/objective.h"
#include "core/optim/release_budget.h"
#include "core/optim/step_reporter.h"

namespace dpopt::optim::bilevel {
namespace {

constexpr int64_t kDefaultTrainSteps = 50;

struct GridPlan {
  SplitSizes split;
  std::vector<double> grid;
  double beta_loss = 0;
  double radius = 0;
  double loss_clip = 0;
  double selection_epsilon = 0;
  InnerPlan train;
  PlannedMechanism mechanism;
};

absl::StatusOr<GridPlan> MakeGridPlan(const DpGridSearchOptions& o,
                                      int64_t rows, int64_t dimension,
                                      double row_norm_bound,
                                      privacy::Relation relation,
                                      const PrivacyTarget& target) {
  RETURN_IF_ERROR(o.Validate());
  GridPlan plan;
  ASSIGN_OR_RETURN(std::unique_ptr<Objective> objective,
                   Objective::Create(o.common.model, dimension));
  const int64_t p = objective->parameter_size();
  ASSIGN_OR_RETURN(plan.split, PublicSplit(rows, o.common.validation_fraction));
  plan.grid = o.EffectiveGrid();
  plan.beta_loss = LossSmoothness(o.common, row_norm_bound);
  const double loss0 = LossAtZero(o.common.model);
  plan.radius = std::sqrt(2 * loss0 / o.common.weight_min);
  plan.loss_clip = o.loss_clip > 0 ? o.loss_clip : 2 * loss0;
  InnerSolverOptions train = o.train;
  if (train.steps == 0) train.steps = kDefaultTrainSteps;
  InnerProblem problem{o.common.weight_min,
                       plan.beta_loss + o.common.weight_max, o.common.clip_norm,
                       plan.radius, p};
  ASSIGN_OR_RETURN(plan.train, PlanInnerSolve(train, problem, rows, 1.0));
  plan.train.center = Eigen::VectorXd::Zero(p);
  plan.mechanism.name = "training (all grid points)";
  plan.mechanism.releases =
      static_cast<int64_t>(plan.grid.size()) * plan.train.releases();
  plan.mechanism.weight = 1;
  plan.mechanism.sensitivity = RelationFactor(relation) * o.common.clip_norm /
                               static_cast<double>(plan.split.train);
  plan.mechanism.dimension = p;
  RETURN_IF_ERROR(plan.mechanism.Validate());
  plan.selection_epsilon =
      std::sqrt(2 * o.selection_share *
                ZcdpFromEpsilonDelta(target.epsilon, target.delta));
  return plan;
}

class DpGridSearch final : public Algorithm {
 public:
  explicit DpGridSearch(const DpGridSearchOptions& options)
      : options_(options) {}
  std::string name() const override { return "dp_grid_search"; }

  absl::StatusOr<Calibration> Calibrate(
      const PublicDatasetInfo& info,
      const PrivacyTarget& target) const override {
    RETURN_IF_ERROR(CheckPublicInfo(info, options_.common.model, true));
    RETURN_IF_ERROR(CheckPrivateTarget(target));
    RETURN_IF_ERROR(CheckRelation(
        info.relation,
        {privacy::Relation::kAddRemove, privacy::Relation::kReplaceOne},
        name()));
    ASSIGN_OR_RETURN(GridPlan plan,
                     MakeGridPlan(options_, info.rows, info.dimension,
                                  info.row_norm_bound, info.relation, target));
    const std::vector<privacy::DpEvent> selection = {
        privacy::DpEvent::Exponential(plan.selection_epsilon)};
    ASSIGN_OR_RETURN(const double scale,
                     CalibrateScale({plan.mechanism}, target,
                                    CalibrationMode::kAccountant, selection));
    Calibration c;
    c.rows = info.rows;
    c.dimension = info.dimension;
    c.row_norm_bound = info.row_norm_bound;
    c.relation = info.relation;
    c.target = target;
    ASSIGN_OR_RETURN(c.event, JobEvent({plan.mechanism}, scale, selection));
    // As in every bilevel job, noise_multiplier is the scale s (here the
    // training z = s sqrt(J K)).
    c.noise_multiplier = scale;
    // Calibration::noise_stddev: every training release's.
    ASSIGN_OR_RETURN(c.noise_stddev, plan.mechanism.NoiseStddev(scale));
    c.steps = static_cast<int64_t>(plan.grid.size());
    // Per grid weight: one training solve and one validation loss pass.
    c.work_units = PassWork(
        static_cast<double>(plan.grid.size()) *
            (static_cast<double>(plan.train.rounds * plan.train.steps) + 1),
        info.rows, ParameterBound(info));
    c.expected_batch_size = static_cast<double>(info.rows);
    c.clip_norm = options_.common.clip_norm;
    c.notes.push_back(absl::StrFormat(
        "%d grid weights in [%g, %g], %d training steps each on %d training "
        "rows; selection by report-noisy-min (permute-and-flip) on %d "
        "validation rows with epsilon %.6g, losses clipped to %.6g",
        plan.grid.size(), plan.grid.back(), plan.grid.front(), plan.train.steps,
        plan.split.train, plan.split.validation, plan.selection_epsilon,
        plan.loss_clip));
    c.notes.push_back(absl::StrFormat(
        "training: %d Gaussian releases, sensitivity %.6g, noise multiplier "
        "%.6g, noise std %.6g",
        plan.mechanism.releases, plan.mechanism.sensitivity,
        plan.mechanism.NoiseMultiplier(scale), c.noise_stddev));
    return c;
  }

  absl::StatusOr<SolveResult> Run(const Dataset& data,
                                  const Calibration& calibration,
                                  SolveContext& context) const override {
    if (context.rng == nullptr) {
      return absl::FailedPreconditionError("no random source");
    }
    ASSIGN_OR_RETURN(
        GridPlan plan,
        MakeGridPlan(options_, calibration.rows, calibration.dimension,
                     calibration.row_norm_bound, calibration.relation,
                     calibration.target));
    const double scale = calibration.noise_multiplier;
    const std::vector<privacy::DpEvent> selection = {
        privacy::DpEvent::Exponential(plan.selection_epsilon)};
    ASSIGN_OR_RETURN(privacy::DpEvent event,
                     JobEvent({plan.mechanism}, scale, selection));
    if (!(event == calibration.event)) {
      return absl::FailedPreconditionError(
          "calibration event does not match the planned releases");
    }
    ASSIGN_OR_RETURN(
        std::unique_ptr<Objective> objective,
        Objective::Create(options_.common.model, calibration.dimension));
    RETURN_IF_ERROR(objective->CheckDataset(data));
    PlannedReleases budget;
    ASSIGN_OR_RETURN(privacy::DpEvent release,
                     plan.mechanism.ReleaseEvent(scale));
    budget.Allow(release, plan.mechanism.releases);
    budget.Allow(selection.front(), 1);
    ASSIGN_OR_RETURN(std::vector<uint8_t> is_validation,
                     DrawSplit(data.rows(), options_.common.validation_fraction,
                               *context.rng));
    ASSIGN_OR_RETURN(
        std::unique_ptr<PrivateSumOracle> oracle,
        PrivateSumOracle::Create(data, calibration.relation, *context.rng,
                                 context.noise(), budget));
    const int64_t p = objective->parameter_size();
    LossGradientSource source(*objective, is_validation,
                              1 / static_cast<double>(plan.split.train), 0,
                              options_.common.clip_norm);
    std::vector<Eigen::VectorXd> models;
    Eigen::VectorXd start = Eigen::VectorXd::Zero(p);
    SolveResult result;
    const int64_t total = static_cast<int64_t>(plan.grid.size());
    StepReporter reporter(context, total);
    for (int64_t j = 0; j < total; ++j) {
      const double omega = plan.grid[j];
      InnerPlan train = plan.train;
      train.step_size = 1 / (plan.beta_loss + omega);
      source.SetPenalty(Eigen::VectorXd::Constant(p, omega), 1);
      absl::StatusOr<Eigen::VectorXd> theta =
          RunInnerSolve(train, plan.mechanism, scale, *oracle, source, start,
                        nullptr, &reporter);
      if (reporter.stopped()) {
        result.cancelled = true;
        break;
      }
      RETURN_IF_ERROR(theta.status());
      if (options_.warm_start) start = *theta;
      models.push_back(*std::move(theta));
      result.steps_done = j + 1;
      if (!reporter.Report(j + 1, models.back())) {
        result.cancelled = j + 1 < total;
        if (result.cancelled) break;
      }
    }
    result.model.dimension = objective->dimension();
    result.model.loss = options_.common.model.loss;
    if (result.cancelled) {
      // The last released model (the public start if none was).
      result.model.weights = models.empty() ? start : models.back();
      result.spent = budget.Spent();
      return result;
    }
    ValidationLossSource scores(*objective, is_validation, models,
                                plan.loss_clip, plan.split.validation);
    ASSIGN_OR_RETURN(
        const int64_t best,
        oracle->ReportNoisyMin(
            scores, plan.selection_epsilon,
            plan.loss_clip / static_cast<double>(plan.split.validation),
            calibration.relation == privacy::Relation::kAddRemove));
    result.spent = budget.Spent();
    result.model.weights = models[best];
    result.released.push_back(
        {"weights_out", {plan.grid[best]}, "the selected weight omega_{j*}"});
    result.released.push_back({"selected_index",
                               {static_cast<double>(best)},
                               "j* (0-based index into the grid)"});
    result.released.push_back({"grid", plan.grid, "the grid, in run order"});
    return result;
  }

 private:
  const DpGridSearchOptions options_;
};

}  // namespace

std::vector<double> DpGridSearchOptions::EffectiveGrid() const {
  if (!grid.empty()) return grid;
  std::vector<double> out;
  const double hi = std::log(common.weight_max);
  const double lo = std::log(common.weight_min);
  for (int64_t j = 0; j < grid_size; ++j) {
    const double f =
        grid_size == 1 ? 0 : static_cast<double>(j) / (grid_size - 1);
    // Clamped: exp(log(w)) may round just outside the box.
    out.push_back(std::clamp(std::exp(hi + f * (lo - hi)), common.weight_min,
                             common.weight_max));
  }
  return out;
}

absl::Status DpGridSearchOptions::Validate() const {
  RETURN_IF_ERROR(common.Validate());
  if (grid.empty() && (grid_size < 2 || grid_size > 200)) {
    return absl::InvalidArgumentError("grid_size must be in [2, 200]");
  }
  if (grid.size() > 200) {
    return absl::InvalidArgumentError("at most 200 grid weights");
  }
  for (double w : grid) {
    if (!(std::isfinite(w) && w >= common.weight_min &&
          w <= common.weight_max)) {
      return absl::InvalidArgumentError(
          "grid weights must lie in [weight_min, weight_max]");
    }
  }
  RETURN_IF_ERROR(train.Validate());
  if (train.mode != InnerMode::kPractical) {
    return absl::InvalidArgumentError(
        "grid search trains with the practical inner solver");
  }
  if (!(std::isfinite(loss_clip) && loss_clip >= 0 && loss_clip <= 1e6)) {
    return absl::InvalidArgumentError("loss_clip must be in [0, 1e6]");
  }
  if (!(selection_share > 0 && selection_share < 1)) {
    return absl::InvalidArgumentError("selection_share must be in (0, 1)");
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Algorithm>> NewDpGridSearch(
    const DpGridSearchOptions& options) {
  RETURN_IF_ERROR(options.Validate());
  return std::unique_ptr<Algorithm>(new DpGridSearch(options));
}

}  // namespace dpopt::optim::bilevel
