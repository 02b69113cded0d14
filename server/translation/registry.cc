#include "server/translation/registry.h"

#include "google/protobuf/descriptor.h"
#include "server/translation/accelerated.h"
#include "server/translation/bilevel.h"
#include "server/translation/distributed_dda.h"
#include "server/translation/gradient.h"
#include "server/translation/line_search.h"
#include "server/translation/piecewise_affine.h"

namespace dpopt::server {

const std::vector<const JobFamily*>& JobFamilies() {
  // One line per family.
  static const auto* families = new std::vector<const JobFamily*>{
      &GradientFamily(), &AcceleratedFamily(),     &LineSearchFamily(),
      &BilevelFamily(),  &PiecewiseAffineFamily(), &DistributedDdaFamily(),
  };
  return *families;
}

const JobFamily* FindJobFamily(AlgorithmCase c) {
  for (const JobFamily* f : JobFamilies()) {
    for (AlgorithmCase owned : f->cases) {
      if (owned == c) return f;
    }
  }
  return nullptr;
}

absl::Status CheckExecutionEnvironment(const ExecutionEnvironment& env) {
  for (const JobFamily* f : JobFamilies()) {
    if (f->check_environment == nullptr) continue;
    absl::Status s = f->check_environment(env);
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

std::string JobTypeName(AlgorithmCase c) {
  const google::protobuf::FieldDescriptor* field =
      v1::AlgorithmSpec::descriptor()->FindFieldByNumber(static_cast<int>(c));
  return field == nullptr ? "" : field->name();
}

}  // namespace dpopt::server
