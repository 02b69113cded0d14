#include "server/spec_translation.h"

#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/common/status_macros.h"
#include "core/optim/accelerated/accelerated.h"
#include "core/optim/line_search/dp_line_search.h"
#include "server/translation/bilevel.h"
#include "server/translation/piecewise_affine.h"
#include "server/translation/distributed_dda.h"

namespace dpopt::server {
namespace {

using v1::AlgorithmSpec;
using v1::ModelSpec;

bool Finite(double v) { return std::isfinite(v); }

absl::Status CheckRegularization(double l2, double l1) {
  if (!Finite(l2) || l2 < 0) {
    return absl::InvalidArgumentError("model: l2 must be a finite number >= 0");
  }
  if (!Finite(l1) || l1 < 0) {
    return absl::InvalidArgumentError("model: l1 must be a finite number >= 0");
  }
  return absl::OkStatus();
}

absl::StatusOr<optim::ModelConfig> TranslateModel(const ModelSpec& m,
                                                  bool dataset_is_public,
                                                  int dataset_num_classes) {
  optim::ModelConfig c;
  switch (m.loss_case()) {
    case ModelSpec::kLogisticRegression:
      c.loss = optim::LossKind::kLogistic;
      c.l2 = m.logistic_regression().l2();
      c.l1 = m.logistic_regression().l1();
      break;
    case ModelSpec::kSoftmaxRegression:
      c.loss = optim::LossKind::kSoftmax;
      c.l2 = m.softmax_regression().l2();
      c.l1 = m.softmax_regression().l1();
      c.num_classes = m.softmax_regression().num_classes();
      if (c.num_classes == 0) c.num_classes = dataset_num_classes;
      if (c.num_classes != dataset_num_classes) {
        return absl::InvalidArgumentError(absl::StrCat(
            "model.softmax_regression.num_classes is ", c.num_classes,
            " but the dataset declares ", dataset_num_classes, " classes"));
      }
      break;
    case ModelSpec::kLeastSquares:
      c.loss = optim::LossKind::kLeastSquares;
      c.l2 = m.least_squares().l2();
      c.l1 = m.least_squares().l1();
      c.label_bound = m.least_squares().label_bound();
      if (!dataset_is_public && !(c.label_bound > 0 && Finite(c.label_bound))) {
        return absl::InvalidArgumentError(
            "model.least_squares.label_bound must be > 0 on a private dataset "
            "(labels are clipped to it by the server)");
      }
      break;
    case ModelSpec::kHingeSvm:
      c.loss = optim::LossKind::kHinge;
      c.l2 = m.hinge_svm().l2();
      c.l1 = m.hinge_svm().l1();
      break;
    case ModelSpec::kHuberizedHingeSvm:
      c.loss = optim::LossKind::kHuberizedHinge;
      c.l2 = m.huberized_hinge_svm().l2();
      c.l1 = m.huberized_hinge_svm().l1();
      c.huber_width = m.huberized_hinge_svm().huber_width() > 0
                          ? m.huberized_hinge_svm().huber_width()
                          : 0.5;
      break;
    default:
      return absl::InvalidArgumentError(
          "model: choose one of logistic_regression, softmax_regression, "
          "least_squares, hinge_svm, huberized_hinge_svm");
  }
  RETURN_IF_ERROR(CheckRegularization(c.l2, c.l1));
  RETURN_IF_ERROR(c.Validate());
  return c;
}

absl::Status CheckSteps(int64_t steps, const std::string& field) {
  if (steps < 1 || steps > kMaxSteps) {
    return absl::InvalidArgumentError(absl::StrCat(
        field, " must be between 1 and ", kMaxSteps, ", got ", steps));
  }
  return absl::OkStatus();
}

absl::Status CheckPositive(double v, const std::string& field) {
  if (!Finite(v) || v <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, " must be a finite number > 0"));
  }
  return absl::OkStatus();
}

