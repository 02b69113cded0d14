// Piecewise-affine's job algorithms: calibration from public metadata (the
// dataset's ProblemInfo) and Run() on the loaded problem.
#include <cmath>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/common/status_macros.h"
#include "core/optim/piecewise_affine/lp.h"
#include "core/optim/piecewise_affine/mechanisms.h"
#include "core/optim/piecewise_affine/scores.h"
#include "core/optim/step_reporter.h"

namespace dpopt::optim::piecewise_affine {
namespace {

constexpr double kMaxEpsilon = 1e6;

// The public description the job is calibrated for (and runs on).
absl::StatusOr<ProblemInfo> PublicProblem(const PublicDatasetInfo& info) {
  if (info.problem_json.empty()) {
    return absl::InvalidArgumentError(
        "this job type needs a max-affine problem dataset (imported with "
        "max_affine: public slopes, private offsets, a polytope and b_max)");
  }
  ASSIGN_OR_RETURN(ProblemInfo p, ProblemInfo::FromJson(info.problem_json));
  if (p.pieces != info.rows || p.dimension != info.dimension) {
    return absl::InvalidArgumentError(
        "the dataset's max-affine description does not match its shape");
  }
  return p;
}

absl::Status CheckTarget(const PrivacyTarget& t, const PublicDatasetInfo& info,
                         const ProblemInfo& p, bool private_mechanism) {
  if (!private_mechanism) {
    if (!t.non_private) {
      return absl::InvalidArgumentError(
          "pa_solve is non-private: public datasets only");
    }
    return absl::OkStatus();
  }
  if (t.non_private) {
    return absl::InvalidArgumentError("a private mechanism needs a target");
  }
  if (!std::isfinite(t.epsilon) || !(t.epsilon > 0) ||
      t.epsilon > kMaxEpsilon) {
    return absl::InvalidArgumentError(
        absl::StrCat("privacy.epsilon must be in (0, ", kMaxEpsilon, "]"));
  }
  if (info.relation != privacy::Relation::kLinfOffsets) {
    return absl::InvalidArgumentError(
        "piecewise-affine family's mechanisms are analysed under the "
        "l-infinity offset "
        "relation of a max-affine dataset");
  }
  // The scores stay inside their exact range (never clamped).
  return CheckScoreRange(p);
}

// Fields every piecewise-affine calibration shares. Pure epsilon-DP (delta 0)
// whatever delta the job spec gave.
Calibration BaseCalibration(const ProblemInfo& p, const PrivacyTarget& target,
                            const std::string& problem_json) {
  Calibration c;
  c.rows = p.pieces;
  c.dimension = p.dimension;
  c.steps = 1;
  c.sampling_rate = 1;
  c.expected_batch_size = static_cast<double>(p.pieces);
  c.clip_norm = p.b_max;
  c.target = target;
  c.relation = privacy::Relation::kLinfOffsets;
  c.problem_json = problem_json;
  if (!target.non_private) {
    c.event = privacy::DpEvent::EpsilonDelta(target.epsilon, 0);
    c.guarantee_epsilon = target.epsilon;
    c.notes.push_back(absl::StrFormat(
        "pure epsilon-DP (delta 0) under the l-infinity offset relation, "
        "b_max = %g (Han, Topcu & Pappas 2014, eq. (4)); epsilon %g, "
        "charged once",
        p.b_max, target.epsilon));
  }
  return c;
}

absl::StatusOr<ProblemInfo> RunProblem(const Dataset& data,
                                       const Calibration& c) {
  ASSIGN_OR_RETURN(ProblemInfo p, ProblemInfo::FromJson(c.problem_json));
  RETURN_IF_ERROR(CheckData(data, p));
  if (p.pieces != c.rows || p.dimension != c.dimension) {
    return absl::FailedPreconditionError(
        "calibration was made for another problem");
  }
  return p;
}

// Public bound on one LP solve's work: GLPK's iteration limit times one pass
// over the constraint matrix ((m + polytope rows) x (d + 1)).
double LpWork(const ProblemInfo& p) {
  return static_cast<double>(kLpIterationLimit) *
         static_cast<double>(p.pieces + p.polytope.rows + 1) *
         static_cast<double>(p.dimension + 1);
}

// Public bound on one projection onto P (problem.h): clipping for a box,
// at most 10000 Dykstra sweeps over the half-spaces otherwise.
double ProjectionWork(const ProblemInfo& p) {
  const double d = static_cast<double>(p.dimension);
  return p.polytope.is_box()
             ? d
             : 10000.0 * static_cast<double>(p.polytope.rows + 1) * d;
}

Model DecisionModel(const Eigen::VectorXd& x) {
  Model m;
  m.weights = x;
  m.dimension = x.size();
  m.num_classes = 1;
  return m;
}

ReleasedOutput Released(std::string name, const Eigen::VectorXd& v,
                        std::string description) {
  ReleasedOutput r;
  r.name = std::move(name);
  r.values.assign(v.data(), v.data() + v.size());
  r.description = std::move(description);
  return r;
}

// ---------------------------------------------------------------------------

class PerturbProblem final : public Algorithm {
 public:
  explicit PerturbProblem(PerturbProblemOptions o) : o_(std::move(o)) {}
  std::string name() const override { return "pa_perturb_problem"; }

