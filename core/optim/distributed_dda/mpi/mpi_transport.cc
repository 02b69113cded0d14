#include "core/optim/distributed_dda/mpi/mpi_transport.h"

#include <mpi.h>

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace dpopt::optim::distributed_dda {
namespace {

constexpr int kGatherTag = 10000;

absl::Status MpiError(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return absl::OkStatus();
  return absl::InternalError(
      absl::StrCat(what, " failed (MPI error ", rc, ")"));
}

}  // namespace

absl::Status MpiTransport::Exchange(int64_t t, const GossipStep& step,
                                    const Placement& placement,
                                    std::vector<Eigen::VectorXd>* messages) {
  const int n = placement.nodes;
  send_.resize(n);
  recv_.resize(n);
  std::vector<MPI_Request> requests;
  std::vector<int> received;
  for (size_t k = 0; k < step.active.size(); ++k) {
    const int i = step.active[k];
    const int owner = placement.Owner(i);
    if (owner == rank_) {
      std::vector<int> ranks;
      for (const auto& [j, w] : step.rows[k].neighbors) {
        const int r = placement.Owner(j);
        if (r != rank_ &&
            std::find(ranks.begin(), ranks.end(), r) == ranks.end()) {
          ranks.push_back(r);
        }
      }
      if (ranks.empty()) continue;
      std::sort(ranks.begin(), ranks.end());
      send_[i].resize(p_ + 1);
      send_[i].head(p_) = (*messages)[i];
      send_[i][p_] = static_cast<double>(t);
      for (int r : ranks) {
        requests.emplace_back();
        if (absl::Status s = MpiError(
                MPI_Isend(send_[i].data(), static_cast<int>(p_ + 1), MPI_DOUBLE,
                          r, i, MPI_COMM_WORLD, &requests.back()),
                "MPI_Isend");
            !s.ok()) {
          return s;
        }
      }
    } else {
      // W is symmetric: i is needed here iff one of its neighbours is local.
      bool needed = false;
      for (const auto& [j, w] : step.rows[k].neighbors) {
        if (placement.Owner(j) == rank_) needed = true;
      }
      if (!needed) continue;
      recv_[i].resize(p_ + 1);
      requests.emplace_back();
      if (absl::Status s = MpiError(
              MPI_Irecv(recv_[i].data(), static_cast<int>(p_ + 1), MPI_DOUBLE,
                        owner, i, MPI_COMM_WORLD, &requests.back()),
              "MPI_Irecv");
          !s.ok()) {
        return s;
      }
      received.push_back(i);
    }
  }
  if (!requests.empty()) {
    if (absl::Status s =
            MpiError(MPI_Waitall(static_cast<int>(requests.size()),
                                 requests.data(), MPI_STATUSES_IGNORE),
                     "MPI_Waitall");
        !s.ok()) {
      return s;
    }
  }
  for (int i : received) {
    if (recv_[i][p_] != static_cast<double>(t)) {
      return absl::InternalError("MPI message from another pass");
    }
    (*messages)[i] = recv_[i].head(p_);
  }
  return absl::OkStatus();
}

absl::Status MpiTransport::GatherToRoot(const Placement& placement,
                                        std::vector<Eigen::VectorXd>* vectors) {
  const int n = placement.nodes;
  if (rank_ == 0) {
    const Eigen::Index size = (*vectors)[0].size();  // node 0 is on rank 0
    for (int i = 0; i < n; ++i) {
      const int owner = placement.Owner(i);
      if (owner == 0) continue;
      (*vectors)[i].resize(size);
      if (absl::Status s =
              MpiError(MPI_Recv((*vectors)[i].data(), static_cast<int>(size),
                                MPI_DOUBLE, owner, kGatherTag + i,
                                MPI_COMM_WORLD, MPI_STATUS_IGNORE),
                       "MPI_Recv");
          !s.ok()) {
        return s;
      }
    }
    return absl::OkStatus();
  }
  for (int i = 0; i < n; ++i) {
    if (placement.Owner(i) != rank_) continue;
    if (absl::Status s =
            MpiError(MPI_Send((*vectors)[i].data(),
                              static_cast<int>((*vectors)[i].size()),
                              MPI_DOUBLE, 0, kGatherTag + i, MPI_COMM_WORLD),
                     "MPI_Send");
        !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<bool> MpiTransport::BroadcastFlag(bool value) {
  int v = value ? 1 : 0;
  if (absl::Status s =
          MpiError(MPI_Bcast(&v, 1, MPI_INT, 0, MPI_COMM_WORLD), "MPI_Bcast");
      !s.ok()) {
    return s;
  }
  return v != 0;
}

}  // namespace dpopt::optim::distributed_dda
