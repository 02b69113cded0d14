#include "core/optim/distributed_dda/gossip.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "core/optim/distributed_dda/public_stream.h"

namespace dpopt::optim::distributed_dda {
namespace {

// Metropolis rows for the nodes in `nodes` (ascending) of the graph with
// adjacency lists `adj` (indexed by node, ascending, degrees = sizes).
void MetropolisRows(const std::vector<int>& nodes,
                    const std::vector<std::vector<int>>& adj,
                    std::vector<MixRow>* rows) {
  rows->assign(nodes.size(), MixRow{});
  for (size_t k = 0; k < nodes.size(); ++k) {
    const int i = nodes[k];
    MixRow& row = (*rows)[k];
    double sum = 0;
    for (int j : adj[i]) {
      const double w =
          1.0 /
          (1.0 + static_cast<double>(std::max(adj[i].size(), adj[j].size())));
      row.neighbors.emplace_back(j, w);
      sum += w;
    }
    row.self_weight = 1 - sum;
  }
}

}  // namespace

std::string ActivationName(Activation a) {
  switch (a) {
    case Activation::kEdges:
      return "edges";
    case Activation::kNodes:
      return "nodes";
    case Activation::kBernoulli:
      return "bernoulli";
    case Activation::kAll:
      return "all";
  }
  return "unknown";
}

absl::Status GossipOptions::Validate(const Graph& graph) const {
  const int n = graph.nodes();
  switch (activation) {
    case Activation::kEdges:
      if (edges_per_step < 1 ||
          edges_per_step > static_cast<int64_t>(graph.edges().size())) {
        return absl::InvalidArgumentError(
            absl::StrCat("edges_per_step must be in [1, ", graph.edges().size(),
                         "] (the base graph's edges), got ", edges_per_step));
      }
      break;
    case Activation::kNodes:
      if (active_nodes < 1 || active_nodes > n) {
        return absl::InvalidArgumentError(absl::StrCat(
            "active_nodes must be in [1, ", n, "], got ", active_nodes));
      }
      break;
    case Activation::kBernoulli:
      if (!(activation_probability > 0 && activation_probability <= 1)) {
        return absl::InvalidArgumentError(
            "activation_probability must be in (0, 1]");
      }
      break;
    case Activation::kAll:
      break;
  }
  return absl::OkStatus();
}

Gossip::Gossip(const Graph* graph, const GossipOptions& options,
               uint64_t public_seed)
    : graph_(graph), options_(options), seed_(public_seed) {
  const int n = graph_->nodes();
  std::vector<std::vector<int>> adj(n);
  for (int i = 0; i < n; ++i) adj[i] = graph_->neighbors(i);
  for (int i = 0; i < n; ++i) all_.active.push_back(i);
  MetropolisRows(all_.active, adj, &all_.rows);
}

double Gossip::NominalIota() const {
  if (options_.all_nodes_compute) return 1.0;
  const double n = graph_->nodes();
  switch (options_.activation) {
    case Activation::kEdges:
      return std::min(1.0, 2.0 * options_.edges_per_step / n);
    case Activation::kNodes:
      return options_.active_nodes / n;
    case Activation::kBernoulli:
      return options_.activation_probability;
    case Activation::kAll:
      return 1.0;
  }
  return 1.0;
}

void Gossip::Draw(int64_t t, std::vector<std::pair<int, int>>* pairs,
                  std::vector<int>* mixing) const {
  PublicStream rng(seed_, kGossipDomain, static_cast<uint64_t>(t));
  const int n = graph_->nodes();
  pairs->clear();
  mixing->clear();
  switch (options_.activation) {
    case Activation::kEdges: {
      const auto& edges = graph_->edges();
      std::vector<uint64_t> picked;
      while (static_cast<int>(picked.size()) < options_.edges_per_step) {
        const uint64_t e = rng.UniformInt(edges.size());
        if (std::find(picked.begin(), picked.end(), e) == picked.end()) {
          picked.push_back(e);
        }
      }
      std::sort(picked.begin(), picked.end());
      for (uint64_t e : picked) {
        pairs->push_back(edges[e]);
        mixing->push_back(edges[e].first);
        mixing->push_back(edges[e].second);
      }
      break;
    }
    case Activation::kNodes: {
      // Floyd's algorithm: a uniform k-subset of {0..n-1}.
      const int k = options_.active_nodes;
      for (int j = n - k; j < n; ++j) {
        const int r = static_cast<int>(rng.UniformInt(j + 1));
        if (std::find(mixing->begin(), mixing->end(), r) == mixing->end()) {
          mixing->push_back(r);
        } else {
          mixing->push_back(j);
        }
      }
      break;
    }
    case Activation::kBernoulli:
      for (int i = 0; i < n; ++i) {
        if (rng.UniformDouble() < options_.activation_probability) {
          mixing->push_back(i);
        }
      }
      break;
    case Activation::kAll:
      for (int i = 0; i < n; ++i) mixing->push_back(i);
      break;
  }
  std::sort(mixing->begin(), mixing->end());
  mixing->erase(std::unique(mixing->begin(), mixing->end()), mixing->end());
}

void Gossip::ActiveSet(int64_t t, std::vector<int>* active) const {
  const int n = graph_->nodes();
  if (options_.all_nodes_compute || options_.activation == Activation::kAll) {
    active->resize(n);
    for (int i = 0; i < n; ++i) (*active)[i] = i;
    return;
  }
  std::vector<std::pair<int, int>> pairs;
  Draw(t, &pairs, active);
}

void Gossip::Step(int64_t t, GossipStep* out) const {
  if (options_.activation == Activation::kAll) {
    *out = all_;
    return;
  }
  const int n = graph_->nodes();
  std::vector<std::pair<int, int>> pairs;
  std::vector<int> mixing;
  Draw(t, &pairs, &mixing);
  // The mixing graph: sampled edges, or the subgraph induced by `mixing`.
  std::vector<std::vector<int>> adj(n);
  if (options_.activation == Activation::kEdges) {
    for (const auto& [i, j] : pairs) {
      adj[i].push_back(j);
      adj[j].push_back(i);
    }
    for (int i : mixing) std::sort(adj[i].begin(), adj[i].end());
  } else {
    for (int i : mixing) {
      for (int j : mixing) {
        if (j != i && graph_->adjacent(i, j)) adj[i].push_back(j);
      }
    }
  }
  std::vector<MixRow> rows;
  MetropolisRows(mixing, adj, &rows);
  if (!options_.all_nodes_compute) {
    out->active = std::move(mixing);
    out->rows = std::move(rows);
    return;
  }
  out->active.resize(n);
  out->rows.assign(n, MixRow{});
  for (int i = 0; i < n; ++i) out->active[i] = i;
  for (size_t k = 0; k < mixing.size(); ++k) {
    out->rows[mixing[k]] = std::move(rows[k]);
  }
}

std::vector<int64_t> Gossip::ActivationCounts(int64_t steps) const {
  std::vector<int64_t> counts(graph_->nodes(), 0);
  std::vector<int> active;
  for (int64_t t = 1; t <= steps; ++t) {
    ActiveSet(t, &active);
    for (int i : active) ++counts[i];
  }
  return counts;
}

}  // namespace dpopt::optim::distributed_dda
