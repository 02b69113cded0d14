// Translation of the public JobSpec (proto) into engine objects, with all
// validation of client input that needs no storage access. Every error is
// INVALID_ARGUMENT (or PERMISSION_DENIED for a non-private algorithm on a
// private dataset) with a message that names the offending field.
#ifndef DPOPT_SERVER_SPEC_TRANSLATION_H_
#define DPOPT_SERVER_SPEC_TRANSLATION_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "core/optim/algorithm.h"
#include "core/optim/dp_sgd.h"
#include "core/optim/non_private_gd.h"
#include "core/optim/distributed_dda/mpi_settings.h"
#include "dpopt/v1/job_spec.pb.h"

namespace dpopt::server {

struct TranslatedJob {
  std::unique_ptr<optim::Algorithm> algorithm;
  optim::ModelConfig model;
  optim::PrivacyTarget target;
  // Short algorithm name ("dp_sgd", ...).
  std::string algorithm_name;
  int64_t trace_every = 1;
  // Whether the job trains a model of `model` (evaluable on a public
  // dataset). False for bilevel family's dp_bilevel*, whose catalogue problem
  // defines the released variable (no evaluate_on, labels unused).
  bool evaluable_model = true;
  // Model.loss of the result when evaluable_model is false.
  std::string output_name = "bilevel_outer_variable";
};

// What this server can run beyond the in-process engine (from its flags).
struct ExecutionEnvironment {
  // dp_dda's MPI execution (distributed-DDA family); null = not configured.
  const optim::distributed_dda::MpiSettings* dda_mpi = nullptr;
};

// Limits on what a single job may ask for (absurd values are refused before
// anything is calibrated or charged).
inline constexpr int64_t kMaxSteps = 1'000'000;

// `dataset_is_public` decides whether a non-private algorithm is allowed and
// whether `privacy` is required. `dataset_num_classes` is the dataset's
// declared class count (checked against a softmax model).
absl::StatusOr<TranslatedJob> TranslateJobSpec(
    const v1::JobSpec& spec, bool dataset_is_public, int dataset_num_classes,
    const ExecutionEnvironment& env = ExecutionEnvironment());

// The ModelSpec field name of a loss: "logistic_regression", ...
std::string ProtoLossName(optim::LossKind kind);

}  // namespace dpopt::server

#endif  // DPOPT_SERVER_SPEC_TRANSLATION_H_
