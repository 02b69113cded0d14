// DP-GD / DP-SGD (Abadi et al. 2016, with Poisson subsampling by the server
// and exactly sampled rounded Gaussian noise).
//
// Per step t (see PrivateGradientOracle for the exact release):
//   g_t = (sum_{i in B_t} clip_C(grad loss_i(w_t)) + g round(N(0, tau^2 I)))
//         / (q n) + l2 w_t,       B_t ~ Poisson(q) over the rows,
//   v_t = beta v_{t-1} + g_t,  w_{t+1} = prox_{lr l1 ||.||_1}(w_t - lr v_t),
// from w_0 = 0. q = 1 is DP-GD (full batch, no sampling).
//
// Privacy: Calibrate() picks the smallest noise multiplier z such that
//   SelfComposed(T, PoissonSampled(q, Gaussian(z)))
// (no PoissonSampled when q = 1) is (epsilon, delta)-DP under add/remove for
// the target's accountant, p = number of parameters. For a dataset declared
// replace-one, the add/remove target is (epsilon/2, delta/(1 + e^{epsilon/2}))
// so that group privacy gives (epsilon, delta) under replace-one; the event
// is recorded as add/remove and the ledger applies that conversion.
#ifndef DPOPT_CORE_OPTIM_DP_SGD_H_
#define DPOPT_CORE_OPTIM_DP_SGD_H_

#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/optim/algorithm.h"
#include "core/optim/model.h"

namespace dpopt::optim {

struct DpSgdOptions {
  // q in [1e-12, 1]; 1 => DP-GD (full batch).
  double sampling_rate = 1.0;
  // T in [1, 10^6].
  int64_t steps = 0;
  // Per-example L2 clipping norm C in (0, 10^6]. Enforced by the server.
  double clip_norm = 0;
  // Step size in (0, 10^6].
  double learning_rate = 0;
  // Heavy-ball momentum beta in [0, 1).
  double momentum = 0;
  ModelConfig model;

  // INVALID_ARGUMENT for any value outside the ranges above.
  absl::Status Validate() const;
};

// name() == "dp_sgd". Errors: INVALID_ARGUMENT if options are invalid.
absl::StatusOr<std::unique_ptr<Algorithm>> NewDpSgd(
    const DpSgdOptions& options);

}  // namespace dpopt::optim

#endif  // DPOPT_CORE_OPTIM_DP_SGD_H_
