#include "core/optim/bilevel/dp_loc_gd.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "core/common/status_macros.h"
#include "core/optim/bilevel/primitives.h"

namespace dpopt::optim::bilevel {
namespace {

constexpr int64_t kMaxSolveSteps = 1'000'000;

bool FinitePositive(double v) { return std::isfinite(v) && v > 0; }

}  // namespace

absl::Status InnerSolverOptions::Validate() const {
  if (rounds < 0 || rounds > 64) {
    return absl::InvalidArgumentError("inner rounds must be in [0, 64]");
  }
  if (steps < 0 || steps > kMaxSolveSteps) {
    return absl::InvalidArgumentError("inner steps must be in [0, 1000000]");
  }
  if (!(failure_probability > 0 && failure_probability < 1)) {
    return absl::InvalidArgumentError(
        "inner failure probability must be in (0, 1)");
  }
  return absl::OkStatus();
}

absl::Status InnerProblem::Validate() const {
  if (!FinitePositive(mu) || !FinitePositive(beta) ||
      !FinitePositive(lipschitz) || !FinitePositive(radius)) {
    return absl::InvalidArgumentError(
        "inner problem: mu, beta, L and R0 must be finite and > 0");
  }
  if (!(mu <= beta)) {
    return absl::InvalidArgumentError(
        "inner problem: strong convexity exceeds smoothness");
  }
  if (dimension < 1) {
    return absl::InvalidArgumentError("inner problem: dimension must be >= 1");
  }
  return absl::OkStatus();
}

int64_t PaperRounds(double mu, double per_call_epsilon, double rows,
                    double lipschitz) {
  const double a = mu * per_call_epsilon * rows / lipschitz;
  return std::max<int64_t>(1, static_cast<int64_t>(std::ceil(std::log2(
                                  std::log(std::max(std::exp(2.0), a))))));
}

absl::StatusOr<InnerPlan> PlanInnerSolve(const InnerSolverOptions& options,
                                         const InnerProblem& problem,
                                         int64_t rows,
                                         double per_call_epsilon) {
  RETURN_IF_ERROR(options.Validate());
  RETURN_IF_ERROR(problem.Validate());
  if (rows < 1) return absl::InvalidArgumentError("rows must be >= 1");
  InnerPlan plan;
  plan.mode = options.mode;
  plan.mu = problem.mu;
  plan.step_size = 1 / problem.beta;
  const double n = static_cast<double>(rows);
  const double kappa = problem.beta / problem.mu;
  switch (options.mode) {
    case InnerMode::kPractical: {
      plan.rounds = 1;
      plan.steps = options.steps > 0
                       ? options.steps
                       : static_cast<int64_t>(std::ceil(
                             2 * kappa * std::log(std::max(std::exp(1.0), n))));
      plan.averaged = (plan.steps + 1) / 2;
      plan.radii = {problem.radius};
      break;
    }
    case InnerMode::kPaper: {
      if (!FinitePositive(per_call_epsilon)) {
        return absl::InvalidArgumentError("per-call epsilon must be > 0");
      }
      if (options.rounds > 0) {
        plan.rounds = options.rounds;
      } else {
        plan.rounds =
            PaperRounds(problem.mu, per_call_epsilon, n, problem.lipschitz);
      }
      const double steps = options.steps > 0 ? options.steps : n * n;
      if (steps * plan.rounds > kMaxSolveSteps) {
        return absl::InvalidArgumentError(absl::StrCat(
            "paper inner mode: M * T_GD = ", plan.rounds, " * ", steps,
            " exceeds 10^6 steps per solve (T_GD defaults to n^2); set "
            "inner steps or use the practical mode"));
      }
      plan.steps = static_cast<int64_t>(steps);
      plan.radii.assign(plan.rounds, problem.radius);
      break;
    }
    case InnerMode::kExact: {
      plan.rounds = 1;
      plan.steps = options.steps > 0
                       ? options.steps
                       : static_cast<int64_t>(std::ceil(40 * kappa)) + 100;
      if (plan.steps > kMaxSolveSteps) {
        return absl::InvalidArgumentError("exact inner solve is too long");
      }
      plan.radii = {problem.radius};
      break;
    }
  }
  if (plan.steps < 1) {
    return absl::InvalidArgumentError("inner solve needs >= 1 step");
  }
  return plan;
}

void SetPaperRadii(const InnerProblem& problem, double sigma, bool minibatch,
                   double gamma_in, InnerPlan* plan) {
  const double m_rounds = static_cast<double>(plan->rounds);
  const double t = static_cast<double>(plan->steps);
  const double h = 1 + std::log(t);
  const double l = problem.lipschitz;
  const double d = static_cast<double>(problem.dimension);
  const double tail =
      std::sqrt(d) + std::sqrt(2 * std::log(2 * m_rounds * t / gamma_in));
  plan->radii.assign(plan->rounds, problem.radius);
  for (int64_t m = 0; m + 1 < plan->rounds; ++m) {
    const double r = plan->radii[m];
    const double gap =
        2 * r * (sigma + (minibatch ? 2 * l : 0)) *
            std::sqrt(2 * std::log(4 * m_rounds / gamma_in) / t) +
        h * (l * l + sigma * sigma * tail * tail) / (problem.mu * t);
    plan->radii[m + 1] = std::min(2 * r, std::sqrt(2 * gap / problem.mu));
  }
}

absl::StatusOr<Eigen::VectorXd> RunInnerSolve(
    const InnerPlan& plan, const PlannedMechanism& mechanism, double scale,
    PrivateSumOracle& oracle, InnerSource& source, const Eigen::VectorXd& y0,
    InnerTrace* trace, StepReporter* reporter) {
  const bool exact = plan.mode == InnerMode::kExact;
  Eigen::VectorXd start = y0;
  Eigen::VectorXd y = y0;
  Eigen::VectorXd direction;
  if (trace != nullptr) trace->round_starts.push_back(start);
  Eigen::VectorXd tail_sum = Eigen::VectorXd::Zero(y0.size());
  for (int64_t m = 0; m < plan.rounds; ++m) {
    const double radius = plan.radii[m];
    Eigen::VectorXd round_sum = Eigen::VectorXd::Zero(y0.size());
    y = start;
    if (trace != nullptr) trace->rounds.push_back({y});
    for (int64_t t = 0; t < plan.steps; ++t) {
      if (reporter != nullptr && reporter->StopRequested()) {
        return absl::CancelledError("cancelled");
      }
      round_sum += y;  // y^m_t, t = 0..T_GD-1
      source.SetPoint(y);
      if (exact) {
        RETURN_IF_ERROR(oracle.ExactSum(source, &direction));
      } else {
        RETURN_IF_ERROR(oracle.NoisySum(mechanism, scale, source, &direction));
      }
      const double eta = plan.mode == InnerMode::kPaper
                             ? 1 / (plan.mu * static_cast<double>(t + 1))
                             : plan.step_size;
      y -= eta * direction;
      ProjectOntoBall(plan.mode != InnerMode::kPaper && plan.center.size() > 0
                          ? plan.center
                          : start,
                      radius, y);
      if (plan.mode == InnerMode::kPractical &&
          t + 1 > plan.steps - plan.averaged) {
        tail_sum += y;  // the last ceil(T/2) iterates y_{T-h+1}..y_T
      }
      if (trace != nullptr) trace->rounds.back().push_back(y);
    }
    if (plan.mode == InnerMode::kPaper) {
      start = round_sum / static_cast<double>(plan.steps);
      if (trace != nullptr) trace->round_starts.push_back(start);
    }
  }
  switch (plan.mode) {
    case InnerMode::kPaper:
      return start;
    case InnerMode::kPractical:
      return Eigen::VectorXd(tail_sum / static_cast<double>(plan.averaged));
    case InnerMode::kExact:
      return y;
  }
  return y;
}

}  // namespace dpopt::optim::bilevel
