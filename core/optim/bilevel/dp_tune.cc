#include "core/optim/bilevel/dp_tune.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/common/status_macros.h"
#include "core/optim/bilevel/dp_bilevel.h"
#include "core/optim/bilevel/primitives.h"
#include "core/optim/bilevel/private_sums.h"
#include "core/optim/objective.h"
#include "core/optim/release_budget.h"
#include "core/optim/step_reporter.h"

namespace dpopt::optim::bilevel {
namespace {

constexpr int64_t kDefaultInnerSteps = 50;

struct TunePlan {
  SplitSizes split;
  int groups = 1;
  std::vector<int> group_of;
  double beta_loss = 0;
  double radius1 = 0;
  double radius2 = 0;
  InnerPlan plan1;
  InnerPlan plan2;
  std::vector<PlannedMechanism> mechanisms;
  bool noisy_outer = false;
  double outer_clip = 0;
  Eigen::VectorXd omega0;
};

absl::StatusOr<TunePlan> MakeTunePlan(const DpTuneOptions& o, int64_t rows,
                                      int64_t dimension, double row_norm_bound,
                                      privacy::Relation relation) {
  RETURN_IF_ERROR(o.Validate());
  TunePlan plan;
  ASSIGN_OR_RETURN(std::unique_ptr<Objective> objective,
                   Objective::Create(o.common.model, dimension));
  const int64_t p = objective->parameter_size();
  ASSIGN_OR_RETURN(plan.split, PublicSplit(rows, o.common.validation_fraction));
  ASSIGN_OR_RETURN(plan.group_of,
                   GroupIndex(o.feature_groups, p, &plan.groups));
  plan.omega0 = Eigen::VectorXd::Ones(plan.groups);
  if (!o.initial_weights.empty()) {
    if (static_cast<int>(o.initial_weights.size()) != plan.groups) {
      return absl::InvalidArgumentError(
          absl::StrCat("initial_weights has ", o.initial_weights.size(),
                       " values; there are ", plan.groups, " groups"));
    }
    for (int k = 0; k < plan.groups; ++k) {
      if (!std::isfinite(o.initial_weights[k])) {
        return absl::InvalidArgumentError("initial_weights must be finite");
      }
      plan.omega0[k] = o.initial_weights[k];
    }
  }
  plan.omega0 =
      plan.omega0.cwiseMax(o.common.weight_min).cwiseMin(o.common.weight_max);
  plan.beta_loss = LossSmoothness(o.common, row_norm_bound);
  const double loss0 = LossAtZero(o.common.model);
  const double w_min = o.common.weight_min;
  const double w_max = o.common.weight_max;
  const double lam = o.penalty;
  plan.radius1 = std::sqrt(2 * loss0 / w_min);
  plan.radius2 = std::sqrt(2 * loss0 * (1 + lam) / (lam * w_min));
  InnerSolverOptions inner = o.inner;
  if (inner.steps == 0) inner.steps = kDefaultInnerSteps;
  InnerProblem p1{w_min, plan.beta_loss + w_max, o.common.clip_norm,
                  plan.radius1, p};
  InnerProblem p2{lam * w_min, plan.beta_loss * (1 + lam) + lam * w_max,
                  o.common.clip_norm * std::max(1.0, lam), plan.radius2, p};
  ASSIGN_OR_RETURN(plan.plan1, PlanInnerSolve(inner, p1, rows, 1.0));
  ASSIGN_OR_RETURN(plan.plan2, PlanInnerSolve(inner, p2, rows, 1.0));
  plan.plan1.center = Eigen::VectorXd::Zero(p);
  plan.plan2.center = Eigen::VectorXd::Zero(p);

  const BudgetSplit split = o.EffectiveSplit();
  const double factor = RelationFactor(relation);
  const double n_tr = static_cast<double>(plan.split.train);
  const double n_val = static_cast<double>(plan.split.validation);
  const double c = o.common.clip_norm;
  const int64_t t = o.outer_iterations;
  PlannedMechanism in1;
  in1.name = "inner solve 1 (training loss)";
  in1.releases = t * plan.plan1.releases();
  in1.weight = split.inner1;
  in1.sensitivity = factor * c / n_tr;
  in1.dimension = p;
  PlannedMechanism in2 = in1;
  in2.name = "inner solve 2 (validation + lambda training loss)";
  in2.releases = t * plan.plan2.releases();
  in2.weight = split.inner2;
  in2.sensitivity = factor * c * std::max(1 / n_val, lam / n_tr);
  plan.mechanisms = {in1, in2};
  plan.noisy_outer = o.paper_outer_noise;
  plan.outer_clip = o.outer_clip > 0 ? o.outer_clip : c;
  if (plan.noisy_outer) {
    PlannedMechanism out;
    out.name = "outer noise (paper-faithful; the direction has no data)";
    out.releases = t;
    out.weight = split.outer;
    out.sensitivity = factor * plan.outer_clip / static_cast<double>(rows);
    out.dimension = plan.groups;
    plan.mechanisms.push_back(out);
  }
  for (const PlannedMechanism& m : plan.mechanisms) {
    RETURN_IF_ERROR(m.Validate());
  }
  return plan;
}

// The paper-faithful outer release: no per-record part (the direction is
// post-processing), public part = the direction.
class OuterDirectionSource final : public ContributionSource {
 public:
  OuterDirectionSource(const Eigen::VectorXd& direction, double bound)
      : direction_(direction), bound_(bound) {}
  int64_t dimension() const override { return direction_.size(); }
  double bound() const override { return bound_; }
  void AddClipped(const Dataset&, int64_t, Eigen::Ref<Eigen::VectorXd>,
                  Eigen::VectorXd&) const override {}
  void AddUnclipped(const Dataset&, int64_t, Eigen::Ref<Eigen::VectorXd>,
                    Eigen::VectorXd&) const override {}
  void AddPublic(Eigen::Ref<Eigen::VectorXd> out) const override {
    out += direction_;
  }