  absl::StatusOr<Calibration> Calibrate(
      const PublicDatasetInfo& info,
      const PrivacyTarget& target) const override {
    ASSIGN_OR_RETURN(ProblemInfo p, PublicProblem(info));
    RETURN_IF_ERROR(CheckTarget(target, info, p, true));
    ASSIGN_OR_RETURN(noise::VectorLaplacePlan plan,
                     PerturbProblemPlan(p, target.epsilon));
    Calibration c = BaseCalibration(p, target, info.problem_json);
    c.work_units =
        LpWork(p) + ProjectionWork(p) + static_cast<double>(p.pieces);
    const double sensitivity = plan.l2_sensitivity;
    c.noise_multiplier = 1 / (plan.lambda * sensitivity);
    c.noise_stddev = plan.coordinate_stddev;
    c.notes.push_back(absl::StrFormat(
        "M_P (Han, Topcu & Pappas 2014, Thm 16): b~ = b + w, w ~ vector "
        "Laplace in R^%d with lambda_P = eps / (sqrt(m) b_max) = %.10g "
        "(sampled exactly: %.10g on grid %g)",
        p.pieces, target.epsilon / sensitivity, plan.lambda, plan.grid));
    c.notes.push_back(absl::StrFormat(
        "E||w_P||_2 = m / lambda = %.6g; every draw has f(x~; b) - f_opt <= "
        "2 ||w_P||_inf (as f(x~; b) <= f(x~; b~) + ||w_P||_inf)",
        plan.expected_norm));
    return c;
  }

  absl::StatusOr<SolveResult> Run(const Dataset& data, const Calibration& c,
                                  SolveContext& context) const override {
    ASSIGN_OR_RETURN(ProblemInfo p, RunProblem(data, c));
    if (context.rng == nullptr) {
      return absl::FailedPreconditionError("no random source");
    }
    ASSIGN_OR_RETURN(noise::VectorLaplacePlan plan,
                     PerturbProblemPlan(p, c.target.epsilon));
    ASSIGN_OR_RETURN(
        PerturbProblemOutput out,
        RunPerturbProblem(p, data, plan, SecureOffsetNoise(), *context.rng));
    SolveResult r;
    r.model = DecisionModel(out.x);
    r.steps_done = 1;
    r.spent = c.event;
    if (o_.release_offsets) {
      r.released.push_back(
          Released("b_tilde", out.b_tilde,
                   "the privatized offsets b + w_P (M_P's release; x is the LP "
                   "solution for them)"));
    }
    r.released.push_back(Released(
        "lp_fallback", Eigen::VectorXd::Constant(1, out.lp_fallback ? 1 : 0),
        "1 if the LP on b~ failed and x is P's centre (post-processing)"));
    StepReporter reporter(context, 1);
    r.cancelled = !reporter.Report(1, out.x);
    return r;
  }

 private:
  PerturbProblemOptions o_;
};

class PerturbSolution final : public Algorithm {
 public:
  explicit PerturbSolution(PerturbSolutionOptions o) : o_(std::move(o)) {}
  std::string name() const override { return "pa_perturb_solution"; }

