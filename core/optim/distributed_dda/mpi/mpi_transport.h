// Transport (engine.h) over MPI point-to-point messages (distributed-DDA
// family): per gradient pass, each active node sends its message once to every
// other rank hosting one of its active neighbours (tag = sender node, the
// pass number appended and checked), and receives its remote neighbours'
// messages; no global barrier. Trace points gather every node's vector onto
// rank 0 (tag 10000 + node), which sums them in node order exactly as the
// simulation does. REQUIRES: MPI is initialised; one Transport per rank.
#ifndef DPOPT_CORE_OPTIM_DISTRIBUTED_DDA_MPI_MPI_TRANSPORT_H_
#define DPOPT_CORE_OPTIM_DISTRIBUTED_DDA_MPI_MPI_TRANSPORT_H_

#include <cstdint>
#include <vector>

#include "Eigen/Dense"
#include "core/optim/distributed_dda/engine.h"

namespace dpopt::optim::distributed_dda {

class MpiTransport final : public Transport {
 public:
  // `parameter_size` is the length of every node's message.
  MpiTransport(int rank, int64_t parameter_size)
      : rank_(rank), p_(parameter_size) {}
  int rank() const override { return rank_; }
  absl::Status Exchange(int64_t t, const GossipStep& step,
                        const Placement& placement,
                        std::vector<Eigen::VectorXd>* messages) override;
  absl::Status GatherToRoot(const Placement& placement,
                            std::vector<Eigen::VectorXd>* vectors) override;
  absl::StatusOr<bool> BroadcastFlag(bool value) override;

 private:
  const int rank_;
  const int64_t p_;
  std::vector<Eigen::VectorXd> send_, recv_;
};

}  // namespace dpopt::optim::distributed_dda

#endif  // DPOPT_CORE_OPTIM_DISTRIBUTED_DDA_MPI_MPI_TRANSPORT_H_
