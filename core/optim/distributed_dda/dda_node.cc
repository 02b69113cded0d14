#include "core/optim/distributed_dda/dda_node.h"

#include <algorithm>
#include <utility>

#include "core/common/status_macros.h"
#include "core/optim/poisson_sampler.h"

namespace dpopt::optim::distributed_dda {

DdaNode::DdaNode(int id, Dataset shard, const Objective* objective,
                 const NodeParams* params,
                 std::unique_ptr<noise::RandomSource> rng,
                 const NoiseAdder* noise)
    : id_(id),
      shard_(std::move(shard)),
      objective_(objective),
      params_(params),
      rng_(std::move(rng)),
      noise_(noise) {
  row_norm_.resize(shard_.rows());
  for (int64_t i = 0; i < shard_.rows(); ++i) {
    row_norm_[i] = shard_.RowNorm(i);
  }
  coef_.resize(objective_->outputs());
}

void DdaNode::Init(double iota_a1, double gamma1) {
  const int64_t p = objective_->parameter_size();
  z_ = Eigen::VectorXd::Zero(p);
  zeta_ = Eigen::VectorXd::Zero(p);
  PrimalMap(z_, iota_a1, gamma1, params_->h, &x_);
  average_ = x_;
}

absl::Status DdaNode::SampleBatch() {
  const int64_t q = shard_.rows();
  batch_.clear();
  if (params_->sampling == NodeSampling::kPoisson) {
    PoissonSampler sampler(params_->poisson_rate, *rng_);
    return sampler.Sample(q, &batch_);
  }
  // b distinct rows, uniformly (Floyd's algorithm), fresh each step
  // (no shuffling or epochs: the amplification argument assumes fresh
  // uniform draws).
  const int64_t b = std::min(params_->batch_size, q);
  for (int64_t j = q - b; j < q; ++j) {
    const int64_t r = static_cast<int64_t>(rng_->UniformInt(j + 1));
    if (std::find(batch_.begin(), batch_.end(), r) == batch_.end()) {
      batch_.push_back(r);
    } else {
      batch_.push_back(j);
    }
  }
  std::sort(batch_.begin(), batch_.end());
  return rng_->status();
}

absl::Status DdaNode::ComputeMessage(double a_t, Eigen::VectorXd* message) {
  RETURN_IF_ERROR(SampleBatch());
  zeta_.setZero();
  for (int64_t i : batch_) {
    objective_->AddClippedExampleGradient(
        shard_, i, x_, Objective::ClipNorm::kL2, params_->clip_norm,
        row_norm_[i], coef_, zeta_);
  }
  RETURN_IF_ERROR(noise_->AddGaussian(params_->plan, *rng_, zeta_));
  zeta_ /= params_->normalizer;
  *message = z_ + a_t * zeta_;
  return absl::OkStatus();
}

void DdaNode::Mix(
    const MixRow& row,
    const std::function<const Eigen::VectorXd&(int)>& message_of) {
  // Ascending order over {i} and the neighbours.
  bool self_done = false;
  bool first = true;
  auto add = [&](double w, const Eigen::VectorXd& m) {
    if (first) {
      mixed_ = w * m;
      first = false;
    } else {
      mixed_ += w * m;
    }
  };
  for (const auto& [j, w] : row.neighbors) {
    if (!self_done && id_ < j) {
      add(row.self_weight, message_of(id_));
      self_done = true;
    }
    add(w, message_of(j));
  }
  if (!self_done) add(row.self_weight, message_of(id_));
  z_.swap(mixed_);
}

void DdaNode::Primal(double iota_a, double gamma) {
  PrimalMap(z_, iota_a, gamma, params_->h, &x_);
}

void DdaNode::Average(double weight) { average_ += weight * (x_ - average_); }

}  // namespace dpopt::optim::distributed_dda
