// The server's Open MPI configuration: what mpirun to start and how, for the
// job types that run on MPI ranks (today dp_dda: its launcher is
// core/optim/distributed_dda/mpi_launcher.h).
// Kept free of Eigen and of any family so that server headers can carry it.
#ifndef DPOPT_CORE_OPTIM_MPI_SETTINGS_H_
#define DPOPT_CORE_OPTIM_MPI_SETTINGS_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace dpopt::optim {

namespace distributed_dda::testing {
class MpiSettingsTestPeer;  // core/optim/distributed_dda/testing, tests only
}  // namespace distributed_dda::testing

// What the production worker prints for --identify (and nothing else does):
// the server refuses at start-up any worker that does not (see
// CheckProductionWorker in mpi_launcher.h), so the test-only
// dpopt-dda-worker-testing (seeded generators) can never be its worker.
inline constexpr char kProductionWorkerIdentity[] =
    "dpopt-dda-worker: secure generators";

// Shards (the private rows of each node) travel between the server and the
// ranks, and between ranks, through Open MPI's transports: unencrypted.
// Run MPI hosts only on a private network, or over an encrypted overlay
// (docs/operations.md, "MPI").
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

  // Whether `worker` may be the test-only worker (set only through
  // testing::MpiSettingsTestPeer, which the server never links).
  bool allows_testing_worker() const { return allow_testing_worker_; }

 private:
  friend class distributed_dda::testing::MpiSettingsTestPeer;
  bool allow_testing_worker_ = false;
};

}  // namespace dpopt::optim

#endif  // DPOPT_CORE_OPTIM_MPI_SETTINGS_H_
