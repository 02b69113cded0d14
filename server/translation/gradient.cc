#include "server/translation/gradient.h"

#include <cmath>

#include "core/common/status_macros.h"
#include "core/optim/dp_sgd.h"
#include "core/optim/non_private_gd.h"

namespace dpopt::server {
namespace {

using translation::CheckPositive;
using translation::CheckSteps;
using v1::AlgorithmSpec;

JobTypeTraits GradientTraits(const AlgorithmSpec& a) {
  JobTypeTraits t;
  t.non_private = a.algorithm_case() == AlgorithmSpec::kGd;
  // DP-GD, DP-SGD and GD read rows only through the gradient oracle.
  t.runs_on_worker_pool = true;
  return t;
}

absl::StatusOr<std::unique_ptr<optim::Algorithm>> TranslateGradient(
    const TranslationInput& in) {
  const AlgorithmSpec& a = in.spec.algorithm();
  const std::string& f = in.field;
  switch (a.algorithm_case()) {
    case AlgorithmSpec::kDpGd: {
      optim::DpSgdOptions o;
      o.model = in.model;
      o.sampling_rate = 1.0;  // full batch: what makes it DP-GD
      o.steps = a.dp_gd().steps();
      o.clip_norm = a.dp_gd().clip_norm();
      o.learning_rate = a.dp_gd().learning_rate();
      RETURN_IF_ERROR(CheckSteps(o.steps, f + ".steps"));
      RETURN_IF_ERROR(CheckPositive(o.clip_norm, f + ".clip_norm"));
      RETURN_IF_ERROR(CheckPositive(o.learning_rate, f + ".learning_rate"));
      RETURN_IF_ERROR(o.Validate());
      return optim::NewDpSgd(o);
    }
    case AlgorithmSpec::kDpSgd: {
      const v1::DpSgd& s = a.dp_sgd();
      optim::DpSgdOptions o;
      o.model = in.model;
      o.sampling_rate = s.sampling_rate();
      o.steps = s.steps();
      o.clip_norm = s.clip_norm();
      o.learning_rate = s.learning_rate();
      o.momentum = s.momentum();
      if (!std::isfinite(o.sampling_rate) || o.sampling_rate <= 0 ||
          o.sampling_rate > 1) {
        return absl::InvalidArgumentError(f +
                                          ".sampling_rate must be in (0, 1]");
      }
      RETURN_IF_ERROR(CheckSteps(o.steps, f + ".steps"));
      RETURN_IF_ERROR(CheckPositive(o.clip_norm, f + ".clip_norm"));
      RETURN_IF_ERROR(CheckPositive(o.learning_rate, f + ".learning_rate"));
      if (!std::isfinite(o.momentum) || o.momentum < 0 || o.momentum >= 1) {
        return absl::InvalidArgumentError(f + ".momentum must be in [0, 1)");
      }
      RETURN_IF_ERROR(o.Validate());
      return optim::NewDpSgd(o);
    }
    case AlgorithmSpec::kGd: {
      optim::GdOptions o;
      o.model = in.model;
      o.steps = a.gd().steps();
      o.learning_rate = a.gd().learning_rate();
      RETURN_IF_ERROR(CheckSteps(o.steps, f + ".steps"));
      RETURN_IF_ERROR(CheckPositive(o.learning_rate, f + ".learning_rate"));
      RETURN_IF_ERROR(o.Validate());
      return optim::NewNonPrivateGd(o);
    }
    default:
      return absl::InvalidArgumentError("not a gradient job type");
  }
}

}  // namespace

const JobFamily& GradientFamily() {
  static const JobFamily* family = new JobFamily{
      "gradient",
      {AlgorithmSpec::kDpGd, AlgorithmSpec::kDpSgd, AlgorithmSpec::kGd},
      &GradientTraits,
      &TranslateGradient};
  return *family;
}

}  // namespace dpopt::server
