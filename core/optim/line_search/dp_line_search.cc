#include "core/optim/line_search/dp_line_search.h"

#include <cmath>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_format.h"
#include "core/common/status_macros.h"
#include "core/noise/vector_mechanisms.h"
#include "core/optim/line_search/job_filter.h"
#include "core/optim/objective.h"
#include "core/optim/poisson_sampler.h"
#include "core/optim/private_oracle.h"
#include "core/optim/solve_loop.h"
#include "core/privacy/accountant.h"

namespace dpopt::optim::line_search {
namespace {

constexpr int64_t kMaxPlanned = 100'000;
constexpr int64_t kMaxIterations = 1'000'000;

std::string VariantName(Variant v) {
  switch (v) {
    case Variant::kBlsgd:
      return "dp_blsgd";
    case Variant::kBlsgdAc:
      return "dp_blsgd_ac";
    case Variant::kBlgd:
      return "dp_blgd";
  }
  return "unknown";
}

// Gaussian gradient noise multiplier for a zCDP-style budget rho:
// std on the sum = C / sqrt(2 rho) (Chen & Lee 2022, Lemma 1; with
// rho = eps_iter^2 / 2 the std on the sum is C_grad / eps_iter).
double ZForRho(double rho) { return 1 / std::sqrt(2 * rho); }

// Initial line-search budget for gradient noise multiplier z0: Laplace
// eps_BT0 = share / z0 (= share * eps_iter, the paper's split); Gaussian
// rho_BT0 = eps_BT0^2 / 2, its zCDP equivalent, = share^2 rho_g0.
double InitialLineSearchBudget(const DpLineSearchOptions& o, double z0) {
  const double eps = o.line_search_share / z0;
  return o.line_search_noise == SvtNoiseKind::kGaussian ? eps * eps / 2 : eps;
}

// The event one line search at budget b (eps_BT or rho_BT) is charged.
absl::StatusOr<privacy::DpEvent> LineSearchEvent(const DpLineSearchOptions& o,
                                                 double budget, double q) {
  if (o.line_search_noise == SvtNoiseKind::kGaussian) {
    return GaussianSvtEvent(budget, o.line_search.max_candidates, q);
  }
  return LaplaceSvtEvent(budget, q);
}

// One outer iteration (dp_line_search.h) per Step().
class LineSearchMethod final : public IterativeMethod {
 public:
  LineSearchMethod(const DpLineSearchOptions& options, double z0, int64_t p,
                   JobPrivacyFilter& filter, LineSearchOracle& searcher,
                   LineSearchRunStats& stats)
      : o_(options),
        p_(p),
        filter_(filter),
        searcher_(searcher),
        stats_(stats),
        w_(Eigen::VectorXd::Zero(p)),  // w0 = 0 (the paper: random)
        rho_(1 / (2 * z0 * z0)),
        ls_budget_(InitialLineSearchBudget(options, z0)),
        angle_(options.angle_decay),
        schedule_(options.line_search.initial_step,
                  options.step_schedule_period, options.step_schedule_factor),
        clips_(options.clip_grad, options.clip_obj, options.clip_decay) {
    Publish();
  }

  absl::Status Step(int64_t t, PrivateGradientOracle& oracle,
                    StepInfo* info) override {
    const double q = o_.sampling_rate;
    ASSIGN_OR_RETURN(privacy::DpEvent grad_event, GradEvent(ZForRho(rho_)));
    ASSIGN_OR_RETURN(privacy::DpEvent ls_event,
                     LineSearchEvent(o_, ls_budget_, q));
    // Never pay for a gradient that no line search could use.
    RETURN_IF_ERROR(filter_.CanAfford({grad_event, ls_event}));
    ++stats_.iterations;
    RETURN_IF_ERROR(oracle.GaussianGradient(
        {q, clips_.clip_grad(), ZForRho(rho_)}, w_, &g_));
    ++stats_.gradient_releases;
    clips_.BeginIteration();
    LineSearchOptions ls = o_.line_search;
    ls.initial_step = schedule_.eta0();
    while (true) {
      ASSIGN_OR_RETURN(LineSearchResult r,
                       searcher_.Search(Query(q), w_, g_, ls));
      ++stats_.line_searches;
      if (r.accepted && r.step > 0) {
        angle_.OnSuccessfulStep(g_);  // eq. (7), on the direction used
        w_ -= r.step * g_;
        schedule_.RecordStep(r.step);
        ++stats_.accepted_steps;
        break;
      }
      if (o_.variant == Variant::kBlgd) {
        RETURN_IF_ERROR(IncreaseFullBatch(oracle));
      } else {
        RETURN_IF_ERROR(ChebStep(oracle));
      }
    }
    schedule_.EndIteration(t);
    info->noisy_gradient_norm = g_.norm();
    Publish();
    return absl::OkStatus();
  }

