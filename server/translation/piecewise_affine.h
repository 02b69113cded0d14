// Piecewise-affine (max-affine problems; spec
// piecewise-affine-piecewise-affine.md) in proto terms: the dataset kind
// (ImportHeader.max_affine -> the stored public description,
// DatasetInfo.max_affine) and the job types of AlgorithmSpec fields 40-49.
// Called from the thin switches in dataset_manager.cc and spec_translation.cc.
// Errors are INVALID_ARGUMENT naming the field.
#ifndef DPOPT_SERVER_TRANSLATION_PIECEWISE_AFFINE_H_
#define DPOPT_SERVER_TRANSLATION_PIECEWISE_AFFINE_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/optim/algorithm.h"
#include "dpopt/v1/dpopt.pb.h"
#include "dpopt/v1/job_spec.pb.h"
#include "server/translation/job_family.h"
#include "storage/dataset_import.h"

namespace dpopt::server {

// Import: if the header declares max_affine, sets the relation to
// linf_offsets and the label kind to real (refusing any other declared
// relation or label type), and puts a placeholder description in
// options->problem_json (replaced by DescribeMaxAffine once the rows are
// parsed). A header with relation LINF_OFFSETS but no max_affine is refused.
absl::Status ApplyMaxAffineHeader(const v1::ImportHeader& h,
                                  storage::ImportOptions* options);

// The public description (JSON) of the parsed problem: slopes only, never
// the offsets (labels).
absl::StatusOr<std::string> DescribeMaxAffine(const v1::MaxAffineProblem& m,
                                              const storage::ParsedRows& rows);

// DatasetInfo.max_affine from the stored description (DATA_LOSS if corrupt).
absl::StatusOr<v1::MaxAffineInfo> MaxAffineInfoOf(const std::string& json);

// pa_perturb_problem, pa_perturb_solution, pa_exponential, pa_subgradient
// (private, on max-affine datasets) and pa_solve (non-private baseline).
const JobFamily& PiecewiseAffineFamily();

}  // namespace dpopt::server

#endif  // DPOPT_SERVER_TRANSLATION_PIECEWISE_AFFINE_H_
