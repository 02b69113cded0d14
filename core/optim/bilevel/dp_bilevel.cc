#include "core/optim/bilevel/dp_bilevel.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/common/status_macros.h"
#include "core/optim/bilevel/private_sums.h"
#include "core/optim/release_budget.h"
#include "core/optim/step_reporter.h"

namespace dpopt::optim::bilevel {
namespace {

constexpr int64_t kMaxOuterIterations = 10'000;
constexpr double kMaxClip = 1e6;

bool Finite(double v) { return std::isfinite(v); }

// Inner solve 1: c_i = Clip(grad_y g_i, C_gy) / n; public grad_y g_pub.
class Inner1Source final : public InnerSource {
 public:
  Inner1Source(const BilevelProblem& problem, double clip, double weight)
      : problem_(problem), clip_(clip), weight_(weight) {}
  void SetOuter(const Eigen::VectorXd& x) { x_ = &x; }
  void SetPoint(const Eigen::VectorXd& y) override { y_ = y; }
  int64_t dimension() const override { return problem_.dy(); }
  double bound() const override { return clip_ * weight_; }
  void AddClipped(const Dataset& data, int64_t i,
                  Eigen::Ref<Eigen::VectorXd> out,
                  Eigen::VectorXd& scratch) const override {
    problem_.ExampleGradYG(data, i, *x_, y_, scratch);
    SafeClip(clip_, scratch);
    out += weight_ * scratch;
  }
  void AddUnclipped(const Dataset& data, int64_t i,
                    Eigen::Ref<Eigen::VectorXd> out,
                    Eigen::VectorXd& scratch) const override {
    problem_.ExampleGradYG(data, i, *x_, y_, scratch);
    out += weight_ * scratch;
  }
  void AddPublic(Eigen::Ref<Eigen::VectorXd> out) const override {
    problem_.AddPublicGradYG(*x_, y_, out);
  }

 private:
  const BilevelProblem& problem_;
  const double clip_;
  const double weight_;
  const Eigen::VectorXd* x_ = nullptr;
  Eigen::VectorXd y_;
};

// Inner solve 2: c_i = (Clip(grad_y f_i, C_fy) + lambda Clip(grad_y g_i,
// C_gy)) / n; public grad_y f_pub + lambda grad_y g_pub.
class Inner2Source final : public InnerSource {
 public:
  Inner2Source(const BilevelProblem& problem, double clip_fy, double clip_gy,
               double lambda, double weight)
      : problem_(problem),
        clip_fy_(clip_fy),
        clip_gy_(clip_gy),
        lambda_(lambda),
        weight_(weight) {}
  void SetOuter(const Eigen::VectorXd& x) { x_ = &x; }
  void SetPoint(const Eigen::VectorXd& y) override { y_ = y; }
  int64_t dimension() const override { return problem_.dy(); }
  double bound() const override {
    return ((problem_.has_example_f() ? clip_fy_ : 0) + lambda_ * clip_gy_) *
           weight_;
  }
  void AddClipped(const Dataset& data, int64_t i,
                  Eigen::Ref<Eigen::VectorXd> out,
                  Eigen::VectorXd& scratch) const override {
    if (problem_.has_example_f()) {
      problem_.ExampleGradYF(data, i, *x_, y_, scratch);
      SafeClip(clip_fy_, scratch);
      out += weight_ * scratch;
    }
    problem_.ExampleGradYG(data, i, *x_, y_, scratch);
    SafeClip(clip_gy_, scratch);
    out += (weight_ * lambda_) * scratch;
  }
  void AddUnclipped(const Dataset& data, int64_t i,
                    Eigen::Ref<Eigen::VectorXd> out,
                    Eigen::VectorXd& scratch) const override {
    if (problem_.has_example_f()) {
      problem_.ExampleGradYF(data, i, *x_, y_, scratch);
      out += weight_ * scratch;
    }
    problem_.ExampleGradYG(data, i, *x_, y_, scratch);
    out += (weight_ * lambda_) * scratch;
  }
  void AddPublic(Eigen::Ref<Eigen::VectorXd> out) const override {
    problem_.AddPublicGradYF(*x_, y_, out);
    Eigen::VectorXd g = Eigen::VectorXd::Zero(out.size());
    problem_.AddPublicGradYG(*x_, y_, g);
    out += lambda_ * g;
  }

