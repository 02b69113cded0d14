#include "server/translation/bilevel.h"

#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/common/status_macros.h"

namespace dpopt::server {
namespace {

namespace s0 = optim::bilevel;

using translation::CheckFinite;
// Core Validate() messages, as INVALID_ARGUMENT naming the field.
absl::Status Field(const std::string& field, const absl::Status& s) {
  return translation::InvalidWithField(field, s);
}

absl::StatusOr<s0::ConstraintSet> TranslateOuterSet(
    const v1::OuterConstraint& m, const std::string& field) {
  s0::ConstraintSet set;
  RETURN_IF_ERROR(
      CheckFinite(field, {m.lower(), m.upper(), m.radius(), m.total()}));
  switch (m.kind()) {
    case v1::OUTER_SET_UNSPECIFIED:
    case v1::OUTER_SET_WHOLE:
      set.kind = s0::SetKind::kWhole;
      break;
    case v1::OUTER_SET_BOX:
      set.kind = s0::SetKind::kBox;
      break;
    case v1::OUTER_SET_BALL:
      set.kind = s0::SetKind::kBall;
      break;
    case v1::OUTER_SET_SIMPLEX:
      set.kind = s0::SetKind::kSimplex;
      break;
    case v1::OUTER_SET_HALF_LINE:
      set.kind = s0::SetKind::kHalfLine;
      break;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat(field, ".kind: unknown set"));
  }
  set.lower = m.lower();
  set.upper = m.upper();
  set.radius = m.radius();
  if (m.total() != 0) set.total = m.total();
  if (m.center_size() > 0) {
    set.center.resize(m.center_size());
    for (int j = 0; j < m.center_size(); ++j) set.center[j] = m.center(j);
  }
  return set;
}

absl::StatusOr<s0::InnerSolverOptions> TranslateInner(const v1::InnerSolver& m,
                                                      const std::string& field,
                                                      bool* warm_start) {
  s0::InnerSolverOptions o;
  switch (m.mode()) {
    case v1::INNER_SOLVER_UNSPECIFIED:
    case v1::INNER_SOLVER_PRACTICAL:
      o.mode = s0::InnerMode::kPractical;
      break;
    case v1::INNER_SOLVER_PAPER:
      o.mode = s0::InnerMode::kPaper;
      break;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat(field, ".mode: unknown inner solver"));
  }
  o.rounds = m.rounds();
  o.steps = m.steps();
  RETURN_IF_ERROR(CheckFinite(field, {m.failure_probability()}));
  if (m.failure_probability() != 0) {
    o.failure_probability = m.failure_probability();
  }
  if (warm_start != nullptr && m.has_warm_start()) {
    *warm_start = m.warm_start();
  }
  RETURN_IF_ERROR(Field(field, o.Validate()));
  return o;
}

absl::StatusOr<s0::BudgetSplit> TranslateSplit(const v1::BudgetShares& m,
                                               s0::BudgetSplit dflt,
                                               const std::string& field) {
  RETURN_IF_ERROR(CheckFinite(field, {m.outer(), m.inner1(), m.inner2()}));
  if (m.outer() == 0 && m.inner1() == 0 && m.inner2() == 0) return dflt;
  s0::BudgetSplit split{m.outer(), m.inner1(), m.inner2()};
  RETURN_IF_ERROR(Field(field, split.Validate()));
  return split;
}

std::vector<double> ToVector(
    const google::protobuf::RepeatedField<double>& values) {
  return std::vector<double>(values.begin(), values.end());
}

}  // namespace

