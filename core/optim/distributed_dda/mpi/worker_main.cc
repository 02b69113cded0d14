// dpopt-dda-worker: one MPI rank of a dp_dda job; started by dpopt-server
// through mpirun, never by hand (see worker.h). Every node's noise and
// samples come from the secure generator.
#include <cstdio>
#include <cstring>

#include "core/noise/random.h"
#include "core/optim/distributed_dda/mpi/worker.h"
#include "core/optim/mpi_settings.h"

int main(int argc, char** argv) {
  // The server's start-up check (mpi_launcher.h, CheckProductionWorker).
  if (argc == 2 && std::strcmp(argv[1], "--identify") == 0) {
    std::printf("%s\n",
                dpopt::optim::kProductionWorkerIdentity);
    return 0;
  }
  dpopt::optim::distributed_dda::WorkerHooks hooks;
  hooks.node_random = [](int) { return dpopt::noise::NewSecureRandom(); };
  return dpopt::optim::distributed_dda::WorkerMain(argc, argv, hooks);
}
