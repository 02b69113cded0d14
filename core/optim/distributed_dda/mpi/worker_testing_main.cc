// TEST ONLY. NOT DIFFERENTIALLY PRIVATE.
// dpopt-dda-worker-testing: the MPI worker with seeded node generators
// (--test-seed=N, as DpDdaTestPeer::UseSeededNodes(N) in the simulation, so
// that both give bit-identical traces) and fault injection
// (--test-fault=die:RANK:PASS kills that rank after that gradient pass,
// --test-fault=hang:RANK:PASS makes it hang there). Built only for the tests;
// never installed, never started by a production server configuration.
#include <signal.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "core/optim/distributed_dda/mpi/worker.h"
#include "core/optim/distributed_dda/testing/dp_dda_test_peer.h"

int main(int argc, char** argv) {
  namespace s4 = dpopt::optim::distributed_dda;
  uint64_t seed = 0;
  std::string fault;
  int fault_rank = -1;
  int64_t fault_pass = -1;
  std::vector<char*> rest = {argv[0]};
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--identify") {
      // Never the production identity: a server refuses this worker.
      std::printf(
          "dpopt-dda-worker-testing: TEST ONLY, seeded generators, NOT "
          "differentially private\n");
      return 0;
    }
    if (absl::StartsWith(a, "--test-seed=")) {
      if (!absl::SimpleAtoi(a.substr(12), &seed)) return 2;
    } else if (absl::StartsWith(a, "--test-fault=")) {
      std::vector<std::string> parts = absl::StrSplit(a.substr(13), ':');
      if (parts.size() != 3 || !absl::SimpleAtoi(parts[1], &fault_rank) ||
          !absl::SimpleAtoi(parts[2], &fault_pass)) {
        return 2;
      }
      fault = parts[0];
    } else {
      rest.push_back(argv[i]);
    }
  }
  s4::WorkerHooks hooks;
  hooks.node_random = [seed](int node)
      -> absl::StatusOr<std::unique_ptr<dpopt::noise::RandomSource>> {
    return s4::testing::SeededNodeRandom(seed, node);
  };
  if (!fault.empty()) {
    hooks.after_pass = [fault, fault_rank, fault_pass](int rank, int64_t t) {
      if (rank != fault_rank || t != fault_pass) return;
      if (fault == "die") raise(SIGKILL);
      if (fault == "hang") {
        for (;;) pause();
      }
    };
  }
  int n = static_cast<int>(rest.size());
  return s4::WorkerMain(n, rest.data(), hooks);
}
