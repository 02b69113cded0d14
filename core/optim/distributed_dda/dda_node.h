// One node of distributed-DDA family's DP distributed dual averaging (Liu,
// Johansson & Shi 2023, Algorithm 1):
// the per-node code that runs unchanged in the in-process simulation and in
// every MPI rank. A node sees only its own shard, its own state (z_i, x_i,
// the running average), its own SECRET generator, the public parameters and
// the messages it receives; nothing global (so the simulation cannot use
// global information, such as z_bar, inside the algorithm).
//
// Per active step t (Algorithm 1, steps 4a-4f):
//   xi      <- the node's sample: b rows uniformly without replacement from
//              its q rows (kWithoutReplacement), or each row independently
//              with probability p (kPoisson), drawn from the secret generator;
//   g       <- sum_{i in xi} clip_L(grad loss_i(x_i))   (server-side clipping,
//              Objective::AddClippedExampleGradient, total on finite rows);
//   g       <- g + N(0, sigma^2 I) through the NoiseAdder (production: the
//              exact rounded Gaussian on a power-of-two grid, whose rounding
//              is in the plan's sensitivity);
//   zeta    <- g / b (b public: the batch size, or the expected batch size
//              p q_public of Poisson sampling);
//   message <- z_i + a_t zeta.
// Then (step 5) z_i <- sum_j w_ij M_j over j in {i} and its neighbours in
// ascending order (the prescribed summation order, so that simulation and
// MPI are bitwise identical), the primal map and the running average.
#ifndef DPOPT_CORE_OPTIM_DISTRIBUTED_DDA_DDA_NODE_H_
#define DPOPT_CORE_OPTIM_DISTRIBUTED_DDA_DDA_NODE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "Eigen/Dense"
#include "absl/status/status.h"
#include "core/data/dataset.h"
#include "core/noise/random.h"
#include "core/noise/vector_mechanisms.h"
#include "core/optim/distributed_dda/gossip.h"
#include "core/optim/distributed_dda/schedule.h"
#include "core/optim/objective.h"
#include "core/optim/private_oracle.h"

namespace dpopt::optim::distributed_dda {

enum class NodeSampling { kWithoutReplacement, kPoisson };

// Public parameters shared by every node.
struct NodeParams {
  NodeSampling sampling = NodeSampling::kWithoutReplacement;
  // kWithoutReplacement: rows per step, in [1, shard rows].
  int64_t batch_size = 1;
  // kPoisson: inclusion probability p in (0, 1].
  double poisson_rate = 0;
  // zeta = (noisy clipped sum) / normalizer.
  double normalizer = 1;
  // Per-example L2 clip L.
  double clip_norm = 1;
  // The Gaussian's plan (sensitivity, multiplier, grid, sigma).
  noise::GaussianPlan plan;
  // Node-sampling ratio iota used in the primal map.
  double iota = 1;
  Regularizer h;
};

class DdaNode {
 public:
  // `shard` is the node's own data; objective, noise and params are shared
  // and must outlive the node; `rng` is the node's secret generator.
  DdaNode(int id, Dataset shard, const Objective* objective,
          const NodeParams* params, std::unique_ptr<noise::RandomSource> rng,
          const NoiseAdder* noise);

  int id() const { return id_; }
  int64_t shard_rows() const { return shard_.rows(); }

  // z = 0, x = PRIMAL(0, iota A_1, gamma_1), average = x.
  void Init(double iota_a1, double gamma1);
  // Steps 4a-4f: *message = z + a_t zeta; zeta is kept (last_zeta()).
  // Errors: the generator's failure (fail closed: nothing may be
  // published; *message is then undefined) or INVALID_ARGUMENT from the
  // noise plan.
  absl::Status ComputeMessage(double a_t, Eigen::VectorXd* message);
  // Step 5 for an active node: z = w_ii M_i + sum_j w_ij M_j, summed in
  // ascending node order over {i} and the row's neighbours. `message_of(j)`
  // returns node j's message of this step (the node's own for j == id()).
  void Mix(const MixRow& row,
           const std::function<const Eigen::VectorXd&(int)>& message_of);
  // x = PRIMAL(z, iota A, gamma).
  void Primal(double iota_a, double gamma);
  // average += weight (x - average), weight = a_t / A_t.
  void Average(double weight);

  const Eigen::VectorXd& z() const { return z_; }
  const Eigen::VectorXd& x() const { return x_; }
  const Eigen::VectorXd& average() const { return average_; }
  // zeta of the last ComputeMessage (post-processing of the release).
  const Eigen::VectorXd& last_zeta() const { return zeta_; }

 private:
  absl::Status SampleBatch();

  const int id_;
  const Dataset shard_;
  const Objective* objective_;
  const NodeParams* params_;
  std::unique_ptr<noise::RandomSource> rng_;
  const NoiseAdder* noise_;
  Eigen::VectorXd row_norm_;
  std::vector<int64_t> batch_;
  Eigen::VectorXd coef_;
  Eigen::VectorXd z_, x_, average_, zeta_, mixed_;
};

}  // namespace dpopt::optim::distributed_dda

#endif  // DPOPT_CORE_OPTIM_DISTRIBUTED_DDA_DDA_NODE_H_