// Accelerated: Accel* messages -> options (0 = default). Sets *name to the
// algorithm's name ("accel_dp_nag", ...).
absl::StatusOr<optim::accelerated::AcceleratedOptions> TranslateAccelerated(
    const AlgorithmSpec& a, std::string* name) {
  namespace s2 = optim::accelerated;
  s2::AcceleratedOptions o;
  const v1::AccelCommon* common = nullptr;
  const v1::AccelNoiseDividing* dividing = nullptr;
  const v1::AccelMasgSchedule* schedule = nullptr;
  switch (a.algorithm_case()) {
    case AlgorithmSpec::kAccelDpGd:
      o.method = s2::Method::kGd;
      common = &a.accel_dp_gd().common();
      o.learning_rate = a.accel_dp_gd().learning_rate();
      break;
    case AlgorithmSpec::kAccelDpHb:
      o.method = s2::Method::kHeavyBall;
      common = &a.accel_dp_hb().common();
      o.learning_rate = a.accel_dp_hb().learning_rate();
      if (a.accel_dp_hb().has_momentum()) {
        o.momentum = a.accel_dp_hb().momentum();
      }
      break;
    case AlgorithmSpec::kAccelDpNag:
      o.method = s2::Method::kNag;
      common = &a.accel_dp_nag().common();
      o.learning_rate = a.accel_dp_nag().learning_rate();
      if (a.accel_dp_nag().has_momentum()) {
        o.momentum = a.accel_dp_nag().momentum();
      }
      break;
    case AlgorithmSpec::kAccelDpNagOpt:
      o.method = s2::Method::kNagOpt;
      common = &a.accel_dp_nag_opt().common();
      o.learning_rate = a.accel_dp_nag_opt().learning_rate();
      dividing = &a.accel_dp_nag_opt().dividing();
      break;
    case AlgorithmSpec::kAccelDpMasg:
      o.method = s2::Method::kMasg;
      common = &a.accel_dp_masg().common();
      schedule = &a.accel_dp_masg().schedule();
      break;
    case AlgorithmSpec::kAccelDpMasgOpt:
      o.method = s2::Method::kMasgOpt;
      common = &a.accel_dp_masg_opt().common();
      schedule = &a.accel_dp_masg_opt().schedule();
      dividing = &a.accel_dp_masg_opt().dividing();
      break;
    default:
      return absl::InvalidArgumentError("not a accelerated algorithm");
  }
  *name = s2::MethodName(o.method);
  const std::string field = absl::StrCat("algorithm.", *name, ".common.");
  o.steps = common->steps();
  RETURN_IF_ERROR(CheckSteps(o.steps, field + "steps"));
  o.batch_size = common->batch_size();
  o.clip_norm = common->clip_norm();
  RETURN_IF_ERROR(CheckPositive(o.clip_norm, field + "clip_norm"));
  o.smoothness = common->smoothness();
  RETURN_IF_ERROR(CheckPositive(
      o.smoothness, field + "smoothness (the public constant L; required)"));
  o.strong_convexity = common->strong_convexity();
  o.step_scale = common->step_scale() != 0 ? common->step_scale() : 1.0;
  o.noise = common->noise() == v1::ACCEL_NOISE_GAUSSIAN
                ? s2::NoiseFamily::kGaussian
                : s2::NoiseFamily::kLaplace;
  o.initial_point.assign(common->initial_point().begin(),
                         common->initial_point().end());
  if (dividing != nullptr) {
    o.initial_error =
        dividing->initial_error() != 0 ? dividing->initial_error() : 10.0;
    o.select_steps = !dividing->keep_steps();
    o.convention = dividing->t_select() == v1::ACCEL_T_SELECT_PAPER
                       ? s2::TSelectConvention::kPaper
                       : s2::TSelectConvention::kReference;
  }
  if (schedule != nullptr) {
    o.masg_p = schedule->p() != 0 ? schedule->p() : 1;
    o.first_stage = schedule->first_stage() == v1::ACCEL_FIRST_STAGE_FLOOR
                        ? s2::FirstStageRule::kFloor
                        : s2::FirstStageRule::kCeil;
  }
  return o;
}

