#include "core/optim/distributed_dda/graph.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "core/optim/distributed_dda/public_stream.h"

namespace dpopt::optim::distributed_dda {

std::string GraphKindName(GraphKind kind) {
  switch (kind) {
    case GraphKind::kComplete:
      return "complete";
    case GraphKind::kRing:
      return "ring";
    case GraphKind::kGrid:
      return "grid";
    case GraphKind::kGeometric:
      return "geometric";
    case GraphKind::kErdosRenyi:
      return "erdos_renyi";
  }
  return "unknown";
}

absl::Status GraphOptions::Validate() const {
  if (!(radius == 0 || (radius > 0 && radius <= 1.5))) {
    return absl::InvalidArgumentError("graph radius must be in (0, 1.5]");
  }
  if (!(edge_probability == 0 ||
        (edge_probability > 0 && edge_probability <= 1))) {
    return absl::InvalidArgumentError(
        "graph edge_probability must be in (0, 1]");
  }
  return absl::OkStatus();
}

Graph Graph::FromEdges(int n, std::vector<std::pair<int, int>> edges) {
  Graph g;
  g.n_ = n;
  g.adjacency_.assign(static_cast<size_t>(n) * n, 0);
  g.neighbors_.assign(n, {});
  for (auto& [i, j] : edges) {
    if (i > j) std::swap(i, j);
  }
  std::sort(edges.begin(), edges.end());
  edges.erase(std::unique(edges.begin(), edges.end()), edges.end());
  for (const auto& [i, j] : edges) {
    g.adjacency_[i * n + j] = g.adjacency_[j * n + i] = 1;
    g.neighbors_[i].push_back(j);
    g.neighbors_[j].push_back(i);
  }
  for (auto& nb : g.neighbors_) std::sort(nb.begin(), nb.end());
  g.edges_ = std::move(edges);
  return g;
}

bool Graph::Connected() const {
  if (n_ <= 1) return true;
  std::vector<uint8_t> seen(n_, 0);
  std::vector<int> stack = {0};
  seen[0] = 1;
  int count = 1;
  while (!stack.empty()) {
    const int i = stack.back();
    stack.pop_back();
    for (int j : neighbors_[i]) {
      if (!seen[j]) {
        seen[j] = 1;
        ++count;
        stack.push_back(j);
      }
    }
  }
  return count == n_;
}

absl::StatusOr<Graph> Graph::Build(int n, const GraphOptions& options,
                                   uint64_t public_seed) {
  if (absl::Status s = options.Validate(); !s.ok()) return s;
  if (n < 1 || n > kMaxNodes) {
    return absl::InvalidArgumentError(
        absl::StrCat("nodes must be in [1, ", kMaxNodes, "], got ", n));
  }
  std::vector<std::pair<int, int>> edges;
  switch (options.kind) {
    case GraphKind::kComplete:
      for (int i = 0; i < n; ++i) {
        for (int j = i + 1; j < n; ++j) edges.emplace_back(i, j);
      }
      return FromEdges(n, std::move(edges));
    case GraphKind::kRing:
      for (int i = 0; i + 1 < n; ++i) edges.emplace_back(i, i + 1);
      if (n > 2) edges.emplace_back(0, n - 1);
      return FromEdges(n, std::move(edges));
    case GraphKind::kGrid: {
      int rows = 1;
      for (int r = 1; r * r <= n; ++r) {
        if (n % r == 0) rows = r;
      }
      const int cols = n / rows;
      for (int r = 0; r < rows; ++r) {
        for (int c = 0; c < cols; ++c) {
          const int i = r * cols + c;
          if (c + 1 < cols) edges.emplace_back(i, i + 1);
          if (r + 1 < rows) edges.emplace_back(i, i + cols);
        }
      }
      return FromEdges(n, std::move(edges));
    }
    case GraphKind::kGeometric:
    case GraphKind::kErdosRenyi:
      break;
  }
  const double ln_n = std::log(static_cast<double>(n));
  const double radius =
      options.radius > 0
          ? options.radius
          : std::max(0.5, std::sqrt(2 * ln_n / static_cast<double>(n)));
  const double p =
      options.edge_probability > 0
          ? options.edge_probability
          : (n <= 3 ? 1.0 : std::min(1.0, 2 * ln_n / static_cast<double>(n)));
  for (uint64_t attempt = 0; attempt < 1000; ++attempt) {
    PublicStream rng(public_seed, kGraphDomain, attempt);
    edges.clear();
    if (options.kind == GraphKind::kGeometric) {
      std::vector<double> x(n), y(n);
      for (int i = 0; i < n; ++i) {
        x[i] = rng.UniformDouble();
        y[i] = rng.UniformDouble();
      }
      for (int i = 0; i < n; ++i) {
        for (int j = i + 1; j < n; ++j) {
          const double dx = x[i] - x[j], dy = y[i] - y[j];
          if (dx * dx + dy * dy <= radius * radius) edges.emplace_back(i, j);
        }
      }
    } else {
      for (int i = 0; i < n; ++i) {
        for (int j = i + 1; j < n; ++j) {
          if (rng.UniformDouble() < p) edges.emplace_back(i, j);
        }
      }
    }
    Graph g = FromEdges(n, edges);
    if (g.Connected()) return g;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "the random ", GraphKindName(options.kind),
      " graph stayed disconnected in 1000 draws; raise the ",
      options.kind == GraphKind::kGeometric ? "radius" : "edge_probability"));
}

}  // namespace dpopt::optim::distributed_dda
