#include "core/optim/gradient_sums.h"

#include <utility>

#include "core/common/status_macros.h"

namespace dpopt::optim {

int64_t ShardBegin(int64_t rows, int shards, int shard) {
  // r n / k without overflow for n < 2^63 / k: n = a k + b.
  const int64_t a = rows / shards;
  const int64_t b = rows % shards;
  return a * shard + (b * shard) / shards;
}

LocalGradientSums::LocalGradientSums(const Dataset& data,
                                     const Objective& objective,
                                     noise::RandomSource& rng)
    : data_(data), objective_(objective), rng_(rng) {}

absl::Status LocalGradientSums::ClippedSum(
    const ClippedSumQuery& query, const Eigen::Ref<const Eigen::VectorXd>& w,
    Eigen::VectorXd* sum) {
  sum->setZero(objective_.parameter_size());
  // q >= 1 selects every row (PoissonSampler would list 0..n-1, drawing
  // nothing); the kernels then run over the rows in order, no list needed.
  if (query.sampling_rate >= 1.0) {
    objective_.AddClippedGradientSum(data_, w, query.norm, query.clip, *sum);
    return absl::OkStatus();
  }
  if (sampler_ == nullptr || sampler_rate_ != query.sampling_rate) {
    sampler_ = std::make_unique<PoissonSampler>(query.sampling_rate, rng_);
    sampler_rate_ = query.sampling_rate;
  }
  RETURN_IF_ERROR(sampler_->Sample(data_.rows(), &batch_));
  // Total on finite rows: each term is finite with norm <= clip.
  objective_.AddClippedGradientSum(data_, batch_, w, query.norm, query.clip,
                                   *sum);
  return absl::OkStatus();
}

absl::Status LocalGradientSums::ExactSum(
    const Eigen::Ref<const Eigen::VectorXd>& w, Eigen::VectorXd* sum) {
  sum->setZero(objective_.parameter_size());
  objective_.AddGradientSum(data_, w, 1.0, *sum);
  return absl::OkStatus();
}

ShardedGradientSums::ShardedGradientSums(
    std::vector<std::unique_ptr<GradientSums>> shards)
    : shards_(std::move(shards)) {}

absl::Status ShardedGradientSums::ClippedSum(
    const ClippedSumQuery& query, const Eigen::Ref<const Eigen::VectorXd>& w,
    Eigen::VectorXd* sum) {
  RETURN_IF_ERROR(shards_[0]->ClippedSum(query, w, sum));
  for (size_t r = 1; r < shards_.size(); ++r) {
    RETURN_IF_ERROR(shards_[r]->ClippedSum(query, w, &part_));
    *sum += part_;
  }
  return absl::OkStatus();
}

absl::Status ShardedGradientSums::ExactSum(
    const Eigen::Ref<const Eigen::VectorXd>& w, Eigen::VectorXd* sum) {
  RETURN_IF_ERROR(shards_[0]->ExactSum(w, sum));
  for (size_t r = 1; r < shards_.size(); ++r) {
    RETURN_IF_ERROR(shards_[r]->ExactSum(w, &part_));
    *sum += part_;
  }
  return absl::OkStatus();
}

}  // namespace dpopt::optim
