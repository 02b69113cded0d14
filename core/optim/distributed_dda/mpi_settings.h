// The server's MPI configuration for dp_dda (distributed-DDA family): what mpirun to start
// and how (mpi_launcher.h). Kept free of Eigen so that server headers can
// carry it.
#ifndef DPOPT_CORE_OPTIM_DISTRIBUTED_DDA_MPI_SETTINGS_H_
#define DPOPT_CORE_OPTIM_DISTRIBUTED_DDA_MPI_SETTINGS_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace dpopt::optim::distributed_dda {

struct MpiSettings {
  // mpirun executable (path, or a name looked up in PATH). Required.
  std::string mpirun;
  // The dpopt-dda-worker executable (absolute path). Required.
  std::string worker;
  // Optional Open MPI hostfile (--hostfile).
  std::string hostfile;
  // Extra mpirun arguments (e.g. "--oversubscribe").
  std::vector<std::string> mpirun_args;
  // Extra worker arguments (only the test worker accepts any).
  std::vector<std::string> worker_args;
  // Wall-clock limit of one job, > 0.
  absl::Duration timeout = absl::Hours(1);
  // Most ranks one job may ask for, >= 1.
  int max_ranks = 64;

  absl::Status Validate() const;
};

}  // namespace dpopt::optim::distributed_dda

#endif  // DPOPT_CORE_OPTIM_DISTRIBUTED_DDA_MPI_SETTINGS_H_
