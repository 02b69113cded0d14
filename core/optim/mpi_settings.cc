#include "core/optim/mpi_settings.h"

namespace dpopt::optim {

absl::Status MpiSettings::Validate() const {
  if (mpirun.empty()) return absl::InvalidArgumentError("mpirun is required");
  if (worker.empty()) {
    return absl::InvalidArgumentError("the dp_dda worker path is required");
  }
  if (timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("the MPI timeout must be > 0");
  }
  if (max_ranks < 1)
    return absl::InvalidArgumentError("max_ranks must be >= 1");
  return absl::OkStatus();
}

}  // namespace dpopt::optim
