// PrivateGradientOracle: the only place where optimizers touch private rows.
// Every method returns a privatized quantity and charges its DP event to the
// run's ReleaseBudget BEFORE reading the data.
//
// Gaussian gradient release (docs/architecture.md, invariants "server-side
// sampling and clipping" and "secure noise only"), for a query (q, C, z)
// on the public row count n:
//   1. Poisson sampling by the server: each row is included independently
//      with probability exactly q (noise::PoissonSampler: below q = 1/8
//      geometric skips plus an exact thinning, O(batch) time; above, a lazy
//      comparison of a uniform's binary digits with q's per row).
//      q == 1 uses every row, no draws.
//   2. Per-example L2 clipping to C, enforced here whatever the client asked:
//      g_i <- g_i * min(1, C / ||g_i||_2).
//   3. S = sum of clipped g_i; under add/remove one row ||S - S'||_2 <= C.
//   4. Noise on the SUM through noise::AddGaussianNoise with
//      plan = noise::PlanGaussian(C, z, p) (the exactly sampled rounded
//      continuous Gaussian on a power-of-two grid, a post-processing of the
//      Gaussian mechanism; the grid rounding is in the plan's sensitivity).
//   5. Normalisation by the PUBLIC expected batch size q * n (post-
//      processing), then the data-independent regularizer gradient l2 * w.
// The DP event of one release is
//   PoissonSampled(q, Gaussian(z)),
// without the PoissonSampled wrapper when q == 1 (GaussianGradientEvent()).
//
// Laplace gradient release (accelerated family's pure-DP family): the same with
// per-example L1 clipping to C (||c (outer) x||_1 = ||c||_1 ||x||_1),
// noise::AddLaplaceNoise with plan = noise::PlanLaplace(C, b_mult, p), and
// the event PoissonSampled(q, DiscreteLaplace(b_mult))
// (LaplaceGradientEvent()).
//
// Where the rows are: steps 1-3 are a RowSums (row_sums.h): the
// rows of the job's dataset in this process (LocalRowSums, sampled with
// the run's generator), or the shards placed on an MPI worker pool, each
// rank sampling its own rows with its own secure generator and the sums
// added in rank order (SolveContext::remote_rows). The charge (before) and
// the noise (step 4, with the run's generator) are always here.
//
// Computation: steps 2-3 are
// Objective::AddClippedGradientSum (batched gather / clip / scatter, row
// norms computed on the fly); ExactGradient is Objective::AddGradientSum.
// Batches longer than one chunk (parallel.h ChunkRows; e.g. DP-GD's q = 1)
// run on up to GetParallelOptions().threads threads with a result bitwise
// independent of the thread count; smaller ones on the caller. The time of a
// release depends on the number of sampled rows and their nonzeros, not on
// the values in them (objective.h, "Timing").
//
// Extending: new privatized queries (e.g. line-search family's clipped loss
// sums for the noisy line search) belong here as further methods, each charging
// its exact event first.
#ifndef DPOPT_CORE_OPTIM_PRIVATE_ORACLE_H_
#define DPOPT_CORE_OPTIM_PRIVATE_ORACLE_H_

#include <cstdint>
#include <memory>

#include "Eigen/Dense"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/data/dataset.h"
#include "core/noise/random.h"
#include "core/noise/vector_mechanisms.h"
#include "core/optim/algorithm.h"
#include "core/optim/objective.h"
#include "core/optim/release_budget.h"
#include "core/optim/row_sums.h"
#include "core/privacy/dp_event.h"

