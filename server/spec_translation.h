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
#include "dpopt/v1/job_spec.pb.h"
#include "server/translation/job_family.h"

namespace dpopt::server {

struct TranslatedJob {
  std::unique_ptr<optim::Algorithm> algorithm;
  // The job type's traits (server/translation/job_family.h).
  JobTypeTraits traits;
  // Set when traits.trains_model.
  optim::ModelConfig model;
  optim::PrivacyTarget target;
  // The job type ("dp_sgd", ...): the AlgorithmSpec oneof field's name.
  std::string algorithm_name;
  // As requested; 0 = about 100 trace points over the calibrated steps
  // (see DefaultTraceEvery).
  int64_t trace_every = 0;
};

// The trace interval of a job that did not choose one: about 100 points
// over `steps`.
int64_t DefaultTraceEvery(int64_t steps);

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
