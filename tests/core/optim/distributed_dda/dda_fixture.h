// Shared helpers of the distributed-DDA tests: small synthetic problems, a network
// of DdaNodes built directly from given shards (so tests know each node's
// data), and high-accuracy reference solutions.
#ifndef DPOPT_TESTS_CORE_OPTIM_DISTRIBUTED_DDA_DDA_FIXTURE_H_
#define DPOPT_TESTS_CORE_OPTIM_DISTRIBUTED_DDA_DDA_FIXTURE_H_

#include <cmath>
#include <memory>
#include <vector>

#include "Eigen/Dense"
#include "core/data/dataset.h"
#include "core/noise/testing/seeded_random.h"
#include "core/optim/objective.h"
#include "core/optim/distributed_dda/dda_node.h"
#include "core/optim/distributed_dda/engine.h"
#include "core/optim/distributed_dda/gossip.h"
#include "core/optim/distributed_dda/graph.h"
#include "core/optim/distributed_dda/schedule.h"
#include "core/optim/distributed_dda/testing/dp_dda_test_peer.h"
#include "core/optim/testing/noise_off.h"

namespace dpopt::optim::distributed_dda::test {

// rows x dim, rows of L2 norm `norm`, labels sign(<teacher, x>) flipped with
// probability 0.1. Deterministic in seed.
inline Dataset MakeBinary(int rows, int dim, uint64_t seed, double norm = 1.0) {
  noise::testing::SeededRandomForTesting rng(seed);
  auto gauss = [&rng]() {
    const double u1 = rng.UniformDouble() + 1e-300, u2 = rng.UniformDouble();
    return std::sqrt(-2 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  };
  Eigen::VectorXd teacher(dim);
  for (int j = 0; j < dim; ++j) teacher[j] = gauss();
  Eigen::MatrixXd x(rows, dim);
  Eigen::VectorXd y(rows);
  for (int i = 0; i < rows; ++i) {
    for (int j = 0; j < dim; ++j) x(i, j) = gauss();
    x.row(i) *= norm / x.row(i).norm();
    y[i] = x.row(i).dot(teacher) >= 0 ? 1 : -1;
    if (rng.UniformDouble() < 0.1) y[i] = -y[i];
  }
  return Dataset::Dense(std::move(x), std::move(y), LabelKind::kBinary);
}

// Contiguous shards of q rows.
inline std::vector<Dataset> Shards(const Dataset& d, int n) {
  const int64_t q = d.rows() / n;
  std::vector<Dataset> out;
  for (int i = 0; i < n; ++i) {
    Eigen::MatrixXd x = d.dense().middleRows(i * q, q);
    Eigen::VectorXd y = d.labels().segment(i * q, q);
    out.push_back(Dataset::Dense(std::move(x), std::move(y), d.label_kind(),
                                 d.num_classes()));
  }
  return out;
}

inline const NoiseAdder& NoNoise() {
  static const optim::testing::NoNoiseForTesting* const k =
      new optim::testing::NoNoiseForTesting();
  return *k;
}

// A network of nodes on given shards, run by the engine in one process.
struct Net {
  Net(const std::vector<Dataset>& shards, const ModelConfig& model,
      const NodeParams& node_params, const Graph& g, const GossipOptions& go,
      uint64_t public_seed, uint64_t secret_seed, const NoiseAdder& noise)
      : graph(g), params(node_params) {
    objective = *Objective::Create(model, shards[0].dimension());
    gossip = std::make_unique<Gossip>(&graph, go, public_seed);
    for (size_t i = 0; i < shards.size(); ++i) {
      nodes.push_back(std::make_unique<DdaNode>(
          static_cast<int>(i), shards[i], objective.get(), &params,
          testing::SeededNodeRandom(secret_seed, static_cast<int>(i)), &noise));
      local.push_back(nodes.back().get());
    }
  }
  EngineResult Run(const EngineOptions& eo, const Schedule& s,
                   TraceSink sink = nullptr) {
    LocalTransport transport;
    Placement placement{static_cast<int>(nodes.size()), 1};
    if (!sink)
      sink = [](int64_t, const Eigen::VectorXd&, double) { return true; };
    auto r = RunEngine(eo, s, *gossip, placement, local, transport, sink);
    EXPECT_TRUE(r.ok()) << r.status();
    return *std::move(r);
  }
  Graph graph;
  NodeParams params;
  std::unique_ptr<Objective> objective;
  std::unique_ptr<Gossip> gossip;
  std::vector<std::unique_ptr<DdaNode>> nodes;
  std::vector<DdaNode*> local;
};

// Full-batch non-private F(x) = mean loss + (mu/2)||x||^2 + phi ||x||_1.
inline double F(const Objective& o, const Dataset& d,
                const Eigen::VectorXd& x) {
  return o.Loss(d, x);
}

// argmin F by proximal gradient (FISTA with restarts), to ~1e-12.
inline Eigen::VectorXd Minimize(const Objective& o, const Dataset& d,
                                double smoothness, int iterations = 20000) {
  const double mu = o.config().l2, phi = o.config().l1;
  const double step = 1 / (smoothness + mu);
  Eigen::VectorXd x = Eigen::VectorXd::Zero(o.parameter_size()), y = x;
  double t = 1;
  for (int k = 0; k < iterations; ++k) {
    Eigen::VectorXd g = o.SmoothGradient(d, y);
    Eigen::VectorXd v = y - step * g;
    Eigen::VectorXd xn = v;
    for (Eigen::Index j = 0; j < v.size(); ++j) {
      const double m = std::fabs(v[j]) - step * phi;
      xn[j] = m > 0 ? std::copysign(m, v[j]) : 0.0;
    }
    const double tn = (1 + std::sqrt(1 + 4 * t * t)) / 2;
    y = xn + ((t - 1) / tn) * (xn - x);
    if ((y - xn).dot(xn - x) > 0) {  // restart
      y = xn;
      t = 1;
    } else {
      t = tn;
    }
    x = xn;
  }
  return x;
}

}  // namespace dpopt::optim::distributed_dda::test

#endif  // DPOPT_TESTS_CORE_OPTIM_DISTRIBUTED_DDA_DDA_FIXTURE_H_
