// Shared pieces of bilevel family's private hyperparameter tuning jobs
// (dp_tune_regularization, Kornowski 2024, Sec. 7 corrected, and
// the dp_grid_search baseline): the server-side train/validation split, the
// public constants of a loss, and the per-example sources over an
// Objective.
//
// Split (our choice; the paper assumes a fixed partition): every row goes
// to the
// validation part independently with probability `validation_fraction`,
// drawn from the job's random source (the secure generator in the server;
// never client-seeded, never released). The normalisers are PUBLIC:
// n_val = max(1, round(fraction * n)) and n_tr = n - n_val, with n the
// public row count, so neighbouring datasets are compared under the same
// coupling of each record's coin (replace-one: the replaced record keeps its
// part; add/remove: the added record's coin is one more independent draw).
// The released quantities are, for every realisation of the split, Gaussian
// mechanisms with the sensitivities below, so the mixture over the split has
// the same (epsilon, delta) and RDP guarantees (joint convexity). A declared
// split column is not supported.
#ifndef DPOPT_CORE_OPTIM_BILEVEL_TUNING_H_
#define DPOPT_CORE_OPTIM_BILEVEL_TUNING_H_

#include <cstdint>
#include <vector>

#include "Eigen/Dense"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/data/dataset.h"
#include "core/noise/random.h"
#include "core/optim/bilevel/dp_loc_gd.h"
#include "core/optim/model.h"
#include "core/optim/objective.h"

namespace dpopt::optim::bilevel {

struct TuningCommon {
  // logistic_regression, least_squares (ridge; label_bound > 0 on private
  // data), hinge_svm or huberized_hinge_svm, with l2 = l1 = 0 (the tuned
  // weight is the regularizer).
  ModelConfig model;
  // Fraction of rows (in expectation) in the validation part, (0, 1).
  double validation_fraction = 0.3;
  // Per-example L2 clip C of loss gradients, (0, 1e6].
  double clip_norm = 1;
  // Public smoothness beta of one example's loss (0 = from the dataset's
  // declared row norm bound A, 1 if none: logistic A^2/4, least squares
  // A^2, huberized hinge A^2/(2h), hinge A^2 as a step-size proxy).
  double smoothness = 0;
  // The box [weight_min, weight_max] of every regularization weight,
  // 0 < weight_min <= weight_max <= 1e6 (weight_min > 0 keeps g strongly
  // convex; the paper's omega >= 0 allows omega = 0).
  double weight_min = 1e-3;
  double weight_max = 10;

  absl::Status Validate() const;
};

struct SplitSizes {
  int64_t validation = 0;
  int64_t train = 0;
};

// Public normalisers (see the header comment). INVALID_ARGUMENT if either
// part would be empty.
absl::StatusOr<SplitSizes> PublicSplit(int64_t rows, double fraction);

// One Bernoulli(fraction) coin per row (1 = validation), exact (the
// Poisson sampler's lazy comparison). Errors: the rng's.
absl::StatusOr<std::vector<uint8_t>> DrawSplit(int64_t rows, double fraction,
                                               noise::RandomSource& rng);

// The smoothness used for step sizes (see TuningCommon::smoothness).
double LossSmoothness(const TuningCommon& common, double row_norm_bound);
// loss(0; x, y) bound: logistic ln 2, (huberized) hinge 1, least squares
// label_bound^2 / 2; used for the public radius of the minimisers.
double LossAtZero(const ModelConfig& model);

// c_i = w_i Clip(grad loss_i(theta), C) with the public weight w_i =
// train_weight for training rows and validation_weight for validation rows
// (either may be 0); public part: public_scale * (penalty .* theta), with a
// per-coordinate L2 weight vector `penalty`.
class LossGradientSource final : public InnerSource {
 public:
  LossGradientSource(const Objective& objective,
                     const std::vector<uint8_t>& is_validation,
                     double train_weight, double validation_weight,
                     double clip);
  void SetPenalty(const Eigen::VectorXd& penalty, double public_scale);
  void SetPoint(const Eigen::VectorXd& theta) override { theta_ = theta; }
  int64_t dimension() const override { return objective_.parameter_size(); }
  double bound() const override;
  void AddClipped(const Dataset& data, int64_t i,
                  Eigen::Ref<Eigen::VectorXd> out,
                  Eigen::VectorXd& scratch) const override;
  void AddUnclipped(const Dataset& data, int64_t i,
                    Eigen::Ref<Eigen::VectorXd> out,
                    Eigen::VectorXd& scratch) const override;
  void AddPublic(Eigen::Ref<Eigen::VectorXd> out) const override;

 private:
  double Weight(int64_t i) const {
    return is_validation_[i] ? validation_weight_ : train_weight_;
  }
  void Gradient(const Dataset& data, int64_t i, Eigen::VectorXd& g) const;

  const Objective& objective_;
  const std::vector<uint8_t>& is_validation_;
  const double train_weight_;
  const double validation_weight_;
  const double clip_;
  Eigen::VectorXd penalty_;
  double public_scale_ = 1;
  Eigen::VectorXd theta_;
  mutable Eigen::VectorXd coef_;
};

// Validation scores of K models: c_ij = min(loss_i(theta_j), C_obj) /
// n_val for validation rows (0 for training rows; a non-finite loss counts
// as C_obj). Each score moves by at most C_obj / n_val between neighbours.
class ValidationLossSource final : public ContributionSource {
 public:
  ValidationLossSource(const Objective& objective,
                       const std::vector<uint8_t>& is_validation,
                       const std::vector<Eigen::VectorXd>& models,
                       double loss_clip, int64_t validation_rows);
  int64_t dimension() const override { return models_.size(); }
  double bound() const override;
  void AddClipped(const Dataset& data, int64_t i,
                  Eigen::Ref<Eigen::VectorXd> out,
                  Eigen::VectorXd& scratch) const override;
  void AddUnclipped(const Dataset& data, int64_t i,
                    Eigen::Ref<Eigen::VectorXd> out,
                    Eigen::VectorXd& scratch) const override;
  void AddPublic(Eigen::Ref<Eigen::VectorXd>) const override {}

 private:
  const Objective& objective_;
  const std::vector<uint8_t>& is_validation_;
  const std::vector<Eigen::VectorXd>& models_;
  const double loss_clip_;
  const double weight_;
};

// Feature groups -> per-coordinate group index of a parameter vector of size
// p (binary and least-squares models: p = dimension). Empty groups = one
// group. Errors: INVALID_ARGUMENT (wrong size, ids not 0..G-1 all used).
absl::StatusOr<std::vector<int>> GroupIndex(const std::vector<int>& groups,
                                            int64_t parameter_size,
                                            int* num_groups);

}  // namespace dpopt::optim::bilevel

#endif  // DPOPT_CORE_OPTIM_BILEVEL_TUNING_H_
