// NOISYBTLS: the noisy Armijo backtracking line search of line-search family
// (Chen & Lee 2022, Algorithm 1; docs/algorithms/line_search.md) as an
// AboveThreshold
// sparse-vector test with cutoff 1 and public threshold 0, and the data
// access that feeds it (LineSearchOracle).
//
// Queries, for candidates eta_i = eta0 beta^{i-1}, i = 1..max_it (Alg. 1
// line 7, scaled):
//   q_i = F(w) - F(w - eta_i g) - c_A eta_i m ||g||^2,
//   F(v) = sum_{j in S} min(loss_j(v), C_obj) + m R(v),
// with m = q n the PUBLIC expected batch size: the paper's f is a sum and g
// an average, so its literal Armijo term is |B| times too small, and scaling
// by the realised |B| would make the sensitivity unbounded. For a
// nonnegative loss each q_i has add/remove sensitivity C_obj (objective
// clipping, Thm 1).
//
// Discretisation (docs/architecture.md, invariant "secure noise only";
// Mironov 2012): q_i is rounded to the nearest
// point of a power-of-two grid gamma, so neighbouring rounded queries differ
// by at most ceil(C_obj / gamma) + 1 grid units; we use
// Delta_g = ceil(C_obj / gamma) + 2 (one more unit absorbs floating-point
// error in the sums). Noise is drawn in grid units by the exact discrete
// samplers (core/noise/discrete_samplers.h) and compared in integers:
//   Laplace  (Thm 1, Alg. 1 line 3):  b_T = 2 Delta_g / eps_BT,
//                                  b_Q = 4 Delta_g / eps_BT.
//   Gaussian (Thm 3, Alg. 1 line 3): s_T = Delta_g sqrt(3 / (2 rho_BT)),
//                                     s_Q = Delta_g sqrt(3 / rho_BT).
// The AboveThreshold shift argument (Lyu, Su, Li 2017, Alg. 1 with
// non-monotone queries) only uses integer shifts by Delta_g and 2 Delta_g
// and the ratio bound of the noise pmf, which the discrete Laplace satisfies
// exactly; so the Laplace version is eps_BT-DP for any number of rejected
// candidates, including the capped "fail" output (the paper's Appendix A
// argument: append a dummy query that always answers "above").
// The grid is the power of two >= 2^-25 b_T (real units), so b_Q is at most
// ~2^26 grid units (within the sampler's range) and C_obj / grid lies in
// (2^23 eps_BT, 2^24 eps_BT]: the rounding adds a relative <= 3 * 2^-23 /
// eps_BT to the sensitivity (folded into the noise, never ignored).
#ifndef DPOPT_CORE_OPTIM_LINE_SEARCH_SVT_LINE_SEARCH_H_
#define DPOPT_CORE_OPTIM_LINE_SEARCH_SVT_LINE_SEARCH_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "Eigen/Dense"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/data/dataset.h"
#include "core/noise/random.h"
#include "core/optim/objective.h"
#include "core/optim/poisson_sampler.h"
#include "core/optim/release_budget.h"
#include "core/optim/row_sums.h"
#include "core/privacy/dp_event.h"

