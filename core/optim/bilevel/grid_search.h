// dp_grid_search: the baseline analysts use without bilevel tuning
// (not in Kornowski 2024; the natural comparison for its Sec. 7 tuning):
// train one DP model per
// regularization weight of a grid on the training part, then select a weight
// privately on the validation part, all under ONE total budget.
//
// For each grid weight omega_j (in the given order): theta_j = DP-GD on
// (1/n_tr) sum_tr loss_i(theta) + omega_j/2 ||theta||^2 (c_i = Clip(grad,
// C) / n_tr, the practical inner solver of dp_loc_gd.h, warm-started from
// theta_{j-1} by default). Then report-noisy-min over the validation scores
// s_j = (1/n_val) sum_val min(loss_i(theta_j), C_obj): the exponential
// mechanism (permute-and-flip, noise/exponential_mechanism.h) with
// epsilon_sel, score sensitivity C_obj / n_val, monotone under add/remove.
// Output: theta_{j*}, omega_{j*}.
//
// Privacy: Composed{SelfComposed(J K, Gaussian(z)), Exponential(eps_sel)},
// eps_sel = sqrt(2 w_sel rho(epsilon, delta)) (the exponential mechanism's
// RDP as the ledger prices it, alpha eps^2 / 2, is then w_sel of the zCDP
// budget), and z the smallest value meeting (epsilon, delta) for the whole
// composition under the job's accountant. The split is the same as
// dp_tune_regularization's (tuning.h). Papernot-Steinke random stopping is
// not implemented.
#ifndef DPOPT_CORE_OPTIM_BILEVEL_GRID_SEARCH_H_
#define DPOPT_CORE_OPTIM_BILEVEL_GRID_SEARCH_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/optim/algorithm.h"
#include "core/optim/bilevel/dp_loc_gd.h"
#include "core/optim/bilevel/tuning.h"

namespace dpopt::optim::bilevel {

struct DpGridSearchOptions {
  TuningCommon common;
  // The grid (each in [weight_min, weight_max]); empty = grid_size values
  // log-spaced from weight_max down to weight_min.
  std::vector<double> grid;
  // [2, 200], default 20.
  int64_t grid_size = 20;
  // Training steps per grid point (practical inner solver; default 50).
  InnerSolverOptions train;
  bool warm_start = true;
  // C_obj, the clip of validation losses (0 = 2 loss(0)), (0, 1e6].
  double loss_clip = 0;
  // w_sel in (0, 1): the selection's share of the zCDP budget.
  double selection_share = 0.1;

  std::vector<double> EffectiveGrid() const;
  absl::Status Validate() const;
};

// name(): "dp_grid_search".
absl::StatusOr<std::unique_ptr<Algorithm>> NewDpGridSearch(
    const DpGridSearchOptions& options);

}  // namespace dpopt::optim::bilevel

#endif  // DPOPT_CORE_OPTIM_BILEVEL_GRID_SEARCH_H_
