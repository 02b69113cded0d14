// Translation of distributed-DDA family's AlgorithmSpec message (field 50, DpDda) into
// core/optim/distributed_dda options. Called from the thin switch in
// spec_translation.cc. Errors name the offending field: INVALID_ARGUMENT for
// bad values, PERMISSION_DENIED for PAPER accounting on a private dataset,
// FAILED_PRECONDITION for MPI execution on a server without MPI.
#ifndef DPOPT_SERVER_TRANSLATION_DISTRIBUTED_DDA_H_
#define DPOPT_SERVER_TRANSLATION_DISTRIBUTED_DDA_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "core/optim/distributed_dda/dp_dda.h"
#include "dpopt/v1/job_spec.pb.h"

namespace dpopt::server {

absl::StatusOr<optim::distributed_dda::DpDdaOptions> TranslateDpDda(
    const v1::DpDda& m, const optim::ModelConfig& model, int64_t trace_every,
    bool dataset_is_public, const optim::distributed_dda::MpiSettings* mpi,
    const std::string& field);

}  // namespace dpopt::server

#endif  // DPOPT_SERVER_TRANSLATION_DISTRIBUTED_DDA_H_