  absl::StatusOr<Calibration> Calibrate(
      const PublicDatasetInfo& info,
      const PrivacyTarget& target) const override {
    ASSIGN_OR_RETURN(ProblemInfo p, PublicProblem(info));
    RETURN_IF_ERROR(CheckTarget(target, info, p, true));
    ASSIGN_OR_RETURN(noise::VectorLaplacePlan plan,
                     PerturbSolutionPlan(p, target.epsilon, o_.noise));
    Calibration c = BaseCalibration(p, target, info.problem_json);
    // Two LPs: the public probe that sets the padding budget, then the
    // private one.
    c.work_units = 2 * LpWork(p) + ProjectionWork(p);
    c.noise_multiplier = 1 / (plan.lambda * p.diameter);
    c.noise_stddev = plan.coordinate_stddev;
    const bool paper = o_.noise == SolutionNoise::kPaper;
    c.notes.push_back(absl::StrFormat(
        "M_S (Han, Topcu & Pappas 2014, Sec. 4.2): x~ = x* + w, w ~ vector "
        "Laplace in R^%d with lambda_S = eps / (%sDelta_S) = %.10g, Delta_S = "
        "R = %.10g (sampled exactly: %.10g on grid %g); %s",
        p.dimension, paper ? "sqrt(d) " : "",
        plan.epsilon / plan.l2_sensitivity, p.diameter, plan.lambda, plan.grid,
        o_.project ? "projected onto P" : "not projected (raw)"));
    c.notes.push_back(absl::StrFormat(
        "E||w_S||_2 = d / lambda_S = %.6g; Thm 17: E f - f_opt <= G E||w_S|| "
        "= %.6g",
        plan.expected_norm, p.slope_norm_bound * plan.expected_norm));
    c.notes.push_back(absl::StrFormat(
        "timing: the LP on the true offsets is padded to %g x the time of the "
        "same LP with public offsets + %g ms",
        kLpBudgetFactor, absl::ToDoubleMilliseconds(kLpBudgetFloor)));
    return c;
  }

  absl::StatusOr<SolveResult> Run(const Dataset& data, const Calibration& c,
                                  SolveContext& context) const override {
    ASSIGN_OR_RETURN(ProblemInfo p, RunProblem(data, c));
    if (context.rng == nullptr) {
      return absl::FailedPreconditionError("no random source");
    }
    ASSIGN_OR_RETURN(noise::VectorLaplacePlan plan,
                     PerturbSolutionPlan(p, c.target.epsilon, o_.noise));
    StepReporter reporter(context, 1);
    ASSIGN_OR_RETURN(Eigen::VectorXd x,
                     RunPerturbSolution(
                         p, data, plan, o_.project, SecureOffsetNoise(),
                         *context.rng, PerturbSolutionLpBudget(p, data.dense()),
                         [&reporter] { return reporter.StopRequested(); }));
    SolveResult r;
    r.model = DecisionModel(x);
    r.steps_done = 1;
    r.spent = c.event;
    r.cancelled = !reporter.Report(1, x);
    return r;
  }

 private:
  PerturbSolutionOptions o_;
};

class Exponential final : public Algorithm {
 public:
  explicit Exponential(ExponentialOptions o) : o_(std::move(o)) {}
  std::string name() const override { return "pa_exponential"; }