namespace dpopt::optim::line_search {

enum class SvtNoiseKind { kLaplace, kGaussian };

// Noise plan of one AboveThreshold call. All scales in grid units.
struct SvtPlan {
  SvtNoiseKind kind = SvtNoiseKind::kLaplace;
  double sensitivity = 0;  // Delta_q = C_obj (declared by the algorithm)
  double epsilon = 0;      // Laplace: eps_BT
  double rho = 0;          // Gaussian: rho_BT
  double grid = 0;         // gamma, a power of two
  int64_t sensitivity_in_grid_units = 0;  // Delta_g
  double effective_sensitivity = 0;       // Delta_g * gamma
  double threshold_scale = 0;  // Laplace b_T or Gaussian std s_T (grid units)
  double query_scale = 0;      // Laplace b_Q or Gaussian std s_Q (grid units)
};

// Errors: INVALID_ARGUMENT unless sensitivity and budget are finite, > 0
// and the resulting scales fit the samplers' range.
absl::StatusOr<SvtPlan> PlanLaplaceSvt(double sensitivity, double epsilon);
absl::StatusOr<SvtPlan> PlanGaussianSvt(double sensitivity, double rho);

// Scalar noise of AboveThreshold, in grid units. Production code uses
// SecureSvtNoise() (exact discrete samplers on the secure generator); the
// only other implementation is the test double in line_search/testing (NOT DP).
class SvtNoise {
 public:
  virtual ~SvtNoise() = default;
  virtual absl::StatusOr<int64_t> Threshold(const SvtPlan& plan,
                                            noise::RandomSource& rng) const = 0;
  virtual absl::StatusOr<int64_t> Query(const SvtPlan& plan,
                                        noise::RandomSource& rng) const = 0;
};
const SvtNoise& SecureSvtNoise();

struct LineSearchOptions {
  double initial_step = 2.0;  // eta0 > 0 (not given in the paper)
  double shrink = 0.8;        // beta in (0, 1)
  int max_candidates = 15;    // max_it in [1, 100]
  double armijo = 0.5;        // c_A in [0, 1)
  // Returned when no candidate passes: 0 (DP-BLSGD) or beta^max_it eta0
  // (neural-network variant, Sec. 5.7). >= 0.
  double fallback_step = 0;
  absl::Status Validate() const;
};

struct LineSearchResult {
  double step = 0;                // the released eta (fallback if !accepted)
  bool accepted = false;          // some candidate answered "above"
  int candidates = 0;             // candidates evaluated (k for an answer at k)
  int objective_evaluations = 0;  // k + 1 (F(w) once, then one per candidate)
};

// Algorithm 1 on an already chosen batch. `batch_objective(v)` returns F(v)
// above (clipped sum plus m R(v)); `m` is the public normaliser.
// Errors: INVALID_ARGUMENT (options, sizes, non-finite or out-of-range query
// values), or the noise source's error (then nothing may be published).
absl::StatusOr<LineSearchResult> NoisyBacktracking(
    const std::function<double(const Eigen::VectorXd&)>& batch_objective,
    const Eigen::VectorXd& w, const Eigen::VectorXd& g, double m,
    const LineSearchOptions& options, const SvtPlan& plan,
    const SvtNoise& noise, noise::RandomSource& rng);

// What one line-search data access is charged (add/remove relation):
// SparseVector(eps_BT), wrapped in PoissonSampled(q, .) when q < 1 (the
// search runs on its own fresh Poisson batch). The RDP accountant prices it
// as the tight RDP of a pure log(1 + q (e^eps - 1))-DP mechanism (Poisson
// amplification of pure DP under add/remove).
absl::StatusOr<privacy::DpEvent> LaplaceSvtEvent(double epsilon,
                                                 double sampling_rate);

// What one Gaussian line search is charged (add/remove relation):
// GaussianSparseVector(sqrt(3 / (2 rho_BT)), sqrt(3 / rho_BT), max_it) (the
// multipliers of PlanGaussianSvt, relative to Delta_g), wrapped in
// PoissonSampled(q, .) when q < 1. Its RDP is
// raw(alpha) = (4/3) alpha rho_BT + log(max_it + 1) / (alpha - 1)
// (Zhu & Wang 2020, Thm 8; the paper's Thm 3 claims alpha rho_BT and omits
// the outcome sum), amplified by the accountant's generic Zhu-Wang 2019
// bound and capped by the raw curve.
absl::StatusOr<privacy::DpEvent> GaussianSvtEvent(double rho,
                                                  int max_candidates,
                                                  double sampling_rate);

// F(v) = sum_{i in batch} min(loss_i(v), clip) + m R(v) (the clipped
// objective of Thm 1; R is the model's public regularizer). NON-PRIVATE
// value: only for the line search's noisy comparison and for tests.
double ClippedBatchObjective(const Objective& objective, const Dataset& data,
                             const std::vector<int64_t>& batch, double clip,
                             double m, const Eigen::VectorXd& v);

struct SvtQuery {
  double epsilon = 0;         // eps_BT > 0 (Laplace; ignored for Gaussian)
  double clip_objective = 0;  // C_obj > 0: per-example loss clip = Delta_q
  double sampling_rate = 1;   // q in [1e-12, 1]; a fresh batch per call
  SvtNoiseKind noise = SvtNoiseKind::kLaplace;
  double rho = 0;  // rho_BT > 0 (Gaussian; ignored for Laplace)
  absl::Status Validate() const;
};

// The event one Search(query, options) is charged: LaplaceSvtEvent or
// GaussianSvtEvent by query.noise. Errors: INVALID_ARGUMENT.
absl::StatusOr<privacy::DpEvent> SvtQueryEvent(
    const SvtQuery& query, const LineSearchOptions& options);

// The only place where the line search touches private rows. Like
// PrivateGradientOracle, it charges the budget BEFORE reading any row or
// drawing any randomness.
class LineSearchOracle {
 public:
  // Errors: INVALID_ARGUMENT if objective.CheckDataset(data) fails, the loss
  // can be negative, or public_rows < 1. References must outlive the oracle.
  static absl::StatusOr<std::unique_ptr<LineSearchOracle>> Create(
      const Dataset& data, const Objective& objective, int64_t public_rows,
      noise::RandomSource& rng, const SvtNoise& noise, ReleaseBudget& budget);
  // The same with the rows read through `rows` (the run's rows, shared with
  // its gradient oracle; e.g. an MPI worker pool's shards), which must
  // outlive the oracle; the noise is drawn from `rng`.
  static absl::StatusOr<std::unique_ptr<LineSearchOracle>> Create(
      RowSums& rows, const Objective& objective, int64_t public_rows,
      noise::RandomSource& rng, const SvtNoise& noise, ReleaseBudget& budget);

  // Charges SvtQueryEvent(query, options) (budget error => nothing touched),
  // draws a fresh Poisson(q) batch S, then runs NoisyBacktracking (Laplace or
  // Gaussian plan by query.noise) with Delta_q = C_obj and m = q n. Returns
  // only the released step (and public counts).
  absl::StatusOr<LineSearchResult> Search(const SvtQuery& query,
                                          const Eigen::VectorXd& w,
                                          const Eigen::VectorXd& g,
                                          const LineSearchOptions& options);

 private:
  LineSearchOracle(std::unique_ptr<RowSums> owned, RowSums& rows,
                   const Objective& objective, int64_t public_rows,
                   noise::RandomSource& rng, const SvtNoise& noise,
                   ReleaseBudget& budget);

  std::unique_ptr<RowSums> owned_rows_;  // null when borrowed
  RowSums& rows_;
  const Objective& objective_;
  const int64_t public_rows_;
  noise::RandomSource& rng_;
  const SvtNoise& noise_;
  ReleaseBudget& budget_;
};

}  // namespace dpopt::optim::line_search

#endif  // DPOPT_CORE_OPTIM_LINE_SEARCH_SVT_LINE_SEARCH_H_
