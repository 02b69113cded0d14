// Model description shared by every optimizer: which loss, which
// regularizers, and the trained-model value type.
//
// Regularized objective (for a public row count n and data rows (x_i, y_i)):
//   F(w) = (1/n) sum_i loss(w; x_i, y_i) + (l2/2) ||w||_2^2 + l1 ||w||_1.
// Note the 1/2 on the L2 term: its gradient is l2 * w.
#ifndef DPOPT_CORE_OPTIM_MODEL_H_
#define DPOPT_CORE_OPTIM_MODEL_H_

#include <cstdint>
#include <string>

#include "Eigen/Dense"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/data/dataset.h"

namespace dpopt::optim {

// Linear-model losses. With margin m = y <w, x> (binary labels y in {-1,+1}):
//   kLogistic:        log(1 + exp(-m))
//   kHinge:           max(0, 1 - m)           (subgradient -1 at m < 1, else 0)
//   kHuberizedHinge:  0 for m > 1 + h; (1 + h - m)^2 / (4h) for |1 - m| <= h;
//                     1 - m for m < 1 - h     (h = huber_width; Chapelle 2007)
//   kSoftmax:         multinomial logistic (cross entropy), labels in
//                     {0..K-1}, parameters are K blocks of d (class k uses
//                     w[k*d .. (k+1)*d)).
//   kLeastSquares:    (1/2) (<w, x> - clip(y, label_bound))^2, real labels.
enum class LossKind {
  kLogistic,
  kSoftmax,
  kLeastSquares,
  kHinge,
  kHuberizedHinge
};

// "logistic", "softmax", "least_squares", "hinge", "huberized_hinge".
std::string LossName(LossKind loss);
absl::StatusOr<LossKind> ParseLoss(absl::string_view name);

// The label kind a loss needs (binary / multiclass / real).
LabelKind RequiredLabelKind(LossKind loss);

struct ModelConfig {
  LossKind loss = LossKind::kLogistic;
  // L2 regularization strength (objective term (l2/2) ||w||^2). >= 0.
  double l2 = 0;
  // L1 regularization strength (objective term l1 ||w||_1). >= 0. Handled by
  // proximal steps (soft thresholding), never by a data gradient.
  double l1 = 0;
  // Number of classes; must be 2 for the binary losses, in [2, 1000] for
  // kSoftmax; ignored for kLeastSquares.
  int num_classes = 2;
  // kLeastSquares only: labels are clipped to [-label_bound, label_bound]
  // before use. 0 means "no clipping", allowed only for non-private runs on
  // public data (private least squares needs a bound: the loss gradient is
  // otherwise unbounded in y, which clipping would hide but the caller
  // should decide). Must be finite and >= 0.
  double label_bound = 0;
  // kHuberizedHinge only: h in (0, 1].
  double huber_width = 0.5;

  // INVALID_ARGUMENT on negative/non-finite strengths, bad num_classes or
  // huber_width.
  absl::Status Validate() const;
};

// A trained (privatized) model.
struct Model {
  // Parameter vector; size dimension (binary / least squares) or
  // num_classes * dimension (softmax, class-major blocks).
  Eigen::VectorXd weights;
  int64_t dimension = 0;
  int num_classes = 2;
  LossKind loss = LossKind::kLogistic;
};

}  // namespace dpopt::optim

#endif  // DPOPT_CORE_OPTIM_MODEL_H_
