#include "server/spec_translation.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/common/status_macros.h"
#include "server/translation/registry.h"

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

}  // namespace

int64_t DefaultTraceEvery(int64_t steps) {
  return std::max<int64_t>(1, steps / 100);
}

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
  const JobFamily* family = FindJobFamily(a.algorithm_case());
  if (family == nullptr) {
    return absl::InvalidArgumentError("unsupported algorithm");
  }
  TranslatedJob out;
  out.algorithm_name = JobTypeName(a.algorithm_case());
  out.traits = family->traits(a);
  if (out.traits.trains_model && !spec.has_model()) {
    return absl::InvalidArgumentError("model is required");
  }
  if (!out.traits.trains_model && spec.has_model()) {
    return absl::InvalidArgumentError(
        "this algorithm takes no model: its problem defines it");
  }
  if (spec.trace_every() < 0) {
    return absl::InvalidArgumentError("trace_every must be >= 0");
  }
  if (out.traits.trains_model) {
    ASSIGN_OR_RETURN(out.model, TranslateModel(spec.model(), dataset_is_public,
                                               dataset_num_classes));
  }

  if (out.traits.non_private) {
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

  TranslationInput in{spec, absl::StrCat("algorithm.", out.algorithm_name),
                      out.model, dataset_is_public, env};
  ASSIGN_OR_RETURN(out.algorithm, family->translate(in));
  out.trace_every = spec.trace_every();
  return out;
}

}  // namespace dpopt::server
