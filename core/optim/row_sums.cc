#include "core/optim/row_sums.h"

#include <algorithm>
#include <utility>

#include "core/common/status_macros.h"

namespace dpopt::optim {

int64_t ShardBegin(int64_t rows, int shards, int shard) {
  // r n / k without overflow for n < 2^63 / k: n = a k + b.
  const int64_t a = rows / shards;
  const int64_t b = rows % shards;
  return a * shard + (b * shard) / shards;
}

LocalRowSums::LocalRowSums(const Dataset& data, const Objective& objective,
                           noise::RandomSource& rng)
    : data_(data), objective_(objective), rng_(rng) {}

absl::Status LocalRowSums::ClippedSum(
    const ClippedSumQuery& query, const Eigen::Ref<const Eigen::VectorXd>& w,
    Eigen::VectorXd* sum) {
  sum->setZero(objective_.parameter_size());
  // q >= 1 selects every row (PoissonSampler would list 0..n-1, drawing
  // nothing); the kernels then run over the rows in order, no list needed.
  if (query.sampling_rate >= 1.0) {
    objective_.AddClippedGradientSum(data_, w, query.norm, query.clip, *sum);
    return absl::OkStatus();
  }
  RETURN_IF_ERROR(Sample(query.sampling_rate, gradient_sampler_, &batch_));
  // Total on finite rows: each term is finite with norm <= clip.
  objective_.AddClippedGradientSum(data_, batch_, w, query.norm, query.clip,
                                   *sum);
  return absl::OkStatus();
}

absl::Status LocalRowSums::Sample(double q, RateSampler& sampler,
                                  std::vector<int64_t>* batch) {
  if (sampler.sampler == nullptr || sampler.rate != q) {
    sampler.sampler = std::make_unique<PoissonSampler>(q, rng_);
    sampler.rate = q;
  }
  return sampler.sampler->Sample(data_.rows(), batch);
}

absl::Status LocalRowSums::SampleForLosses(double sampling_rate) {
  if (sampling_rate >= 1.0) {
    loss_batch_.resize(data_.rows());
    for (int64_t i = 0; i < data_.rows(); ++i) loss_batch_[i] = i;
    return absl::OkStatus();
  }
  return Sample(sampling_rate, loss_sampler_, &loss_batch_);
}

absl::Status LocalRowSums::ClippedLossSum(
    double clip, const Eigen::Ref<const Eigen::VectorXd>& v, double* sum) {
  double s = 0;
  for (int64_t i : loss_batch_) {
    s += std::min(objective_.ExampleLoss(data_, i, v), clip);
  }
  *sum = s;
  return absl::OkStatus();
}

absl::Status LocalRowSums::ExactSum(const Eigen::Ref<const Eigen::VectorXd>& w,
                                    Eigen::VectorXd* sum) {
  sum->setZero(objective_.parameter_size());
  objective_.AddGradientSum(data_, w, 1.0, *sum);
  return absl::OkStatus();
}

ShardedRowSums::ShardedRowSums(std::vector<std::unique_ptr<RowSums>> shards)
    : shards_(std::move(shards)) {}

absl::Status ShardedRowSums::ClippedSum(
    const ClippedSumQuery& query, const Eigen::Ref<const Eigen::VectorXd>& w,
    Eigen::VectorXd* sum) {
  RETURN_IF_ERROR(shards_[0]->ClippedSum(query, w, sum));
  for (size_t r = 1; r < shards_.size(); ++r) {
    RETURN_IF_ERROR(shards_[r]->ClippedSum(query, w, &part_));
    *sum += part_;
  }
  return absl::OkStatus();
}

absl::Status ShardedRowSums::ExactSum(
    const Eigen::Ref<const Eigen::VectorXd>& w, Eigen::VectorXd* sum) {
  RETURN_IF_ERROR(shards_[0]->ExactSum(w, sum));
  for (size_t r = 1; r < shards_.size(); ++r) {
    RETURN_IF_ERROR(shards_[r]->ExactSum(w, &part_));
    *sum += part_;
  }
  return absl::OkStatus();
}

absl::Status ShardedRowSums::SampleForLosses(double sampling_rate) {
  for (auto& shard : shards_) {
    RETURN_IF_ERROR(shard->SampleForLosses(sampling_rate));
  }
  return absl::OkStatus();
}

absl::Status ShardedRowSums::ClippedLossSum(
    double clip, const Eigen::Ref<const Eigen::VectorXd>& v, double* sum) {
  RETURN_IF_ERROR(shards_[0]->ClippedLossSum(clip, v, sum));
  for (size_t r = 1; r < shards_.size(); ++r) {
    double part = 0;
    RETURN_IF_ERROR(shards_[r]->ClippedLossSum(clip, v, &part));
    *sum += part;
  }
  return absl::OkStatus();
}

}  // namespace dpopt::optim