 private:
  const BilevelProblem& problem_;
  const double clip_fy_;
  const double clip_gy_;
  const double lambda_;
  const double weight_;
  const Eigen::VectorXd* x_ = nullptr;
  Eigen::VectorXd y_;
};

// Outer vector: c_i = Clip(v_i, C_out) / n (v_i differenced before
// clipping); public part of the same expression.
class OuterSource final : public ContributionSource {
 public:
  OuterSource(const BilevelProblem& problem, double clip, double lambda,
              double weight, const Eigen::VectorXd& x,
              const Eigen::VectorXd& y_lambda, const Eigen::VectorXd& y)
      : problem_(problem),
        clip_(clip),
        lambda_(lambda),
        weight_(weight),
        x_(x),
        y_lambda_(y_lambda),
        y_(y) {}
  int64_t dimension() const override { return problem_.dx(); }
  double bound() const override { return clip_ * weight_; }
  void AddClipped(const Dataset& data, int64_t i,
                  Eigen::Ref<Eigen::VectorXd> out,
                  Eigen::VectorXd& scratch) const override {
    if (!problem_.has_example_outer()) return;
    problem_.ExampleOuter(data, i, x_, y_lambda_, y_, lambda_, scratch);
    SafeClip(clip_, scratch);
    out += weight_ * scratch;
  }
  void AddUnclipped(const Dataset& data, int64_t i,
                    Eigen::Ref<Eigen::VectorXd> out,
                    Eigen::VectorXd& scratch) const override {
    if (!problem_.has_example_outer()) return;
    problem_.ExampleOuter(data, i, x_, y_lambda_, y_, lambda_, scratch);
    out += weight_ * scratch;
  }
  void AddPublic(Eigen::Ref<Eigen::VectorXd> out) const override {
    problem_.AddPublicOuter(x_, y_lambda_, y_, lambda_, out);
  }

 private:
  const BilevelProblem& problem_;
  const double clip_;
  const double lambda_;
  const double weight_;
  const Eigen::VectorXd& x_;
  const Eigen::VectorXd& y_lambda_;
  const Eigen::VectorXd& y_;
};

absl::StatusOr<Eigen::VectorXd> InitialPoint(const std::vector<double>& v,
                                             int64_t dim, const char* field) {
  if (v.empty()) return Eigen::VectorXd(Eigen::VectorXd::Zero(dim));
  if (static_cast<int64_t>(v.size()) != dim) {
    return absl::InvalidArgumentError(absl::StrCat(
        field, " has ", v.size(), " values, the problem needs ", dim));
  }
  Eigen::VectorXd out(dim);
  for (int64_t j = 0; j < dim; ++j) {
    if (!Finite(v[j])) {
      return absl::InvalidArgumentError(absl::StrCat(field, " must be finite"));
    }
    out[j] = v[j];
  }
  return out;
}

std::string InnerModeName(InnerMode mode) {
  switch (mode) {
    case InnerMode::kPractical:
      return "practical";
    case InnerMode::kPaper:
      return "paper";
    case InnerMode::kExact:
      return "exact (non-private)";
  }
  return "?";
}

std::vector<double> ToVector(const Eigen::VectorXd& v) {
  return std::vector<double>(v.data(), v.data() + v.size());
}

class DpBilevel final : public Algorithm {
 public:
  explicit DpBilevel(const DpBilevelOptions& options) : options_(options) {}

  std::string name() const override {
    return options_.minibatch() ? "dp_bilevel_minibatch" : "dp_bilevel";
  }

