// RowSums: where a private release reads its rows. The private oracles
// (private_oracle.h; the line-search family's LineSearchOracle) charge a
// release, ask a RowSums for a clipped sum over a fresh Poisson sample, then
// add the noise themselves: a RowSums is the part of a release between the
// charge and the noise, and nothing it returns may leave an oracle before
// the noise is added. Two kinds of sums: the clipped gradient sum (one per
// gradient release), and the clipped loss sums of the line search (a sample
// drawn once per search, then the sum of min(loss_i(v), C) over it at each
// candidate point v the search evaluates).
//
// Three sources:
//   - LocalRowSums: the rows of one in-memory dataset, sampled with one
//     generator (every job in the server process; also one rank's shard on
//     an MPI worker pool).
//   - ShardedRowSums: several sources, each sampling its own rows with
//     its own generator, summed in shard order. With Poisson sampling at the
//     same rate q in every shard, the union of the shards' samples is exactly
//     a Poisson(q) sample of the whole dataset (each row is included
//     independently with probability q, whichever shard holds it). It is
//     what an MPI worker pool computes (core/optim/mpi_pool/), in one
//     process: the tests compare the two bit for bit.
//   - the pool's client (core/optim/mpi_pool/pool_row_sums.h): the same
//     sums computed by the pool's ranks on the shards placed on them.
//
// Shards are contiguous blocks of rows: ShardBegin(n, k, r) below.
#ifndef DPOPT_CORE_OPTIM_ROW_SUMS_H_
#define DPOPT_CORE_OPTIM_ROW_SUMS_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "Eigen/Dense"
#include "absl/status/status.h"
#include "core/data/dataset.h"
#include "core/noise/random.h"
#include "core/optim/objective.h"
#include "core/optim/poisson_sampler.h"

namespace dpopt::optim {

struct ClippedSumQuery {
  double sampling_rate = 1;  // q in [1e-12, 1]; 1 = every row, no draws
  Objective::ClipNorm norm = Objective::ClipNorm::kL2;
  double clip = 0;  // per-example bound C > 0 in `norm`
};

class RowSums {
 public:
  virtual ~RowSums() = default;
  // *sum (resized to the parameter size) <- the sum, over a fresh Poisson
  // sample at query.sampling_rate drawn by this source, of the per-example
  // gradients at w clipped to query.clip in query.norm. Its time depends on
  // the number of sampled rows and their nonzeros, not on their values.
  // Errors: a generator's error (then *sum must not be published), or the
  // source's transport error (pool).
  virtual absl::Status ClippedSum(const ClippedSumQuery& query,
                                  const Eigen::Ref<const Eigen::VectorXd>& w,
                                  Eigen::VectorXd* sum) = 0;
  // NON-PRIVATE: *sum <- the unclipped gradient sum over every row (the
  // oracle allows it only for runs calibrated as non-private).
  virtual absl::Status ExactSum(const Eigen::Ref<const Eigen::VectorXd>& w,
                                Eigen::VectorXd* sum) = 0;
  // Draws a fresh Poisson sample at `sampling_rate` (1: every row, no draws)
  // for the loss sums that follow. Errors: a generator's or the transport's.
  virtual absl::Status SampleForLosses(double sampling_rate) = 0;
  // *sum <- sum over the last SampleForLosses sample of min(loss_i(v), clip)
  // (no regularizer). REQUIRES: a sample was drawn; clip > 0.
  virtual absl::Status ClippedLossSum(
      double clip, const Eigen::Ref<const Eigen::VectorXd>& v, double* sum) = 0;
};

// The first row of shard r when n rows are split into k contiguous shards:
// floor(r n / k). Shard r is [ShardBegin(n, k, r), ShardBegin(n, k, r + 1)).
// REQUIRES: 0 <= r <= k, k >= 1, n >= 0.
int64_t ShardBegin(int64_t rows, int shards, int shard);

// The rows of one dataset, sampled with `rng`. `data`, `objective` and
// `rng` must outlive it; REQUIRES objective.CheckDataset(data) is OK (the
// oracle checks it).
class LocalRowSums final : public RowSums {
 public:
  LocalRowSums(const Dataset& data, const Objective& objective,
               noise::RandomSource& rng);
  absl::Status ClippedSum(const ClippedSumQuery& query,
                          const Eigen::Ref<const Eigen::VectorXd>& w,
                          Eigen::VectorXd* sum) override;
  absl::Status ExactSum(const Eigen::Ref<const Eigen::VectorXd>& w,
                        Eigen::VectorXd* sum) override;
  absl::Status SampleForLosses(double sampling_rate) override;
  absl::Status ClippedLossSum(double clip,
                              const Eigen::Ref<const Eigen::VectorXd>& v,
                              double* sum) override;

 private:
  // The sampler of one kind of sum, for the last rate it was used at.
  struct RateSampler {
    std::unique_ptr<PoissonSampler> sampler;
    double rate = 0;
  };
  // Poisson sample at rate q (< 1) into *batch.
  absl::Status Sample(double q, RateSampler& sampler,
                      std::vector<int64_t>* batch);
  const Dataset& data_;
  const Objective& objective_;
  noise::RandomSource& rng_;
  std::vector<int64_t> batch_;
  std::vector<int64_t> loss_batch_;
  RateSampler gradient_sampler_;
  RateSampler loss_sampler_;
};

// The shards' sums added in shard order: *sum = s_0, then *sum += s_r for
// r = 1, ..., k - 1 (the order an MPI pool's root adds its ranks' sums in).
// REQUIRES: at least one shard.
class ShardedRowSums final : public RowSums {
 public:
  explicit ShardedRowSums(std::vector<std::unique_ptr<RowSums>> shards);
  absl::Status ClippedSum(const ClippedSumQuery& query,
                          const Eigen::Ref<const Eigen::VectorXd>& w,
                          Eigen::VectorXd* sum) override;
  absl::Status ExactSum(const Eigen::Ref<const Eigen::VectorXd>& w,
                        Eigen::VectorXd* sum) override;
  absl::Status SampleForLosses(double sampling_rate) override;
  // The shards' loss sums added in shard order, like the vectors.
  absl::Status ClippedLossSum(double clip,
                              const Eigen::Ref<const Eigen::VectorXd>& v,
                              double* sum) override;

 private:
  std::vector<std::unique_ptr<RowSums>> shards_;
  Eigen::VectorXd part_;
};

// Opens the RowSums of a job whose rows are not in this process (an
// MPI worker pool's placed shards). Set on the SolveContext by the server;
// the oracle asks it once per run with the run's objective.
class RemoteRows {
 public:
  virtual ~RemoteRows() = default;
  virtual absl::StatusOr<std::unique_ptr<RowSums>> Open(
      const Objective& objective) = 0;
};

}  // namespace dpopt::optim

#endif  // DPOPT_CORE_OPTIM_ROW_SUMS_H_
