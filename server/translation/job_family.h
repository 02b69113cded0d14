// What a family of job types tells the rest of the server: which oneof cases
// of AlgorithmSpec it owns, each job type's traits (what it trains or
// releases, which dataset kind it runs on, whether it is private), and how
// its proto message becomes a core Algorithm. The job manager and the
// generic translation (server/spec_translation.cc) know job types only
// through this interface; the families are listed once, in
// server/translation/registry.cc. DEVELOPERS.md has the recipe for adding a
// family.
#ifndef DPOPT_SERVER_TRANSLATION_JOB_FAMILY_H_
#define DPOPT_SERVER_TRANSLATION_JOB_FAMILY_H_

#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/optim/algorithm.h"
#include "core/optim/model.h"
#include "core/optim/mpi_settings.h"
#include "dpopt/v1/job_spec.pb.h"

namespace dpopt::optim::mpi_pool {
class WorkerPool;  // core/optim/mpi_pool/worker_pool.h
}  // namespace dpopt::optim::mpi_pool

namespace dpopt::server {

// The kinds of stored datasets a job type can run on.
enum class DatasetKind {
  // Labelled examples (LIBSVM/CSV rows), add/remove or replace-one.
  kExamples,
  // A max-affine problem: public slopes, private offsets (l-infinity
  // relation on the offsets).
  kMaxAffine,
};

// What the server needs to know about one job type besides its algorithm.
struct JobTypeTraits {
  // Trains a model of the spec's ModelSpec, so `model` is required and the
  // result can be evaluated on a public dataset (`evaluate_on`). When false
  // the job type's problem defines what it releases and `model` is refused.
  bool trains_model = true;
  // Model.loss of the result when !trains_model.
  std::string output_name;
  DatasetKind dataset_kind = DatasetKind::kExamples;
  // Runs without privacy: only on public datasets, without a privacy target.
  bool non_private = false;
  // Can read its rows on the server's MPI worker pool (JobSpec.execution =
  // EXECUTION_MPI_POOL): its algorithm reads rows only through the run's
  // RowSums (core/optim/row_sums.h: OpenRunRows, the private oracles), which
  // come from SolveContext::remote_rows when it is set, and never from the
  // dataset given to Run().
  bool runs_on_worker_pool = false;
};

// What this server can run beyond the in-process engine (from its flags).
struct ExecutionEnvironment {
  // The Open MPI launcher (--mpirun and friends); null = not configured.
  const optim::MpiSettings* mpi = nullptr;
  // The MPI worker pool (--mpi-pool=N); null = none.
  optim::mpi_pool::WorkerPool* pool = nullptr;
};

// Everything a family's translation may read.
struct TranslationInput {
  const v1::JobSpec& spec;
  // "algorithm.<job type>": the prefix of every error message.
  std::string field;
  // The translated spec.model when the job type trains a model.
  optim::ModelConfig model;
  bool dataset_is_public = false;
  const ExecutionEnvironment& env;
};

using AlgorithmCase = v1::AlgorithmSpec::AlgorithmCase;

// One family of job types.
struct JobFamily {
  // The folder name under core/optim ("bilevel", ...), or "gradient" for the
  // job types in core/optim itself.
  std::string name;
  // The AlgorithmSpec oneof cases the family owns.
  std::vector<AlgorithmCase> cases;
  // The traits of one job type of the family (REQUIRES: its case is in
  // `cases`).
  JobTypeTraits (*traits)(const v1::AlgorithmSpec& a) = nullptr;
  // The algorithm of one job type (REQUIRES: its case is in `cases`). Errors
  // name the field: INVALID_ARGUMENT for bad values, PERMISSION_DENIED or
  // FAILED_PRECONDITION for what this dataset or server cannot run.
  absl::StatusOr<std::unique_ptr<optim::Algorithm>> (*translate)(
      const TranslationInput& in) = nullptr;
  // Optional start-up check of what the server was given for this family
  // (e.g. that the MPI worker is the production one); an error stops the
  // server from starting.
  absl::Status (*check_environment)(const ExecutionEnvironment& env) = nullptr;
};

// Shared checks for the families' translations. Every error is
// INVALID_ARGUMENT and starts with `field`.
namespace translation {

// Largest number of steps (iterations) a job may ask for.
inline constexpr int64_t kMaxSteps = 1'000'000;

absl::Status CheckSteps(int64_t steps, const std::string& field);
absl::Status CheckPositive(double v, const std::string& field);
absl::Status CheckFinite(const std::string& field,
                         std::initializer_list<double> values);
// `s` with `field: ` in front of its message (OK stays OK).
absl::Status WithField(const std::string& field, const absl::Status& s);
// `s` as INVALID_ARGUMENT with `field: ` in front (OK stays OK): for core
// Validate() results, whose codes describe the core's caller.
absl::Status InvalidWithField(const std::string& field, const absl::Status& s);

}  // namespace translation
}  // namespace dpopt::server

#endif  // DPOPT_SERVER_TRANSLATION_JOB_FAMILY_H_
