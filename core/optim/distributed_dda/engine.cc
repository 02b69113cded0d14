#include "core/optim/distributed_dda/engine.h"

#include <utility>

#include "core/common/status_macros.h"

namespace dpopt::optim::distributed_dda {

int Placement::Owner(int node) const {
  // The largest r with First(r) <= node.
  int r = static_cast<int>(static_cast<int64_t>(node) * ranks / nodes);
  while (r + 1 < ranks && First(r + 1) <= node) ++r;
  while (r > 0 && First(r) > node) --r;
  return r;
}

absl::StatusOr<EngineResult> RunEngine(const EngineOptions& options,
                                       const Schedule& schedule,
                                       const Gossip& gossip,
                                       const Placement& placement,
                                       const std::vector<DdaNode*>& local,
                                       Transport& transport,
                                       const TraceSink& sink) {
  const int n = placement.nodes;
  const int64_t T = options.iterations;
  const double iota = options.iota;
  int64_t p = 0;
  for (DdaNode* node : local) {
    if (node == nullptr) continue;
    node->Init(iota * schedule.A(1), schedule.gamma(1));
    p = node->z().size();
  }
  std::vector<Eigen::VectorXd> messages(n);
  std::vector<Eigen::VectorXd> gathered(n);
  std::vector<uint8_t> was_active(n, 0);
  GossipStep step;
  EngineResult result;
  for (int64_t t = 1; t <= T; ++t) {
    if (t == 1 || t % options.trace_every == 0 || t == T) {
      // [x~_i ; zeta_i or 0] of every node onto rank 0, summed in node order.
      for (int i = 0; i < n; ++i) {
        if (local[i] == nullptr) continue;
        gathered[i].resize(2 * p);
        gathered[i].head(p) = local[i]->average();
        if (was_active[i]) {
          gathered[i].tail(p) = local[i]->last_zeta();
        } else {
          gathered[i].tail(p).setZero();
        }
      }
      RETURN_IF_ERROR(transport.GatherToRoot(placement, &gathered));
      bool go_on = true;
      if (transport.rank() == 0) {
        Eigen::VectorXd sum = gathered[0];
        for (int i = 1; i < n; ++i) sum += gathered[i];
        sum /= static_cast<double>(n);
        result.model = sum.head(sum.size() / 2);
        const double theta = sum.tail(sum.size() / 2).norm();
        result.steps_done = t;
        go_on = sink(t, result.model, theta);
        if (t == T) {
          result.node_models.resize(n);
          for (int i = 0; i < n; ++i) {
            result.node_models[i] = gathered[i].head(gathered[i].size() / 2);
          }
        }
      }
      ASSIGN_OR_RETURN(go_on, transport.BroadcastFlag(go_on));
      if (!go_on) {
        result.stopped = t < T;
        break;
      }
    }
    if (t == T) break;
    if (options.stop_requested && options.stop_requested()) {
      result.stopped = true;
      break;
    }
    gossip.Step(t, &step);
    const double a_t = schedule.a(t);
    for (int i : step.active) {
      if (local[i] == nullptr) continue;
      RETURN_IF_ERROR(local[i]->ComputeMessage(a_t, &messages[i]));
    }
    RETURN_IF_ERROR(transport.Exchange(t, step, placement, &messages));
    auto message_of = [&messages](int j) -> const Eigen::VectorXd& {
      return messages[j];
    };
    for (size_t k = 0; k < step.active.size(); ++k) {
      const int i = step.active[k];
      if (local[i] != nullptr) local[i]->Mix(step.rows[k], message_of);
    }
    std::fill(was_active.begin(), was_active.end(), 0);
    for (int i : step.active) was_active[i] = 1;
    const double iota_a = iota * schedule.A(t + 1);
    const double gamma = schedule.gamma(t + 1);
    const double weight = schedule.a(t + 1) / schedule.A(t + 1);
    for (int i = 0; i < n; ++i) {
      if (local[i] == nullptr) continue;
      if (!options.literal_inactive || was_active[i]) {
        local[i]->Primal(iota_a, gamma);
      }
      local[i]->Average(weight);
    }
    if (options.after_pass) options.after_pass(t, step);
  }
  return result;
}

}  // namespace dpopt::optim::distributed_dda
