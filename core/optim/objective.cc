#include "core/optim/objective.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "absl/base/attributes.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/common/status_macros.h"
#include "core/optim/clip_select.h"
#include "core/optim/loss_functions.h"
#include "core/optim/objective_kernels.h"
#include "core/optim/parallel.h"

namespace dpopt::optim {
namespace {

constexpr int64_t kMaxDimension = 10'000'000;

using internal::kHighNorm;
using internal::kLowNorm;
using internal::LogisticDerivative;  // branch-free (clip_select.h)
using internal::LogisticLoss;
using internal::ScalarCoefficient;

}  // namespace

std::string LossName(LossKind loss) {
  switch (loss) {
    case LossKind::kLogistic:
      return "logistic";
    case LossKind::kSoftmax:
      return "softmax";
    case LossKind::kLeastSquares:
      return "least_squares";
    case LossKind::kHinge:
      return "hinge";
    case LossKind::kHuberizedHinge:
      return "huberized_hinge";
  }
  return "unknown";
}

absl::StatusOr<LossKind> ParseLoss(absl::string_view name) {
  for (LossKind k :
       {LossKind::kLogistic, LossKind::kSoftmax, LossKind::kLeastSquares,
        LossKind::kHinge, LossKind::kHuberizedHinge}) {
    if (name == LossName(k)) return k;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown loss \"", name, "\""));
}

LabelKind RequiredLabelKind(LossKind loss) {
  switch (loss) {
    case LossKind::kSoftmax:
      return LabelKind::kMulticlass;
    case LossKind::kLeastSquares:
      return LabelKind::kReal;
    default:
      return LabelKind::kBinary;
  }
}

