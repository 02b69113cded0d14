#include "core/optim/accelerated/accelerated.h"

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/common/status_macros.h"
#include "core/noise/vector_mechanisms.h"
#include "core/optim/objective.h"
#include "core/optim/private_oracle.h"
#include "core/optim/release_budget.h"
#include "core/optim/solve_loop.h"
#include "core/optim/step_reporter.h"

namespace dpopt::optim::accelerated {
namespace {

enum class UpdateKind { kGradient, kHeavyBall, kNesterov };

UpdateKind UpdateOf(Method m) {
  switch (m) {
    case Method::kGd:
      return UpdateKind::kGradient;
    case Method::kHeavyBall:
      return UpdateKind::kHeavyBall;
    default:
      return UpdateKind::kNesterov;  // NAG, NAG-opt, MASG, MASG-opt
  }
}

// One oracle query per step.
struct StepQuery {
  double multiplier = 0;
  privacy::DpEvent oracle_event;
};

class AcceleratedMethod final : public IterativeMethod {
 public:
  AcceleratedMethod(UpdateKind kind, NoiseFamily noise, double q, double clip,
                    StepSchedule schedule, std::vector<StepQuery> queries,
                    Eigen::VectorXd x0)
      : kind_(kind),
        noise_(noise),
        q_(q),
        clip_(clip),
        schedule_(std::move(schedule)),
        queries_(std::move(queries)),
        x_(std::move(x0)),
        x_prev_(x_) {}

  absl::Status Step(int64_t step, PrivateGradientOracle& oracle,
                    StepInfo* info) override {
    const double alpha = schedule_.alpha[step];
    const double beta = schedule_.beta[step];
    // MASG restart (as in the authors' code; the paper does not mention
    // it): x_prev := x, so z = x.
    const Eigen::VectorXd& prev = schedule_.restart[step] ? x_ : x_prev_;
    // Query point: x (GD, HB) or z = x + beta (x - x_prev) (NAG, (4.1)).
    if (kind_ == UpdateKind::kNesterov) {
      y_ = x_ + beta * (x_ - prev);
    } else {
      y_ = x_;
    }
    const double mult = queries_[step].multiplier;
    if (noise_ == NoiseFamily::kLaplace) {
      RETURN_IF_ERROR(oracle.LaplaceGradient({q_, clip_, mult}, y_, &g_));
    } else {
      RETURN_IF_ERROR(oracle.GaussianGradient({q_, clip_, mult}, y_, &g_));
    }
    info->noisy_gradient_norm = g_.norm();
    Eigen::VectorXd next;
    switch (kind_) {
      case UpdateKind::kGradient:  // x_t = x_{t-1} - alpha g
        next = x_ - alpha * g_;
        break;
      case UpdateKind::kHeavyBall:  // paper (3.1)
        next = x_ - alpha * g_ + beta * (x_ - prev);
        break;
      case UpdateKind::kNesterov:  // paper (4.1)
        next = y_ - alpha * g_;
        break;
    }
    x_prev_ = std::move(x_);
    x_ = std::move(next);
    return absl::OkStatus();
  }

  const Eigen::VectorXd& iterate() const override { return x_; }

 private:
  const UpdateKind kind_;
  const NoiseFamily noise_;
  const double q_;
  const double clip_;
  const StepSchedule schedule_;
  const std::vector<StepQuery> queries_;
  Eigen::VectorXd x_;
  Eigen::VectorXd x_prev_;
  Eigen::VectorXd y_;
  Eigen::VectorXd g_;
};

class Accelerated final : public Algorithm {
 public:
  explicit Accelerated(const AcceleratedOptions& options) : options_(options) {}

  std::string name() const override { return MethodName(options_.method); }

  absl::StatusOr<Calibration> Calibrate(
      const PublicDatasetInfo& info,
      const PrivacyTarget& target) const override {
    ASSIGN_OR_RETURN(Plan plan, MakePlan(options_, info, target));
    ASSIGN_OR_RETURN(std::unique_ptr<Objective> objective,
                     Objective::Create(options_.model, info.dimension));
    const int64_t p = objective->parameter_size();
    Calibration c;
    c.noise_multiplier = plan.oracle_multiplier.front();
    if (options_.noise == NoiseFamily::kLaplace) {
      ASSIGN_OR_RETURN(
          noise::LaplacePlan lp,
          noise::PlanLaplace(options_.clip_norm, c.noise_multiplier, p));
      // Calibration::noise_stddev, on each coordinate of the first step's
      // clipped sum: the std of Laplace(b) is sqrt(2) b.
      c.noise_stddev = std::sqrt(2.0) * lp.scale;
    } else {
      ASSIGN_OR_RETURN(
          noise::GaussianPlan gp,
          noise::PlanGaussian(options_.clip_norm, c.noise_multiplier, p));
      // Calibration::noise_stddev, on each coordinate of the first step's
      // clipped sum.
      c.noise_stddev = gp.sigma;
    }
    c.steps = plan.steps;
    // At most two gradient evaluations per step (the extrapolated point and
    // the iterate), each over at most n rows.
    c.work_units =
        PassWork(2.0 * static_cast<double>(plan.steps), info.rows, p);
    c.sampling_rate = plan.sampling_rate;
    c.expected_batch_size = plan.expected_batch_size;
    c.clip_norm = options_.clip_norm;
    c.rows = info.rows;
    c.dimension = info.dimension;
    c.notes = std::move(plan.notes);
    c.event = std::move(plan.event);
    c.relation = plan.relation;
    return c;
  }

