// Translation of distributed-DDA family's AlgorithmSpec message (field 50,
// DpDda) into core/optim/distributed_dda options. Called from the thin switch
// in spec_translation.cc. Errors name the offending field: INVALID_ARGUMENT for
// bad values, PERMISSION_DENIED for PAPER accounting on a private dataset,
// FAILED_PRECONDITION for MPI execution on a server without MPI.
#ifndef DPOPT_SERVER_TRANSLATION_DISTRIBUTED_DDA_H_
#define DPOPT_SERVER_TRANSLATION_DISTRIBUTED_DDA_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "core/optim/distributed_dda/dp_dda.h"
#include "dpopt/v1/job_spec.pb.h"
#include "server/translation/job_family.h"

namespace dpopt::server {

// dp_dda: simulated in process, or on Open MPI ranks when the server has
// an MPI launcher (ExecutionEnvironment::mpi).
const JobFamily& DistributedDdaFamily();

}  // namespace dpopt::server

#endif  // DPOPT_SERVER_TRANSLATION_DISTRIBUTED_DDA_H_
