#include "core/optim/distributed_dda/dp_dda.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>
#include <vector>

#include "Eigen/SparseCore"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/common/status_macros.h"
#include "core/optim/distributed_dda/dda_node.h"
#include "core/optim/distributed_dda/engine.h"
#include "core/optim/distributed_dda/wire.h"
#include "core/optim/objective.h"
#include "core/optim/step_reporter.h"

namespace dpopt::optim::distributed_dda {
namespace {

// Bound on n * (parameters): the nodes' states (z, x, average, message,
// gathered) take about 48 bytes per entry.
constexpr int64_t kMaxStateEntries = 20'000'000;
constexpr uint64_t kMaxPublicSeed = uint64_t{1} << 53;

absl::Status Invalid(const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat("dp_dda: ", what));
}

// The public per-node parameters a calibration implies.
absl::StatusOr<NodeParams> ParamsOf(const DpDdaOptions& o, const Calibration& c,
                                    double iota, int64_t parameter_size) {
  NodeParams p;
  const bool poisson = c.relation == privacy::Relation::kAddRemove;
  p.sampling =
      poisson ? NodeSampling::kPoisson : NodeSampling::kWithoutReplacement;
  p.batch_size = o.batch_size;
  p.poisson_rate = c.sampling_rate;
  p.normalizer = static_cast<double>(o.batch_size);
  p.clip_norm = o.clip_norm;
  ASSIGN_OR_RETURN(p.plan,
                   noise::PlanGaussian(poisson ? o.clip_norm : 2 * o.clip_norm,
                                       c.noise_multiplier, parameter_size));
  p.iota = iota;
  p.h = Regularizer{o.model.l2, o.model.l1};
  return p;
}

}  // namespace

ScheduleOptions DpDdaOptions::EffectiveSchedule() const {
  if (schedule.has_value()) return *schedule;
  ScheduleOptions s;
  if (model.l2 > 0 && model.l1 == 0) {
    s.weights = WeightSchedule::kLinear;
    s.gamma = 20;
    s.gamma_power = 0;
  } else {
    s.weights = WeightSchedule::kUniform;
    s.gamma = 0.01;
    s.gamma_power = 0.5;
  }
  return s;
}

double DpDdaOptions::EffectiveIota(const Gossip& g) const {
  return iota > 0 ? iota : g.NominalIota();
}

int DpDdaOptions::EffectiveRanks() const {
  return mpi_ranks > 0 ? mpi_ranks : std::min(nodes, 4);
}