  const Eigen::VectorXd& iterate() const override { return w_; }

 private:
  // The line search at the current budget (charged inside Search() with
  // SvtQueryEvent, the same event as LineSearchEvent above).
  SvtQuery Query(double q) const {
    SvtQuery query;
    query.clip_objective = clips_.clip_obj();
    query.sampling_rate = q;
    query.noise = o_.line_search_noise;
    if (query.noise == SvtNoiseKind::kGaussian) {
      query.rho = ls_budget_;
    } else {
      query.epsilon = ls_budget_;
    }
    return query;
  }

  absl::StatusOr<privacy::DpEvent> GradEvent(double z) const {
    return GaussianGradientEvent({o_.sampling_rate, clips_.clip_grad(), z}, p_);
  }

  // Alg. 2 lines 15-17 + Alg. 3: a second gradient on a fresh batch at the
  // current rho, then CHEB.
  absl::Status ChebStep(PrivateGradientOracle& oracle) {
    const double q = o_.sampling_rate;
    ASSIGN_OR_RETURN(privacy::DpEvent grad_event, GradEvent(ZForRho(rho_)));
    ASSIGN_OR_RETURN(privacy::DpEvent ls_event,
                     LineSearchEvent(o_, ls_budget_, q));
    RETURN_IF_ERROR(filter_.CanAfford({grad_event, ls_event}));
    RETURN_IF_ERROR(oracle.GaussianGradient(
        {q, clips_.clip_grad(), ZForRho(rho_)}, w_, &g2_));
    ++stats_.gradient_releases;
    const ChebOutcome c =
        Cheb(g2_, angle_.value(), o_.cheb, &g_, &rho_, &ls_budget_);
    switch (c.branch) {
      case ChebBranch::kRaiseGradient:
        ++stats_.cheb_raise_gradient;
        if (o_.variant == Variant::kBlsgdAc &&
            clips_.OnGradientBudgetRaised()) {
          ++stats_.clip_decays;
        }
        break;
      case ChebBranch::kRaiseLineSearch:
        ++stats_.cheb_raise_line_search;
        break;
      case ChebBranch::kNoChange:
        ++stats_.cheb_no_change;
        break;
    }
    return absl::OkStatus();
  }

  // DP-BLGD: DP-AGD's budget increase (Lee & Kifer 2018; q = 1).
  absl::Status IncreaseFullBatch(PrivateGradientOracle& oracle) {
    const double rho_old = rho_;
    const double rho_new = (1 + o_.cheb.growth) * rho_old;
    const double dz = ZForRho(rho_new - rho_old);
    ASSIGN_OR_RETURN(privacy::DpEvent grad_event, GradEvent(dz));
    ASSIGN_OR_RETURN(privacy::DpEvent ls_event,
                     LineSearchEvent(o_, ls_budget_, 1.0));
    RETURN_IF_ERROR(filter_.CanAfford({grad_event, ls_event}));
    RETURN_IF_ERROR(
        oracle.GaussianGradient({1.0, clips_.clip_grad(), dz}, w_, &g2_));
    ++stats_.gradient_releases;
    ++stats_.cheb_raise_gradient;
    // Precision weighting: noise variances 1/(2 rho_old), 1/(2 (rho_new -
    // rho_old)) combine to 1/(2 rho_new).
    const double a = rho_old / rho_new;
    g_ = a * g_ + (1 - a) * g2_;
    rho_ = rho_new;
    return absl::OkStatus();
  }