namespace dpopt::optim {

// How calibrated noise is added to a clipped sum. Production code always
// uses SecureNoise(); the only other implementation is the test double in
// core/optim/testing/ (NOT differentially private, never in the server).
class NoiseAdder {
 public:
  virtual ~NoiseAdder() = default;
  virtual absl::Status AddGaussian(const noise::GaussianPlan& plan,
                                   noise::RandomSource& rng,
                                   Eigen::Ref<Eigen::VectorXd> v) const = 0;
  virtual absl::Status AddLaplace(const noise::LaplacePlan& plan,
                                  noise::RandomSource& rng,
                                  Eigen::Ref<Eigen::VectorXd> v) const = 0;
};

// noise::AddGaussianNoise / noise::AddLaplaceNoise (exact samplers).
const NoiseAdder& SecureNoise();

struct GaussianGradientQuery {
  double sampling_rate = 1;     // q in [1e-12, 1]; 1 = every row
  double clip_norm = 0;         // per-example L2 bound C > 0
  double noise_multiplier = 0;  // z > 0
  absl::Status Validate() const;
};

struct LaplaceGradientQuery {
  double sampling_rate = 1;     // q in [1e-12, 1]
  double clip_norm = 0;         // per-example L1 bound C > 0
  double scale_multiplier = 0;  // Laplace scale / effective L1 sensitivity
  absl::Status Validate() const;
};

// The exact DP event (add/remove relation) of one release on a parameter
// vector of size p. Errors: INVALID_ARGUMENT for invalid queries.
absl::StatusOr<privacy::DpEvent> GaussianGradientEvent(
    const GaussianGradientQuery& query, int64_t parameter_size);
absl::StatusOr<privacy::DpEvent> LaplaceGradientEvent(
    const LaplaceGradientQuery& query, int64_t parameter_size);

// The rows of a run, as its oracles read them: LocalRowSums over `data`
// sampled with *context.rng (after objective.CheckDataset(data)), or, when
// context.remote_rows is set, the remote rows opened for `objective`
// (`data` then holds no rows and is not read). REQUIRES: context.rng.
absl::StatusOr<std::unique_ptr<RowSums>> OpenRunRows(const Dataset& data,
                                                     const Objective& objective,
                                                     SolveContext& context);

class PrivateGradientOracle {
 public:
  // `public_rows` is the curator-declared row count n used to normalise.
  // All references must outlive the oracle.
  // Errors: INVALID_ARGUMENT if objective.CheckDataset(data) fails or
  // public_rows < 1.
  static absl::StatusOr<std::unique_ptr<PrivateGradientOracle>> Create(
      const Dataset& data, const Objective& objective, int64_t public_rows,
      noise::RandomSource& rng, const NoiseAdder& noise, ReleaseBudget& budget);
  // The run's oracle, as algorithms make it: the rows of `data` sampled and
  // noised with *context.rng, or, when context.remote_rows is set (jobs on
  // an MPI worker pool; `data` then holds no rows and is not read), the
  // remote rows opened for `objective`, noised with *context.rng.
  // REQUIRES: context.rng != nullptr.
  static absl::StatusOr<std::unique_ptr<PrivateGradientOracle>> Create(
      const Dataset& data, const Objective& objective, int64_t public_rows,
      SolveContext& context, ReleaseBudget& budget);
  // Rows read through `sums` (owned, or borrowed: it must then outlive the
  // oracle); noise from `rng`.
  static absl::StatusOr<std::unique_ptr<PrivateGradientOracle>> Create(
      std::unique_ptr<RowSums> sums, const Objective& objective,
      int64_t public_rows, noise::RandomSource& rng, const NoiseAdder& noise,
      ReleaseBudget& budget);
  static absl::StatusOr<std::unique_ptr<PrivateGradientOracle>> Create(
      RowSums& sums, const Objective& objective, int64_t public_rows,
      noise::RandomSource& rng, const NoiseAdder& noise, ReleaseBudget& budget);

  // *g = (sum_{i in B} clip_C(grad_i(w)) + noise) / (q n) + l2 w, as above.
  // Charges GaussianGradientEvent(query) first. Errors: INVALID_ARGUMENT
  // (bad query / w size), the budget's error (nothing read, *g untouched),
  // the rng's error (*g must not be published).
  absl::Status GaussianGradient(const GaussianGradientQuery& query,
                                const Eigen::Ref<const Eigen::VectorXd>& w,
                                Eigen::VectorXd* g);
  // Same with L1 clipping and Laplace noise.
  absl::Status LaplaceGradient(const LaplaceGradientQuery& query,
                               const Eigen::Ref<const Eigen::VectorXd>& w,
                               Eigen::VectorXd* g);

  // NON-PRIVATE: *g = (1/n) sum_i grad_i(w) + l2 w over every row, no
  // clipping, no noise. Charges DpEvent::NoOp(), which only
  // UnlimitedNoOpBudget accepts, i.e. only runs calibrated as non-private
  // (public datasets, decided by the server). FAILED_PRECONDITION otherwise.
  absl::Status ExactGradient(const Eigen::Ref<const Eigen::VectorXd>& w,
                             Eigen::VectorXd* g);

  const Objective& objective() const { return objective_; }
  int64_t public_rows() const { return public_rows_; }

 private:
  PrivateGradientOracle(std::unique_ptr<RowSums> owned, RowSums& sums,
                        const Objective& objective, int64_t public_rows,
                        noise::RandomSource& rng, const NoiseAdder& noise,
                        ReleaseBudget& budget);

  std::unique_ptr<RowSums> owned_sums_;  // null when borrowed
  RowSums& sums_;
  const Objective& objective_;
  const int64_t public_rows_;
  noise::RandomSource& rng_;
  const NoiseAdder& noise_;
  ReleaseBudget& budget_;
  Eigen::VectorXd sum_;
  // The event and plan of the last Gaussian query: a fixed-schedule run
  // asks the same query every step, and both are functions of the query
  // and the parameter size alone, so they are built once, not per step.
  struct GaussianRelease {
    GaussianGradientQuery query;
    privacy::DpEvent event;
    noise::GaussianPlan plan;
  };
  std::unique_ptr<GaussianRelease> gaussian_;
  // Returns the event and plan of `query` (validated), from gaussian_ when
  // the query is the last one.
  absl::StatusOr<const GaussianRelease*> GaussianReleaseFor(
      const GaussianGradientQuery& query);
};

}  // namespace dpopt::optim

#endif  // DPOPT_CORE_OPTIM_PRIVATE_ORACLE_H_