// Line-search: DpBacktrackingLineSearch -> options (0 = default).
absl::StatusOr<optim::line_search::DpLineSearchOptions> TranslateLineSearch(
    const v1::DpBacktrackingLineSearch& m, optim::line_search::Variant variant,
    const std::string& field) {
  optim::line_search::DpLineSearchOptions o;
  o.variant = variant;
  auto pick = [](double v, double dflt) { return v != 0 ? v : dflt; };
  o.sampling_rate = pick(m.sampling_rate(),
                         variant == optim::line_search::Variant::kBlgd ? 1 : 0.1);
  o.clip_grad = pick(m.clip_grad(), o.clip_grad);
  o.clip_obj = pick(m.clip_obj(), o.clip_obj);
  o.planned_iterations =
      m.planned_iterations() != 0 ? m.planned_iterations() : 50;
  o.max_iterations = m.max_iterations();
  o.line_search_share = pick(m.line_search_share(), o.line_search_share);
  o.line_search.initial_step =
      pick(m.initial_step(), o.line_search.initial_step);
  o.line_search.shrink = pick(m.shrink(), o.line_search.shrink);
  o.line_search.max_candidates = m.max_candidates() != 0
                                     ? m.max_candidates()
                                     : o.line_search.max_candidates;
  o.line_search.armijo = pick(m.armijo(), o.line_search.armijo);
  o.cheb.growth = pick(m.growth(), o.cheb.growth);
  o.clip_decay = pick(m.clip_decay(), o.clip_decay);
  o.line_search_noise = m.gaussian_line_search()
                            ? optim::line_search::SvtNoiseKind::kGaussian
                            : optim::line_search::SvtNoiseKind::kLaplace;
  o.reserve_amplified = m.reserve_amplified();
  for (double v :
       {o.sampling_rate, o.clip_grad, o.clip_obj, o.line_search_share,
        o.line_search.initial_step, o.line_search.shrink, o.line_search.armijo,
        o.cheb.growth, o.clip_decay}) {
    if (!Finite(v)) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, ": every number must be finite"));
    }
  }
  absl::Status valid = o.Validate();
  if (!valid.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": ", valid.message()));
  }
  return o;
}

}  // namespace

std::string ProtoLossName(optim::LossKind kind) {
  switch (kind) {
    case optim::LossKind::kLogistic:
      return "logistic_regression";
    case optim::LossKind::kSoftmax:
      return "softmax_regression";
    case optim::LossKind::kLeastSquares:
      return "least_squares";
    case optim::LossKind::kHinge:
      return "hinge_svm";
    case optim::LossKind::kHuberizedHinge:
      return "huberized_hinge_svm";
  }
  return "unknown";
}