  absl::StatusOr<Calibration> Calibrate(
      const PublicDatasetInfo& info,
      const PrivacyTarget& target) const override {
    ASSIGN_OR_RETURN(ProblemInfo p, PublicProblem(info));
    RETURN_IF_ERROR(CheckTarget(target, info, p, true));
    RETURN_IF_ERROR(o_.Validate());
    ASSIGN_OR_RETURN(ExponentialPlan plan, PlanExponential(p, target.epsilon));
    if (!(plan.expected_proposals_bound <= o_.max_expected_proposals)) {
      // Refused before anything is charged (docs/architecture.md, invariant
      // "public work bounds"): the bound depends only on public values, and
      // an approximate sampler would not be pure epsilon-DP.
      return absl::FailedPreconditionError(absl::StrFormat(
          "pa_exponential: exact sampling is infeasible here: the public "
          "bound on the expected number of proposals, about exp(eps / (2 "
          "b_max) G R) = exp(%.4g), exceeds max_expected_proposals = %g. "
          "Use a smaller epsilon or P, or another mechanism; an approximate "
          "(Metropolis) sampler is not offered because its guarantee is not "
          "certified",
          std::log(plan.expected_proposals_bound), o_.max_expected_proposals));
    }
    Calibration c = BaseCalibration(p, target, info.problem_json);
    c.event = privacy::DpEvent::Exponential(target.epsilon);
    // K certificate steps and N rounds of m d multiply-adds each (plus the
    // lattice draws), always all of them.
    c.work_units = PassWork(static_cast<double>(plan.certificate_steps) +
                                static_cast<double>(plan.rounds) + 2,
                            p.pieces, p.dimension);
    c.noise_multiplier = 1 / (2 * plan.beta * p.b_max);
    c.notes.push_back(absl::StrFormat(
        "M_E (Han, Topcu & Pappas 2014, Thm 19): density prop. to exp(-beta "
        "f) on a 2^%d per axis lattice of P, beta = eps / (2 b_max) = %.10g "
        "(sampled exactly: %.10g, score grid %g)",
        plan.lattice_bits, target.epsilon / (2 * p.b_max), plan.beta,
        plan.grid));
    c.notes.push_back(absl::StrFormat(
        "exact rejection sampler with a fixed public amount of work: %d "
        "subgradient steps certify a lower bound of f (no LP), then exactly "
        "%d proposal rounds (each accepts with probability >= 1/%.4g; if "
        "none does, with probability <= 2^-80/%.4g, a uniform lattice point "
        "is released, which the charged epsilon covers); the run time does "
        "not depend on the offsets except through the exact Bernoulli draws "
        "(docs/algorithms/piecewise_affine.md, \"Timing\")",
        plan.certificate_steps, plan.rounds, plan.expected_proposals_bound,
        plan.expected_proposals_bound));
    return c;
  }

  absl::StatusOr<SolveResult> Run(const Dataset& data, const Calibration& c,
                                  SolveContext& context) const override {
    ASSIGN_OR_RETURN(ProblemInfo p, RunProblem(data, c));
    if (context.rng == nullptr) {
      return absl::FailedPreconditionError("no random source");
    }
    ASSIGN_OR_RETURN(ExponentialPlan plan,
                     PlanExponential(p, c.target.epsilon));
    if (!(plan.expected_proposals_bound <= o_.max_expected_proposals)) {
      return absl::FailedPreconditionError(
          "calibration was not made for this algorithm's parameters");
    }
    StepReporter reporter(context, 1);
    absl::StatusOr<Eigen::VectorXd> x =
        RunExponential(p, data, plan, *context.rng, nullptr, &reporter);
    SolveResult r;
    r.spent = c.event;
    if (absl::IsCancelled(x.status()) && reporter.stopped()) {
      // Stopped before the sampler finished: nothing is released.
      r.model = DecisionModel(p.Center());
      r.cancelled = true;
      return r;
    }
    RETURN_IF_ERROR(x.status());
    r.model = DecisionModel(*x);
    r.steps_done = 1;
    r.cancelled = !reporter.Report(1, *x);
    return r;
  }

 private:
  ExponentialOptions o_;
};

// Algorithm 2, private (pa_subgradient) or the regular method (pa_solve).
class Subgradient final : public Algorithm {
 public:
  Subgradient(SubgradientOptions o, bool private_selection)
      : o_(std::move(o)), private_(private_selection) {}
  std::string name() const override {
    return private_ ? "pa_subgradient" : "pa_solve";
  }

