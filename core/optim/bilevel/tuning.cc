#include "core/optim/bilevel/tuning.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "core/common/status_macros.h"
#include "core/optim/poisson_sampler.h"
#include "core/optim/bilevel/primitives.h"

namespace dpopt::optim::bilevel {

absl::Status TuningCommon::Validate() const {
  RETURN_IF_ERROR(model.Validate());
  switch (model.loss) {
    case LossKind::kLogistic:
    case LossKind::kLeastSquares:
    case LossKind::kHinge:
    case LossKind::kHuberizedHinge:
      break;
    case LossKind::kSoftmax:
      return absl::InvalidArgumentError(
          "tuning supports logistic regression, least squares, hinge and "
          "huberized hinge models");
  }
  if (model.l2 != 0 || model.l1 != 0) {
    return absl::InvalidArgumentError(
        "the tuned weight is the L2 regularizer: leave the model's l2 and l1 "
        "at 0");
  }
  if (!(validation_fraction > 0 && validation_fraction < 1)) {
    return absl::InvalidArgumentError("validation_fraction must be in (0, 1)");
  }
  if (!(std::isfinite(clip_norm) && clip_norm > 0 && clip_norm <= 1e6)) {
    return absl::InvalidArgumentError("clip_norm must be in (0, 1e6]");
  }
  if (!(std::isfinite(smoothness) && smoothness >= 0 && smoothness <= 1e12)) {
    return absl::InvalidArgumentError("smoothness must be in [0, 1e12]");
  }
  if (!(std::isfinite(weight_min) && std::isfinite(weight_max) &&
        weight_min > 0 && weight_min <= weight_max && weight_max <= 1e6)) {
    return absl::InvalidArgumentError(
        "weights need 0 < weight_min <= weight_max <= 1e6");
  }
  return absl::OkStatus();
}

absl::StatusOr<SplitSizes> PublicSplit(int64_t rows, double fraction) {
  SplitSizes s;
  s.validation =
      std::max<int64_t>(1, static_cast<int64_t>(std::llround(fraction * rows)));
  s.train = rows - s.validation;
  if (s.train < 1) {
    return absl::InvalidArgumentError(
        "the train/validation split needs at least 2 rows");
  }
  return s;
}

absl::StatusOr<std::vector<uint8_t>> DrawSplit(int64_t rows, double fraction,
                                               noise::RandomSource& rng) {
  PoissonSampler sampler(fraction, rng);
  std::vector<int64_t> validation;
  RETURN_IF_ERROR(sampler.Sample(rows, &validation));
  std::vector<uint8_t> is_validation(rows, 0);
  for (int64_t i : validation) is_validation[i] = 1;
  return is_validation;
}

double LossSmoothness(const TuningCommon& common, double row_norm_bound) {
  if (common.smoothness > 0) return common.smoothness;
  const double a2 = row_norm_bound > 0 ? row_norm_bound * row_norm_bound : 1;
  switch (common.model.loss) {
    case LossKind::kLogistic:
      return a2 / 4;
    case LossKind::kLeastSquares:
      return a2;
    case LossKind::kHuberizedHinge:
      return a2 / (2 * common.model.huber_width);
    case LossKind::kHinge:
    case LossKind::kSoftmax:
      return a2;
  }
  return a2;
}

double LossAtZero(const ModelConfig& model) {
  switch (model.loss) {
    case LossKind::kLogistic:
      return std::log(2.0);
    case LossKind::kLeastSquares:
      return model.label_bound > 0 ? model.label_bound * model.label_bound / 2
                                   : 1.0;
    case LossKind::kHinge:
    case LossKind::kHuberizedHinge:
    case LossKind::kSoftmax:
      return 1.0;
  }
  return 1.0;
}

LossGradientSource::LossGradientSource(
    const Objective& objective, const std::vector<uint8_t>& is_validation,
    double train_weight, double validation_weight, double clip)
    : objective_(objective),
      is_validation_(is_validation),
      train_weight_(train_weight),
      validation_weight_(validation_weight),
      clip_(clip),
      penalty_(Eigen::VectorXd::Zero(objective.parameter_size())),
      coef_(objective.outputs()) {}

void LossGradientSource::SetPenalty(const Eigen::VectorXd& penalty,
                                    double public_scale) {
  penalty_ = penalty;
  public_scale_ = public_scale;
}

double LossGradientSource::bound() const {
  return clip_ * std::max(train_weight_, validation_weight_);
}

void LossGradientSource::Gradient(const Dataset& data, int64_t i,
                                  Eigen::VectorXd& g) const {
  g.setZero(objective_.parameter_size());
  objective_.ExampleCoefficients(data, i, theta_, coef_);
  objective_.AddScaledExampleGradient(data, i, coef_, 1.0, g);
}

void LossGradientSource::AddClipped(const Dataset& data, int64_t i,
                                    Eigen::Ref<Eigen::VectorXd> out,
                                    Eigen::VectorXd& scratch) const {
  const double w = Weight(i);
  if (w == 0) return;
  Gradient(data, i, scratch);
  SafeClip(clip_, scratch);
  out += w * scratch;
}

void LossGradientSource::AddUnclipped(const Dataset& data, int64_t i,
                                      Eigen::Ref<Eigen::VectorXd> out,
                                      Eigen::VectorXd& scratch) const {
  const double w = Weight(i);
  if (w == 0) return;
  Gradient(data, i, scratch);
  out += w * scratch;
}

void LossGradientSource::AddPublic(Eigen::Ref<Eigen::VectorXd> out) const {
  out += public_scale_ * penalty_.cwiseProduct(theta_);
}

ValidationLossSource::ValidationLossSource(
    const Objective& objective, const std::vector<uint8_t>& is_validation,
    const std::vector<Eigen::VectorXd>& models, double loss_clip,
    int64_t validation_rows)
    : objective_(objective),
      is_validation_(is_validation),
      models_(models),
      loss_clip_(loss_clip),
      weight_(1.0 / static_cast<double>(validation_rows)) {}

double ValidationLossSource::bound() const {
  // L2 over the K scores (the L-infinity bound per score is
  // loss_clip * weight).
  return loss_clip_ * weight_ * std::sqrt(static_cast<double>(models_.size()));
}

void ValidationLossSource::AddClipped(const Dataset& data, int64_t i,
                                      Eigen::Ref<Eigen::VectorXd> out,
                                      Eigen::VectorXd&) const {
  if (!is_validation_[i]) return;
  for (size_t j = 0; j < models_.size(); ++j) {
    const double loss = objective_.ExampleLoss(data, i, models_[j]);
    // Non-negative losses; a non-finite value (extreme row) counts as the
    // clip, a bounded function of the record.
    const double clipped =
        std::isfinite(loss) ? std::clamp(loss, 0.0, loss_clip_) : loss_clip_;
    out[j] += weight_ * clipped;
  }
}

void ValidationLossSource::AddUnclipped(const Dataset& data, int64_t i,
                                        Eigen::Ref<Eigen::VectorXd> out,
                                        Eigen::VectorXd&) const {
  if (!is_validation_[i]) return;
  for (size_t j = 0; j < models_.size(); ++j) {
    out[j] += weight_ * objective_.ExampleLoss(data, i, models_[j]);
  }
}

absl::StatusOr<std::vector<int>> GroupIndex(const std::vector<int>& groups,
                                            int64_t parameter_size,
                                            int* num_groups) {
  if (groups.empty()) {
    *num_groups = 1;
    return std::vector<int>(parameter_size, 0);
  }
  if (static_cast<int64_t>(groups.size()) != parameter_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "feature_groups has ", groups.size(), " entries; the model has ",
        parameter_size, " parameters"));
  }
  int g = 0;
  for (int id : groups) {
    if (id < 0 || id >= 1000) {
      return absl::InvalidArgumentError(
          "feature group ids must be in [0, 1000)");
    }
    g = std::max(g, id + 1);
  }
  std::vector<bool> used(g, false);
  for (int id : groups) used[id] = true;
  for (int k = 0; k < g; ++k) {
    if (!used[k]) {
      return absl::InvalidArgumentError(
          absl::StrCat("feature group ids must be 0..G-1, all used; group ", k,
                       " is empty"));
    }
  }
  *num_groups = g;
  return groups;
}

}  // namespace dpopt::optim::bilevel
