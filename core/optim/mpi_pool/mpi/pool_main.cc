// dpopt-mpi-pool: one rank of the MPI worker pool (see pool_worker.h).
// Every job's samples on every rank come from the secure generator.
#include "core/noise/random.h"
#include "core/optim/mpi_pool/mpi/pool_worker.h"
#include "core/optim/mpi_pool/worker_pool.h"

int main(int argc, char** argv) {
  dpopt::optim::mpi_pool::PoolWorkerHooks hooks;
  hooks.identity = dpopt::optim::mpi_pool::kProductionPoolIdentity;
  hooks.job_random = [](int, uint64_t) {
    return dpopt::noise::NewSecureRandom();
  };
  return dpopt::optim::mpi_pool::PoolWorkerMain(argc, argv, hooks);
}
