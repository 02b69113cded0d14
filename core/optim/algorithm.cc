#include "core/optim/algorithm.h"

#include <cmath>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/common/status_macros.h"

namespace dpopt::optim {

absl::Status CheckPublicInfo(const PublicDatasetInfo& info,
                             const ModelConfig& model, bool private_run) {
  RETURN_IF_ERROR(model.Validate());
  if (info.rows < 1) {
    return absl::InvalidArgumentError("dataset has no rows");
  }
  if (info.dimension < 1 || info.dimension > 10'000'000) {
    return absl::InvalidArgumentError("dimension must be in [1, 10000000]");
  }
  if (info.label_kind != RequiredLabelKind(model.loss)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "loss ", LossName(model.loss), " does not fit the dataset's labels"));
  }
  if (model.loss == LossKind::kSoftmax &&
      info.num_classes != model.num_classes) {
    return absl::InvalidArgumentError(
        absl::StrFormat("model has %d classes, dataset has %d",
                        model.num_classes, info.num_classes));
  }
  if (private_run && model.loss == LossKind::kLeastSquares &&
      !(model.label_bound > 0)) {
    return absl::InvalidArgumentError(
        "private least squares needs label_bound > 0");
  }
  return absl::OkStatus();
}

absl::Status CheckPrivateTarget(const PrivacyTarget& target) {
  if (target.non_private) {
    return absl::InvalidArgumentError(
        "this algorithm is differentially private; non_private is only for "
        "non-private baselines on public datasets");
  }
  if (!(std::isfinite(target.epsilon) && target.epsilon > 0)) {
    return absl::InvalidArgumentError("epsilon must be finite and > 0");
  }
  if (!(target.delta > 0 && target.delta < 1)) {
    return absl::InvalidArgumentError("delta must be in (0, 1)");
  }
  return absl::OkStatus();
}

absl::Status CheckRelation(privacy::Relation relation,
                           absl::Span<const privacy::Relation> supported,
                           absl::string_view job_type) {
  for (privacy::Relation r : supported) {
    if (r == relation) return absl::OkStatus();
  }
  std::string names;
  for (privacy::Relation r : supported) {
    absl::StrAppend(&names, names.empty() ? "" : " or ",
                    privacy::RelationName(r));
  }
  return absl::InvalidArgumentError(absl::StrCat(
      job_type, " is analysed under the ", names,
      " relation; the dataset is declared ", privacy::RelationName(relation)));
}

double PassWork(double passes, int64_t rows, int64_t coordinates) {
  return passes * (static_cast<double>(rows) + 1) *
         static_cast<double>(coordinates);
}

}  // namespace dpopt::optim