  absl::StatusOr<Calibration> Calibrate(
      const PublicDatasetInfo& info,
      const PrivacyTarget& target) const override {
    if (options_.naive) {
      if (!target.non_private) {
        return absl::InvalidArgumentError(
            "naive mode is the NON-PRIVATE penalty method (it leaks, see "
            "Example 3.1 of the paper): it runs "
            "only on public datasets");
      }
    } else {
      RETURN_IF_ERROR(CheckPrivateTarget(target));
      RETURN_IF_ERROR(CheckRelation(
          info.relation,
          {privacy::Relation::kAddRemove, privacy::Relation::kReplaceOne},
          name()));
    }
    if (info.rows < 1) return absl::InvalidArgumentError("dataset has no rows");
    ASSIGN_OR_RETURN(BilevelPlan plan,
                     MakeBilevelPlan(options_, info.rows, info.dimension,
                                     info.relation, target));
    Calibration c;
    c.rows = info.rows;
    c.dimension = info.dimension;
    c.relation = info.relation;
    c.target = target;
    c.steps = options_.outer_iterations;
    // Per outer iteration: both inner solves (rounds x steps passes each) and
    // the outer direction, each pass over at most n rows of dx + dy values.
    c.work_units = PassWork(
        static_cast<double>(options_.outer_iterations) *
            (static_cast<double>(plan.plan1.rounds * plan.plan1.steps) +
             static_cast<double>(plan.plan2.rounds * plan.plan2.steps) + 1),
        info.rows, plan.problem->dx() + plan.problem->dy());
    c.sampling_rate = options_.outer_sampling_rate;
    c.expected_batch_size =
        options_.outer_sampling_rate * static_cast<double>(info.rows);
    c.clip_norm = plan.clip_out;
    c.notes.push_back(absl::StrFormat(
        "problem %s: dx %d, dy %d; lambda %.6g (lambda_min %.6g), eta %.6g, "
        "T %d; clip norms C_gy %.6g, C_fy %.6g, C_out %.6g; R_Y %.6g",
        plan.problem->name(), plan.problem->dx(), plan.problem->dy(),
        plan.lambda, plan.lambda_min, plan.eta, options_.outer_iterations,
        plan.clip_gy, plan.clip_fy, plan.clip_out, plan.radius_y));
    c.notes.push_back(absl::StrFormat(
        "inner solver %s: solve 1 %d x %d steps, solve 2 %d x %d steps per "
        "outer iteration",
        InnerModeName(plan.plan1.mode), plan.plan1.rounds, plan.plan1.steps,
        plan.plan2.rounds, plan.plan2.steps));
    if (options_.naive) {
      c.event = privacy::DpEvent::NoOp();
      c.notes.push_back(
          "NON-PRIVATE naive penalty method (exact inner solves, no noise): "
          "public datasets only");
      return c;
    }
    ASSIGN_OR_RETURN(const double scale, CalibrateScale(plan.mechanisms, target,
                                                        options_.calibration));
    ASSIGN_OR_RETURN(c.event, JobEvent(plan.mechanisms, scale));
    c.noise_multiplier = scale;
    // Calibration::noise_stddev: the first release's (inner solve 1); the
    // notes give every mechanism's.
    ASSIGN_OR_RETURN(c.noise_stddev,
                     plan.mechanisms.front().NoiseStddev(scale));
    c.notes.push_back(absl::StrFormat(
        "noise_multiplier is the scale s: mechanism j has z_j = s "
        "sqrt(R_j / w_j) (%s calibration, %s accountant; split w_out %.4g, "
        "w_in1 %.4g, w_in2 %.4g)",
        options_.calibration == CalibrationMode::kZcdpClosedForm
            ? "zCDP closed-form"
            : "accountant",
        privacy::AccountantName(target.accountant),
        plan.noisy_outer ? options_.split.outer : 0.0, options_.split.inner1,
        options_.split.inner2));
    for (const PlannedMechanism& m : plan.mechanisms) {
      c.notes.push_back(absl::StrFormat(
          "%s: %d releases, Poisson rate %.6g, sensitivity %.6g, z %.6g, "
          "noise std %.6g per coordinate",
          m.name, m.releases, m.sampling_rate, m.sensitivity,
          m.NoiseMultiplier(scale), m.NominalSigma(scale) / m.sampling_rate));
    }
    if (!plan.noisy_outer) {
      c.notes.push_back(
          "outer share 0: the outer direction has no per-example part, so "
          "it is post-processing of the inner releases and adds no noise");
    }
    return c;
  }

