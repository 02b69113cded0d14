// dpopt-dda-worker: one MPI rank of a dp_dda job; started by dpopt-server
// through mpirun, never by hand (see worker.h). Every node's noise and
// samples come from the secure generator.
#include "core/noise/random.h"
#include "core/optim/distributed_dda/mpi/worker.h"

int main(int argc, char** argv) {
  dpopt::optim::distributed_dda::WorkerHooks hooks;
  hooks.node_random = [](int) { return dpopt::noise::NewSecureRandom(); };
  return dpopt::optim::distributed_dda::WorkerMain(argc, argv, hooks);
}