absl::StatusOr<TranslatedJob> TranslateJobSpec(
    const v1::JobSpec& spec, bool dataset_is_public, int dataset_num_classes,
    const ExecutionEnvironment& env) {
  if (spec.dataset().empty()) {
    return absl::InvalidArgumentError("dataset is required");
  }
  if (!spec.has_algorithm() ||
      spec.algorithm().algorithm_case() == AlgorithmSpec::ALGORITHM_NOT_SET) {
    return absl::InvalidArgumentError(
        "algorithm is required (e.g. {\"dp_sgd\": {...}})");
  }
  const AlgorithmSpec& a = spec.algorithm();
  TranslatedJob out;
  out.evaluable_model = (!IsBilevel(a) || BilevelUsesModel(a)) && !IsPiecewiseAffine(a);
  if (IsPiecewiseAffine(a)) out.output_name = "max_affine_decision";
  if (out.evaluable_model && !spec.has_model()) {
    return absl::InvalidArgumentError("model is required");
  }
  if (!out.evaluable_model && spec.has_model()) {
    return absl::InvalidArgumentError(
        "this algorithm takes no model: its problem defines it");
  }
  if (spec.trace_every() < 0) {
    return absl::InvalidArgumentError("trace_every must be >= 0");
  }
  if (out.evaluable_model) {
    ASSIGN_OR_RETURN(out.model, TranslateModel(spec.model(), dataset_is_public,
                                               dataset_num_classes));
  }

  const bool non_private_algorithm = a.algorithm_case() == AlgorithmSpec::kGd ||
                                     BilevelIsNonPrivate(a) ||
                                     PiecewiseAffineIsNonPrivate(a);
  if (non_private_algorithm) {
    if (!dataset_is_public) {
      return absl::PermissionDeniedError(
          "non-private algorithms run only on public datasets");
    }
    if (spec.has_privacy()) {
      return absl::InvalidArgumentError(
          "a non-private algorithm takes no privacy target");
    }
    out.target.non_private = true;
  } else {
    if (!spec.has_privacy()) {
      return absl::InvalidArgumentError(
          "privacy {epsilon, delta} is required for a DP algorithm");
    }
    const auto& p = spec.privacy();
    if (!Finite(p.epsilon()) || p.epsilon() <= 0) {
      return absl::InvalidArgumentError(
          "privacy.epsilon must be a finite number > 0");
    }
    if (!Finite(p.delta()) || p.delta() < 0 || p.delta() >= 1) {
      return absl::InvalidArgumentError("privacy.delta must be in [0, 1)");
    }
    out.target.epsilon = p.epsilon();
    out.target.delta = p.delta();
    out.target.accountant = p.accountant() == v1::ACCOUNTANT_PLD
                                ? privacy::AccountantKind::kPld
                                : privacy::AccountantKind::kRdp;
  }

  int64_t steps = 0;
  switch (a.algorithm_case()) {
    case AlgorithmSpec::kDpGd:
    case AlgorithmSpec::kDpSgd: {
      optim::DpSgdOptions o;
      o.model = out.model;
      if (a.has_dp_gd()) {
        const auto& g = a.dp_gd();
        o.sampling_rate = 1.0;
        o.steps = g.steps();
        o.clip_norm = g.clip_norm();
        o.learning_rate = g.learning_rate();
        RETURN_IF_ERROR(CheckSteps(o.steps, "algorithm.dp_gd.steps"));
        RETURN_IF_ERROR(
            CheckPositive(o.clip_norm, "algorithm.dp_gd.clip_norm"));
        RETURN_IF_ERROR(
            CheckPositive(o.learning_rate, "algorithm.dp_gd.learning_rate"));
        out.algorithm_name = "dp_gd";
      } else {
        const auto& s = a.dp_sgd();
        o.sampling_rate = s.sampling_rate();
        o.steps = s.steps();
        o.clip_norm = s.clip_norm();
        o.learning_rate = s.learning_rate();
        o.momentum = s.momentum();
        if (!Finite(o.sampling_rate) || o.sampling_rate <= 0 ||
            o.sampling_rate > 1) {
          return absl::InvalidArgumentError(
              "algorithm.dp_sgd.sampling_rate must be in (0, 1]");
        }
        RETURN_IF_ERROR(CheckSteps(o.steps, "algorithm.dp_sgd.steps"));
        RETURN_IF_ERROR(
            CheckPositive(o.clip_norm, "algorithm.dp_sgd.clip_norm"));
        RETURN_IF_ERROR(
            CheckPositive(o.learning_rate, "algorithm.dp_sgd.learning_rate"));
        if (!Finite(o.momentum) || o.momentum < 0 || o.momentum >= 1) {
          return absl::InvalidArgumentError(
              "algorithm.dp_sgd.momentum must be in [0, 1)");
        }
        out.algorithm_name = "dp_sgd";
      }
      RETURN_IF_ERROR(o.Validate());
      steps = o.steps;
      ASSIGN_OR_RETURN(out.algorithm, optim::NewDpSgd(o));
      break;
    }
    case AlgorithmSpec::kAccelDpGd:
    case AlgorithmSpec::kAccelDpHb:
    case AlgorithmSpec::kAccelDpNag:
    case AlgorithmSpec::kAccelDpNagOpt:
    case AlgorithmSpec::kAccelDpMasg:
    case AlgorithmSpec::kAccelDpMasgOpt: {
      ASSIGN_OR_RETURN(optim::accelerated::AcceleratedOptions o,
                       TranslateAccelerated(a, &out.algorithm_name));
      o.model = out.model;
      const absl::Status valid = o.Validate();
      if (!valid.ok()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "algorithm.", out.algorithm_name, ": ", valid.message()));
      }
      steps = o.steps;
      ASSIGN_OR_RETURN(out.algorithm,
                       optim::accelerated::NewAcceleratedAlgorithm(o));
      break;
    }
    case AlgorithmSpec::kDpBlsgd:
    case AlgorithmSpec::kDpBlsgdAc:
    case AlgorithmSpec::kDpBlgd: {
      using optim::line_search::Variant;
      Variant variant = Variant::kBlsgd;
      const v1::DpBacktrackingLineSearch* m = &a.dp_blsgd();
      out.algorithm_name = "dp_blsgd";
      if (a.has_dp_blsgd_ac()) {
        variant = Variant::kBlsgdAc;
        m = &a.dp_blsgd_ac();
        out.algorithm_name = "dp_blsgd_ac";
      } else if (a.has_dp_blgd()) {
        variant = Variant::kBlgd;
        m = &a.dp_blgd();
        out.algorithm_name = "dp_blgd";
      }
      ASSIGN_OR_RETURN(
          optim::line_search::DpLineSearchOptions o,
          TranslateLineSearch(*m, variant, "algorithm." + out.algorithm_name));
      o.model = out.model;
      RETURN_IF_ERROR(o.Validate());
      steps = o.EffectiveMaxIterations();
      ASSIGN_OR_RETURN(out.algorithm, optim::line_search::NewDpLineSearch(o));
      break;
    }
    case AlgorithmSpec::kDpBilevel:
    case AlgorithmSpec::kDpBilevelMinibatch: {
      const bool minibatch = a.has_dp_bilevel_minibatch();
      const std::string field =
          minibatch ? "algorithm.dp_bilevel_minibatch" : "algorithm.dp_bilevel";
      ASSIGN_OR_RETURN(optim::bilevel::DpBilevelOptions o,
                       TranslateDpBilevel(minibatch ? a.dp_bilevel_minibatch()
                                                    : a.dp_bilevel(),
                                          minibatch, field));
      steps = o.outer_iterations;
      ASSIGN_OR_RETURN(out.algorithm, optim::bilevel::NewDpBilevel(o));
      out.algorithm_name = out.algorithm->name();
      break;
    }
    case AlgorithmSpec::kDpTuneRegularization: {
      ASSIGN_OR_RETURN(optim::bilevel::DpTuneOptions o,
                       TranslateDpTune(a.dp_tune_regularization(), out.model,
                                       "algorithm.dp_tune_regularization"));
      steps = o.outer_iterations;
      ASSIGN_OR_RETURN(out.algorithm, optim::bilevel::NewDpTune(o));
      out.algorithm_name = "dp_tune_regularization";
      break;
    }
    case AlgorithmSpec::kDpGridSearch: {
      ASSIGN_OR_RETURN(optim::bilevel::DpGridSearchOptions o,
                       TranslateDpGridSearch(a.dp_grid_search(), out.model,
                                             "algorithm.dp_grid_search"));
      steps = static_cast<int64_t>(o.EffectiveGrid().size());
      ASSIGN_OR_RETURN(out.algorithm, optim::bilevel::NewDpGridSearch(o));
      out.algorithm_name = "dp_grid_search";
      break;
    }
    case AlgorithmSpec::kPaPerturbProblem:
    case AlgorithmSpec::kPaPerturbSolution:
    case AlgorithmSpec::kPaExponential:
    case AlgorithmSpec::kPaSubgradient:
    case AlgorithmSpec::kPaSolve: {
      ASSIGN_OR_RETURN(out.algorithm,
                       TranslatePiecewiseAffine(a, &out.algorithm_name, &steps));
      break;
    }
    case AlgorithmSpec::kDpDda: {
      ASSIGN_OR_RETURN(
          optim::distributed_dda::DpDdaOptions o,
          TranslateDpDda(a.dp_dda(), out.model, spec.trace_every(),
                         dataset_is_public, env.dda_mpi, "algorithm.dp_dda"));
      steps = o.iterations;
      ASSIGN_OR_RETURN(out.algorithm, optim::distributed_dda::NewDpDda(o));
      out.algorithm_name = "dp_dda";
      break;
    }
    case AlgorithmSpec::kGd: {
      optim::GdOptions o;
      o.model = out.model;
      o.steps = a.gd().steps();
      o.learning_rate = a.gd().learning_rate();
      RETURN_IF_ERROR(CheckSteps(o.steps, "algorithm.gd.steps"));
      RETURN_IF_ERROR(
          CheckPositive(o.learning_rate, "algorithm.gd.learning_rate"));
      RETURN_IF_ERROR(o.Validate());
      steps = o.steps;
      out.algorithm_name = "gd";
      ASSIGN_OR_RETURN(out.algorithm, optim::NewNonPrivateGd(o));
      break;
    }
    default:
      return absl::InvalidArgumentError("unsupported algorithm");
  }
  out.trace_every = spec.trace_every() > 0 ? spec.trace_every()
                                           : std::max<int64_t>(1, steps / 100);
  return out;
}

}  // namespace dpopt::server
