// dp_dda: differentially private distributed dual averaging with node
// subsampling (distributed-DDA family; Liu, Johansson & Shi, "Distributed
// Empirical Risk Minimization With Differential Privacy", arXiv 2302.10520,
// 2023, Algorithm 1; docs/algorithms/distributed_dda.md).
//
// n nodes hold a random split of the dataset made by the server (secure
// generator): WBK/paper accounting deals exactly q = floor(N / n) rows to
// each node (the rest is unused), Poisson accounting assigns every row to a
// uniform node. Every node runs DdaNode (dda_node.h): a noisy clipped
// subgradient on its own sample, the message z_i + a_t zeta_i to its active
// neighbours, Metropolis mixing (gossip.h), the closed-form l1/l2 primal map
// and the running average (schedule.h). The engine (engine.h) runs all nodes
// in the server process (the simulation); the MPI execution runs the same
// engine and node code in one process per rank.
//
// Released: the network average x_bar = (1/n) sum_i x~_i^(T) as the model,
// its trace (x_bar^(t), ||theta^(t-1)||), K and, if asked, the per-node
// models x~_i^(T). All are post-processing of the noisy messages plus public
// randomness (the activation pattern is public anyway: it comes from the
// released public seed). Nothing computed on private rows without noise
// (F(x), accuracy) is released: such metrics are not post-processing.
//
// Privacy: accounting.h (visible activation only; the paper's calibration
// only on public data).
#ifndef DPOPT_CORE_OPTIM_DISTRIBUTED_DDA_DP_DDA_H_
#define DPOPT_CORE_OPTIM_DISTRIBUTED_DDA_DP_DDA_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/noise/random.h"
#include "core/optim/algorithm.h"
#include "core/optim/distributed_dda/accounting.h"
#include "core/optim/distributed_dda/engine.h"
#include "core/optim/distributed_dda/gossip.h"
#include "core/optim/distributed_dda/graph.h"
#include "core/optim/distributed_dda/mpi_launcher.h"
#include "core/optim/distributed_dda/schedule.h"

namespace dpopt::optim::distributed_dda {

namespace testing {
class DpDdaTestPeer;  // core/optim/distributed_dda/testing, never in the server
}  // namespace testing

// Where the nodes run: all in this process (the simulation), or one MPI
// process per rank started with mpirun (mpi_launcher.h; the same engine and
// node code).
enum class Execution { kSimulation, kMpi };

struct DpDdaOptions {
  ModelConfig model;  // h = (l2/2) ||x||^2 + l1 ||x||_1 (mu = l2, phi = l1)
  // n in [1, 256] (the paper's experiments: 20).
  int nodes = 20;
  GraphOptions graph;
  // Default: one random edge per step (the paper's experiments).
  GossipOptions gossip;
  // Unset = the paper's experiments (Sec. 5): l2 > 0 and l1 = 0: a_t = t,
  // gamma_t = 20; otherwise a_t = 1, gamma_t = 0.01 sqrt(t).
  std::optional<ScheduleOptions> schedule;
  // T in [2, 10^6]: iterates x^(1..T), T - 1 gradient passes.
  int64_t iterations = 0;
  // Per-example L2 clip L (the public Lipschitz bound), > 0.
  double clip_norm = 1;
  // Rows per node and step (paper: 1); Poisson mode: the expected number.
  int64_t batch_size = 1;
  AccountingMode accounting = AccountingMode::kAuto;
  // Paper mode's delta0 (the paper's experiments: 0.01), in (0, 1).
  double paper_delta0 = 0.01;
  // iota in the primal map (0 = the mode's nominal value, gossip.h).
  double iota = 0;
  bool literal_inactive = false;
  // Public seed of the graph, active sets and gossip matrices, in
  // [1, 2^53) (exact in a double); 0 = drawn when the algorithm is created.
  uint64_t public_seed = 0;
  bool release_node_models = false;
  // Trace every this many steps (>= 1; 0 = max(1, T / 100)).
  int64_t trace_every = 0;
  Execution execution = Execution::kSimulation;
  // kMpi: ranks in [1, min(nodes, mpi->max_ranks)] (0 = min(nodes, 4)).
  int mpi_ranks = 0;
  // kMpi: the server's MPI configuration (required).
  std::optional<MpiSettings> mpi;

  int EffectiveRanks() const;

  ScheduleOptions EffectiveSchedule() const;
  double EffectiveIota(const Gossip& gossip) const;
  absl::Status Validate() const;
};

// Creates a node's secret generator (production: noise::NewSecureRandom()).
using NodeRandomFactory =
    std::function<absl::StatusOr<std::unique_ptr<noise::RandomSource>>(
        int node)>;

class DpDda final : public Algorithm {
 public:
  // Errors: INVALID_ARGUMENT (options, or a random graph that is never
  // connected).
  static absl::StatusOr<std::unique_ptr<DpDda>> Create(
      const DpDdaOptions& options);

  std::string name() const override { return "dp_dda"; }
  absl::StatusOr<Calibration> Calibrate(
      const PublicDatasetInfo& info,
      const PrivacyTarget& target) const override;
  absl::StatusOr<SolveResult> Run(const Dataset& data,
                                  const Calibration& calibration,
                                  SolveContext& context) const override;

  const DpDdaOptions& options() const { return options_; }
  const Graph& graph() const { return *graph_; }
  const Gossip& gossip() const { return *gossip_; }
  uint64_t public_seed() const { return options_.public_seed; }

  // The calibration's privacy plan for `info` (exposed for tests).
  absl::StatusOr<AccountingPlan> Plan(const PublicDatasetInfo& info,
                                      const PrivacyTarget& target) const;

 private:
  friend class testing::DpDdaTestPeer;
  explicit DpDda(const DpDdaOptions& options) : options_(options) {}
  absl::StatusOr<EngineResult> RunSimulation(
      const Dataset& data, std::vector<std::vector<int64_t>>& shards,
      const Objective& objective, const NodeParams& params, int64_t trace_every,
      double iota, SolveContext& context, const TraceSink& sink,
      const std::function<bool()>& stop_requested) const;
  absl::StatusOr<SolveResult> Finish(EngineResult r, const Dataset& data,
                                     const Calibration& calibration,
                                     int64_t K) const;

  DpDdaOptions options_;
  std::unique_ptr<Graph> graph_;
  std::unique_ptr<Gossip> gossip_;
  NodeRandomFactory node_random_for_testing_;
  // Size of the job stream's chunks under MPI; 0: wire.h's kMaxChunkBytes
  // (tests lower it through DpDdaTestPeer).
  int64_t mpi_chunk_bytes_ = 0;
};

absl::StatusOr<std::unique_ptr<Algorithm>> NewDpDda(
    const DpDdaOptions& options);

// The data split of the run (exposed for tests): shard[i] lists the rows of
// node i. kWithoutReplacement: a uniformly random permutation dealt in
// blocks of exactly `shard_rows`; kPoisson: every row to a uniform node.
// Draws from `rng` (the server's secure generator); returns its status.
absl::Status SplitRows(int64_t rows, int nodes, NodeSampling sampling,
                       int64_t shard_rows, noise::RandomSource& rng,
                       std::vector<std::vector<int64_t>>* shards);

}  // namespace dpopt::optim::distributed_dda

#endif  // DPOPT_CORE_OPTIM_DISTRIBUTED_DDA_DP_DDA_H_
