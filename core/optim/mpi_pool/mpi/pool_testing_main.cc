// TEST ONLY. NOT DIFFERENTIALLY PRIVATE.
// dpopt-mpi-pool-testing: the pool with seeded generators (--test-seed=S:
// rank r samples every job with SeededRandomForTesting(S + r), as an
// in-process ShardedRowSums with those seeds does, so both give
// bit-identical results) and fault injection (--test-fault=die:RANK:SUMS
// kills that rank after that many sums). Built only for the tests; never
// installed; a production server refuses it (its identity says so).
#include <signal.h>

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "core/noise/testing/seeded_random.h"
#include "core/optim/mpi_pool/mpi/pool_worker.h"

int main(int argc, char** argv) {
  uint64_t seed = 0;
  int fault_rank = -1;
  int64_t fault_sums = -1;
  std::vector<char*> rest = {argv[0]};
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (absl::StartsWith(a, "--test-seed=")) {
      if (!absl::SimpleAtoi(a.substr(12), &seed)) return 2;
    } else if (absl::StartsWith(a, "--test-fault=")) {
      std::vector<std::string> parts = absl::StrSplit(a.substr(13), ':');
      if (parts.size() != 3 || parts[0] != "die" ||
          !absl::SimpleAtoi(parts[1], &fault_rank) ||
          !absl::SimpleAtoi(parts[2], &fault_sums)) {
        return 2;
      }
    } else {
      rest.push_back(argv[i]);
    }
  }
  dpopt::optim::mpi_pool::PoolWorkerHooks hooks;
  hooks.identity =
      "dpopt-mpi-pool-testing: TEST ONLY, seeded generators, NOT "
      "differentially private";
  hooks.job_random = [seed](int rank, uint64_t)
      -> absl::StatusOr<std::unique_ptr<dpopt::noise::RandomSource>> {
    return std::make_unique<dpopt::noise::testing::SeededRandomForTesting>(
        seed + static_cast<uint64_t>(rank));
  };
  if (fault_rank >= 0) {
    hooks.after_sum = [fault_rank, fault_sums](int rank, int64_t sums) {
      if (rank == fault_rank && sums == fault_sums) raise(SIGKILL);
    };
  }
  return dpopt::optim::mpi_pool::PoolWorkerMain(static_cast<int>(rest.size()),
                                                rest.data(), hooks);
}