  absl::StatusOr<SolveResult> Run(const Dataset& data,
                                  const Calibration& calibration,
                                  SolveContext& context) const override {
    return RunDpBilevel(options_, data, calibration, context, nullptr);
  }

 private:
  const DpBilevelOptions options_;
};

}  // namespace

absl::Status DpBilevelOptions::Validate() const {
  if (outer_iterations < 1 || outer_iterations > kMaxOuterIterations) {
    return absl::InvalidArgumentError("outer_iterations must be in [1, 10000]");
  }
  for (double v :
       {inner_radius, penalty, outer_step, clip_gy, clip_fy, clip_out}) {
    if (!Finite(v) || v < 0 || v > kMaxClip) {
      return absl::InvalidArgumentError(
          "inner_radius, penalty, outer_step and clip norms must be in "
          "[0, 1e6] (0 = default)");
    }
  }
  RETURN_IF_ERROR(split.Validate());
  RETURN_IF_ERROR(inner.Validate());
  for (double q : {inner_sampling_rate, outer_sampling_rate}) {
    if (!(q >= 1e-6 && q <= 1)) {
      return absl::InvalidArgumentError("sampling rates must be in [1e-6, 1]");
    }
  }
  if (naive && minibatch()) {
    return absl::InvalidArgumentError("naive mode is full batch only");
  }
  if (minibatch() && calibration == CalibrationMode::kZcdpClosedForm) {
    return absl::InvalidArgumentError(
        "mini-batch jobs are calibrated by the accountant (the zCDP closed "
        "form does not capture amplification by sampling)");
  }
  if (inner.mode == InnerMode::kExact && !naive) {
    return absl::InvalidArgumentError(
        "the exact inner solver is non-private: naive mode only");
  }
  return absl::OkStatus();
}

absl::StatusOr<BilevelPlan> MakeBilevelPlan(const DpBilevelOptions& options,
                                            int64_t rows, int64_t dimension,
                                            privacy::Relation relation,
                                            const PrivacyTarget& target) {
  RETURN_IF_ERROR(options.Validate());
  if (rows < 1) return absl::InvalidArgumentError("dataset has no rows");
  if (options.minibatch() && relation == privacy::Relation::kReplaceOne) {
    return absl::FailedPreconditionError(
        "Poisson sampling is analysed under add/remove; this dataset is "
        "declared replace-one: use dp_bilevel (full batch)");
  }
  BilevelPlan plan;
  plan.rows = rows;
  ASSIGN_OR_RETURN(plan.problem, MakeProblem(options.problem, dimension));
  const BilevelProblem& p = *plan.problem;
  const ProblemConstants& k = p.constants();
  const int64_t dx = p.dx();
  const int64_t dy = p.dy();
  if (options.outer_iterations * dx > 1'000'000) {
    return absl::InvalidArgumentError(
        "outer_iterations * dx must be <= 10^6 (the released trace)");
  }
  RETURN_IF_ERROR(options.outer_set.Validate(dx));
  ASSIGN_OR_RETURN(plan.x0,
                   InitialPoint(options.initial_outer, dx, "initial_outer"));
  options.outer_set.Project(plan.x0);
  ASSIGN_OR_RETURN(plan.y0,
                   InitialPoint(options.initial_inner, dy, "initial_inner"));
  const double mu_g = k.strong_convexity_g;
  plan.clip_gy = options.clip_gy > 0 ? options.clip_gy : k.lipschitz_g;
  plan.clip_fy = options.clip_fy > 0 ? options.clip_fy : k.lipschitz_f;
  plan.clip_out =
      options.clip_out > 0
          ? options.clip_out
          : k.lipschitz_f + 2 * k.smoothness_g * k.lipschitz_f / mu_g;
  if (p.has_example_f() && !(plan.clip_fy > 0)) {
    return absl::InvalidArgumentError(
        "clip_fy must be > 0 (or declare L0^f > 0)");
  }
  if (!(plan.clip_out > 0)) plan.clip_out = plan.clip_gy;  // unused bound
  plan.lambda_min = std::max(
      {2 * k.smoothness_f / mu_g, 2 * k.smoothness_g / mu_g,
       k.lipschitz_f / k.lipschitz_g, k.smoothness_f / k.smoothness_g});
  if (options.penalty > 0) {
    if (options.penalty < plan.lambda_min * (1 - 1e-12)) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "penalty lambda = %g is below lambda_min = %g = max(2 L1^f/mu_g, "
          "2 L1^g/mu_g, L0^f/L0^g, L1^f/L1^g)",
          options.penalty, plan.lambda_min));
    }
    plan.lambda = options.penalty;
  } else {
    plan.lambda = std::max(plan.lambda_min, 10 * k.kappa());
  }
  const double ell = k.ell();
  const double kappa = k.kappa();
  plan.eta = options.outer_step > 0 ? options.outer_step
                                    : 1 / (2 * ell * std::pow(1 + kappa, 3));
  plan.radius_y =
      options.inner_radius > 0 ? options.inner_radius : 2 * plan.clip_gy / mu_g;

  plan.inner1.mu = mu_g;
  plan.inner1.beta = k.smoothness_g;
  plan.inner1.lipschitz = plan.clip_gy;
  plan.inner1.radius = plan.radius_y;
  plan.inner1.dimension = dy;
  plan.inner2.mu = plan.lambda * mu_g / 2;
  plan.inner2.beta = k.smoothness_f + plan.lambda * k.smoothness_g;
  plan.inner2.lipschitz =
      (p.has_example_f() ? plan.clip_fy : 0) + plan.lambda * plan.clip_gy;
  plan.inner2.radius =
      plan.radius_y + k.lipschitz_f / (plan.lambda * mu_g);  // Lemma 8.5
  plan.inner2.dimension = dy;

  InnerSolverOptions inner = options.inner;
  if (options.naive) inner.mode = InnerMode::kExact;
  const double t = static_cast<double>(options.outer_iterations);
  // epsilon' of the paper's M formula: the zCDP-equivalent epsilon of one
  // call's share (public; only shapes the paper-mode schedule).
  auto per_call_epsilon = [&](double w) {
    if (target.non_private) return 1.0;
    const double rho = ZcdpFromEpsilonDelta(target.epsilon, target.delta);
    return EpsilonFromZcdp(w * rho / t, target.delta);
  };
  ASSIGN_OR_RETURN(plan.plan1,
                   PlanInnerSolve(inner, plan.inner1, rows,
                                  per_call_epsilon(options.split.inner1)));
  ASSIGN_OR_RETURN(plan.plan2,
                   PlanInnerSolve(inner, plan.inner2, rows,
                                  per_call_epsilon(options.split.inner2)));
  if (options.naive) return plan;

  const double n = static_cast<double>(rows);
  const double factor = RelationFactor(relation);
  const int64_t outer_t = options.outer_iterations;
  PlannedMechanism in1;
  in1.name = "inner solve 1";
  in1.releases = outer_t * plan.plan1.releases();
  in1.weight = options.split.inner1;
  in1.sampling_rate = options.inner_sampling_rate;
  in1.sensitivity = factor * plan.clip_gy / n;
  in1.dimension = dy;
  PlannedMechanism in2 = in1;
  in2.name = "inner solve 2";
  in2.releases = outer_t * plan.plan2.releases();
  in2.weight = options.split.inner2;
  in2.sensitivity = factor * plan.inner2.lipschitz / n;
  plan.mechanisms = {in1, in2};
  plan.noisy_outer = options.split.outer > 0;
  if (plan.noisy_outer) {
    PlannedMechanism out;
    out.name = "outer gradient";
    out.releases = outer_t;
    out.weight = options.split.outer;
    out.sampling_rate = options.outer_sampling_rate;
    out.sensitivity = factor * plan.clip_out / n;
    out.dimension = dx;
    plan.mechanisms.push_back(out);
  } else if (p.has_example_outer()) {
    return absl::InvalidArgumentError(
        "an outer budget share of 0 is only allowed when the outer direction "
        "has no per-example part; problem " +
        p.name() + " has one");
  }
  for (const PlannedMechanism& m : plan.mechanisms) {
    RETURN_IF_ERROR(m.Validate());
  }
  return plan;
}