absl::Status ModelConfig::Validate() const {
  if (!std::isfinite(l2) || l2 < 0) {
    return absl::InvalidArgumentError("l2 must be finite and >= 0");
  }
  if (!std::isfinite(l1) || l1 < 0) {
    return absl::InvalidArgumentError("l1 must be finite and >= 0");
  }
  if (!std::isfinite(label_bound) || label_bound < 0) {
    return absl::InvalidArgumentError("label_bound must be finite and >= 0");
  }
  switch (loss) {
    case LossKind::kSoftmax:
      if (num_classes < 2 || num_classes > 1000) {
        return absl::InvalidArgumentError(
            "softmax needs num_classes in [2, 1000]");
      }
      break;
    case LossKind::kLeastSquares:
      break;
    case LossKind::kHuberizedHinge:
      if (!(huber_width > 0 && huber_width <= 1)) {
        return absl::InvalidArgumentError("huber_width must be in (0, 1]");
      }
      [[fallthrough]];
    case LossKind::kLogistic:
    case LossKind::kHinge:
      if (num_classes != 2) {
        return absl::InvalidArgumentError(absl::StrCat(
            LossName(loss), " is a binary loss: num_classes must be 2"));
      }
      break;
    default:
      return absl::InvalidArgumentError("unknown loss");
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Objective>> Objective::Create(
    const ModelConfig& config, int64_t dimension) {
  RETURN_IF_ERROR(config.Validate());
  if (dimension < 1 || dimension > kMaxDimension) {
    return absl::InvalidArgumentError(
        absl::StrCat("dimension must be in [1, ", kMaxDimension, "]"));
  }
  return std::unique_ptr<Objective>(new Objective(config, dimension));
}

Objective::Objective(const ModelConfig& config, int64_t dimension)
    : config_(config),
      dimension_(dimension),
      outputs_(config.loss == LossKind::kSoftmax ? config.num_classes : 1) {}

absl::Status Objective::CheckDataset(const Dataset& data) const {
  if (data.dimension() != dimension_) {
    return absl::InvalidArgumentError(
        absl::StrFormat("dataset dimension %d does not match the model's %d",
                        data.dimension(), dimension_));
  }
  const LabelKind want = RequiredLabelKind(config_.loss);
  if (data.label_kind() != want) {
    return absl::InvalidArgumentError(absl::StrCat(
        "loss ", LossName(config_.loss), " does not fit the dataset's labels"));
  }
  if (want == LabelKind::kMulticlass &&
      data.num_classes() != config_.num_classes) {
    return absl::InvalidArgumentError(
        absl::StrFormat("model has %d classes, dataset has %d",
                        config_.num_classes, data.num_classes()));
  }
  RETURN_IF_ERROR(data.Validate());
  // Dataset::Validate checks label ranges for its kind; re-check what the
  // losses rely on, without echoing values.
  const Eigen::VectorXd& y = data.labels();
  for (int64_t i = 0; i < y.size(); ++i) {
    const double v = y[i];
    bool ok = std::isfinite(v);
    if (want == LabelKind::kBinary) ok = ok && (v == 1.0 || v == -1.0);
    if (want == LabelKind::kMulticlass) {
      ok = ok && v >= 0 && v < config_.num_classes && v == std::floor(v);
    }
    if (!ok) {
      return absl::InvalidArgumentError(absl::StrCat(
          "a label is out of range for loss ", LossName(config_.loss)));
    }
  }
  return absl::OkStatus();
}

double Objective::EffectiveLabel(const Dataset& data, int64_t i) const {
  const double y = data.label(i);
  if (config_.loss == LossKind::kLeastSquares && config_.label_bound > 0) {
    return std::clamp(y, -config_.label_bound, config_.label_bound);
  }
  return y;
}

double Objective::ExampleCoefficients(
    const Dataset& data, int64_t i, const Eigen::Ref<const Eigen::VectorXd>& w,
    Eigen::Ref<Eigen::VectorXd> c) const {
  const double y = EffectiveLabel(data, i);
  const double h = config_.huber_width;
  switch (config_.loss) {
    case LossKind::kLogistic:
      return ScalarCoefficient<LossKind::kLogistic, true>(h, data.RowDot(i, w),
                                                          y, &c[0]);
    case LossKind::kHinge:
      return ScalarCoefficient<LossKind::kHinge, true>(h, data.RowDot(i, w), y,
                                                       &c[0]);
    case LossKind::kHuberizedHinge:
      return ScalarCoefficient<LossKind::kHuberizedHinge, true>(
          h, data.RowDot(i, w), y, &c[0]);
    case LossKind::kLeastSquares:
      return ScalarCoefficient<LossKind::kLeastSquares, true>(
          h, data.RowDot(i, w), y, &c[0]);
    case LossKind::kSoftmax: {
      // loss = logsumexp(s) - s_y; c = softmax(s) - e_y.
      const int k = outputs_;
      for (int j = 0; j < k; ++j) {
        c[j] = data.RowDot(i, w.segment(j * dimension_, dimension_));
      }
      const int label = static_cast<int>(y);
      const double score_y = c[label];
      const double mx = c.maxCoeff();
      if (!std::isfinite(mx)) {
        // Scores are +-Inf only when <w_j, x> overflows (RowDot never gives
        // NaN). Take the limit: softmax is uniform over the maximal scores.
        int ties = 0;
        for (int j = 0; j < k; ++j) ties += (c[j] == mx);
        const bool label_is_max = score_y == mx;
        for (int j = 0; j < k; ++j) c[j] = c[j] == mx ? 1.0 / ties : 0.0;
        c[label] -= 1.0;
        return label_is_max ? std::log(static_cast<double>(ties))
                            : std::numeric_limits<double>::infinity();
      }
      double z = 0.0;
      for (int j = 0; j < k; ++j) {
        c[j] = std::exp(c[j] - mx);
        z += c[j];
      }
      c /= z;
      c[label] -= 1.0;
      return mx + std::log(z) - score_y;
    }
  }
  return std::numeric_limits<double>::quiet_NaN();
}

double Objective::ExampleLoss(
    const Dataset& data, int64_t i,
    const Eigen::Ref<const Eigen::VectorXd>& w) const {
  Eigen::VectorXd c(outputs_);
  return ExampleCoefficients(data, i, w, c);
}

void Objective::AddScaledExampleGradient(
    const Dataset& data, int64_t i, const Eigen::Ref<const Eigen::VectorXd>& c,
    double scale, Eigen::Ref<Eigen::VectorXd> out) const {
  for (int j = 0; j < outputs_; ++j) {
    const double a = scale * c[j];
    if (a != 0.0) {
      data.AddScaledRow(i, a, out.segment(j * dimension_, dimension_));
    }
  }
}

void Objective::AddClippedExampleGradient(
    const Dataset& data, int64_t i, const Eigen::Ref<const Eigen::VectorXd>& w,
    ClipNorm norm, double clip, double row_norm, Eigen::Ref<Eigen::VectorXd> c,
    Eigen::Ref<Eigen::VectorXd> out) const {
  ExampleCoefficients(data, i, w, c);  // finite
  // ||c (outer) x|| = ||c|| ||x|| in both norms. ||c|| is finite: |c_j| <= 1
  // except least squares, where c has one entry.
  const double c_norm = outputs_ == 1           ? std::abs(c[0])
                        : norm == ClipNorm::kL2 ? c.norm()
                                                : c.lpNorm<1>();
  if (c_norm == 0) return;
  // Direct path: the row's norm is far from overflow and underflow, so the
  // coefficients below stay normal numbers and every product is bounded by
  // the clip norm.
  if (row_norm >= kLowNorm && row_norm <= kHighNorm) {
    const double g_norm = c_norm * row_norm;  // may be +Inf: then clipped
    if (g_norm <= clip) {
      AddScaledExampleGradient(data, i, c, 1.0, out);
      return;
    }
    for (int j = 0; j < outputs_; ++j) {
      const double a = clip * (c[j] / c_norm) / row_norm;
      if (a != 0.0) {
        data.AddScaledRow(i, a, out.segment(j * dimension_, dimension_));
      }
    }
    return;
  }
  // Overflow-free path: x = M u, ||x|| = M ||u|| with ||u|| in [1, d].
  const Dataset::RowScaleInfo r = data.RowScale(i);
  if (r.max_abs == 0) return;  // zero row: zero gradient
  const double u_norm = norm == ClipNorm::kL2 ? r.l2 : r.l1;
  const double g_norm = (c_norm * u_norm) * r.max_abs;  // may be +Inf
  if (g_norm <= clip) {
    // Every |c_j x_ik| <= g_norm <= clip: finite.
    AddScaledExampleGradient(data, i, c, 1.0, out);
    return;
  }
  for (int j = 0; j < outputs_; ++j) {
    // clip * (c_j / ||c||) * u / ||u||, with u = x / M formed entry by entry.
    const double a = clip * (c[j] / c_norm) / u_norm;
    if (a != 0.0) {
      data.AddScaledRowOver(i, a, r.max_abs,
                            out.segment(j * dimension_, dimension_));
    }
  }
}

Eigen::VectorXd Objective::ExampleGradient(
    const Dataset& data, int64_t i,
    const Eigen::Ref<const Eigen::VectorXd>& w) const {
  Eigen::VectorXd c(outputs_);
  ExampleCoefficients(data, i, w, c);
  Eigen::VectorXd g = Eigen::VectorXd::Zero(parameter_size());
  AddScaledExampleGradient(data, i, c, 1.0, g);
  return g;
}

double Objective::Regularizer(
    const Eigen::Ref<const Eigen::VectorXd>& w) const {
  return 0.5 * config_.l2 * w.squaredNorm() + config_.l1 * w.lpNorm<1>();
}

void Objective::AddSmoothRegularizerGradient(
    const Eigen::Ref<const Eigen::VectorXd>& w,
    Eigen::Ref<Eigen::VectorXd> out) const {
  if (config_.l2 != 0.0) out.noalias() += config_.l2 * w;
}

double Objective::Loss(const Dataset& data,
                       const Eigen::Ref<const Eigen::VectorXd>& w) const {
  const Chunking chunking =
      ChunkRows(data.rows(), dimension_, parameter_size());
  const double sum = ChunkedScalarSum(
      chunking, GetParallelOptions().threads, [&](int64_t chunk) {
        const int64_t begin = chunking.begin(chunk);
        const int64_t end = chunking.end(chunk);
        double s = 0.0;
        const bool scalar =
            Kernels::VisitScalarLoss(config_.loss, [&](auto loss) {
              Kernels::VisitLayout(data, [&](auto sparse) {
                s = Kernels::LossRows<decltype(loss)::value,
                                      decltype(sparse)::value>(*this, data,
                                                               begin, end, w);
              });
            });
        if (!scalar) {
          Eigen::VectorXd c(outputs_);
          for (int64_t i = begin; i < end; ++i) {
            s += ExampleCoefficients(data, i, w, c);
          }
        }
        return s;
      });
  return sum / static_cast<double>(data.rows()) + Regularizer(w);
}

Eigen::VectorXd Objective::SmoothGradient(
    const Dataset& data, const Eigen::Ref<const Eigen::VectorXd>& w) const {
  Eigen::VectorXd g = Eigen::VectorXd::Zero(parameter_size());
  AddGradientSum(data, w, 1.0 / static_cast<double>(data.rows()), g);
  AddSmoothRegularizerGradient(w, g);
  return g;
}

double Objective::Accuracy(const Dataset& data,
                           const Eigen::Ref<const Eigen::VectorXd>& w) const {
  if (config_.loss == LossKind::kLeastSquares || data.rows() == 0) {
    return std::numeric_limits<double>::quiet_NaN();
  }
  const Chunking chunking =
      ChunkRows(data.rows(), dimension_, parameter_size());
  // Counts below 2^53: exact in any order.
  const double correct = ChunkedScalarSum(
      chunking, GetParallelOptions().threads, [&](int64_t chunk) {
        int64_t n = 0;
        if (config_.loss != LossKind::kSoftmax) {
          Kernels::VisitLayout(data, [&](auto sparse) {
            n = Kernels::CorrectRows<decltype(sparse)::value>(
                data, chunking.begin(chunk), chunking.end(chunk), w);
          });
          return static_cast<double>(n);
        }
        for (int64_t i = chunking.begin(chunk); i < chunking.end(chunk); ++i) {
          int best = 0;
          double best_score = -std::numeric_limits<double>::infinity();
          for (int j = 0; j < outputs_; ++j) {
            const double s =
                data.RowDot(i, w.segment(j * dimension_, dimension_));
            if (s > best_score) {
              best_score = s;
              best = j;
            }
          }
          n += (best == static_cast<int>(data.label(i)));
        }
        return static_cast<double>(n);
      });
  return correct / static_cast<double>(data.rows());
}

}  // namespace dpopt::optim