absl::StatusOr<s0::DpBilevelOptions> TranslateDpBilevel(
    const v1::DpBilevel& m, bool minibatch, const std::string& field) {
  s0::DpBilevelOptions o;
  switch (m.problem()) {
    case v1::BILEVEL_PROBLEM_UNSPECIFIED:
    case v1::BILEVEL_PROBLEM_QUADRATIC:
      o.problem.kind = s0::ProblemKind::kQuadratic;
      break;
    case v1::BILEVEL_PROBLEM_QUADRATIC_NONCONVEX:
      o.problem.kind = s0::ProblemKind::kQuadraticNonconvex;
      break;
    case v1::BILEVEL_PROBLEM_LEAK_EXAMPLE:
      o.problem.kind = s0::ProblemKind::kLeakExample;
      break;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat(field, ".problem: not in the catalogue"));
  }
  if (m.outer_dimension() < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ".outer_dimension must be >= 0"));
  }
  o.problem.outer_dimension = m.outer_dimension();
  o.problem.b_matrix = ToVector(m.b_matrix());
  if (m.has_rho_x()) o.problem.rho_x = m.rho_x();
  const v1::BilevelConstants& k = m.constants();
  RETURN_IF_ERROR(CheckFinite(
      field + ".constants",
      {k.lipschitz_f(), k.smoothness_f(), k.lipschitz_g(), k.smoothness_g(),
       k.hessian_lipschitz_g(), k.strong_convexity_g(), o.problem.rho_x}));
  o.problem.constants.lipschitz_f = k.lipschitz_f();
  o.problem.constants.smoothness_f = k.smoothness_f();
  o.problem.constants.lipschitz_g = k.lipschitz_g();
  o.problem.constants.smoothness_g = k.smoothness_g();
  o.problem.constants.hessian_lipschitz_g = k.hessian_lipschitz_g();
  o.problem.constants.strong_convexity_g = k.strong_convexity_g();
  ASSIGN_OR_RETURN(o.outer_set,
                   TranslateOuterSet(m.outer_set(), field + ".outer_set"));
  o.initial_outer = ToVector(m.initial_outer());
  o.initial_inner = ToVector(m.initial_inner());
  RETURN_IF_ERROR(CheckFinite(
      field,
      {m.inner_radius(), m.penalty(), m.outer_step(), m.clip_gy(), m.clip_fy(),
       m.clip_out(), m.inner_sampling_rate(), m.outer_sampling_rate()}));
  o.inner_radius = m.inner_radius();
  o.penalty = m.penalty();
  o.outer_step = m.outer_step();
  if (m.outer_iterations() != 0) o.outer_iterations = m.outer_iterations();
  o.clip_gy = m.clip_gy();
  o.clip_fy = m.clip_fy();
  o.clip_out = m.clip_out();
  ASSIGN_OR_RETURN(
      o.split, TranslateSplit(m.split(), s0::BudgetSplit{}, field + ".split"));
  ASSIGN_OR_RETURN(o.inner,
                   TranslateInner(m.inner(), field + ".inner", &o.warm_start));
  o.calibration = m.calibration() == v1::BILEVEL_CALIBRATION_ZCDP_CLOSED_FORM
                      ? s0::CalibrationMode::kZcdpClosedForm
                      : s0::CalibrationMode::kAccountant;
  o.naive = m.naive();
  if (minibatch) {
    if (o.naive) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, ".naive: the naive mode is full batch only"));
    }
    o.inner_sampling_rate = o.outer_sampling_rate =
        s0::DpBilevelOptions::kDefaultMinibatchSamplingRate;
    if (m.inner_sampling_rate() != 0) {
      o.inner_sampling_rate = m.inner_sampling_rate();
    }
    if (m.outer_sampling_rate() != 0) {
      o.outer_sampling_rate = m.outer_sampling_rate();
    }
  } else if (m.inner_sampling_rate() != 0 || m.outer_sampling_rate() != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        field, ": sampling rates are for dp_bilevel_minibatch only"));
  }
  RETURN_IF_ERROR(Field(field, o.Validate()));
  return o;
}

namespace {

absl::StatusOr<s0::TuningCommon> TranslateCommon(
    const optim::ModelConfig& model, double validation_fraction,
    double clip_norm, double smoothness, double weight_min, double weight_max,
    const std::string& field) {
  RETURN_IF_ERROR(CheckFinite(field, {validation_fraction, clip_norm,
                                      smoothness, weight_min, weight_max}));
  s0::TuningCommon c;
  c.model = model;
  if (validation_fraction != 0) c.validation_fraction = validation_fraction;
  if (clip_norm != 0) c.clip_norm = clip_norm;
  c.smoothness = smoothness;
  if (weight_min != 0) c.weight_min = weight_min;
  if (weight_max != 0) c.weight_max = weight_max;
  RETURN_IF_ERROR(Field(field, c.Validate()));
  return c;
}

}  // namespace

