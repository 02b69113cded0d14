#include "server/translation/distributed_dda.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "core/common/status_macros.h"
#include "core/optim/distributed_dda/mpi_launcher.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"

namespace dpopt::server {
namespace {

namespace s4 = optim::distributed_dda;

using translation::CheckFinite;
absl::Status Field(const std::string& field, const absl::Status& s) {
  return translation::WithField(field, s);
}

absl::StatusOr<s4::DpDdaOptions> TranslateDpDda(const v1::DpDda& m,
                                                const optim::ModelConfig& model,
                                                int64_t trace_every,
                                                bool dataset_is_public,
                                                const optim::MpiSettings* mpi,
                                                const std::string& field) {
  RETURN_IF_ERROR(CheckFinite(
      field,
      {m.clip_norm(), m.iota(), m.paper_delta0(), m.graph().radius(),
       m.graph().edge_probability(), m.activation().activation_probability(),
       m.schedule().gamma(), m.schedule().gamma_power()}));
  s4::DpDdaOptions o;
  o.model = model;
  if (m.nodes() != 0) o.nodes = m.nodes();
  switch (m.graph().kind()) {
    case v1::DDA_GRAPH_UNSPECIFIED:
    case v1::DDA_GRAPH_COMPLETE:
      o.graph.kind = s4::GraphKind::kComplete;
      break;
    case v1::DDA_GRAPH_RING:
      o.graph.kind = s4::GraphKind::kRing;
      break;
    case v1::DDA_GRAPH_GRID:
      o.graph.kind = s4::GraphKind::kGrid;
      break;
    case v1::DDA_GRAPH_GEOMETRIC:
      o.graph.kind = s4::GraphKind::kGeometric;
      break;
    case v1::DDA_GRAPH_ERDOS_RENYI:
      o.graph.kind = s4::GraphKind::kErdosRenyi;
      break;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat(field, ".graph.kind: unknown graph"));
  }
  o.graph.radius = m.graph().radius();
  o.graph.edge_probability = m.graph().edge_probability();
  const v1::DdaActivation& act = m.activation();
  switch (act.kind()) {
    case v1::DDA_ACTIVATION_UNSPECIFIED:
    case v1::DDA_ACTIVATION_EDGES:
      o.gossip.activation = s4::Activation::kEdges;
      break;
    case v1::DDA_ACTIVATION_NODES:
      o.gossip.activation = s4::Activation::kNodes;
      break;
    case v1::DDA_ACTIVATION_BERNOULLI:
      o.gossip.activation = s4::Activation::kBernoulli;
      break;
    case v1::DDA_ACTIVATION_ALL:
      o.gossip.activation = s4::Activation::kAll;
      break;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat(field, ".activation.kind: unknown activation"));
  }
  if (act.edges_per_step() != 0) o.gossip.edges_per_step = act.edges_per_step();
  o.gossip.active_nodes = act.active_nodes();
  o.gossip.activation_probability = act.activation_probability();
  o.gossip.all_nodes_compute = act.all_nodes_compute();
  o.iterations = m.iterations();
  if (m.clip_norm() != 0) o.clip_norm = m.clip_norm();
  if (m.batch_size() != 0) o.batch_size = m.batch_size();
  if (m.has_schedule()) {
    s4::ScheduleOptions s;
    switch (m.schedule().weights()) {
      case v1::DDA_WEIGHTS_UNSPECIFIED:
        s.weights = model.l2 > 0 && model.l1 == 0
                        ? s4::WeightSchedule::kLinear
                        : s4::WeightSchedule::kUniform;
        break;
      case v1::DDA_WEIGHTS_UNIFORM:
        s.weights = s4::WeightSchedule::kUniform;
        break;
      case v1::DDA_WEIGHTS_LINEAR:
        s.weights = s4::WeightSchedule::kLinear;
        break;
      default:
        return absl::InvalidArgumentError(
            absl::StrCat(field, ".schedule.weights: unknown schedule"));
    }
    s.gamma = m.schedule().gamma();
    s.gamma_power = m.schedule().gamma_power();
    o.schedule = s;
  }
  switch (m.accounting()) {
    case v1::DDA_ACCOUNTING_AUTO:
      o.accounting = s4::AccountingMode::kAuto;
      break;
    case v1::DDA_ACCOUNTING_WBK_REPLACE_ONE:
      o.accounting = s4::AccountingMode::kWbkReplaceOne;
      break;
    case v1::DDA_ACCOUNTING_POISSON_ADD_REMOVE:
      o.accounting = s4::AccountingMode::kPoissonAddRemove;
      break;
    case v1::DDA_ACCOUNTING_PAPER:
      if (!dataset_is_public) {
        return absl::PermissionDeniedError(absl::StrCat(
            field,
            ".accounting: PAPER uses the paper's Theorem 1 noise, which "
            "carries no valid guarantee (see "
            "docs/algorithms/distributed_dda.md); "
            "it runs only on public "
            "datasets"));
      }
      o.accounting = s4::AccountingMode::kPaper;
      break;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat(field, ".accounting: unknown accounting mode"));
  }
  o.iota = m.iota();
  o.literal_inactive = m.literal_inactive();
  o.public_seed = m.public_seed();
  if (o.public_seed == 0) {
    // Default: a function of the public spec (FNV-1a of its deterministic
    // serialization), so that `job estimate` and `job submit` of the same
    // spec use the same activation pattern, hence the same K and cost.
    std::string bytes;
    {
      google::protobuf::io::StringOutputStream out(&bytes);
      google::protobuf::io::CodedOutputStream coded(&out);
      coded.SetSerializationDeterministic(true);
      m.SerializeToCodedStream(&coded);
    }
    uint64_t h = 0xcbf29ce484222325ULL;
    for (unsigned char c : bytes) {
      h ^= c;
      h *= 0x100000001b3ULL;
    }
    o.public_seed = (h >> 11) == 0 ? 1 : (h >> 11);
  }
  o.release_node_models = m.release_node_models();
  if (m.paper_delta0() != 0) o.paper_delta0 = m.paper_delta0();
  o.trace_every = trace_every;
  if (m.execution() == v1::DDA_EXECUTION_MPI) {
    if (mpi == nullptr) {
      return absl::FailedPreconditionError(absl::StrCat(
          field,
          ".execution: this server has no MPI configured (start "
          "dpopt-server with --mpirun=PATH); use DDA_EXECUTION_SIMULATION"));
    }
    o.execution = s4::Execution::kMpi;
    o.mpi = *mpi;
    o.mpi_ranks = m.mpi_ranks();
  } else if (m.execution() != v1::DDA_EXECUTION_SIMULATION) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ".execution: unknown execution"));
  } else if (m.mpi_ranks() != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ".mpi_ranks: only for DDA_EXECUTION_MPI"));
  }
  RETURN_IF_ERROR(Field(field, o.Validate()));
  return o;
}

JobTypeTraits DistributedDdaTraits(const v1::AlgorithmSpec&) {
  return JobTypeTraits();
}

absl::StatusOr<std::unique_ptr<optim::Algorithm>> TranslateDistributedDda(
    const TranslationInput& in) {
  ASSIGN_OR_RETURN(s4::DpDdaOptions o,
                   TranslateDpDda(in.spec.algorithm().dp_dda(), in.model,
                                  in.spec.trace_every(), in.dataset_is_public,
                                  in.env.mpi, in.field));
  return s4::NewDpDda(o);
}

// Only the production worker (secure generators) may run dp_dda's ranks.
absl::Status CheckDistributedDdaEnvironment(const ExecutionEnvironment& env) {
  if (env.mpi == nullptr) return absl::OkStatus();
  return s4::CheckProductionWorker(*env.mpi);
}

}  // namespace

const JobFamily& DistributedDdaFamily() {
  static const JobFamily* family =
      new JobFamily{"distributed_dda",
                    {v1::AlgorithmSpec::kDpDda},
                    &DistributedDdaTraits,
                    &TranslateDistributedDda,
                    &CheckDistributedDdaEnvironment};
  return *family;
}

}  // namespace dpopt::server