  absl::StatusOr<Calibration> Calibrate(
      const PublicDatasetInfo& info,
      const PrivacyTarget& target) const override {
    ASSIGN_OR_RETURN(ProblemInfo p, PublicProblem(info));
    RETURN_IF_ERROR(CheckTarget(target, info, p, private_));
    RETURN_IF_ERROR(o_.Validate());
    if (!o_.initial_point.empty()) {
      Eigen::Map<const Eigen::VectorXd> x1(o_.initial_point.data(),
                                           o_.initial_point.size());
      if (static_cast<int64_t>(o_.initial_point.size()) != p.dimension ||
          !p.polytope.Contains(x1, 1e-12)) {
        return absl::InvalidArgumentError(
            absl::StrCat("initial_point must be a point of P with ",
                         p.dimension, " coordinates"));
      }
    }
    Calibration c = BaseCalibration(p, target, info.problem_json);
    c.steps = o_.iterations;
    // k selections (or argmax scans) over the m pieces and k projections.
    c.work_units = static_cast<double>(o_.iterations) *
                   (PassWork(1, p.pieces, p.dimension) + ProjectionWork(p));
    const double alpha = SubgradientStep(p, o_, 1);
    if (private_) {
      const double step_eps = target.epsilon / o_.iterations;
      const ScoreGrid grid = MakeScoreGrid(p.b_max);
      ASSIGN_OR_RETURN(noise::Dyadic rate, SelectionRate(step_eps, grid));
      // Spend check: k selections at 2 rate Delta_units <= eps / k each.
      const double per_step = 2 * rate.ToDouble() * grid.sensitivity_units;
      if (!(per_step * o_.iterations <= target.epsilon)) {
        return absl::InternalError("selection rate exceeds its share");
      }
      c.noise_multiplier = 1 / step_eps;
      if (!target.non_private) {
        // The k selections are exponential mechanisms at (2 rate Delta) <=
        // eps / k each: charged as such, so an RDP filter prices them through
        // zCDP (eps^2 / (8 k), Cesar & Rogers 2021) while basic composition
        // still charges exactly eps. The guarantee stays pure eps-DP.
        c.event = privacy::DpEvent::ExponentialMechanisms(target.epsilon,
                                                          o_.iterations);
        c.notes.push_back(absl::StrFormat(
            "charged as %d exponential mechanisms at eps / k each: pure "
            "eps-DP (eps = %g) under basic composition, and (eps^2 / (8 k)) "
            "= %.6g-zCDP, i.e. RDP alpha eps^2 / (8 k), under an RDP filter "
            "(Cesar & Rogers 2021)",
            o_.iterations, target.epsilon,
            target.epsilon * target.epsilon / (8.0 * o_.iterations)));
      }
      c.notes.push_back(absl::StrFormat(
          "Algorithm 2 (Han, Topcu & Pappas 2014, Sec. 4.4): %d steps, each "
          "Algorithm 1 at eps' = eps / k = %.10g: P(i) prop. to exp(+eps' "
          "(a_i^T x + b_i) / (2 b_max)) (the paper's minus sign is a typo, "
          "fixed), exact softmax on a score grid of %g",
          o_.iterations, step_eps, grid.grid));
      const double m = static_cast<double>(p.pieces);
      const double sum_alpha2 = o_.step_rule == StepRule::kConstant
                                    ? o_.iterations * alpha * alpha
                                    : 0;  // reported for the constant rule only
      if (o_.step_rule == StepRule::kConstant && alpha > 0) {
        const double bound =
            (p.diameter * p.diameter +
             p.slope_norm_bound * p.slope_norm_bound * sum_alpha2) /
                (2 * o_.iterations * alpha) +
            2 * o_.iterations * p.b_max * (1 + std::log(m)) / target.epsilon;
        c.notes.push_back(absl::StrFormat(
            "Thm 24 bound on E min_i f(x^(i)) - f_opt (and on the AVERAGE "
            "readout): %.6g",
            bound));
      }
    }
    c.notes.push_back(absl::StrFormat(
        "alpha_1 = %.10g (%s), x^(1) = %s, %s, readout %s", alpha,
        o_.step_rule == StepRule::kConstant ? "constant R/(G sqrt(k))"
                                            : "R/(G sqrt(i))",
        o_.initial_point.empty() ? "centre of P" : "given",
        o_.project ? "projected onto P" : "not projected",
        o_.readout == Readout::kLast ? "LAST" : "AVERAGE"));
    return c;
  }