  void Publish() {
    stats_.final_rho_grad = rho_;
    if (o_.line_search_noise == SvtNoiseKind::kGaussian) {
      stats_.final_rho_bt = ls_budget_;
    } else {
      stats_.final_eps_bt = ls_budget_;
    }
    stats_.final_clip_grad = clips_.clip_grad();
    stats_.final_clip_obj = clips_.clip_obj();
    stats_.final_eta0 = schedule_.eta0();
    stats_.final_theta_bar = angle_.value();
  }

  const DpLineSearchOptions o_;
  const int64_t p_;
  JobPrivacyFilter& filter_;
  LineSearchOracle& searcher_;
  LineSearchRunStats& stats_;
  Eigen::VectorXd w_, g_, g2_;
  double rho_;
  double ls_budget_;  // eps_BT (Laplace) or rho_BT (Gaussian)
  AngleAverage angle_;
  InitialStepSchedule schedule_;
  ClipAdaptation clips_;
};

class DpLineSearch final : public Algorithm {
 public:
  explicit DpLineSearch(const DpLineSearchOptions& options)
      : options_(options) {}

  std::string name() const override { return VariantName(options_.variant); }

  absl::StatusOr<Calibration> Calibrate(
      const PublicDatasetInfo& info,
      const PrivacyTarget& target) const override {
    RETURN_IF_ERROR(CheckPublicInfo(info, options_.model, true));
    RETURN_IF_ERROR(CheckPrivateTarget(target));
    // Analysed under add/remove with Poisson sampling.
    RETURN_IF_ERROR(
        CheckRelation(info.relation, {privacy::Relation::kAddRemove}, name()));
    ASSIGN_OR_RETURN(std::unique_ptr<Objective> objective,
                     Objective::Create(options_.model, info.dimension));
    const int64_t p = objective->parameter_size();
    absl::Status event_error;
    auto make_event = [&](double z) -> privacy::DpEvent {
      absl::StatusOr<privacy::DpEvent> e = ReservationEvent(options_, z, p);
      if (!e.ok()) {
        if (event_error.ok()) event_error = e.status();
        return privacy::DpEvent::EpsilonDelta(
            std::numeric_limits<double>::max(), 1.0);
      }
      return *std::move(e);
    };
    // The job filter and the ledger price by RDP; calibrate with it too.
    constexpr auto kRdp = privacy::AccountantKind::kRdp;
    ASSIGN_OR_RETURN(
        double z, privacy::CalibrateNoiseMultiplier(make_event, target.epsilon,
                                                    target.delta, kRdp));
    RETURN_IF_ERROR(event_error);
    Calibration c;
    c.event = make_event(z);
    RETURN_IF_ERROR(event_error);
    ASSIGN_OR_RETURN(privacy::EpsilonResult check,
                     privacy::ComputeEpsilon(c.event, target.delta, kRdp));
    if (!(check.epsilon <= target.epsilon)) {
      return absl::InternalError("calibration overshot the privacy target");
    }
    ASSIGN_OR_RETURN(noise::GaussianPlan plan,
                     noise::PlanGaussian(options_.clip_grad, z, p));
    const double q = options_.sampling_rate;
    c.noise_multiplier = z;
    c.steps = options_.EffectiveMaxIterations();
    // Per iteration: one gradient, at most max_candidates loss evaluations
    // of the line search and one more loss (the Chebyshev test), each a pass
    // over at most n rows.
    c.work_units = PassWork(
        static_cast<double>(c.steps) *
            (2.0 + static_cast<double>(options_.line_search.max_candidates)),
        info.rows, p);
    c.sampling_rate = q;
    c.expected_batch_size = q * static_cast<double>(info.rows);
    // Calibration::noise_stddev: the first gradient release's, on each
    // coordinate of the clipped sum (CHEB may raise rho_grad later).
    c.noise_stddev = plan.sigma;
    c.clip_norm = options_.clip_grad;
    c.rows = info.rows;
    c.dimension = info.dimension;
    c.relation = privacy::Relation::kAddRemove;
    const double rho0 = 1 / (2 * z * z);
    const bool gaussian_ls =
        options_.line_search_noise == SvtNoiseKind::kGaussian;
    const double ls0 = InitialLineSearchBudget(options_, z);
    c.notes.push_back(absl::StrFormat(
        "%s (line-search family), SOUND accounting: the ledger is charged the "
        "reservation of %d ideal iterations (one gradient + one line search "
        "each) = (%.6g, %.3g)-DP under RDP; a job-internal all-orders RDP "
        "filter over it pays every gradient, line search and CHEB draw, and "
        "the job stops when the next one cannot be paid",
        name(), options_.planned_iterations, check.epsilon, target.delta));
    c.notes.push_back(absl::StrFormat(
        "initial budgets: rho_grad %.6g (noise multiplier %.6g on the "
        "clipped gradient sum, C_grad %g), %s %.6g (%s sparse vector, C_obj "
        "%g%s); q %g, at most %d iterations",
        rho0, z, options_.clip_grad, gaussian_ls ? "rho_BT" : "eps_BT", ls0,
        gaussian_ls ? "Gaussian" : "Laplace", options_.clip_obj,
        gaussian_ls ? ", charged by Zhu & Wang 2020 Thm 8 incl. "
                      "log(max_it + 1)/(alpha - 1)"
                    : "",
        q, c.steps));
    if (q < 1) {
      c.notes.push_back(
          options_.reserve_amplified
              ? "gradients reserved at their Poisson-amplified cost "
                "(reserve_amplified)"
              : "gradients reserved at their unsampled cost (set "
                "reserve_amplified for less noise per gradient)");
    }
    if (target.accountant != kRdp) {
      c.notes.push_back(
          "calibrated with the RDP accountant (the job filter is RDP)");
    }
    return c;
  }

