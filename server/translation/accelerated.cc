#include "server/translation/accelerated.h"

#include "core/common/status_macros.h"
#include "core/optim/accelerated/accelerated.h"

namespace dpopt::server {
namespace {

namespace acc = optim::accelerated;
using v1::AlgorithmSpec;

// Accel* messages -> options. Fields left at 0 keep the core default
// (acc::AcceleratedOptions states each default once).
absl::StatusOr<acc::AcceleratedOptions> TranslateOptions(
    const TranslationInput& in) {
  const AlgorithmSpec& a = in.spec.algorithm();
  acc::AcceleratedOptions o;
  o.model = in.model;
  const v1::AccelCommon* common = nullptr;
  const v1::AccelNoiseDividing* dividing = nullptr;
  const v1::AccelMasgSchedule* schedule = nullptr;
  switch (a.algorithm_case()) {
    case AlgorithmSpec::kAccelDpGd:
      o.method = acc::Method::kGd;
      common = &a.accel_dp_gd().common();
      o.learning_rate = a.accel_dp_gd().learning_rate();
      break;
    case AlgorithmSpec::kAccelDpHb:
      o.method = acc::Method::kHeavyBall;
      common = &a.accel_dp_hb().common();
      o.learning_rate = a.accel_dp_hb().learning_rate();
      if (a.accel_dp_hb().has_momentum()) {
        o.momentum = a.accel_dp_hb().momentum();
      }
      break;
    case AlgorithmSpec::kAccelDpNag:
      o.method = acc::Method::kNag;
      common = &a.accel_dp_nag().common();
      o.learning_rate = a.accel_dp_nag().learning_rate();
      if (a.accel_dp_nag().has_momentum()) {
        o.momentum = a.accel_dp_nag().momentum();
      }
      break;
    case AlgorithmSpec::kAccelDpNagOpt:
      o.method = acc::Method::kNagOpt;
      common = &a.accel_dp_nag_opt().common();
      o.learning_rate = a.accel_dp_nag_opt().learning_rate();
      dividing = &a.accel_dp_nag_opt().dividing();
      break;
    case AlgorithmSpec::kAccelDpMasg:
      o.method = acc::Method::kMasg;
      common = &a.accel_dp_masg().common();
      schedule = &a.accel_dp_masg().schedule();
      break;
    case AlgorithmSpec::kAccelDpMasgOpt:
      o.method = acc::Method::kMasgOpt;
      common = &a.accel_dp_masg_opt().common();
      schedule = &a.accel_dp_masg_opt().schedule();
      dividing = &a.accel_dp_masg_opt().dividing();
      break;
    default:
      return absl::InvalidArgumentError("not an accelerated job type");
  }
  const std::string field = in.field + ".common.";
  o.steps = common->steps();
  RETURN_IF_ERROR(translation::CheckSteps(o.steps, field + "steps"));
  o.batch_size = common->batch_size();
  o.clip_norm = common->clip_norm();
  RETURN_IF_ERROR(translation::CheckPositive(o.clip_norm, field + "clip_norm"));
  o.smoothness = common->smoothness();
  RETURN_IF_ERROR(translation::CheckPositive(
      o.smoothness, field + "smoothness (the public constant L; required)"));
  o.strong_convexity = common->strong_convexity();
  if (common->step_scale() != 0) o.step_scale = common->step_scale();
  o.noise = common->noise() == v1::ACCEL_NOISE_GAUSSIAN
                ? acc::NoiseFamily::kGaussian
                : acc::NoiseFamily::kLaplace;
  o.initial_point.assign(common->initial_point().begin(),
                         common->initial_point().end());
  if (dividing != nullptr) {
    if (dividing->initial_error() != 0) {
      o.initial_error = dividing->initial_error();
    }
    o.select_steps = !dividing->keep_steps();
    o.convention = dividing->t_select() == v1::ACCEL_T_SELECT_PAPER
                       ? acc::TSelectConvention::kPaper
                       : acc::TSelectConvention::kReference;
  }
  if (schedule != nullptr) {
    if (schedule->p() != 0) o.masg_p = schedule->p();
    o.first_stage = schedule->first_stage() == v1::ACCEL_FIRST_STAGE_FLOOR
                        ? acc::FirstStageRule::kFloor
                        : acc::FirstStageRule::kCeil;
  }
  RETURN_IF_ERROR(translation::InvalidWithField(in.field, o.Validate()));
  return o;
}

JobTypeTraits AcceleratedTraits(const AlgorithmSpec&) {
  JobTypeTraits t;
  // Every method of the family reads rows only through the gradient oracle.
  t.runs_on_worker_pool = true;
  return t;
}

absl::StatusOr<std::unique_ptr<optim::Algorithm>> TranslateAccelerated(
    const TranslationInput& in) {
  ASSIGN_OR_RETURN(acc::AcceleratedOptions o, TranslateOptions(in));
  return acc::NewAcceleratedAlgorithm(o);
}

}  // namespace

const JobFamily& AcceleratedFamily() {
  static const JobFamily* family = new JobFamily{
      "accelerated",
      {AlgorithmSpec::kAccelDpGd, AlgorithmSpec::kAccelDpHb,
       AlgorithmSpec::kAccelDpNag, AlgorithmSpec::kAccelDpNagOpt,
       AlgorithmSpec::kAccelDpMasg, AlgorithmSpec::kAccelDpMasgOpt},
      &AcceleratedTraits,
      &TranslateAccelerated};
  return *family;
}

}  // namespace dpopt::server