int64_t OutputIndex(const std::vector<Eigen::VectorXd>& x) {
  int64_t best = 0;
  double best_move = SafeNorm(x[1] - x[0]);
  for (size_t t = 1; t + 1 < x.size(); ++t) {
    const double move = SafeNorm(x[t + 1] - x[t]);
    if (move < best_move) {
      best_move = move;
      best = static_cast<int64_t>(t);
    }
  }
  return best;
}

absl::StatusOr<SolveResult> RunDpBilevel(const DpBilevelOptions& options,
                                         const Dataset& data,
                                         const Calibration& calibration,
                                         SolveContext& context,
                                         BilevelTrace* trace) {
  if (context.rng == nullptr) {
    return absl::FailedPreconditionError("no random source");
  }
  if (data.dimension() != calibration.dimension) {
    return absl::InvalidArgumentError(
        "dataset dimension does not match the calibration");
  }
  ASSIGN_OR_RETURN(
      BilevelPlan plan,
      MakeBilevelPlan(options, calibration.rows, calibration.dimension,
                      calibration.relation, calibration.target));
  const double scale = calibration.noise_multiplier;
  PlannedReleases planned;
  UnlimitedNoOpBudget unlimited;
  ReleaseBudget* budget = &unlimited;
  if (options.naive) {
    if (!(calibration.event == privacy::DpEvent::NoOp()) ||
        !calibration.target.non_private) {
      return absl::FailedPreconditionError(
          "naive mode needs a non-private calibration (public data)");
    }
  } else {
    ASSIGN_OR_RETURN(privacy::DpEvent event, JobEvent(plan.mechanisms, scale));
    if (!(event == calibration.event)) {
      return absl::FailedPreconditionError(
          "calibration event does not match the planned releases");
    }
    for (const PlannedMechanism& m : plan.mechanisms) {
      ASSIGN_OR_RETURN(privacy::DpEvent e, m.ReleaseEvent(scale));
      planned.Allow(e, m.releases);
    }
    budget = &planned;
    if (options.inner.mode == InnerMode::kPaper) {
      const double gamma_in =
          options.inner.failure_probability /
          (4 * static_cast<double>(options.outer_iterations));
      for (int j = 0; j < 2; ++j) {
        const PlannedMechanism& m = plan.mechanisms[j];
        SetPaperRadii(j == 0 ? plan.inner1 : plan.inner2,
                      m.NominalSigma(scale) / m.sampling_rate,
                      options.minibatch(), gamma_in,
                      j == 0 ? &plan.plan1 : &plan.plan2);
      }
    }
  }
  ASSIGN_OR_RETURN(
      std::unique_ptr<PrivateSumOracle> oracle,
      PrivateSumOracle::Create(data, calibration.relation, *context.rng,
                               context.noise(), *budget));
  plan.problem->AttachData(data);
  const BilevelProblem& p = *plan.problem;
  const double weight = 1 / static_cast<double>(calibration.rows);
  Inner1Source source1(p, plan.clip_gy, weight);
  Inner2Source source2(p, plan.clip_fy, plan.clip_gy, plan.lambda, weight);
  const PlannedMechanism no_mechanism;
  const PlannedMechanism& mech1 =
      options.naive ? no_mechanism : plan.mechanisms[0];
  const PlannedMechanism& mech2 =
      options.naive ? no_mechanism : plan.mechanisms[1];

  const int64_t total = options.outer_iterations;
  std::vector<Eigen::VectorXd> xs = {plan.x0};
  std::vector<Eigen::VectorXd> gs;
  std::vector<Eigen::VectorXd> ys;
  std::vector<Eigen::VectorXd> yls;
  Eigen::VectorXd x = plan.x0;
  Eigen::VectorXd start1 = plan.y0;
  Eigen::VectorXd start2 = plan.y0;
  SolveResult result;
  StepReporter reporter(context, total);
  for (int64_t t = 0; t < total; ++t) {
    source1.SetOuter(x);
    source2.SetOuter(x);
    InnerTrace trace1;
    InnerTrace trace2;
    const bool record = trace != nullptr && trace->record_inner;
    absl::StatusOr<Eigen::VectorXd> y =
        RunInnerSolve(plan.plan1, mech1, scale, *oracle, source1, start1,
                      record ? &trace1 : nullptr, &reporter);
    absl::StatusOr<Eigen::VectorXd> y_lambda =
        y.ok() ? RunInnerSolve(plan.plan2, mech2, scale, *oracle, source2,
                               start2, record ? &trace2 : nullptr, &reporter)
               : y;
    if (reporter.stopped()) {
      result.cancelled = true;  // inside an inner solve: x is the last output
      break;
    }
    RETURN_IF_ERROR(y_lambda.status());
    if (options.warm_start) {
      start1 = *y;
      start2 = *y_lambda;
    }
    OuterSource outer(p, plan.clip_out, plan.lambda, weight, x, *y_lambda, *y);
    Eigen::VectorXd g;
    if (options.naive) {
      RETURN_IF_ERROR(oracle->ExactSum(outer, &g));
    } else if (plan.noisy_outer) {
      RETURN_IF_ERROR(
          oracle->NoisySum(plan.mechanisms.back(), scale, outer, &g));
    } else {
      // No per-example part (checked by the plan): post-processing only.
      g = Eigen::VectorXd::Zero(p.dx());
      outer.AddPublic(g);
    }
    Eigen::VectorXd next = x - plan.eta * g;
    options.outer_set.Project(next);
    xs.push_back(next);
    gs.push_back(g);
    ys.push_back(*y);
    yls.push_back(*y_lambda);
    if (record) {
      trace->inner1.push_back(std::move(trace1));
      trace->inner2.push_back(std::move(trace2));
    }
    x = next;
    result.steps_done = t + 1;
    if (!reporter.Report(t + 1, x, SafeNorm(g))) {
      result.cancelled = t + 1 < total;
      if (result.cancelled) break;
    }
  }
  result.spent = budget->Spent();
  if (result.cancelled) {
    result.model.weights = x;
    result.model.dimension = p.dx();
    return result;
  }
  const int64_t t_out = OutputIndex(xs);
  result.model.weights = xs[t_out];
  result.model.dimension = p.dx();
  result.released.push_back({"x_out", ToVector(xs[t_out]),
                             "outer output x_{t_out} (Algorithm 1's output "
                             "rule)"});
  result.released.push_back(
      {"t_out",
       {static_cast<double>(t_out)},
       "argmin_t ||x_{t+1} - x_t|| (smallest t on ties)"});
  std::vector<double> x_trace;
  for (const auto& v : xs)
    x_trace.insert(x_trace.end(), v.data(), v.data() + v.size());
  result.released.push_back({"outer_iterates", std::move(x_trace),
                             "x_0..x_T, row-major (T + 1) x dx"});
  std::vector<double> g_trace;
  for (const auto& v : gs)
    g_trace.insert(g_trace.end(), v.data(), v.data() + v.size());
  result.released.push_back(
      {"outer_gradients", std::move(g_trace),
       "noisy hypergradient estimates g~_0..g~_{T-1}, row-major T x dx"});
  result.released.push_back(
      {"y_inner", ToVector(ys[t_out]), "inner solve 1 output at x_{t_out}"});
  result.released.push_back(
      {"y_lambda", ToVector(yls[t_out]), "inner solve 2 output at x_{t_out}"});
  result.released.push_back({"penalty", {plan.lambda}, "lambda (public)"});
  result.released.push_back({"outer_step", {plan.eta}, "eta (public)"});
  if (trace != nullptr) {
    trace->x = std::move(xs);
    trace->gradient = std::move(gs);
    trace->y = std::move(ys);
    trace->y_lambda = std::move(yls);
    trace->t_out = t_out;
  }
  return result;
}

absl::StatusOr<std::unique_ptr<Algorithm>> NewDpBilevel(
    const DpBilevelOptions& options) {
  RETURN_IF_ERROR(options.Validate());
  return std::unique_ptr<Algorithm>(new DpBilevel(options));
}

}  // namespace dpopt::optim::bilevel