  absl::StatusOr<SolveResult> Run(const Dataset& data,
                                  const Calibration& calibration,
                                  SolveContext& context) const override {
    return RunDpLineSearch(options_, data, calibration, context,
                           SecureSvtNoise(), nullptr);
  }

 private:
  const DpLineSearchOptions options_;
};

}  // namespace

absl::Status DpLineSearchOptions::Validate() const {
  if (!(sampling_rate >= PoissonSampler::kMinRate && sampling_rate <= 1)) {
    return absl::InvalidArgumentError("sampling_rate must be in [1e-12, 1]");
  }
  if (variant == Variant::kBlgd && sampling_rate != 1) {
    return absl::InvalidArgumentError("DP-BLGD is full batch: sampling_rate 1");
  }
  if (!(clip_grad > 0 && clip_grad <= 1e6)) {
    return absl::InvalidArgumentError("clip_grad must be in (0, 1e6]");
  }
  if (!(clip_obj > 0 && clip_obj <= 1e6)) {
    return absl::InvalidArgumentError("clip_obj must be in (0, 1e6]");
  }
  if (planned_iterations < 1 || planned_iterations > kMaxPlanned) {
    return absl::InvalidArgumentError(
        "planned_iterations must be in [1, 100000]");
  }
  if (max_iterations < 0 || max_iterations > kMaxIterations ||
      EffectiveMaxIterations() > kMaxIterations) {
    return absl::InvalidArgumentError(
        "max_iterations must be in [0, 1000000] (0: 20 x planned)");
  }
  if (!(line_search_share > 0 && line_search_share <= 100)) {
    return absl::InvalidArgumentError("line_search_share must be in (0, 100]");
  }
  RETURN_IF_ERROR(line_search.Validate());
  RETURN_IF_ERROR(cheb.Validate());
  if (!(angle_decay >= 0 && angle_decay < 1)) {
    return absl::InvalidArgumentError("angle_decay (psi) must be in [0, 1)");
  }
  if (step_schedule_period < 1) {
    return absl::InvalidArgumentError("step_schedule_period must be >= 1");
  }
  if (!(step_schedule_factor >= 1 && step_schedule_factor <= 100)) {
    return absl::InvalidArgumentError(
        "step_schedule_factor must be in [1, 100]");
  }
  if (!(clip_decay >= 0 && clip_decay < 1)) {
    return absl::InvalidArgumentError("clip_decay (zeta) must be in [0, 1)");
  }
  if (line_search_noise != SvtNoiseKind::kLaplace &&
      line_search_noise != SvtNoiseKind::kGaussian) {
    return absl::InvalidArgumentError("unknown line-search noise kind");
  }
  return model.Validate();
}

absl::StatusOr<privacy::DpEvent> ReservationEvent(
    const DpLineSearchOptions& options, double z, int64_t parameter_size) {
  if (!(std::isfinite(z) && z > 0)) {
    return absl::InvalidArgumentError("noise multiplier must be > 0");
  }
  ASSIGN_OR_RETURN(
      privacy::DpEvent grad,
      GaussianGradientEvent({options.sampling_rate, options.clip_grad, z},
                            parameter_size));
  // By default the gradient part is reserved WITHOUT amplification credit
  // (the inner, unsampled Gaussian): the reservation is T ideal iterations at
  // the initial budgets, while CHEB may later raise rho_grad and
  // the number of accesses per iteration is data-dependent; reserving the
  // raw curve leaves that room. With reserve_amplified the reservation keeps
  // the PoissonSampled wrapper (every access is charged amplified),
  // so z is calibrated smaller. Either way the job filter prices each
  // sampled release at min(amplified, raw), the amplified curve being the
  // tight sampled Gaussian of Mironov, Talwar & Zhang 2019 (the release is a
  // post-processing of the continuous Gaussian, noise/vector_mechanisms.h).
  if (!options.reserve_amplified &&
      grad.kind() == privacy::DpEvent::Kind::kPoissonSampled) {
    privacy::DpEvent inner = grad.inner();
    grad = std::move(inner);
  }
  ASSIGN_OR_RETURN(privacy::DpEvent search,
                   LineSearchEvent(options, InitialLineSearchBudget(options, z),
                                   options.sampling_rate));
  return privacy::DpEvent::SelfComposed(
      options.planned_iterations,
      privacy::DpEvent::Composed({std::move(grad), std::move(search)}));
}

absl::StatusOr<SolveResult> RunDpLineSearch(const DpLineSearchOptions& options,
                                            const Dataset& data,
                                            const Calibration& calibration,
                                            SolveContext& context,
                                            const SvtNoise& svt_noise,
                                            LineSearchRunStats* stats) {
  RETURN_IF_ERROR(options.Validate());
  if (context.rng == nullptr) {
    return absl::FailedPreconditionError("no random source");
  }
  if (calibration.steps != options.EffectiveMaxIterations() ||
      calibration.sampling_rate != options.sampling_rate ||
      calibration.clip_norm != options.clip_grad) {
    return absl::FailedPreconditionError(
        "calibration was not made for this algorithm's parameters");
  }
  ASSIGN_OR_RETURN(std::unique_ptr<Objective> objective,
                   Objective::Create(options.model, calibration.dimension));
  const int64_t p = objective->parameter_size();
  ASSIGN_OR_RETURN(privacy::DpEvent reservation,
                   ReservationEvent(options, calibration.noise_multiplier, p));
  if (!(reservation == calibration.event)) {
    return absl::FailedPreconditionError(
        "calibration event is not this job's reservation");
  }
  ASSIGN_OR_RETURN(std::unique_ptr<JobPrivacyFilter> filter,
                   JobPrivacyFilter::Create(calibration.event));
  // One set of rows for both oracles: the gradient releases and the noisy
  // line search's loss sums (in this process, or on a worker pool).
  ASSIGN_OR_RETURN(std::unique_ptr<RowSums> rows,
                   OpenRunRows(data, *objective, context));
  ASSIGN_OR_RETURN(
      std::unique_ptr<PrivateGradientOracle> oracle,
      PrivateGradientOracle::Create(*rows, *objective, calibration.rows,
                                    *context.rng, context.noise(), *filter));
  ASSIGN_OR_RETURN(std::unique_ptr<LineSearchOracle> searcher,
                   LineSearchOracle::Create(*rows, *objective, calibration.rows,
                                            *context.rng, svt_noise, *filter));
  LineSearchRunStats local;
  LineSearchRunStats& s = stats != nullptr ? *stats : local;
  s = LineSearchRunStats();
  LineSearchMethod method(options, calibration.noise_multiplier, p, *filter,
                          *searcher, s);
  ASSIGN_OR_RETURN(SolveResult result,
                   SolveLoop::Run({calibration.steps}, method, *oracle, *filter,
                                  context.callback));
  result.model.loss = options.model.loss;
  return result;
}

absl::StatusOr<std::unique_ptr<Algorithm>> NewDpLineSearch(
    const DpLineSearchOptions& options) {
  RETURN_IF_ERROR(options.Validate());
  return std::unique_ptr<Algorithm>(new DpLineSearch(options));
}

}  // namespace dpopt::optim::line_search
