// The algorithm interface every optimizer job implements, and the value types
// that cross it.
//
// Life of a job (docs/architecture.md, "Life of a job" and invariant "charge
// before data"):
//   1. The server builds PublicDatasetInfo from the dataset's PUBLIC metadata
//      and calls Calibrate(): data-free, it fixes every privacy parameter
//      (noise, steps, sampling rate, clip norm) and returns the DpEvent the
//      job will be charged.
//   2. The server charges the ledger with Calibration::event (durably).
//   3. Only then Run() touches the private rows, using only the
//      calibration's parameters. Everything it hands to the callback and
//      returns is privatized (post-processing of noisy releases).
//
// Run() is implemented on top of the non-virtual SolveLoop
// (core/optim/solve_loop.h), which owns the job-internal budget, step
// counting, cancellation and the trace; algorithms only ask the
// PrivateGradientOracle (core/optim/private_oracle.h) for privatized values.
#ifndef DPOPT_CORE_OPTIM_ALGORITHM_H_
#define DPOPT_CORE_OPTIM_ALGORITHM_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "Eigen/Dense"
#include "absl/status/statusor.h"
#include "core/data/dataset.h"
#include "core/noise/random.h"
#include "core/optim/model.h"
#include "core/privacy/accountant.h"
#include "core/privacy/dp_event.h"
#include "core/privacy/privacy_filter.h"

namespace dpopt::optim {

class NoiseAdder;  // core/optim/private_oracle.h

namespace testing {
class SolveContextTestPeer;  // core/optim/testing/, never in the server
}  // namespace testing

// Public, curator-declared metadata: the only dataset facts Calibrate() may
// use. `rows` is the public row count used for every normalisation.
struct PublicDatasetInfo {
  int64_t rows = 0;
  int64_t dimension = 0;
  LabelKind label_kind = LabelKind::kBinary;
  int num_classes = 2;
  // Curator-declared bound on ||x_i||_2; 0 = none declared.
  double row_norm_bound = 0;
  privacy::Relation relation = privacy::Relation::kAddRemove;
  // Public description of a structured problem stored with the dataset
  // (piecewise-affine family's max-affine problems,
  // core/optim/piecewise_affine/problem.h); empty for ordinary datasets.
  std::string problem_json;
};

struct PrivacyTarget {
  double epsilon = 0;
  double delta = 0;
  privacy::AccountantKind accountant = privacy::AccountantKind::kRdp;
  // Only for public datasets, decided by the server (never by a client).
  // Private algorithms reject it; NonPrivateGd requires it.
  bool non_private = false;
};

struct Calibration {
  // z: noise standard deviation / effective L2 sensitivity (Gaussian), or
  // scale / effective L1 sensitivity (Laplace).
  double noise_multiplier = 0;
  // Per-coordinate standard deviation of the noise in the released
  // (normalised) gradient: sigma / (q * n). Public, for display.
  double noise_stddev = 0;
  int64_t steps = 0;
  double sampling_rate = 1;
  // q * n with the public row count n.
  double expected_batch_size = 0;
  double clip_norm = 0;
  // Public dataset facts the calibration was made for (Run() checks the
  // dimension against them).
  int64_t rows = 0;
  int64_t dimension = 0;
  // The curator-declared row norm bound the calibration used (0 = none).
  double row_norm_bound = 0;
  // Human-readable remarks (e.g. relation conversion, grid rounding).
  std::vector<std::string> notes;
  // The target this calibration was made for (Run() of algorithms whose
  // public schedule depends on it, e.g. bilevel family's paper-mode inner
  // solver, re-derives it from here).
  PrivacyTarget target;
  // Exactly what Run() will release; the server charges this event.
  privacy::DpEvent event;
  // The neighbouring relation `event` was analysed under.
  privacy::Relation relation = privacy::Relation::kAddRemove;
  // PublicDatasetInfo::problem_json the calibration was made for
  // (piecewise-affine family runs on it); empty otherwise.
  std::string problem_json;
};

// Per-iteration summary handed to the callback. Everything here is
// privatized (or public) and may be streamed to the analyst.
struct IterationSummary {
  int64_t step = 0;                // 1-based number of completed steps
  int64_t total_steps = 0;         // planned steps (an upper bound)
  const Eigen::VectorXd& iterate;  // privatized iterate after this step
  // ||noisy gradient||_2 of this step (post-processing of the release).
  double noisy_gradient_norm = 0;
};

// Trace sink and cancellation hook (after ceres' IterationCallback). Called
// by the solve loop after every completed step, on the job's thread.
class IterationCallback {
 public:
  virtual ~IterationCallback() = default;
  // Returns false to stop (cancel): the loop performs no further step.
  virtual bool OnIteration(const IterationSummary& summary) = 0;
};

// Per-run environment supplied by the server.
class SolveContext {
 public:
  SolveContext() = default;
  // REQUIRES: rng is the secure generator (noise::NewSecureRandom()) in the
  // server; it must outlive the run. callback may be null.
  explicit SolveContext(noise::RandomSource* rng,
                        IterationCallback* callback = nullptr)
      : rng(rng), callback(callback) {}

