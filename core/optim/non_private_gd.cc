#include "core/optim/non_private_gd.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "core/common/status_macros.h"
#include "core/optim/objective.h"
#include "core/optim/private_oracle.h"
#include "core/optim/release_budget.h"
#include "core/optim/solve_loop.h"
#include "core/optim/update_rules.h"

namespace dpopt::optim {
namespace {

class GdMethod final : public IterativeMethod {
 public:
  GdMethod(const MomentumProxStep::Options& rule, int64_t p)
      : rule_(rule, p), w_(Eigen::VectorXd::Zero(p)) {}

  absl::Status Step(int64_t step, PrivateGradientOracle& oracle,
                    StepInfo* info) override {
    RETURN_IF_ERROR(oracle.ExactGradient(w_, &g_));
    info->noisy_gradient_norm = g_.norm();  // exact: public data only
    rule_.Apply(g_, &w_);
    return absl::OkStatus();
  }
  const Eigen::VectorXd& iterate() const override { return w_; }

 private:
  MomentumProxStep rule_;
  Eigen::VectorXd w_;
  Eigen::VectorXd g_;
};

class NonPrivateGd final : public Algorithm {
 public:
  explicit NonPrivateGd(const GdOptions& options) : options_(options) {}
  std::string name() const override { return "gd"; }

  absl::StatusOr<Calibration> Calibrate(
      const PublicDatasetInfo& info,
      const PrivacyTarget& target) const override {
    if (!target.non_private) {
      return absl::InvalidArgumentError(
          "non-private gradient descent runs only on public datasets");
    }
    RETURN_IF_ERROR(CheckPublicInfo(info, options_.model, false));
    ASSIGN_OR_RETURN(std::unique_ptr<Objective> objective,
                     Objective::Create(options_.model, info.dimension));
    Calibration c;
    c.steps = options_.steps;
    c.work_units = PassWork(static_cast<double>(options_.steps), info.rows,
                            objective->parameter_size());
    c.sampling_rate = 1;
    c.expected_batch_size = static_cast<double>(info.rows);
    c.rows = info.rows;
    c.dimension = info.dimension;
    c.event = privacy::DpEvent::NoOp();
    c.relation = info.relation;
    c.notes.push_back("non-private: exact gradients, public dataset only");
    return c;
  }

  absl::StatusOr<SolveResult> Run(const Dataset& data,
                                  const Calibration& calibration,
                                  SolveContext& context) const override {
    if (calibration.event.kind() != privacy::DpEvent::Kind::kNoOp ||
        calibration.steps != options_.steps) {
      return absl::FailedPreconditionError(
          "calibration was not made for this algorithm's parameters");
    }
    ASSIGN_OR_RETURN(std::unique_ptr<Objective> objective,
                     Objective::Create(options_.model, calibration.dimension));
    UnlimitedNoOpBudget budget;
    // Exact gradients draw no randomness; the oracle still wants a source.
    if (context.rng == nullptr) {
      return absl::FailedPreconditionError("no random source");
    }
    ASSIGN_OR_RETURN(std::unique_ptr<PrivateGradientOracle> oracle,
                     PrivateGradientOracle::Create(
                         data, *objective, calibration.rows, context, budget));
    GdMethod method({options_.learning_rate, 0.0, options_.model.l1},
                    objective->parameter_size());
    return SolveLoop::Run({calibration.steps}, method, *oracle, budget,
                          context.callback);
  }

 private:
  const GdOptions options_;
};

}  // namespace

absl::Status GdOptions::Validate() const {
  if (steps < 1 || steps > 1'000'000) {
    return absl::InvalidArgumentError("steps must be in [1, 1000000]");
  }
  if (!(learning_rate > 0 && learning_rate <= 1e6)) {
    return absl::InvalidArgumentError("learning_rate must be in (0, 1e6]");
  }
  return model.Validate();
}

absl::StatusOr<std::unique_ptr<Algorithm>> NewNonPrivateGd(
    const GdOptions& options) {
  RETURN_IF_ERROR(options.Validate());
  return std::unique_ptr<Algorithm>(new NonPrivateGd(options));
}

}  // namespace dpopt::optim
