// The iteration loop of distributed-DDA family's DP distributed dual
// averaging (Liu, Johansson & Shi 2023, Algorithm 1), shared by the
// in-process simulation and the MPI ranks: every
// rank runs this loop over the nodes it hosts, and a Transport moves the
// messages between ranks. With one rank hosting every node (LocalTransport)
// it is a faithful single-process simulation: synchronous
// (Jacobi) semantics, messages computed from the pre-update states into
// separate buffers, mixing in ascending node order.
//
// Output convention (the paper's output average, t = 1..T): the released
// per-node model is
// x~_i^(T) = A_T^{-1} sum_{t=1..T} a_t x_i^(t), which excludes x^(T+1), so
// the gradient of pass T (which only moves z^(T+1) and x^(T+1)) is never
// computed: the loop makes T - 1 gradient passes, and trace step t reports
// the network average of x~_i^(t) (t = 1..T; x~^(1) = x^(1) = 0 for the
// symmetric regularizers) together with ||theta^(t-1)||, theta^(s) =
// (1/n) sum_{j in S_s} zeta_j^(s) (0 at t = 1).
#ifndef DPOPT_CORE_OPTIM_DISTRIBUTED_DDA_ENGINE_H_
#define DPOPT_CORE_OPTIM_DISTRIBUTED_DDA_ENGINE_H_

#include <cstdint>
#include <functional>
#include <vector>

#include "Eigen/Dense"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/optim/distributed_dda/dda_node.h"
#include "core/optim/distributed_dda/gossip.h"
#include "core/optim/distributed_dda/schedule.h"

namespace dpopt::optim::distributed_dda {

// Block placement of n nodes on R ranks: rank r hosts
// [r n / R, (r + 1) n / R).
struct Placement {
  int nodes = 1;
  int ranks = 1;
  int First(int rank) const {
    return static_cast<int>(static_cast<int64_t>(rank) * nodes / ranks);
  }
  int Owner(int node) const;
};

class Transport {
 public:
  virtual ~Transport() = default;
  virtual int rank() const = 0;
  // For every active local node i and every neighbour j of its row hosted
  // elsewhere: sends (*messages)[i] to j's rank and receives (*messages)[j]
  // from it. Entries of local active nodes are filled before the call.
  virtual absl::Status Exchange(int64_t t, const GossipStep& step,
                                const Placement& placement,
                                std::vector<Eigen::VectorXd>* messages) = 0;
  // Collects (*vectors)[i] of every node i onto rank 0 (the local entries
  // are filled before the call; on rank 0 every entry is filled after it).
  virtual absl::Status GatherToRoot(const Placement& placement,
                                    std::vector<Eigen::VectorXd>* vectors) = 0;
  // Rank 0's value on every rank.
  virtual absl::StatusOr<bool> BroadcastFlag(bool value) = 0;
};

// Every node on one rank: nothing to move.
class LocalTransport final : public Transport {
 public:
  int rank() const override { return 0; }
  absl::Status Exchange(int64_t, const GossipStep&, const Placement&,
                        std::vector<Eigen::VectorXd>*) override {
    return absl::OkStatus();
  }
  absl::Status GatherToRoot(const Placement&,
                            std::vector<Eigen::VectorXd>*) override {
    return absl::OkStatus();
  }
  absl::StatusOr<bool> BroadcastFlag(bool value) override { return value; }
};

struct EngineOptions {
  int64_t iterations = 0;   // T >= 2
  int64_t trace_every = 1;  // >= 1
  // Inactive nodes keep x (Algorithm 1 line 12) instead of recomputing the
  // primal map with the new A_t, gamma_t (analysis mode, the default: what
  // the paper's proofs assume, Lemma 4.5).
  bool literal_inactive = false;
  double iota = 1;
  // Called after every gradient pass t (mixing, primal step and average
  // done) with that pass's S_t and W^(t); for tests and diagnostics that
  // read the local nodes' states (z_bar and y^(t) are computed only by such
  // an observer, never by the algorithm). May be empty.
  std::function<void(int64_t t, const GossipStep& step)> after_pass;
  // Asked before every gradient pass on this rank; true stops the run
  // (EngineResult::stopped) without a further trace point. Cheap (the
  // server's cancellation token). May be empty (never stops between trace
  // points); MPI ranks leave it empty: the server stops them by ending the
  // launcher's process group.
  std::function<bool()> stop_requested;
};

// Rank 0 only: trace step t with the network average of x~^(t) and
// ||theta^(t-1)||. Returning false stops the run after this step.
using TraceSink =
    std::function<bool(int64_t step, const Eigen::VectorXd& network_average,
                       double noisy_direction_norm)>;

struct EngineResult {
  // Rank 0: (1/n) sum_i x~_i at the last trace step, and the per-node x~_i.
  Eigen::VectorXd model;
  std::vector<Eigen::VectorXd> node_models;
  int64_t steps_done = 0;
  bool stopped = false;
};

// `local[i]` is node i if this rank hosts it, else null (size n).
// Errors: a node's generator failure (fail closed) or the transport's.
absl::StatusOr<EngineResult> RunEngine(const EngineOptions& options,
                                       const Schedule& schedule,
                                       const Gossip& gossip,
                                       const Placement& placement,
                                       const std::vector<DdaNode*>& local,
                                       Transport& transport,
                                       const TraceSink& sink);

}  // namespace dpopt::optim::distributed_dda

#endif  // DPOPT_CORE_OPTIM_DISTRIBUTED_DDA_ENGINE_H_