 private:
  const Eigen::VectorXd& direction_;
  const double bound_;
};

// R_k(theta) = 1/2 ||theta_{G_k}||^2 for every group.
Eigen::VectorXd GroupPenalties(const Eigen::VectorXd& theta,
                               const std::vector<int>& group_of, int groups) {
  Eigen::VectorXd r = Eigen::VectorXd::Zero(groups);
  for (Eigen::Index j = 0; j < theta.size(); ++j) {
    r[group_of[j]] += 0.5 * theta[j] * theta[j];
  }
  return r;
}

Eigen::VectorXd Expand(const Eigen::VectorXd& omega,
                       const std::vector<int>& group_of) {
  Eigen::VectorXd out(group_of.size());
  for (size_t j = 0; j < group_of.size(); ++j) out[j] = omega[group_of[j]];
  return out;
}

std::vector<double> ToVector(const Eigen::VectorXd& v) {
  return std::vector<double>(v.data(), v.data() + v.size());
}

class DpTune final : public Algorithm {
 public:
  explicit DpTune(const DpTuneOptions& options) : options_(options) {}
  std::string name() const override { return "dp_tune_regularization"; }

  absl::StatusOr<Calibration> Calibrate(
      const PublicDatasetInfo& info,
      const PrivacyTarget& target) const override {
    RETURN_IF_ERROR(CheckPublicInfo(info, options_.common.model, true));
    RETURN_IF_ERROR(CheckPrivateTarget(target));
    RETURN_IF_ERROR(CheckRelation(
        info.relation,
        {privacy::Relation::kAddRemove, privacy::Relation::kReplaceOne},
        name()));
    ASSIGN_OR_RETURN(TunePlan plan,
                     MakeTunePlan(options_, info.rows, info.dimension,
                                  info.row_norm_bound, info.relation));
    ASSIGN_OR_RETURN(const double scale, CalibrateScale(plan.mechanisms, target,
                                                        options_.calibration));
    Calibration c;
    c.rows = info.rows;
    c.dimension = info.dimension;
    c.row_norm_bound = info.row_norm_bound;
    c.relation = info.relation;
    c.target = target;
    ASSIGN_OR_RETURN(c.event, JobEvent(plan.mechanisms, scale));
    c.noise_multiplier = scale;
    c.steps = options_.outer_iterations;
    // Per outer iteration: both inner solves and the outer direction, each
    // pass over at most n rows of the model's parameters.
    c.work_units = PassWork(
        static_cast<double>(options_.outer_iterations) *
            (static_cast<double>(plan.plan1.rounds * plan.plan1.steps) +
             static_cast<double>(plan.plan2.rounds * plan.plan2.steps) + 1),
        info.rows, ParameterBound(info));
    c.expected_batch_size = static_cast<double>(info.rows);
    c.clip_norm = options_.common.clip_norm;
    // Calibration::noise_stddev: the first release's (inner solve 1); the
    // notes give every mechanism's.
    ASSIGN_OR_RETURN(c.noise_stddev,
                     plan.mechanisms.front().NoiseStddev(scale));
    const BudgetSplit split = options_.EffectiveSplit();
    c.notes.push_back(absl::StrFormat(
        "split: %d training / %d validation rows (public normalisers; each "
        "row assigned by the server's secure generator with probability "
        "%.4g to validation); %d weight(s) in [%g, %g]; lambda %.6g, eta "
        "%.6g, T %d, %d + %d inner steps per outer iteration",
        plan.split.train, plan.split.validation,
        options_.common.validation_fraction, plan.groups,
        options_.common.weight_min, options_.common.weight_max,
        options_.penalty, options_.outer_step, options_.outer_iterations,
        plan.plan1.steps, plan.plan2.steps));
    c.notes.push_back(absl::StrFormat(
        "noise_multiplier is the scale s: mechanism j has z_j = s "
        "sqrt(R_j / w_j); split w_out %.4g, w_in1 %.4g, w_in2 %.4g",
        plan.noisy_outer ? split.outer : 0.0, split.inner1, split.inner2));
    for (const PlannedMechanism& m : plan.mechanisms) {
      c.notes.push_back(absl::StrFormat(
          "%s: %d releases, sensitivity %.6g, z %.6g, noise std %.6g", m.name,
          m.releases, m.sensitivity, m.NoiseMultiplier(scale),
          m.NominalSigma(scale)));
    }
    if (!plan.noisy_outer) {
      c.notes.push_back(
          "outer sigma = 0: the weight update lambda (R(theta^lam) - "
          "R(theta)) is post-processing of the released models");
    }
    return c;
  }

