// Base communication graphs ("supergraphs") of distributed-DDA family:
// complete, ring, 2-D grid, random geometric and Erdos-Renyi. Random graphs
// are drawn from the job's PUBLIC seed (public_stream.h) and redrawn from
// the next sub-seed until connected (at most 1000 tries), so every rank
// builds the same graph without communication.
#ifndef DPOPT_CORE_OPTIM_DISTRIBUTED_DDA_GRAPH_H_
#define DPOPT_CORE_OPTIM_DISTRIBUTED_DDA_GRAPH_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace dpopt::optim::distributed_dda {

enum class GraphKind { kComplete, kRing, kGrid, kGeometric, kErdosRenyi };

// "complete", "ring", "grid", "geometric", "erdos_renyi".
std::string GraphKindName(GraphKind kind);

struct GraphOptions {
  GraphKind kind = GraphKind::kComplete;
  // kGeometric: nodes uniform in the unit square, an edge when their
  // distance is <= radius. 0 = default sqrt(2 ln(n) / n) (at least 0.5 for
  // n <= 8). Otherwise in (0, 1.5].
  double radius = 0;
  // kErdosRenyi: each edge independently with this probability. 0 = default
  // min(1, 2 ln(n) / n) (1 for n <= 3). Otherwise in (0, 1].
  double edge_probability = 0;

  absl::Status Validate() const;
};

class Graph {
 public:
  // Builds the graph on n nodes. INVALID_ARGUMENT for bad options, n outside
  // [1, kMaxNodes], or a random graph that stays disconnected (raise the
  // radius / probability).
  static constexpr int kMaxNodes = 256;
  static absl::StatusOr<Graph> Build(int n, const GraphOptions& options,
                                     uint64_t public_seed);

  int nodes() const { return n_; }
  // Edges (i, j) with i < j, sorted.
  const std::vector<std::pair<int, int>>& edges() const { return edges_; }
  // Neighbours of i, ascending.
  const std::vector<int>& neighbors(int i) const { return neighbors_[i]; }
  int degree(int i) const { return static_cast<int>(neighbors_[i].size()); }
  bool adjacent(int i, int j) const { return adjacency_[i * n_ + j] != 0; }
  bool Connected() const;

  // From an explicit edge list (tests). REQUIRES: 0 <= i, j < n, i != j.
  static Graph FromEdges(int n, std::vector<std::pair<int, int>> edges);

 private:
  int n_ = 0;
  std::vector<std::pair<int, int>> edges_;
  std::vector<std::vector<int>> neighbors_;
  std::vector<uint8_t> adjacency_;
};

}  // namespace dpopt::optim::distributed_dda

#endif  // DPOPT_CORE_OPTIM_DISTRIBUTED_DDA_GRAPH_H_
