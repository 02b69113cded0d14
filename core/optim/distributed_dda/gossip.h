// Node subsampling and gossip matrices of distributed-DDA family (Liu,
// Johansson & Shi 2023, Sec. 3.1 and Assumption 2; the paper does not say how
// W^(t) is built on a general graph): at every iteration t the PUBLIC stream
// keyed by (public_seed, t) decides the set S_t of nodes that compute a noisy
// gradient and the doubly stochastic W^(t), with Metropolis weights on the
// graph of the pairs that mix, degrees counted inside that graph:
//   w_ij = 1 / (1 + max(deg_i, deg_j)),  w_ii = 1 - sum_j w_ij,
// and w_ii = 1 (row e_i) for every node whose dual state does not change.
//
// Activation modes:
//  * kEdges (the paper's experiments): e distinct edges uniform over the base
//    graph's edges; S_t = their endpoints; W^(t) = Metropolis on the sampled
//    edges (one edge: pairwise averaging). Nominal iota = 2e / n.
//  * kNodes (the paper's Definition 2): a uniform k-subset; W^(t) =
//    Metropolis on the induced subgraph. iota = k / n.
//  * kBernoulli: each node independently with probability p; induced
//    subgraph. iota = p.
//  * kAll: every node, every step, W = Metropolis on the base graph
//    (classical DDA with a fixed W). iota = 1.
// all_nodes_compute (a reconstruction of the paper's baseline, its
// reference [19], which the paper does not restate): every node computes
// and adds its noisy gradient at every step (S_t = all, iota = 1), while W^(t)
// still comes from the mode above (nodes outside it keep w_ii = 1).
#ifndef DPOPT_CORE_OPTIM_DISTRIBUTED_DDA_GOSSIP_H_
#define DPOPT_CORE_OPTIM_DISTRIBUTED_DDA_GOSSIP_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "core/optim/distributed_dda/graph.h"

namespace dpopt::optim::distributed_dda {

enum class Activation { kEdges, kNodes, kBernoulli, kAll };

// "edges", "nodes", "bernoulli", "all".
std::string ActivationName(Activation a);

struct GossipOptions {
  Activation activation = Activation::kEdges;
  // kEdges: e >= 1 distinct edges per step (default 1).
  int edges_per_step = 1;
  // kNodes: k in [1, n] (required).
  int active_nodes = 0;
  // kBernoulli: p in (0, 1] (required).
  double activation_probability = 0;
  bool all_nodes_compute = false;

  // INVALID_ARGUMENT if the mode does not fit `graph` (e.g. more edges per
  // step than the graph has).
  absl::Status Validate(const Graph& graph) const;
};

// One row of W^(t) for a node whose dual state changes.
struct MixRow {
  double self_weight = 1;
  // (j, w_ij), j ascending, w_ij > 0.
  std::vector<std::pair<int, double>> neighbors;
};

struct GossipStep {
  // Nodes computing a noisy gradient at this step, ascending.
  std::vector<int> active;
  // rows[k] is the row of active[k] (w_ii = 1 and no neighbours for an
  // active node that mixes with nobody).
  std::vector<MixRow> rows;
};

class Gossip {
 public:
  // REQUIRES: options.Validate(*graph) is OK; graph outlives the object.
  Gossip(const Graph* graph, const GossipOptions& options,
         uint64_t public_seed);

  // S_t and W^(t) for t >= 1; a pure function of (public_seed, t).
  void Step(int64_t t, GossipStep* out) const;
  // S_t only (same draws as Step).
  void ActiveSet(int64_t t, std::vector<int>* active) const;
  // Per node, the number of steps t in [1, steps] with the node in S_t.
  std::vector<int64_t> ActivationCounts(int64_t steps) const;
  // The nominal node-sampling ratio iota of the mode (see above).
  double NominalIota() const;
  const Graph& graph() const { return *graph_; }
  const GossipOptions& options() const { return options_; }

 private:
  // Draws the mixing pairs (kEdges) or the mixing node set (others).
  void Draw(int64_t t, std::vector<std::pair<int, int>>* pairs,
            std::vector<int>* mixing) const;
  const Graph* graph_;
  GossipOptions options_;
  uint64_t seed_;
  GossipStep all_;  // kAll's fixed step
};

}  // namespace dpopt::optim::distributed_dda

#endif  // DPOPT_CORE_OPTIM_DISTRIBUTED_DDA_GOSSIP_H_