  absl::StatusOr<SolveResult> Run(const Dataset& data, const Calibration& c,
                                  SolveContext& context) const override {
    ASSIGN_OR_RETURN(ProblemInfo p, RunProblem(data, c));
    if (private_ && context.rng == nullptr) {
      return absl::FailedPreconditionError("no random source");
    }
    const double step_eps = private_ ? c.target.epsilon / o_.iterations : 0.0;
    StepReporter reporter(context, o_.iterations);
    ASSIGN_OR_RETURN(SubgradientTrace t,
                     RunSubgradient(p, data, o_, private_, step_eps,
                                    context.rng, &reporter));
    SolveResult r;
    r.model = DecisionModel(o_.readout == Readout::kLast ? t.last : t.average);
    r.steps_done = static_cast<int64_t>(t.indices.size());
    r.cancelled = t.cancelled;
    r.spent = c.event;
    r.released.push_back(Released("x_last", t.last, "x^(k+1)"));
    r.released.push_back(
        Released("x_average", t.average, "(1/k) sum_{i<=k} x^(i)"));
    const int64_t values =
        static_cast<int64_t>(t.iterates.size()) * p.dimension;
    if (o_.release_trace && values <= 1000000) {
      Eigen::VectorXd flat(values);
      for (size_t i = 0; i < t.iterates.size(); ++i) {
        flat.segment(static_cast<Eigen::Index>(i) * p.dimension, p.dimension) =
            t.iterates[i];
      }
      r.released.push_back(Released(
          "iterates", flat,
          "x^(1), ..., x^(k+1), row-major ((k+1) x d): post-processing of "
          "the private selections"));
      Eigen::VectorXd idx(static_cast<Eigen::Index>(t.indices.size()));
      for (size_t i = 0; i < t.indices.size(); ++i) {
        idx[static_cast<Eigen::Index>(i)] = static_cast<double>(t.indices[i]);
      }
      r.released.push_back(
          Released("indices", idx, "i*_1, ..., i*_k (0-based pieces)"));
    }
    if (!private_) {
      // Public dataset: objective values are public too.
      Eigen::VectorXd f(static_cast<Eigen::Index>(t.iterates.size()));
      for (size_t i = 0; i < t.iterates.size(); ++i) {
        f[static_cast<Eigen::Index>(i)] =
            Evaluate(data, data.labels(), t.iterates[i]);
      }
      r.released.push_back(Released(
          "objective", f, "f(x^(i); b) on the PUBLIC offsets (non-private)"));
    }
    return r;
  }

 private:
  SubgradientOptions o_;
  bool private_;
};

// The non-private LP optimum (public datasets only).
class LpBaseline final : public Algorithm {
 public:
  std::string name() const override { return "pa_solve"; }
  absl::StatusOr<Calibration> Calibrate(
      const PublicDatasetInfo& info,
      const PrivacyTarget& target) const override {
    ASSIGN_OR_RETURN(ProblemInfo p, PublicProblem(info));
    RETURN_IF_ERROR(CheckTarget(target, info, p, false));
    Calibration c = BaseCalibration(p, target, info.problem_json);
    c.work_units = LpWork(p);
    c.notes.push_back("non-private LP optimum (GLPK), public data only");
    return c;
  }
  absl::StatusOr<SolveResult> Run(const Dataset& data, const Calibration& c,
                                  SolveContext& context) const override {
    ASSIGN_OR_RETURN(ProblemInfo p, RunProblem(data, c));
    ASSIGN_OR_RETURN(LpSolution lp,
                     SolveMaxAffine(data.dense(), data.labels(), p.polytope));
    SolveResult r;
    r.model = DecisionModel(lp.x);
    r.steps_done = 1;
    r.released.push_back(Released("objective",
                                  Eigen::VectorXd::Constant(1, lp.value),
                                  "f_opt = f(x*; b) on the PUBLIC offsets"));
    StepReporter reporter(context, 1);
    r.cancelled = !reporter.Report(1, lp.x);
    return r;
  }
};

}  // namespace

std::unique_ptr<Algorithm> NewPerturbProblem(const PerturbProblemOptions& o) {
  return std::make_unique<PerturbProblem>(o);
}
std::unique_ptr<Algorithm> NewPerturbSolution(const PerturbSolutionOptions& o) {
  return std::make_unique<PerturbSolution>(o);
}
std::unique_ptr<Algorithm> NewExponential(const ExponentialOptions& o) {
  return std::make_unique<Exponential>(o);
}
std::unique_ptr<Algorithm> NewSubgradient(const SubgradientOptions& o) {
  return std::make_unique<Subgradient>(o, true);
}
std::unique_ptr<Algorithm> NewBaseline(const BaselineOptions& o) {
  if (o.method == BaselineMethod::kLp) return std::make_unique<LpBaseline>();
  return std::make_unique<Subgradient>(o.subgradient, false);
}

}  // namespace dpopt::optim::piecewise_affine