absl::Status DpDdaOptions::Validate() const {
  RETURN_IF_ERROR(model.Validate());
  if (nodes < 1 || nodes > Graph::kMaxNodes) {
    return Invalid(absl::StrCat("nodes must be in [1, ", Graph::kMaxNodes,
                                "], got ", nodes));
  }
  if (iterations < 2 || iterations > 1'000'000) {
    return Invalid(
        absl::StrCat("iterations must be in [2, 1000000], got ", iterations));
  }
  if (!(std::isfinite(clip_norm) && clip_norm > 0)) {
    return Invalid("clip_norm must be a finite number > 0");
  }
  if (batch_size < 1 || batch_size > 1'000'000) {
    return Invalid("batch_size must be in [1, 1000000]");
  }
  if (!(paper_delta0 > 0 && paper_delta0 < 1)) {
    return Invalid("paper_delta0 must be in (0, 1)");
  }
  if (!(iota == 0 || (iota > 0 && iota <= 1))) {
    return Invalid("iota must be in (0, 1] (0 = the mode's nominal value)");
  }
  if (public_seed >= kMaxPublicSeed) {
    return Invalid("public_seed must be below 2^53");
  }
  if (trace_every < 0) return Invalid("trace_every must be >= 0");
  RETURN_IF_ERROR(graph.Validate());
  const ScheduleOptions s = EffectiveSchedule();
  if (absl::Status st = s.Validate(); !st.ok()) {
    return Invalid(std::string(st.message()));
  }
  if (execution == Execution::kMpi) {
    if (!mpi.has_value()) {
      return absl::FailedPreconditionError(
          "dp_dda: MPI execution is not configured on this server");
    }
    RETURN_IF_ERROR(mpi->Validate());
    const int ranks = EffectiveRanks();
    if (ranks < 1 || ranks > nodes || ranks > mpi->max_ranks) {
      return Invalid(absl::StrCat("mpi_ranks must be in [1, ",
                                  std::min(nodes, mpi->max_ranks), "], got ",
                                  ranks));
    }
  } else if (mpi_ranks != 0) {
    return Invalid("mpi_ranks is only for MPI execution");
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<DpDda>> DpDda::Create(
    const DpDdaOptions& options) {
  RETURN_IF_ERROR(options.Validate());
  std::unique_ptr<DpDda> a(new DpDda(options));
  if (a->options_.public_seed == 0) {
    // The public seed is published with the job; any generator would do.
    ASSIGN_OR_RETURN(auto rng, noise::NewSecureRandom());
    do {
      a->options_.public_seed = rng->NextUint64() >> 11;
    } while (a->options_.public_seed == 0);
    RETURN_IF_ERROR(rng->status());
  }
  ASSIGN_OR_RETURN(Graph g, Graph::Build(options.nodes, options.graph,
                                         a->options_.public_seed));
  a->graph_ = std::make_unique<Graph>(std::move(g));
  if (absl::Status s = options.gossip.Validate(*a->graph_); !s.ok()) {
    return Invalid(std::string(s.message()));
  }
  a->gossip_ = std::make_unique<Gossip>(a->graph_.get(), options.gossip,
                                        a->options_.public_seed);
  const Schedule schedule(options.EffectiveSchedule());
  if (absl::Status s = schedule.CheckWellPosed(
          Regularizer{options.model.l2, options.model.l1},
          options.EffectiveIota(*a->gossip_));
      !s.ok()) {
    return Invalid(std::string(s.message()));
  }
  return a;
}

absl::StatusOr<std::unique_ptr<Algorithm>> NewDpDda(
    const DpDdaOptions& options) {
  ASSIGN_OR_RETURN(std::unique_ptr<DpDda> a, DpDda::Create(options));
  return std::unique_ptr<Algorithm>(std::move(a));
}

absl::StatusOr<AccountingPlan> DpDda::Plan(const PublicDatasetInfo& info,
                                           const PrivacyTarget& target) const {
  RETURN_IF_ERROR(CheckPublicInfo(info, options_.model, /*private_run=*/true));
  RETURN_IF_ERROR(CheckPrivateTarget(target));
  RETURN_IF_ERROR(CheckRelation(
      info.relation,
      {privacy::Relation::kAddRemove, privacy::Relation::kReplaceOne},
      "dp_dda"));
  if (info.rows < options_.nodes) {
    return Invalid(absl::StrCat("the dataset has ", info.rows,
                                " rows, fewer than the ", options_.nodes,
                                " nodes"));
  }
  const int64_t outputs = options_.model.loss == LossKind::kSoftmax
                              ? options_.model.num_classes
                              : 1;
  const int64_t parameters = outputs * info.dimension;
  if (parameters > kMaxStateEntries / options_.nodes) {
    return Invalid(absl::StrCat(options_.nodes, " nodes x ", parameters,
                                " parameters exceed the limit of ",
                                kMaxStateEntries, " state entries"));
  }
  if (options_.execution == Execution::kMpi) {
    // Everything the ranks refuse (wire.cc's 1e8-value vectors and shards,
    // wire.h's kMaxShardBytes per shard) is checked here, from public
    // shapes, before charging. A shard has at most R rows: floor(N / n)
    // without replacement; with Poisson assignment to uniform nodes, R = N /
    // n + 12 sqrt(N / n) + 64, exceeded with probability below 2^-100
    // whatever the data (the assignment does not look at the rows). Sparse
    // rows are bounded by their dense size, so no limit depends on private
    // nonzeros. Shards travel in chunks of at most kMaxChunkBytes
    // (wire.h), so no MPI count or pipe write depends on a shard's size.
    const double n_rows = static_cast<double>(info.rows);
    const double mean = n_rows / options_.nodes;
    const double shard_rows =
        std::min(n_rows, std::ceil(mean + 12 * std::sqrt(mean) + 64));
    const double d = static_cast<double>(info.dimension);
    const double values = shard_rows * d;
    const double bytes = 64 + shard_rows * (8 + 8 + 16 * d);
    if (!(values <= 1e8) || !(bytes <= static_cast<double>(kMaxShardBytes))) {
      return Invalid(absl::StrFormat(
          "MPI execution: a shard may hold up to %.0f rows x %d coordinates "
          "(%.3g values, %.3g bytes); the ranks accept at most 1e8 values "
          "and 2^34 bytes per shard: use more nodes or the simulation",
          shard_rows, info.dimension, values, bytes));
    }
  }
  AccountingInput in;
  in.mode = options_.accounting;
  in.dataset_relation = info.relation;
  in.nodes = options_.nodes;
  in.public_rows = info.rows;
  in.parameter_size = parameters;
  in.batch_size = options_.batch_size;
  in.clip_norm = options_.clip_norm;
  in.iterations = options_.iterations;
  const std::vector<int64_t> counts =
      gossip_->ActivationCounts(options_.iterations - 1);
  in.max_activations = *std::max_element(counts.begin(), counts.end());
  in.iota = options_.EffectiveIota(*gossip_);
  in.paper_delta0 = options_.paper_delta0;
  return PlanAccounting(in, target);
}

absl::StatusOr<Calibration> DpDda::Calibrate(
    const PublicDatasetInfo& info, const PrivacyTarget& target) const {
  ASSIGN_OR_RETURN(AccountingPlan plan, Plan(info, target));
  Calibration c;
  c.noise_multiplier = plan.noise_multiplier;
  // Calibration::noise_stddev: on each coordinate of a node's clipped sum
  // (zeta is that noisy sum / the normalizer b).
  c.noise_stddev = plan.plan.sigma;
  c.steps = options_.iterations;
  // Per pass: every node's gradient over at most its shard (all n rows in
  // total) and the mixing of at most nodes^2 messages, of (d + 1) k values.
  {
    const double nodes = static_cast<double>(options_.nodes);
    c.work_units =
        PassWork(static_cast<double>(options_.iterations),
                 info.rows + static_cast<int64_t>(nodes * nodes),
                 (info.dimension + 1) * std::max<int64_t>(2, info.num_classes));
  }
  c.sampling_rate = plan.sampling_rate;
  c.expected_batch_size = static_cast<double>(options_.batch_size);
  c.clip_norm = options_.clip_norm;
  c.rows = info.rows;
  c.dimension = info.dimension;
  c.row_norm_bound = info.row_norm_bound;
  c.target = target;
  c.event = plan.event;
  c.relation = plan.relation;
  c.notes = plan.notes;
  const ScheduleOptions s = options_.EffectiveSchedule();
  c.notes.push_back(absl::StrFormat(
      "%d nodes on a %s graph (public seed %d), activation %s%s, iota %.4g; "
      "a_t = %s, gamma_t = %.4g t^%.3g; %s inactive nodes; noise std %.6g "
      "per coordinate of a node's clipped sum (%.6g on zeta = sum / %.6g)",
      options_.nodes, GraphKindName(options_.graph.kind), options_.public_seed,
      ActivationName(options_.gossip.activation),
      options_.gossip.all_nodes_compute ? " (every node computes: baseline)"
                                        : "",
      options_.EffectiveIota(*gossip_),
      s.weights == WeightSchedule::kLinear ? "t" : "1", s.gamma, s.gamma_power,
      options_.literal_inactive ? "frozen" : "analysis-mode", c.noise_stddev,
      c.noise_stddev / plan.normalizer, plan.normalizer));
  return c;
}

absl::Status SplitRows(int64_t rows, int nodes, NodeSampling sampling,
                       int64_t shard_rows, noise::RandomSource& rng,
                       std::vector<std::vector<int64_t>>* shards) {
  shards->assign(nodes, {});
  if (sampling == NodeSampling::kPoisson) {
    for (int64_t r = 0; r < rows; ++r) {
      (*shards)[rng.UniformInt(static_cast<uint64_t>(nodes))].push_back(r);
    }
    return rng.status();
  }
  std::vector<int64_t> perm(rows);
  for (int64_t r = 0; r < rows; ++r) perm[r] = r;
  for (int64_t r = rows - 1; r > 0; --r) {
    std::swap(perm[r], perm[rng.UniformInt(static_cast<uint64_t>(r + 1))]);
  }
  for (int i = 0; i < nodes; ++i) {
    auto& s = (*shards)[i];
    s.assign(perm.begin() + i * shard_rows,
             perm.begin() + (i + 1) * shard_rows);
    std::sort(s.begin(), s.end());
  }
  return rng.status();
}

absl::StatusOr<SolveResult> DpDda::Run(const Dataset& data,
                                       const Calibration& calibration,
                                       SolveContext& context) const {
  if (context.rng == nullptr) {
    return absl::FailedPreconditionError("dp_dda: no random source");
  }
  if (data.dimension() != calibration.dimension ||
      calibration.steps != options_.iterations) {
    return absl::FailedPreconditionError(
        "dp_dda: the calibration was made for another dataset or options");
  }
  ASSIGN_OR_RETURN(auto objective,
                   Objective::Create(options_.model, data.dimension()));
  RETURN_IF_ERROR(objective->CheckDataset(data));
  const double iota = options_.EffectiveIota(*gossip_);
  ASSIGN_OR_RETURN(NodeParams params, ParamsOf(options_, calibration, iota,
                                               objective->parameter_size()));
  const int n = options_.nodes;
  const int64_t shard_rows = calibration.rows / n;
  // The charged event must be exactly the one these parameters release.
  const std::vector<int64_t> counts =
      gossip_->ActivationCounts(options_.iterations - 1);
  const int64_t K = *std::max_element(counts.begin(), counts.end());
  const AccountingMode mode = params.sampling == NodeSampling::kPoisson
                                  ? AccountingMode::kPoissonAddRemove
                                  : AccountingMode::kWbkReplaceOne;
  if (!(DdaEvent(mode, shard_rows, options_.batch_size, params.poisson_rate, K,
                 calibration.noise_multiplier) == calibration.event)) {
    return absl::FailedPreconditionError(
        "dp_dda: the calibration's event is not the one this run releases");
  }
  if (params.sampling == NodeSampling::kWithoutReplacement &&
      data.rows() < shard_rows * n) {
    return absl::FailedPreconditionError(
        "dp_dda: the dataset has fewer rows than its public row count");
  }
  std::vector<std::vector<int64_t>> shards;
  RETURN_IF_ERROR(SplitRows(data.rows(), n, params.sampling, shard_rows,
                            *context.rng, &shards));
  const int64_t T = options_.iterations;
  StepReporter reporter(context, T);
  auto sink = [&reporter](int64_t step, const Eigen::VectorXd& average,
                          double theta) {
    return reporter.Report(step, average, theta);
  };
  auto stop_requested = [&reporter]() { return reporter.StopRequested(); };
  const int64_t trace_every =
      options_.trace_every > 0
          ? options_.trace_every
          : std::max<int64_t>(1, options_.iterations / 100);
  EngineResult r;
  if (options_.execution == Execution::kMpi) {
    WorkerJob job;
    job.model = options_.model;
    job.nodes = n;
    job.ranks = options_.EffectiveRanks();
    job.iterations = T;
    job.trace_every = trace_every;
    job.literal_inactive = options_.literal_inactive;
    job.iota = iota;
    job.public_seed = options_.public_seed;
    job.graph = options_.graph;
    job.gossip = options_.gossip;
    job.schedule = options_.EffectiveSchedule();
    job.dimension = data.dimension();
    job.sampling = params.sampling;
    job.batch_size = params.batch_size;
    job.poisson_rate = params.poisson_rate;
    job.normalizer = params.normalizer;
    job.clip_norm = params.clip_norm;
    job.sensitivity = params.plan.l2_sensitivity;
    job.noise_multiplier = params.plan.noise_multiplier;
    job.h = params.h;
    // The shards are encoded from `data` in place, a chunk at a time, as
    // mpirun reads them: no copy of a shard and no serialised dataset.
    const int64_t chunk =
        mpi_chunk_bytes_ > 0
            ? std::clamp(mpi_chunk_bytes_, kMinChunkBytes, kMaxChunkBytes)
            : kMaxChunkBytes;
    JobStreamWriter writer(EncodeWorkerJob(job), data, shards, chunk);
    ASSIGN_OR_RETURN(
        r, RunOnMpi(
               *options_.mpi, job.ranks,
               [&writer](std::string* piece) { return writer.Next(piece); },
               sink, stop_requested));
  } else {
    ASSIGN_OR_RETURN(
        r, RunSimulation(data, shards, *objective, params, trace_every, iota,
                         context, sink, stop_requested));
  }
  return Finish(std::move(r), data, calibration, K);
}

absl::StatusOr<EngineResult> DpDda::RunSimulation(
    const Dataset& data, std::vector<std::vector<int64_t>>& shards,
    const Objective& objective, const NodeParams& params, int64_t trace_every,
    double iota, SolveContext& context, const TraceSink& sink,
    const std::function<bool()>& stop_requested) const {
  const int n = options_.nodes;
  std::vector<std::unique_ptr<DdaNode>> nodes;
  std::vector<DdaNode*> local(n, nullptr);
  for (int i = 0; i < n; ++i) {
    std::unique_ptr<noise::RandomSource> rng;
    if (node_random_for_testing_) {
      ASSIGN_OR_RETURN(rng, node_random_for_testing_(i));
    } else {
      ASSIGN_OR_RETURN(rng, noise::NewSecureRandom());
    }
    nodes.push_back(
        std::make_unique<DdaNode>(i, SelectRows(data, shards[i]), &objective,
                                  &params, std::move(rng), &context.noise()));
    local[i] = nodes.back().get();
  }
  shards.clear();

  EngineOptions eo;
  eo.iterations = options_.iterations;
  eo.trace_every = trace_every;
  eo.literal_inactive = options_.literal_inactive;
  eo.iota = iota;
  eo.stop_requested = stop_requested;
  const Schedule schedule(options_.EffectiveSchedule());
  LocalTransport transport;
  Placement placement{n, 1};
  return RunEngine(eo, schedule, *gossip_, placement, local, transport, sink);
}

absl::StatusOr<SolveResult> DpDda::Finish(EngineResult r, const Dataset& data,
                                          const Calibration& calibration,
                                          int64_t K) const {
  SolveResult out;
  out.model.weights = std::move(r.model);
  out.model.dimension = data.dimension();
  out.model.num_classes = options_.model.num_classes;
  out.model.loss = options_.model.loss;
  out.steps_done = r.steps_done;
  out.cancelled = r.stopped;
  out.spent = calibration.event;
  out.released.push_back(
      {"public_seed",
       {static_cast<double>(options_.public_seed)},
       "the public seed of the graph, the active sets and the gossip "
       "matrices (exact: below 2^53)"});
  out.released.push_back(
      {"max_activations",
       {static_cast<double>(K)},
       "K: the largest number of gradient passes any node was active in"});
  if (options_.release_node_models && !r.node_models.empty()) {
    ReleasedOutput o{
        "node_models", {}, "x~_i^(T) of nodes i = 0..n-1, concatenated"};
    for (const Eigen::VectorXd& v : r.node_models) {
      o.values.insert(o.values.end(), v.data(), v.data() + v.size());
    }
    out.released.push_back(std::move(o));
  }
  return out;
}

}  // namespace dpopt::optim::distributed_dda