  noise::RandomSource* rng = nullptr;
  IterationCallback* callback = nullptr;

  // The noise used by the oracle: always the secure discrete samplers,
  // except in tests (set only through testing::SolveContextTestPeer, which
  // lives in the test-only target dpopt_optim_testing).
  const NoiseAdder& noise() const;

 private:
  friend class testing::SolveContextTestPeer;
  const NoiseAdder* noise_for_testing_ = nullptr;
};

// A named privatized output beyond the model (post-processing of charged
// releases), returned to the analyst as is: e.g. bilevel family's outer
// iterates and tuned hyperparameters. Never anything computed from private rows
// without noise.
struct ReleasedOutput {
  std::string name;
  std::vector<double> values;
  std::string description;
};

struct SolveResult {
  Model model;
  int64_t steps_done = 0;
  // The callback asked to stop.
  bool cancelled = false;
  // The job-internal budget could not pay for the next release (adaptive
  // algorithms with their own privacy filter stop cleanly this way).
  bool budget_exhausted = false;
  // Further privatized outputs, in order (empty for most algorithms).
  std::vector<ReleasedOutput> released;
  // What was actually released (composition of every charged release).
  // For fixed-schedule algorithms that ran to completion this equals the
  // calibration's event in cost; the ledger keeps the reservation anyway.
  privacy::DpEvent spent;
};

class Algorithm {
 public:
  virtual ~Algorithm() = default;
  virtual std::string name() const = 0;

  // Data-free, public inputs only: calibrates the noise to the target and
  // returns the DP event to charge. Errors: INVALID_ARGUMENT (bad target or
  // dataset info, incompatible model), OUT_OF_RANGE (target unreachable).
  virtual absl::StatusOr<Calibration> Calibrate(
      const PublicDatasetInfo& info, const PrivacyTarget& target) const = 0;

  // Runs on private data using only the calibration's parameters; the
  // callback sees privatized values only.
  // Errors: INVALID_ARGUMENT (data does not fit the model / calibration),
  // FAILED_PRECONDITION (calibration not produced by this algorithm's
  // parameters, missing rng), or the rng's error (fail closed; nothing from
  // the failed step is published).
  virtual absl::StatusOr<SolveResult> Run(const Dataset& data,
                                          const Calibration& calibration,
                                          SolveContext& context) const = 0;
};

// Shared checks for Calibrate() implementations.
// OK if `info` is plausible (rows >= 1, dimension in [1, 10^7]) and fits
// `model` (label kind, number of classes; private least squares needs
// label_bound > 0). INVALID_ARGUMENT otherwise.
absl::Status CheckPublicInfo(const PublicDatasetInfo& info,
                             const ModelConfig& model, bool private_run);
// OK if target is a valid private (epsilon, delta) target: epsilon finite and
// > 0, delta in (0, 1), non_private false. INVALID_ARGUMENT otherwise.
absl::Status CheckPrivateTarget(const PrivacyTarget& target);

}  // namespace dpopt::optim

#endif  // DPOPT_CORE_OPTIM_ALGORITHM_H_