absl::StatusOr<s0::DpTuneOptions> TranslateDpTune(
    const v1::DpTuneRegularization& m, const optim::ModelConfig& model,
    const std::string& field) {
  s0::DpTuneOptions o;
  ASSIGN_OR_RETURN(
      o.common,
      TranslateCommon(model, m.validation_fraction(), m.clip_norm(),
                      m.smoothness(), m.weight_min(), m.weight_max(), field));
  o.feature_groups.assign(m.feature_groups().begin(), m.feature_groups().end());
  o.initial_weights = ToVector(m.initial_weights());
  RETURN_IF_ERROR(
      CheckFinite(field, {m.penalty(), m.outer_step(), m.outer_clip()}));
  if (m.penalty() != 0) o.penalty = m.penalty();
  if (m.outer_step() != 0) o.outer_step = m.outer_step();
  if (m.outer_iterations() != 0) o.outer_iterations = m.outer_iterations();
  o.paper_outer_noise = m.paper_outer_noise();
  o.outer_clip = m.outer_clip();
  const v1::BudgetShares& sh = m.split();
  RETURN_IF_ERROR(CheckFinite(field, {sh.outer(), sh.inner1(), sh.inner2()}));
  if (sh.outer() != 0 || sh.inner1() != 0 || sh.inner2() != 0) {
    o.split = s0::BudgetSplit{sh.outer(), sh.inner1(), sh.inner2()};
  }
  ASSIGN_OR_RETURN(o.inner,
                   TranslateInner(m.inner(), field + ".inner", &o.warm_start));
  o.calibration = m.calibration() == v1::BILEVEL_CALIBRATION_ZCDP_CLOSED_FORM
                      ? s0::CalibrationMode::kZcdpClosedForm
                      : s0::CalibrationMode::kAccountant;
  RETURN_IF_ERROR(Field(field, o.Validate()));
  return o;
}

absl::StatusOr<s0::DpGridSearchOptions> TranslateDpGridSearch(
    const v1::DpGridSearch& m, const optim::ModelConfig& model,
    const std::string& field) {
  s0::DpGridSearchOptions o;
  ASSIGN_OR_RETURN(
      o.common,
      TranslateCommon(model, m.validation_fraction(), m.clip_norm(),
                      m.smoothness(), m.weight_min(), m.weight_max(), field));
  o.grid = ToVector(m.grid());
  if (m.grid_points() != 0) o.grid_size = m.grid_points();
  ASSIGN_OR_RETURN(o.train,
                   TranslateInner(m.train(), field + ".train", &o.warm_start));
  RETURN_IF_ERROR(CheckFinite(field, {m.loss_clip(), m.selection_share()}));
  o.loss_clip = m.loss_clip();
  if (m.selection_share() != 0) o.selection_share = m.selection_share();
  RETURN_IF_ERROR(Field(field, o.Validate()));
  return o;
}

namespace {

JobTypeTraits BilevelTraits(const v1::AlgorithmSpec& a) {
  JobTypeTraits t;
  if (a.has_dp_bilevel() || a.has_dp_bilevel_minibatch()) {
    t.trains_model = false;
    t.output_name = "bilevel_outer_variable";
  }
  t.non_private = a.has_dp_bilevel() && a.dp_bilevel().naive();
  return t;
}

absl::StatusOr<std::unique_ptr<optim::Algorithm>> TranslateBilevel(
    const TranslationInput& in) {
  const v1::AlgorithmSpec& a = in.spec.algorithm();
  switch (a.algorithm_case()) {
    case v1::AlgorithmSpec::kDpBilevel:
    case v1::AlgorithmSpec::kDpBilevelMinibatch: {
      const bool minibatch = a.has_dp_bilevel_minibatch();
      ASSIGN_OR_RETURN(s0::DpBilevelOptions o,
                       TranslateDpBilevel(minibatch ? a.dp_bilevel_minibatch()
                                                    : a.dp_bilevel(),
                                          minibatch, in.field));
      return s0::NewDpBilevel(o);
    }
    case v1::AlgorithmSpec::kDpTuneRegularization: {
      ASSIGN_OR_RETURN(
          s0::DpTuneOptions o,
          TranslateDpTune(a.dp_tune_regularization(), in.model, in.field));
      return s0::NewDpTune(o);
    }
    case v1::AlgorithmSpec::kDpGridSearch: {
      ASSIGN_OR_RETURN(
          s0::DpGridSearchOptions o,
          TranslateDpGridSearch(a.dp_grid_search(), in.model, in.field));
      return s0::NewDpGridSearch(o);
    }
    default:
      return absl::InvalidArgumentError("not a bilevel job type");
  }
}

}  // namespace

const JobFamily& BilevelFamily() {
  static const JobFamily* family = new JobFamily{
      "bilevel",
      {v1::AlgorithmSpec::kDpBilevel, v1::AlgorithmSpec::kDpBilevelMinibatch,
       v1::AlgorithmSpec::kDpTuneRegularization,
       v1::AlgorithmSpec::kDpGridSearch},
      &BilevelTraits,
      &TranslateBilevel};
  return *family;
}

}  // namespace dpopt::server
