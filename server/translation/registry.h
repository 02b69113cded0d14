// The job families this server runs: the one place that lists them.
#ifndef DPOPT_SERVER_TRANSLATION_REGISTRY_H_
#define DPOPT_SERVER_TRANSLATION_REGISTRY_H_

#include <string>
#include <vector>

#include "server/translation/job_family.h"

namespace dpopt::server {

// Every registered family, in registration order.
const std::vector<const JobFamily*>& JobFamilies();

// The family that owns `c`; null if none does.
const JobFamily* FindJobFamily(AlgorithmCase c);

// Every family's start-up check of `env` (the first error).
absl::Status CheckExecutionEnvironment(const ExecutionEnvironment& env);

// The job type's name: the AlgorithmSpec oneof field's name ("dp_sgd", ...);
// empty for ALGORITHM_NOT_SET.
std::string JobTypeName(AlgorithmCase c);

}  // namespace dpopt::server

#endif  // DPOPT_SERVER_TRANSLATION_REGISTRY_H_
