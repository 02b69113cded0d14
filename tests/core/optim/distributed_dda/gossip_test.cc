// Distributed-DDA gossip (gossip.h): doubly stochastic gossip, the mixing
// constant beta on K_20, activation statistics; plus the base graphs and
// the public stream.
#include "core/optim/distributed_dda/gossip.h"

#include <cmath>
#include <vector>

#include "Eigen/Dense"
#include "core/optim/distributed_dda/graph.h"
#include "core/optim/distributed_dda/public_stream.h"
#include "gtest/gtest.h"
#include "tests/common/status_matchers.h"

namespace dpopt::optim::distributed_dda {
namespace {

Eigen::MatrixXd Dense(const GossipStep& s, int n) {
  Eigen::MatrixXd w = Eigen::MatrixXd::Identity(n, n);
  for (size_t k = 0; k < s.active.size(); ++k) {
    const int i = s.active[k];
    w(i, i) = s.rows[k].self_weight;
    for (const auto& [j, v] : s.rows[k].neighbors) w(i, j) = v;
  }
  return w;
}

Graph Build(int n, GraphKind kind, uint64_t seed = 7) {
  GraphOptions o;
  o.kind = kind;
  auto g = Graph::Build(n, o, seed);
  EXPECT_TRUE(g.ok()) << g.status();
  return *std::move(g);
}

TEST(GraphTest, KindsAreConnectedWithTheExpectedEdges) {
  EXPECT_EQ(Build(20, GraphKind::kComplete).edges().size(), 190u);
  EXPECT_EQ(Build(20, GraphKind::kRing).edges().size(), 20u);
  // 4 x 5 grid: 4*4 + 3*5 edges.
  EXPECT_EQ(Build(20, GraphKind::kGrid).edges().size(), 31u);
  for (GraphKind k : {GraphKind::kComplete, GraphKind::kRing, GraphKind::kGrid,
                      GraphKind::kGeometric, GraphKind::kErdosRenyi}) {
    for (int n : {1, 2, 5, 20, 64}) {
      const Graph g = Build(n, k, 3);
      EXPECT_TRUE(g.Connected()) << GraphKindName(k) << " " << n;
      EXPECT_EQ(g.nodes(), n);
    }
  }
  // Random graphs are a function of the public seed.
  EXPECT_EQ(Build(30, GraphKind::kGeometric, 11).edges(),
            Build(30, GraphKind::kGeometric, 11).edges());
  EXPECT_NE(Build(30, GraphKind::kErdosRenyi, 11).edges(),
            Build(30, GraphKind::kErdosRenyi, 12).edges());
  GraphOptions sparse;
  sparse.kind = GraphKind::kErdosRenyi;
  sparse.edge_probability = 1e-4;
  EXPECT_THAT(Graph::Build(50, sparse, 1).status(),
              ::dpopt::testing::StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(Graph::Build(0, GraphOptions(), 1).status(),
              ::dpopt::testing::StatusIs(absl::StatusCode::kInvalidArgument));
}

// Doubly stochastic, local gossip for every mode on several graphs.
TEST(GossipTest, EverySampledMatrixIsDoublyStochasticAndLocal) {
  struct Case {
    GraphKind graph;
    GossipOptions gossip;
  };
  std::vector<Case> cases;
  for (GraphKind g : {GraphKind::kComplete, GraphKind::kRing, GraphKind::kGrid,
                      GraphKind::kGeometric}) {
    GossipOptions e1, e2, nk, nb, all, base;
    e2.edges_per_step = 2;
    nk.activation = Activation::kNodes;
    nk.active_nodes = 6;
    nb.activation = Activation::kBernoulli;
    nb.activation_probability = 0.3;
    all.activation = Activation::kAll;
    base.all_nodes_compute = true;
    for (const GossipOptions& o : {e1, e2, nk, nb, all, base}) {
      cases.push_back({g, o});
    }
  }
  const int n = 20;
  for (const Case& c : cases) {
    const Graph graph = Build(n, c.graph);
    ASSERT_OK(c.gossip.Validate(graph));
    const Gossip gossip(&graph, c.gossip, 99);
    GossipStep s;
    std::vector<int> active;
    for (int64_t t = 1; t <= 300; ++t) {
      gossip.Step(t, &s);
      gossip.ActiveSet(t, &active);
      ASSERT_EQ(active, s.active);
      const Eigen::MatrixXd w = Dense(s, n);
      ASSERT_LE((w.rowwise().sum().array() - 1).abs().maxCoeff(), 1e-12);
      ASSERT_LE((w.colwise().sum().array() - 1).abs().maxCoeff(), 1e-12);
      ASSERT_LE((w - w.transpose()).cwiseAbs().maxCoeff(), 0);
      ASSERT_GE(w.minCoeff(), 0);
      std::vector<uint8_t> is_active(n, 0);
      for (int i : s.active) is_active[i] = 1;
      for (int i = 0; i < n; ++i) {
        for (int j = 0; j < n; ++j) {
          if (i == j || w(i, j) == 0) continue;
          ASSERT_TRUE(is_active[i] && is_active[j]);
          ASSERT_TRUE(graph.adjacent(i, j));
        }
        if (!is_active[i]) {
          ASSERT_EQ(w(i, i), 1);
        }
      }
    }
  }
}

// Mixing constant: beta = sqrt(rho(E[W^T W] - 11^T / n)) on K_20, 10^6 draws.
double MonteCarloBeta(int edges, int64_t draws) {
  const int n = 20;
  const Graph graph = Build(n, GraphKind::kComplete);
  GossipOptions o;
  o.edges_per_step = edges;
  const Gossip gossip(&graph, o, 2024);
  Eigen::MatrixXd m = Eigen::MatrixXd::Zero(n, n);
  GossipStep s;
  std::vector<uint8_t> is_active(n);
  for (int64_t t = 1; t <= draws; ++t) {
    gossip.Step(t, &s);
    std::fill(is_active.begin(), is_active.end(), 0);
    // W^T W = sum_i row_i^T row_i.
    for (size_t k = 0; k < s.active.size(); ++k) {
      const int i = s.active[k];
      is_active[i] = 1;
      std::vector<std::pair<int, double>> row = s.rows[k].neighbors;
      row.emplace_back(i, s.rows[k].self_weight);
      for (const auto& [a, wa] : row) {
        for (const auto& [b, wb] : row) m(a, b) += wa * wb;
      }
    }
    for (int i = 0; i < n; ++i) {
      if (!is_active[i]) m(i, i) += 1;
    }
  }
  m /= static_cast<double>(draws);
  m.array() -= 1.0 / n;
  Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> es(m);
  return std::sqrt(es.eigenvalues().cwiseAbs().maxCoeff());
}

TEST(GossipTest, MixingConstantOnK20MatchesTheSpec) {
  EXPECT_NEAR(MonteCarloBeta(1, 1'000'000), 0.973329, 1e-3);
  EXPECT_NEAR(MonteCarloBeta(2, 1'000'000), 0.948258, 1e-3);
}

// Sizes and frequencies of the active sets, independence over t.
TEST(GossipTest, ActivationStatistics) {
  const int n = 20;
  const Graph graph = Build(n, GraphKind::kComplete);
  const int64_t T = 200000;
  struct Case {
    GossipOptions o;
    double freq;
  };
  GossipOptions e1, e2, nk;
  e2.edges_per_step = 2;
  nk.activation = Activation::kNodes;
  nk.active_nodes = 4;
  for (const Case& c :
       {Case{e1, 0.1}, Case{e2, 1 - 171.0 * 170 / (190.0 * 189)},
        Case{nk, 0.2}}) {
    const Gossip gossip(&graph, c.o, 5);
    std::vector<int64_t> counts(n, 0), both(n, 0);
    std::vector<uint8_t> prev(n, 0), cur(n, 0);
    std::vector<int> active;
    for (int64_t t = 1; t <= T; ++t) {
      gossip.ActiveSet(t, &active);
      if (c.o.activation == Activation::kNodes) {
        ASSERT_EQ(active.size(), 4u);
      }
      std::fill(cur.begin(), cur.end(), 0);
      for (int i : active) {
        cur[i] = 1;
        ++counts[i];
        if (prev[i]) ++both[i];
      }
      prev = cur;
    }
    const double p = c.freq;
    const double se = std::sqrt(p * (1 - p) / T);
    for (int i = 0; i < n; ++i) {
      EXPECT_NEAR(counts[i] / static_cast<double>(T), p, 5 * se) << i;
      // Independence over t: P(active at t and t+1) = p^2.
      const double pp = both[i] / static_cast<double>(T - 1);
      EXPECT_NEAR(pp, p * p, 5 * std::sqrt(p * p * (1 - p * p) / T)) << i;
    }
    // ActivationCounts agrees with the loop.
    EXPECT_EQ(gossip.ActivationCounts(T), counts);
  }
  GossipOptions base;
  base.all_nodes_compute = true;
  EXPECT_EQ(Gossip(&graph, base, 1).ActivationCounts(50),
            std::vector<int64_t>(n, 50));
  EXPECT_DOUBLE_EQ(Gossip(&graph, e1, 1).NominalIota(), 0.1);
  EXPECT_DOUBLE_EQ(Gossip(&graph, e2, 1).NominalIota(), 0.2);
  EXPECT_DOUBLE_EQ(Gossip(&graph, base, 1).NominalIota(), 1.0);
}

TEST(GossipTest, SpecExamplesOfMetropolisWeights) {
  // One edge: pairwise averaging. Two edges sharing c (path a-c-b):
  // w_ac = w_cb = 1/3, w_aa = w_bb = 2/3, w_cc = 1/3.
  const Graph path = Graph::FromEdges(3, {{0, 1}, {1, 2}});
  GossipOptions o;
  o.edges_per_step = 2;
  const Gossip g(&path, o, 1);
  GossipStep s;
  g.Step(1, &s);
  const Eigen::MatrixXd w = Dense(s, 3);
  EXPECT_DOUBLE_EQ(w(0, 1), 1.0 / 3);
  EXPECT_DOUBLE_EQ(w(1, 2), 1.0 / 3);
  EXPECT_DOUBLE_EQ(w(0, 0), 2.0 / 3);
  EXPECT_DOUBLE_EQ(w(1, 1), 1.0 / 3);
  o.edges_per_step = 1;
  const Gossip g1(&path, o, 1);
  g1.Step(3, &s);
  ASSERT_EQ(s.active.size(), 2u);
  EXPECT_DOUBLE_EQ(s.rows[0].self_weight, 0.5);
  EXPECT_DOUBLE_EQ(s.rows[0].neighbors[0].second, 0.5);
  // Too many edges per step.
  o.edges_per_step = 3;
  EXPECT_THAT(o.Validate(path),
              ::dpopt::testing::StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(PublicStreamTest, DeterministicPerKeyAndRoughlyUniform) {
  PublicStream a(1, kGossipDomain, 5), b(1, kGossipDomain, 5),
      c(1, kGossipDomain, 6), d(1, kGraphDomain, 5);
  const uint64_t va = a.Next();
  EXPECT_EQ(va, b.Next());
  EXPECT_NE(va, c.Next());
  EXPECT_NE(va, d.Next());
  PublicStream u(3, 1, 1);
  std::vector<int> hist(10, 0);
  for (int i = 0; i < 100000; ++i) ++hist[u.UniformInt(10)];
  for (int h : hist) EXPECT_NEAR(h, 10000, 500);
}

}  // namespace
}  // namespace dpopt::optim::distributed_dda