  absl::StatusOr<SolveResult> Run(const Dataset& data,
                                  const Calibration& calibration,
                                  SolveContext& context) const override {
    return RunDpTune(options_, data, calibration, context, nullptr);
  }

 private:
  const DpTuneOptions options_;
};

}  // namespace

BudgetSplit DpTuneOptions::EffectiveSplit() const {
  if (split.has_value()) return *split;
  if (paper_outer_noise) return BudgetSplit{};
  return BudgetSplit{0, 0.5, 0.5};
}

absl::Status DpTuneOptions::Validate() const {
  RETURN_IF_ERROR(common.Validate());
  if (!(std::isfinite(penalty) && penalty > 0 && penalty <= 1e6)) {
    return absl::InvalidArgumentError("penalty must be in (0, 1e6]");
  }
  if (!(std::isfinite(outer_step) && outer_step > 0 && outer_step <= 1e6)) {
    return absl::InvalidArgumentError("outer_step must be in (0, 1e6]");
  }
  if (outer_iterations < 1 || outer_iterations > 1000) {
    return absl::InvalidArgumentError("outer_iterations must be in [1, 1000]");
  }
  if (!(std::isfinite(outer_clip) && outer_clip >= 0 && outer_clip <= 1e6)) {
    return absl::InvalidArgumentError("outer_clip must be in [0, 1e6]");
  }
  RETURN_IF_ERROR(inner.Validate());
  if (inner.mode != InnerMode::kPractical) {
    return absl::InvalidArgumentError(
        "tuning jobs use the practical inner solver");
  }
  const BudgetSplit s = EffectiveSplit();
  RETURN_IF_ERROR(s.Validate());
  if (paper_outer_noise && !(s.outer > 0)) {
    return absl::InvalidArgumentError(
        "paper_outer_noise needs an outer budget share > 0");
  }
  if (!paper_outer_noise && s.outer > 0) {
    return absl::InvalidArgumentError(
        "an outer budget share > 0 is only used with paper_outer_noise (the "
        "weight update has no data; give its share to the inner solves)");
  }
  return absl::OkStatus();
}

absl::StatusOr<SolveResult> RunDpTune(const DpTuneOptions& options,
                                      const Dataset& data,
                                      const Calibration& calibration,
                                      SolveContext& context, TuneTrace* trace) {
  if (context.rng == nullptr) {
    return absl::FailedPreconditionError("no random source");
  }
  ASSIGN_OR_RETURN(
      TunePlan plan,
      MakeTunePlan(options, calibration.rows, calibration.dimension,
                   calibration.row_norm_bound, calibration.relation));
  const double scale = calibration.noise_multiplier;
  ASSIGN_OR_RETURN(privacy::DpEvent event, JobEvent(plan.mechanisms, scale));
  if (!(event == calibration.event)) {
    return absl::FailedPreconditionError(
        "calibration event does not match the planned releases");
  }
  ASSIGN_OR_RETURN(
      std::unique_ptr<Objective> objective,
      Objective::Create(options.common.model, calibration.dimension));
  RETURN_IF_ERROR(objective->CheckDataset(data));
  PlannedReleases budget;
  for (const PlannedMechanism& m : plan.mechanisms) {
    ASSIGN_OR_RETURN(privacy::DpEvent e, m.ReleaseEvent(scale));
    budget.Allow(e, m.releases);
  }
  // The split: drawn from the run's generator (secure in the server), kept
  // inside the job.
  ASSIGN_OR_RETURN(
      std::vector<uint8_t> is_validation,
      DrawSplit(data.rows(), options.common.validation_fraction, *context.rng));
  ASSIGN_OR_RETURN(
      std::unique_ptr<PrivateSumOracle> oracle,
      PrivateSumOracle::Create(data, calibration.relation, *context.rng,
                               context.noise(), budget));
  const double n_tr = static_cast<double>(plan.split.train);
  const double n_val = static_cast<double>(plan.split.validation);
  const double lam = options.penalty;
  const double c = options.common.clip_norm;
  LossGradientSource source1(*objective, is_validation, 1 / n_tr, 0, c);
  LossGradientSource source2(*objective, is_validation, lam / n_tr, 1 / n_val,
                             c);
  const int64_t p = objective->parameter_size();
  const int64_t total = options.outer_iterations;
  Eigen::VectorXd omega = plan.omega0;
  Eigen::VectorXd start1 = Eigen::VectorXd::Zero(p);
  Eigen::VectorXd start2 = Eigen::VectorXd::Zero(p);
  std::vector<Eigen::VectorXd> omegas = {omega};
  std::vector<Eigen::VectorXd> directions;
  std::vector<Eigen::VectorXd> thetas;
  std::vector<Eigen::VectorXd> theta_lambdas;
  SolveResult result;
  StepReporter reporter(context, total);
  for (int64_t t = 0; t < total; ++t) {
    const Eigen::VectorXd penalty = Expand(omega, plan.group_of);
    const double w_max = omega.maxCoeff();
    InnerPlan plan1 = plan.plan1;
    InnerPlan plan2 = plan.plan2;
    plan1.step_size = 1 / (plan.beta_loss + w_max);
    plan2.step_size = 1 / (plan.beta_loss * (1 + lam) + lam * w_max);
    source1.SetPenalty(penalty, 1);
    source2.SetPenalty(penalty, lam);
    absl::StatusOr<Eigen::VectorXd> theta_or =
        RunInnerSolve(plan1, plan.mechanisms[0], scale, *oracle, source1,
                      start1, nullptr, &reporter);
    absl::StatusOr<Eigen::VectorXd> theta_lambda_or =
        theta_or.ok() ? RunInnerSolve(plan2, plan.mechanisms[1], scale, *oracle,
                                      source2, start2, nullptr, &reporter)
                      : theta_or;
    if (reporter.stopped()) {
      result.cancelled = true;
      break;
    }
    RETURN_IF_ERROR(theta_lambda_or.status());
    const Eigen::VectorXd& theta = *theta_or;
    const Eigen::VectorXd& theta_lambda = *theta_lambda_or;
    if (options.warm_start) {
      start1 = theta;
      start2 = theta_lambda;
    }
    // [FIX sign] descend: omega <- omega - eta lambda (R(theta^lam) -
    // R(theta)).
    Eigen::VectorXd direction =
        lam * (GroupPenalties(theta_lambda, plan.group_of, plan.groups) -
               GroupPenalties(theta, plan.group_of, plan.groups));
    if (plan.noisy_outer) {
      const Eigen::VectorXd clean = direction;
      OuterDirectionSource outer(
          clean, plan.outer_clip / static_cast<double>(calibration.rows));
      RETURN_IF_ERROR(
          oracle->NoisySum(plan.mechanisms.back(), scale, outer, &direction));
    }
    Eigen::VectorXd next = omega - options.outer_step * direction;
    next = next.cwiseMax(options.common.weight_min)
               .cwiseMin(options.common.weight_max);
    omegas.push_back(next);
    directions.push_back(direction);
    thetas.push_back(theta);
    theta_lambdas.push_back(theta_lambda);
    omega = next;
    result.steps_done = t + 1;
    if (!reporter.Report(t + 1, thetas.back(), SafeNorm(direction))) {
      result.cancelled = t + 1 < total;
      if (result.cancelled) break;
    }
  }
  result.spent = budget.Spent();
  result.model.dimension = objective->dimension();
  result.model.loss = options.common.model.loss;
  result.model.num_classes = 2;
  if (result.cancelled) {
    // The last released inner solution (zero, the public start, if the
    // first inner solve was stopped).
    result.model.weights = thetas.empty()
                               ? Eigen::VectorXd(Eigen::VectorXd::Zero(p))
                               : thetas.back();
    return result;
  }
  const int64_t t_out = TuneOutputIndex(omegas);
  result.model.weights = thetas[t_out];
  result.released.push_back(
      {"weights_out", ToVector(omegas[t_out]),
       "tuned regularization weight(s) omega_{t_out}, one per group"});
  result.released.push_back(
      {"t_out",
       {static_cast<double>(t_out)},
       "argmin_t ||omega_{t+1} - omega_t|| (largest t on ties)"});
  std::vector<double> w_trace;
  for (const auto& v : omegas) {
    w_trace.insert(w_trace.end(), v.data(), v.data() + v.size());
  }
  result.released.push_back({"weight_iterates", std::move(w_trace),
                             "omega_0..omega_T, row-major (T + 1) x groups"});
  std::vector<double> d_trace;
  for (const auto& v : directions) {
    d_trace.insert(d_trace.end(), v.data(), v.data() + v.size());
  }
  result.released.push_back(
      {"outer_directions", std::move(d_trace),
       "lambda (R(theta^lam_t) - R(theta_t)) (+ outer noise), T x groups"});
  result.released.push_back({"penalty", {lam}, "lambda (public)"});
  if (trace != nullptr) {
    trace->weights = std::move(omegas);
    trace->directions = std::move(directions);
    trace->theta = std::move(thetas);
    trace->theta_lambda = std::move(theta_lambdas);
    trace->t_out = t_out;
  }
  return result;
}

int64_t TuneOutputIndex(const std::vector<Eigen::VectorXd>& omegas) {
  int64_t best = 0;
  double best_move = SafeNorm(omegas[1] - omegas[0]);
  for (size_t t = 1; t + 1 < omegas.size(); ++t) {
    const double move = SafeNorm(omegas[t + 1] - omegas[t]);
    if (move <= best_move) {
      best_move = move;
      best = static_cast<int64_t>(t);
    }
  }
  return best;
}

absl::StatusOr<std::unique_ptr<Algorithm>> NewDpTune(
    const DpTuneOptions& options) {
  RETURN_IF_ERROR(options.Validate());
  return std::unique_ptr<Algorithm>(new DpTune(options));
}

}  // namespace dpopt::optim::bilevel