  absl::StatusOr<SolveResult> Run(const Dataset& data,
                                  const Calibration& calibration,
                                  SolveContext& context) const override {
    if (context.rng == nullptr) {
      return absl::FailedPreconditionError("no random source");
    }
    const int64_t n = calibration.rows;
    const int64_t m = options_.batch_size == 0 ? n : options_.batch_size;
    const double q =
        m == n ? 1.0 : static_cast<double>(m) / static_cast<double>(n);
    if (calibration.steps < 1 || calibration.steps > options_.steps ||
        calibration.clip_norm != options_.clip_norm ||
        calibration.sampling_rate != q || m > n) {
      return absl::FailedPreconditionError(
          "calibration was not made for this algorithm's parameters");
    }
    ASSIGN_OR_RETURN(std::unique_ptr<Objective> objective,
                     Objective::Create(options_.model, calibration.dimension));
    const int64_t p = objective->parameter_size();
    const double mu = options_.strong_convexity > 0 ? options_.strong_convexity
                                                    : options_.model.l2;
    ASSIGN_OR_RETURN(StepSchedule schedule,
                     MakeSchedule(options_, mu, calibration.steps));
    ASSIGN_OR_RETURN(std::vector<privacy::DpEvent> charged,
                     FlattenStepEvents(calibration.event));
    if (static_cast<int64_t>(charged.size()) != calibration.steps) {
      return absl::FailedPreconditionError(
          "calibration event does not match the planned releases");
    }
    // Map every charged step event to the oracle query that releases
    // exactly it (calibration.h); refuse anything else.
    std::vector<StepQuery> queries;
    queries.reserve(charged.size());
    PlannedReleases budget;
    const bool replace_one =
        calibration.relation == privacy::Relation::kReplaceOne;
    // Up to 10^6 step events (about a second): asks whether to stop every
    // 4096 of them, before anything is released.
    StepReporter setup(context, calibration.steps);
    for (const privacy::DpEvent& e : charged) {
      if ((queries.size() & 4095) == 0 && setup.StopRequested()) {
        SolveResult stopped;
        stopped.cancelled = true;
        stopped.model.weights = Eigen::VectorXd::Zero(p);
        stopped.model.dimension = objective->dimension();
        stopped.model.loss = options_.model.loss;
        stopped.spent = privacy::DpEvent::NoOp();
        return stopped;
      }
      ASSIGN_OR_RETURN(StepQuery sq, QueryFor(e, q, p, replace_one));
      budget.Allow(sq.oracle_event, 1);
      queries.push_back(std::move(sq));
    }
    Eigen::VectorXd x0 = Eigen::VectorXd::Zero(p);
    if (!options_.initial_point.empty()) {
      if (static_cast<int64_t>(options_.initial_point.size()) != p) {
        return absl::FailedPreconditionError(
            "initial point has the wrong size");
      }
      x0 = Eigen::Map<const Eigen::VectorXd>(options_.initial_point.data(), p);
    }
    ASSIGN_OR_RETURN(
        std::unique_ptr<PrivateGradientOracle> oracle,
        PrivateGradientOracle::Create(data, *objective, calibration.rows,
                                      context, budget));
    AcceleratedMethod method(UpdateOf(options_.method), options_.noise, q,
                             options_.clip_norm, std::move(schedule),
                             std::move(queries), std::move(x0));
    return SolveLoop::Run({calibration.steps}, method, *oracle, budget,
                          context.callback);
  }

 private:
  absl::StatusOr<StepQuery> QueryFor(const privacy::DpEvent& e, double q,
                                     int64_t p, bool replace_one) const {
    using K = privacy::DpEvent::Kind;
    const bool laplace = options_.noise == NoiseFamily::kLaplace;
    const double clip = options_.clip_norm;
    StepQuery sq;
    const privacy::DpEvent& mech =
        (!replace_one && q < 1 && e.kind() == K::kPoissonSampled) ? e.inner()
                                                                  : e;
    const K want = laplace ? K::kDiscreteLaplace : K::kGaussian;
    if (mech.kind() != want) {
      return absl::FailedPreconditionError(
          "calibration event does not match the planned releases");
    }
    // Replace-one events carry half the oracle's add/remove multiplier
    // (group privacy, see calibration.h).
    sq.multiplier =
        replace_one ? 2 * mech.noise_multiplier() : mech.noise_multiplier();
    if (laplace) {
      ASSIGN_OR_RETURN(sq.oracle_event,
                       LaplaceGradientEvent({q, clip, sq.multiplier}, p));
    } else {
      ASSIGN_OR_RETURN(sq.oracle_event,
                       GaussianGradientEvent({q, clip, sq.multiplier}, p));
    }
    privacy::DpEvent expected = sq.oracle_event;
    if (replace_one) {
      expected =
          laplace ? privacy::DpEvent::DiscreteLaplace(mech.noise_multiplier())
                  : privacy::DpEvent::Gaussian(mech.noise_multiplier());
    }
    if (!(expected == e)) {
      return absl::FailedPreconditionError(
          "calibration event does not match the planned releases");
    }
    return sq;
  }

  const AcceleratedOptions options_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Algorithm>> NewAcceleratedAlgorithm(
    const AcceleratedOptions& options) {
  RETURN_IF_ERROR(options.Validate());
  return std::unique_ptr<Algorithm>(new Accelerated(options));
}

}  // namespace dpopt::optim::accelerated
