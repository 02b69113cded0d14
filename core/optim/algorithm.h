// The algorithm interface every optimizer job implements, and the value types
// that cross it.
//
// Life of a job (docs/architecture.md, "Life of a job" and invariant "charge
// before data"):
//   1. The server builds PublicDatasetInfo from the dataset's PUBLIC metadata
//      and calls Calibrate(): data-free, it fixes every privacy parameter
//      (noise, steps, sampling rate, clip norm) and every bound on the run's
//      work, and returns the DpEvent the job will be charged.
//   2. The server charges the ledger with Calibration::event (durably).
//   3. Only then Run() touches the private rows, using only the
//      calibration's parameters. Everything it hands to the callback and
//      returns is privatized (post-processing of noisy releases).
//
// Every Run() reports its progress through a StepReporter
// (core/optim/step_reporter.h), the only code that may call the
// IterationCallback: it records trace points after completed steps and
// answers the cheap "should I stop" question long inner loops ask between
// units of work. Fixed-schedule gradient methods run on the non-virtual
// SolveLoop (core/optim/solve_loop.h), which drives a StepReporter for them;
// the other families (bilevel, piecewise-affine, distributed DDA) own their
// loops and use a StepReporter directly.
#ifndef DPOPT_CORE_OPTIM_ALGORITHM_H_
#define DPOPT_CORE_OPTIM_ALGORITHM_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "Eigen/Dense"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "core/data/dataset.h"
#include "core/noise/random.h"
#include "core/optim/model.h"
#include "core/privacy/accountant.h"
#include "core/privacy/dp_event.h"
#include "core/privacy/privacy_filter.h"

namespace dpopt::optim {

class NoiseAdder;  // core/optim/private_oracle.h
class RemoteRows;  // core/optim/row_sums.h

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
  // Public, for display; one meaning for every job type: the standard
  // deviation of the noise the job's sampler adds to each coordinate of the
  // vector it privatizes, at the job's first noisy release (later ones may
  // differ: accel_*_opt stages, line-search budgets, bilevel mechanisms),
  // before any normalisation of that vector. For the gradient families (dp_gd,
  // dp_sgd, accel_*, line search, dp_dda) that vector is the clipped gradient
  // sum, so it is noise_multiplier * clip_norm, widened by the noise grid's
  // rounding allowance (noise::GaussianPlan::sigma = z (C + g sqrt(d))), and
  // the averaged gradient's is it / expected_batch_size. Laplace noise of scale
  // b reports sqrt(2) b; the bilevel family's releases are the clipped sums / q
  // of its first mechanism (inner solve 1; the notes give every mechanism's);
  // pa_perturb_* report the vector Laplace noise's sqrt(d + 1) / lambda on the
  // offsets or the solution. 0: no additive noise (exponential mechanisms:
  // pa_exponential, pa_subgradient; non-private jobs).
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
  // The job's own stated guarantee when it is pure epsilon-DP (delta 0), as
  // its epsilon; 0 when the job states none beyond `event`. The ledger
  // charges `event` priced by the dataset's filter, which may be less (e.g.
  // pa_subgradient's exponential mechanisms under an RDP filter).
  double guarantee_epsilon = 0;
  // The neighbouring relation `event` was analysed under.
  privacy::Relation relation = privacy::Relation::kAddRemove;
  // PublicDatasetInfo::problem_json the calibration was made for
  // (piecewise-affine family runs on it); empty otherwise.
  std::string problem_json;
  // Public upper bound on Run()'s work, in row-coordinate operations (one
  // multiply-add of one coordinate of one row: a gradient pass over n rows
  // of dimension d is n d), computed from public values only. The server
  // refuses the job with INVALID_ARGUMENT, before charging, when it exceeds
  // the server's limit. Every Calibrate() sets it (> 0).
  double work_units = 0;
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

class StepReporter;  // core/optim/step_reporter.h

// Trace sink and cancellation hook (after ceres' IterationCallback),
// implemented by the server (and by tests). Only StepReporter calls it, on
// the job's thread: algorithms never do, so every family reports and stops
// the same way.
class IterationCallback {
 public:
  virtual ~IterationCallback() = default;

 private:
  friend class StepReporter;
  // A completed step: records a trace point. Returns false to stop
  // (cancel): the algorithm performs no further step.
  virtual bool OnIteration(const IterationSummary& summary) = 0;
  // Cheap (no trace point, no I/O): true once the run must stop. Long inner
  // loops ask it between units of work of at most about 100 ms.
  virtual bool StopRequested() { return false; }
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
  // Where gradient releases read their rows when they are not in this
  // process (an MPI worker pool's placed shards; set by the server for jobs
  // whose spec asks for MPI execution, and only for job types that declare
  // they can run so). Null: the dataset given to Run(). Must outlive the run.
  RemoteRows* remote_rows = nullptr;

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
// OK if `relation` is one of `supported`, the neighbouring relations the
// calling family's privacy analysis covers; INVALID_ARGUMENT naming
// `job_type` otherwise. Every private Calibrate() checks the dataset's
// relation this way itself (the server's checks are not relied on).
absl::Status CheckRelation(privacy::Relation relation,
                           absl::Span<const privacy::Relation> supported,
                           absl::string_view job_type);
// Calibration::work_units of `passes` passes over `rows` rows of
// `coordinates` coordinates each, plus `coordinates` per pass for the noise
// and the update: passes (rows + 1) coordinates (a double: never overflows).
double PassWork(double passes, int64_t rows, int64_t coordinates);
// OK if target is a valid private (epsilon, delta) target: epsilon finite and
// > 0, delta in (0, 1), non_private false. INVALID_ARGUMENT otherwise.
absl::Status CheckPrivateTarget(const PrivacyTarget& target);

}  // namespace dpopt::optim

#endif  // DPOPT_CORE_OPTIM_ALGORITHM_H_
