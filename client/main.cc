// dpopt: the analyst's and curator's command-line client.
//
// It talks to dpopt-server over gRPC (stubs generated from proto/). The only
// engine code it links is core/privacy (pure accounting math, no data access)
// for the local `dpopt privacy` commands, which need no server.
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/common.h"
#include "client/flags.h"
#include "client/max_affine.h"
#include "core/privacy/accountant.h"
#include "core/privacy/dp_event.h"
#include "dpopt/v1/dpopt.grpc.pb.h"
#include "google/protobuf/util/json_util.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/grpcpp.h"

namespace dpopt::client {
namespace {

// ---------------------------------------------------------------- datasets

int DatasetImport(const ParsedArgs& a, const Globals& g) {
  if (a.positional().size() != 2) {
    return UsageError("usage: dpopt dataset import NAME FILE [flags]");
  }
  pb::ImportHeader h;
  h.set_name(a.positional()[0]);
  const std::string format = absl::AsciiStrToLower(a.Get("format", "libsvm"));
  if (format == "libsvm") {
    h.set_format(pb::DATASET_FORMAT_LIBSVM);
  } else if (format == "csv") {
    h.set_format(pb::DATASET_FORMAT_CSV);
  } else {
    return UsageError("--format must be libsvm or csv");
  }
  auto dim = a.GetInt("dimension", 0);
  if (!dim.ok()) return UsageError(dim.status());
  h.set_dimension(*dim);
  h.set_public_(a.GetBool("public"));
  if (!h.public_()) {
    if (!a.Has("epsilon-budget")) {
      return UsageError(
          "a private dataset needs --epsilon-budget (and --delta-budget); "
          "use --public for public data");
    }
    auto eps = a.GetDouble("epsilon-budget");
    if (!eps.ok()) return UsageError(eps.status());
    auto delta = a.GetDouble("delta-budget", 0.0);
    if (!delta.ok()) return UsageError(delta.status());
    h.set_epsilon_budget(*eps);
    h.set_delta_budget(*delta);
  } else if (a.Has("epsilon-budget") || a.Has("delta-budget")) {
    return UsageError("a --public dataset has no budget");
  }
  const std::string filter = a.Get("budget-filter", "rdp");
  if (filter == "rdp") {
    h.set_budget_filter(pb::BUDGET_FILTER_RDP);
  } else if (filter == "basic") {
    h.set_budget_filter(pb::BUDGET_FILTER_BASIC);
  } else {
    return UsageError("--budget-filter must be rdp or basic");
  }
  const std::string rel = a.Get("relation", "add-remove");
  if (rel == "add-remove") {
    h.set_relation(pb::ADD_REMOVE);
  } else if (rel == "replace-one") {
    h.set_relation(pb::REPLACE_ONE);
  } else {
    return UsageError("--relation must be add-remove or replace-one");
  }
  if (a.Has("polytope") && a.Has("relation")) {
    return UsageError(
        "a max-affine problem has its own relation (l-infinity on the "
        "offsets): drop --relation");
  }
  const std::string labels = a.Get("labels", "binary");
  if (labels == "binary") {
    h.set_label_type(pb::LABEL_TYPE_BINARY);
  } else if (labels == "multiclass") {
    h.set_label_type(pb::LABEL_TYPE_MULTICLASS);
  } else if (labels == "real") {
    h.set_label_type(pb::LABEL_TYPE_REAL);
  } else {
    return UsageError("--labels must be binary, multiclass or real");
  }
  auto k = a.GetInt("num-classes", 0);
  if (!k.ok()) return UsageError(k.status());
  h.set_num_classes(static_cast<int32_t>(*k));
  h.set_delimiter(a.Get("delimiter", ","));
  h.set_has_header(a.GetBool("header"));
  auto label_col = a.GetInt("label-column", -1);
  if (!label_col.ok()) return UsageError(label_col.status());
  h.set_label_column(static_cast<int32_t>(*label_col));
  h.set_label_last(*label_col < 0);
  auto norm = a.GetDouble("row-norm-bound", 0.0);
  if (!norm.ok()) return UsageError(norm.status());
  h.mutable_bounds()->set_row_norm_bound(*norm);
  if (a.Has("feature-bounds")) {
    std::vector<std::string> lh = absl::StrSplit(a.Get("feature-bounds"), ':');
    double lo, hi;
    if (lh.size() != 2 || !absl::SimpleAtod(lh[0], &lo) ||
        !absl::SimpleAtod(lh[1], &hi) || *dim <= 0) {
      return UsageError(
          "--feature-bounds=LO:HI needs two numbers and --dimension");
    }
    for (int64_t j = 0; j < *dim; ++j) {
      h.mutable_bounds()->add_lower(lo);
      h.mutable_bounds()->add_upper(hi);
    }
  }
  h.set_description(a.Get("description"));
  if (absl::Status s = ApplyMaxAffineFlags(a, &h); !s.ok()) {
    return UsageError(s);
  }

  auto file = ReadFile(a.positional()[1]);
  if (!file.ok()) return UsageError(file.status());

  Client c(g);
  auto ctx = c.Context();
  pb::DatasetInfo info;
  auto writer = c.datasets().ImportDataset(ctx.get(), &info);
  pb::ImportDatasetRequest req;
  *req.mutable_header() = h;
  bool ok = writer->Write(req);
  constexpr size_t kChunk = 1 << 20;
  const bool tty = isatty(STDERR_FILENO) && !g.json;
  for (size_t off = 0; ok && off < file->size(); off += kChunk) {
    pb::ImportDatasetRequest chunk;
    chunk.set_chunk(file->substr(off, kChunk));
    ok = writer->Write(chunk);
    if (tty) {
      std::cerr << absl::StrFormat(
          "\ruploading %s: %3.0f%%", a.positional()[1],
          100.0 * std::min(file->size(), off + kChunk) / file->size());
    }
  }
  if (tty) std::cerr << "\n";
  writer->WritesDone();
  grpc::Status s = writer->Finish();
  if (!s.ok()) return ReportRpcError(s, g);
  if (g.json) {
    std::cout << ToJson(info) << std::endl;
  } else {
    std::cout << absl::StrFormat("imported %s: %d rows x %d features (%s%s)\n",
                                 info.name(), info.rows(), info.dimension(),
                                 info.public_() ? "public" : "private",
                                 info.sparse() ? ", sparse" : "");
    if (info.has_budget()) PrintBudget(info.budget());
  }
  return 0;
}

int DatasetList(const ParsedArgs& a, const Globals& g) {
  Client c(g);
  auto ctx = c.Context();
  pb::ListDatasetsResponse resp;
  grpc::Status s =
      c.datasets().ListDatasets(ctx.get(), pb::ListDatasetsRequest(), &resp);
  if (!s.ok()) return ReportRpcError(s, g);
  if (g.json) {
    std::cout << ToJson(resp) << std::endl;
    return 0;
  }
  std::cout << absl::StrFormat("%-20s %-8s %10s %10s %12s %12s\n", "NAME",
                               "ACCESS", "ROWS", "DIMENSION", "EPS_TOTAL",
                               "EPS_LEFT");
  for (const auto& d : resp.datasets()) {
    std::cout << absl::StrFormat(
        "%-20s %-8s %10d %10d %12s %12s\n", d.name(),
        d.public_() ? "public" : "private", d.rows(), d.dimension(),
        d.public_() ? "-" : Num(d.budget().epsilon_total()),
        d.public_() ? "-" : Num(d.budget().epsilon_remaining()));
  }
  return 0;
}

int DatasetShow(const ParsedArgs& a, const Globals& g) {
  if (a.positional().size() != 1) {
    return UsageError("usage: dpopt dataset show NAME");
  }
  Client c(g);
  auto ctx = c.Context();
  pb::GetDatasetRequest req;
  req.set_name(a.positional()[0]);
  pb::DatasetInfo d;
  grpc::Status s = c.datasets().GetDataset(ctx.get(), req, &d);
  if (!s.ok()) return ReportRpcError(s, g);
  if (g.json) {
    std::cout << ToJson(d) << std::endl;
    return 0;
  }
  std::string labels = d.label_type() == pb::LABEL_TYPE_MULTICLASS
                           ? absl::StrCat("multiclass (", d.num_classes(), ")")
                       : d.label_type() == pb::LABEL_TYPE_REAL
                           ? "real"
                           : "binary (-1/+1)";
  std::cout << absl::StrFormat(
      "dataset %s\n  access     %s\n  rows       %d\n  dimension  %d\n"
      "  storage    %s%s\n  labels     %s\n  relation   %s\n",
      d.name(), d.public_() ? "public" : "private", d.rows(), d.dimension(),
      d.sparse() ? "sparse" : "dense",
      d.nonzeros() > 0 ? absl::StrCat(" (", d.nonzeros(), " nonzeros)") : "",
      labels,
      d.relation() == pb::REPLACE_ONE    ? "replace-one"
      : d.relation() == pb::LINF_OFFSETS ? "l-infinity on the offsets"
                                         : "add/remove one row");
  PrintMaxAffine(d);
  if (d.bounds().row_norm_bound() > 0) {
    std::cout << "  row norm   <= " << Num(d.bounds().row_norm_bound()) << "\n";
  }
  if (d.bounds().lower_size() > 0) {
    std::cout << "  bounds     declared per feature ("
              << d.bounds().lower_size() << " features)\n";
  }
  if (!d.description().empty()) {
    std::cout << "  about      " << d.description() << "\n";
  }
  if (d.has_budget()) PrintBudget(d.budget());
  return 0;
}

// ---------------------------------------------------------------- budget

int BudgetShow(const ParsedArgs& a, const Globals& g) {
  if (a.positional().size() != 1) {
    return UsageError("usage: dpopt budget show DATASET");
  }
  Client c(g);
  auto ctx = c.Context();
  pb::GetBudgetRequest req;
  req.set_dataset(a.positional()[0]);
  pb::BudgetStatus b;
  grpc::Status s = c.budget().GetBudget(ctx.get(), req, &b);
  if (!s.ok()) return ReportRpcError(s, g);
  if (g.json) {
    std::cout << ToJson(b) << std::endl;
  } else {
    PrintBudget(b);
  }
  return 0;
}

int Ledger(const ParsedArgs& a, const Globals& g) {
  if (a.positional().size() != 1) {
    return UsageError("usage: dpopt ledger DATASET");
  }
  Client c(g);
  auto ctx = c.Context();
  pb::ListLedgerRequest req;
  req.set_dataset(a.positional()[0]);
  pb::ListLedgerResponse resp;
  grpc::Status s = c.budget().ListLedger(ctx.get(), req, &resp);
  if (!s.ok()) return ReportRpcError(s, g);
  if (g.json) {
    std::cout << ToJson(resp) << std::endl;
    return 0;
  }
  std::cout << absl::StrFormat("%-5s %-26s %-9s %12s %10s  %s\n", "SEQ", "JOB",
                               "PRICED_BY", "EPSILON", "DELTA", "EVENT");
  for (const auto& e : resp.entries()) {
    std::cout << absl::StrFormat(
        "%-5d %-26s %-9s %12s %10s  %s\n", e.sequence(), e.job_id(),
        e.accountant(), Num(e.epsilon()), Num(e.delta()), e.event_json());
  }
  std::cout << "\n";
  PrintBudget(resp.budget());
  return 0;
}

// ---------------------------------------------------------------- jobs

absl::StatusOr<pb::JobSpec> ReadSpec(const std::string& path) {
  std::string text;
  if (path == "-") {
    std::stringstream ss;
    ss << std::cin.rdbuf();
    text = ss.str();
  } else {
    auto f = ReadFile(path);
    if (!f.ok()) return f.status();
    text = *f;
  }
  pb::JobSpec spec;
  google::protobuf::util::JsonParseOptions o;
  o.ignore_unknown_fields = false;
  auto st = google::protobuf::util::JsonStringToMessage(text, &spec, o);
  if (!st.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        path,
        " is not a valid JobSpec (proto3 JSON): ", std::string(st.message())));
  }
  return spec;
}

void PrintCalibration(const pb::Calibration& c) {
  std::cout << absl::StrFormat(
      "  noise      multiplier %s (std %s per coordinate of the clipped sum)\n"
      "  steps      %d, sampling rate %s (expected batch %s), clip norm %s\n",
      Num(c.noise_multiplier()), Num(c.noise_stddev()), c.steps(),
      Num(c.sampling_rate()), Num(c.expected_batch_size()), Num(c.clip_norm()));
  for (const auto& n : c.notes()) std::cout << "  note       " << n << "\n";
}

void PrintCost(const pb::PrivacyCost& c) {
  if (!c.charged()) {
    std::cout << "  cost       none (public dataset, non-private job)\n";
    return;
  }
  std::cout << absl::StrFormat("  cost       epsilon %s at delta %s (%s)\n",
                               Num(c.epsilon()), Num(c.delta()),
                               c.accountant());
}

int JobEstimate(const ParsedArgs& a, const Globals& g) {
  if (a.positional().size() != 1) {
    return UsageError("usage: dpopt job estimate SPEC.json");
  }
  auto spec = ReadSpec(a.positional()[0]);
  if (!spec.ok()) return UsageError(spec.status());
  Client c(g);
  auto ctx = c.Context();
  pb::EstimateJobRequest req;
  *req.mutable_spec() = *spec;
  pb::JobEstimate est;
  grpc::Status s = c.jobs().EstimateJob(ctx.get(), req, &est);
  if (!s.ok()) return ReportRpcError(s, g);
  if (g.json) {
    std::cout << ToJson(est) << std::endl;
    return 0;
  }
  std::cout << "estimate for a job on " << spec->dataset()
            << " (nothing charged)\n";
  PrintCalibration(est.calibration());
  PrintCost(est.cost());
  if (est.has_budget_before() && est.cost().charged()) {
    std::cout << absl::StrFormat(
        "  budget     remaining epsilon %s now, %s after this job\n",
        Num(est.budget_before().epsilon_remaining()),
        est.admissible() ? Num(est.budget_after().epsilon_remaining())
                         : "(not admissible)");
  }
  if (!est.message().empty()) std::cout << "  " << est.message() << "\n";
  return 0;
}

class ProgressBar {
 public:
  explicit ProgressBar(bool enabled)
      : enabled_(enabled), tty_(isatty(STDERR_FILENO)) {}
  void Update(const pb::TracePoint& t, int64_t total) {
    if (!enabled_) return;
    const double frac = total > 0 ? std::min(1.0, 1.0 * t.step() / total) : 0;
    const int width = 30;
    const int filled = static_cast<int>(frac * width);
    std::string bar(filled, '#');
    bar.append(width - filled, '.');
    std::string vals = absl::StrFormat("|w|=%.4g", t.iterate_norm());
    if (t.has_public_eval()) {
      absl::StrAppendFormat(&vals, " public loss=%.4f acc=%.4f",
                            t.public_loss(), t.public_accuracy());
    }
    std::string line = absl::StrFormat("[%s] %3.0f%% step %d/%d %s", bar,
                                       100 * frac, t.step(), total, vals);
    if (tty_) {
      std::cerr << "\r" << line << "\x1b[K" << std::flush;
      dirty_ = true;
    } else if (frac >= next_report_ || t.step() == total) {
      std::cerr << line << "\n";
      next_report_ = std::floor(frac * 10 + 1) / 10;
    }
  }
  void Done() {
    if (enabled_ && tty_ && dirty_) std::cerr << "\n";
    dirty_ = false;
  }

 private:
  bool enabled_;
  bool tty_;
  bool dirty_ = false;
  double next_report_ = 0;
};

void PrintJob(const pb::Job& j) {
  std::cout << absl::StrFormat("job %s  %s  dataset %s  step %d/%d\n", j.id(),
                               StateName(j.state()), j.spec().dataset(),
                               j.steps_done(), j.steps_total());
  if (!j.message().empty()) std::cout << "  message    " << j.message() << "\n";
  if (j.has_calibration()) PrintCalibration(j.calibration());
  if (j.has_cost()) PrintCost(j.cost());
  if (j.has_evaluation() && j.evaluation().rows() > 0) {
    std::cout << absl::StrFormat(
        "  evaluation on %s (%d rows, public): accuracy %.4f, loss %.4f\n",
        j.evaluation().dataset(), j.evaluation().rows(),
        j.evaluation().accuracy(), j.evaluation().loss());
  }
}

// Streams a job's events until it ends. Returns the final job.
absl::StatusOr<pb::Job> Watch(Client& c, const std::string& id,
                              const Globals& g, grpc::Status* rpc_status) {
  auto ctx = c.Context(/*deadline=*/false);
  pb::WatchJobRequest req;
  req.set_id(id);
  auto reader = c.jobs().WatchJob(ctx.get(), req);
  pb::JobEvent ev;
  pb::Job last;
  ProgressBar bar(!g.json);
  int64_t total = 0;
  while (reader->Read(&ev)) {
    if (g.json) std::cout << ToJsonLine(ev) << std::endl;
    if (ev.has_job()) {
      last = ev.job();
      total = last.steps_total();
      if (Terminal(last.state())) break;
    } else if (ev.has_trace()) {
      bar.Update(ev.trace(), total);
    }
  }
  bar.Done();
  ctx->TryCancel();
  grpc::Status s = reader->Finish();
  if (!s.ok() && s.error_code() != grpc::CANCELLED) {
    *rpc_status = s;
    return absl::UnknownError("watch failed");
  }
  return last;
}

int FinishWatch(Client& c, const std::string& id, const Globals& g) {
  grpc::Status rpc;
  auto job = Watch(c, id, g, &rpc);
  if (!job.ok()) return ReportRpcError(rpc, g);
  if (!g.json) PrintJob(*job);
  return job->state() == pb::JOB_STATE_SUCCEEDED ? 0 : 1;
}

int JobSubmit(const ParsedArgs& a, const Globals& g) {
  if (a.positional().size() != 1) {
    return UsageError("usage: dpopt job submit SPEC.json [--wait]");
  }
  auto spec = ReadSpec(a.positional()[0]);
  if (!spec.ok()) return UsageError(spec.status());
  Client c(g);
  auto ctx = c.Context();
  pb::SubmitJobRequest req;
  *req.mutable_spec() = *spec;
  pb::Job job;
  grpc::Status s = c.jobs().SubmitJob(ctx.get(), req, &job);
  if (!s.ok()) return ReportRpcError(s, g);
  if (g.json) {
    std::cout << ToJsonLine(job) << std::endl;
  } else {
    std::cout << "submitted job " << job.id() << "\n";
    PrintCalibration(job.calibration());
    PrintCost(job.cost());
  }
  if (!a.GetBool("wait")) return 0;
  return FinishWatch(c, job.id(), g);
}

int JobWatch(const ParsedArgs& a, const Globals& g) {
  if (a.positional().size() != 1)
    return UsageError("usage: dpopt job watch ID");
  Client c(g);
  return FinishWatch(c, a.positional()[0], g);
}

int JobGet(const ParsedArgs& a, const Globals& g) {
  if (a.positional().size() != 1) return UsageError("usage: dpopt job get ID");
  Client c(g);
  auto ctx = c.Context();
  pb::GetJobRequest req;
  req.set_id(a.positional()[0]);
  pb::Job job;
  grpc::Status s = c.jobs().GetJob(ctx.get(), req, &job);
  if (!s.ok()) return ReportRpcError(s, g);
  if (g.json) {
    std::cout << ToJson(job) << std::endl;
  } else {
    PrintJob(job);
  }
  return 0;
}

int JobList(const ParsedArgs& a, const Globals& g) {
  Client c(g);
  auto ctx = c.Context();
  pb::ListJobsRequest req;
  req.set_dataset(a.Get("dataset"));
  pb::ListJobsResponse resp;
  grpc::Status s = c.jobs().ListJobs(ctx.get(), req, &resp);
  if (!s.ok()) return ReportRpcError(s, g);
  if (g.json) {
    std::cout << ToJson(resp) << std::endl;
    return 0;
  }
  std::cout << absl::StrFormat("%-26s %-10s %-14s %-17s %12s %9s\n", "ID",
                               "STATE", "DATASET", "ALGORITHM", "EPSILON",
                               "ACCURACY");
  for (const auto& j : resp.jobs()) {
    // The oneof field's name: dp_sgd, accel_dp_nag, dp_blsgd, ...
    const auto* field = pb::AlgorithmSpec::descriptor()->FindFieldByNumber(
        j.spec().algorithm().algorithm_case());
    const std::string algo = field != nullptr ? field->name() : "-";
    std::cout << absl::StrFormat(
        "%-26s %-10s %-14s %-17s %12s %9s\n", j.id(), StateName(j.state()),
        j.spec().dataset(), algo,
        j.cost().charged() ? Num(j.cost().epsilon()) : "-",
        j.evaluation().rows() > 0
            ? absl::StrFormat("%.4f", j.evaluation().accuracy())
            : "-");
  }
  return 0;
}

int JobCancel(const ParsedArgs& a, const Globals& g) {
  if (a.positional().size() != 1)
    return UsageError("usage: dpopt job cancel ID");
  Client c(g);
  auto ctx = c.Context();
  pb::CancelJobRequest req;
  req.set_id(a.positional()[0]);
  pb::Job job;
  grpc::Status s = c.jobs().CancelJob(ctx.get(), req, &job);
  if (!s.ok()) return ReportRpcError(s, g);
  if (g.json) {
    std::cout << ToJson(job) << std::endl;
  } else {
    std::cout << "cancellation requested; job " << job.id() << " is "
              << StateName(job.state())
              << " (its privacy cost stays charged)\n";
  }
  return 0;
}

int JobResult(const ParsedArgs& a, const Globals& g) {
  if (a.positional().size() != 1) {
    return UsageError("usage: dpopt job result ID [--output FILE]");
  }
  Client c(g);
  auto ctx = c.Context();
  pb::GetJobResultRequest req;
  req.set_id(a.positional()[0]);
  pb::JobResult r;
  grpc::Status s = c.jobs().GetJobResult(ctx.get(), req, &r);
  if (!s.ok()) return ReportRpcError(s, g);
  const std::string json = ToJson(r);
  if (a.Has("output")) {
    std::ofstream out(a.Get("output"));
    out << json << "\n";
    if (!out) return UsageError("cannot write " + a.Get("output"));
  }
  if (g.json) {
    std::cout << json << std::endl;
    return 0;
  }
  std::cout << absl::StrFormat("privatized model of job %s: %s, %d weights\n",
                               r.job_id(), r.model().loss(),
                               r.model().weights_size());
  PrintCost(r.cost());
  if (r.evaluation().rows() > 0) {
    std::cout << absl::StrFormat(
        "  evaluation on %s (public): accuracy %.4f, loss %.4f\n",
        r.evaluation().dataset(), r.evaluation().accuracy(),
        r.evaluation().loss());
  }
  if (a.Has("output")) std::cout << "  written to " << a.Get("output") << "\n";
  return 0;
}

// ---------------------------------------------------------------- health

int Health(const ParsedArgs& a, const Globals& g) {
  Client c(g);
  auto ctx = c.Context();
  grpc::health::v1::HealthCheckRequest req;
  grpc::health::v1::HealthCheckResponse resp;
  grpc::Status s = c.health().Check(ctx.get(), req, &resp);
  if (!s.ok()) return ReportRpcError(s, g);
  const bool serving =
      resp.status() == grpc::health::v1::HealthCheckResponse::SERVING;
  if (g.json) {
    std::cout << "{\"status\":\"" << (serving ? "SERVING" : "NOT_SERVING")
              << "\"}" << std::endl;
  } else {
    std::cout << (serving ? "SERVING" : "NOT_SERVING") << "\n";
  }
  return serving ? 0 : 1;
}

// ---------------------------------------------------------------- privacy

absl::StatusOr<privacy::AccountantKind> AccountantFlag(const ParsedArgs& a) {
  return privacy::ParseAccountant(a.Get("accountant", "rdp"));
}

privacy::DpEvent DpSgdEventFor(double z, double q, int64_t steps) {
  privacy::DpEvent step = privacy::DpEvent::Gaussian(z);
  if (q < 1.0) step = privacy::DpEvent::PoissonSampled(q, step);
  return privacy::DpEvent::SelfComposed(steps, step);
}

struct SgdParams {
  double q;
  int64_t steps;
  double delta;
};

absl::StatusOr<SgdParams> ReadSgdParams(const ParsedArgs& a) {
  SgdParams p;
  auto q = a.GetDouble("sampling-rate", 1.0);
  if (!q.ok()) return q.status();
  auto t = a.GetInt("steps");
  if (!t.ok()) return t.status();
  auto d = a.GetDouble("delta");
  if (!d.ok()) return d.status();
  if (!(*q > 0 && *q <= 1)) {
    return absl::InvalidArgumentError("--sampling-rate must be in (0, 1]");
  }
  if (*t < 1) return absl::InvalidArgumentError("--steps must be >= 1");
  if (!(*d > 0 && *d < 1)) {
    return absl::InvalidArgumentError("--delta must be in (0, 1)");
  }
  p.q = *q;
  p.steps = *t;
  p.delta = *d;
  return p;
}

int PrivacyEpsilon(const ParsedArgs& a, const Globals& g) {
  auto p = ReadSgdParams(a);
  if (!p.ok()) return UsageError(p.status());
  auto z = a.GetDouble("noise-multiplier");
  if (!z.ok()) return UsageError(z.status());
  if (!(*z > 0)) return UsageError("--noise-multiplier must be > 0");
  auto kind = AccountantFlag(a);
  if (!kind.ok()) return UsageError(kind.status());
  auto r = privacy::ComputeEpsilon(DpSgdEventFor(*z, p->q, p->steps), p->delta,
                                   *kind);
  if (!r.ok()) return UsageError(r.status());
  if (g.json) {
    std::cout << absl::StrFormat(
        "{\"epsilon\": %.10g, \"delta\": %.10g, \"optimal_order\": %.10g, "
        "\"accountant\": \"%s\"}\n",
        r->epsilon, p->delta, r->optimal_order, privacy::AccountantName(*kind));
  } else {
    std::cout << absl::StrFormat("epsilon = %.10g at delta = %g (%s",
                                 r->epsilon, p->delta,
                                 privacy::AccountantName(*kind));
    if (*kind == privacy::AccountantKind::kRdp) {
      std::cout << absl::StrFormat(", optimal order %g", r->optimal_order);
    }
    std::cout << ")\n";
  }
  return 0;
}

int PrivacyCalibrate(const ParsedArgs& a, const Globals& g) {
  auto p = ReadSgdParams(a);
  if (!p.ok()) return UsageError(p.status());
  auto eps = a.GetDouble("epsilon");
  if (!eps.ok()) return UsageError(eps.status());
  auto kind = AccountantFlag(a);
  if (!kind.ok()) return UsageError(kind.status());
  const SgdParams params = *p;
  auto z = privacy::CalibrateNoiseMultiplier(
      [&params](double z) { return DpSgdEventFor(z, params.q, params.steps); },
      *eps, p->delta, *kind);
  if (!z.ok()) return UsageError(z.status());
  auto r = privacy::ComputeEpsilon(DpSgdEventFor(*z, p->q, p->steps), p->delta,
                                   *kind);
  if (!r.ok()) return UsageError(r.status());
  if (g.json) {
    std::cout << absl::StrFormat(
        "{\"noise_multiplier\": %.10g, \"epsilon\": %.10g, \"delta\": %.10g, "
        "\"optimal_order\": %.10g, \"accountant\": \"%s\"}\n",
        *z, r->epsilon, p->delta, r->optimal_order,
        privacy::AccountantName(*kind));
  } else {
    std::cout << absl::StrFormat(
        "noise multiplier = %.10g gives epsilon = %.10g <= %g at delta = %g "
        "(%s)\n",
        *z, r->epsilon, *eps, p->delta, privacy::AccountantName(*kind));
  }
  return 0;
}

// ---------------------------------------------------------------- table

std::vector<Command> Commands() {
  const std::vector<FlagSpec> sgd = {
      {"sampling-rate", false, "Poisson sampling rate q (default 1)", "Q"},
      {"steps", false, "number of steps T", "T"},
      {"delta", false, "target delta", "D"},
      {"accountant", false, "rdp (default) or pld", "NAME"},
  };
  auto with = [](std::vector<FlagSpec> base, std::vector<FlagSpec> more) {
    base.insert(base.end(), more.begin(), more.end());
    return base;
  };
  std::vector<Command> cmds = {
      {"dataset import",
       "NAME FILE",
       "import a dataset file (curator); one transaction, nothing "
       "half-imported",
       {{"format", false, "libsvm (default) or csv", "FORMAT"},
        {"dimension", false, "number of features (required for libsvm)", "D"},
        {"public", true, "public dataset: no budget; for evaluation/baselines"},
        {"epsilon-budget", false, "total epsilon of a private dataset", "E"},
        {"delta-budget", false, "total delta of a private dataset", "D"},
        {"budget-filter", false, "rdp (default) or basic composition", "NAME"},
        {"relation", false, "add-remove (default) or replace-one", "REL"},
        {"labels", false, "binary (default), multiclass or real", "KIND"},
        {"num-classes", false, "classes of a multiclass dataset", "K"},
        {"delimiter", false, "CSV delimiter: ',' (default) or whitespace", "D"},
        {"header", true, "CSV has a header line of column names"},
        {"label-column", false, "0-based label column of a CSV (default last)",
         "N"},
        {"row-norm-bound", false, "declared public bound on row L2 norms", "B"},
        {"feature-bounds", false, "declared bounds LO:HI for every feature",
         "LO:HI"},
        {"description", false, "free-text description", "TEXT"},
        {"polytope", false,
         "seed 001: import the CSV as a max-affine problem (feature columns "
         "= public slopes, label column = private offsets) over the polytope "
         "in FILE (JSON {\"lower\": [...], \"upper\": [...]}, optional "
         "\"hMatrix\", \"hVector\"); needs --b-max",
         "FILE"},
        {"b-max", false,
         "seed 001: public bound on how far any offset may move (the "
         "l-infinity relation's radius)",
         "B"}},
       DatasetImport},
      {"dataset list",
       "",
       "list datasets with their remaining budget",
       {},
       DatasetList},
      {"dataset show",
       "NAME",
       "public metadata of a dataset (never rows)",
       {},
       DatasetShow},
      {"budget show",
       "DATASET",
       "total, spent and remaining epsilon of a dataset",
       {},
       BudgetShow},
      {"ledger", "DATASET", "every charge against a dataset", {}, Ledger},
      {"job estimate",
       "SPEC.json",
       "calibrated noise, steps and privacy cost of a job; charges nothing",
       {},
       JobEstimate},
      {"job submit",
       "SPEC.json",
       "submit a job (charges its privacy cost)",
       {{"wait", true, "watch the job with a progress bar until it ends"}},
       JobSubmit},
      {"job get", "ID", "state of a job", {}, JobGet},
      {"job watch",
       "ID",
       "follow a job's privatized trace until it ends",
       {},
       JobWatch},
      {"job list",
       "",
       "list jobs",
       {{"dataset", false, "only jobs on this dataset", "NAME"}},
       JobList},
      {"job cancel",
       "ID",
       "cancel a job (its cost stays charged)",
       {},
       JobCancel},
      {"job result",
       "ID",
       "the privatized model of a finished job",
       {{"output", false, "write the result JSON to FILE", "FILE"}},
       JobResult},
      {"health", "", "check that the server is SERVING (exit 0)", {}, Health},
      {"privacy epsilon", "",
       "epsilon of DP-SGD (local, no server): noise multiplier, q, steps",
       with(sgd, {{"noise-multiplier", false, "noise multiplier sigma", "S"}}),
       PrivacyEpsilon},
      {"privacy calibrate", "",
       "smallest noise multiplier meeting (epsilon, delta) (local)",
       with(sgd, {{"epsilon", false, "target epsilon", "E"}}),
       PrivacyCalibrate},
  };
  for (Command& c : AdminCommands()) cmds.push_back(std::move(c));
  return cmds;
}

void PrintTopHelp(const std::vector<Command>& cmds) {
  std::cout << "dpopt: client of dpopt-server, a differentially private "
               "optimization service.\n\nusage: dpopt COMMAND [ARGS] "
               "[--server=HOST:PORT] [--json]\n\ncommands:\n";
  for (const auto& c : cmds) {
    std::cout << absl::StrFormat("  %-34s %s\n",
                                 absl::StrCat(c.path, " ", c.args), c.summary);
  }
  std::cout << "\nglobal flags:\n";
  for (const auto& f : GlobalFlags()) {
    std::cout << absl::StrFormat(
        "  --%-32s %s\n",
        f.boolean ? f.name : absl::StrCat(f.name, "=", f.value_name), f.help);
  }
  std::cout << "\nThe bearer token is read from --token-file, $DPOPT_TOKEN "
               "or ~/.config/dpopt/token.\nRun 'dpopt COMMAND --help' for a "
               "command's "
               "flags.\nExit codes: 0 ok, 1 refused or failed by the server, "
               "2 usage error, 3 server unreachable.\n";
}

void PrintCommandHelp(const Command& c) {
  std::cout << "usage: dpopt " << c.path << (c.args.empty() ? "" : " ")
            << c.args << " [flags]\n\n"
            << c.summary << "\n\nflags:\n";
  for (const auto& f : WithGlobals(c.flags)) {
    std::cout << absl::StrFormat(
        "  --%-32s %s\n",
        f.boolean ? f.name : absl::StrCat(f.name, "=", f.value_name), f.help);
  }
}

int Main(int argc, char** argv) {
  std::vector<std::string> args;
  // Global flags may also come before the command: move them behind it.
  std::vector<std::string> leading;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (args.empty() && absl::StartsWith(a, "--") && a != "--help" &&
        a != "--version") {
      leading.push_back(a);
      const bool has_value = a.find('=') != std::string::npos;
      if (!has_value &&
          (a == "--server" || a == "--timeout" || a == "--token-file" ||
           a == "--tls-ca" || a == "--tls-cert" || a == "--tls-key") &&
          i + 1 < argc) {
        leading.push_back(argv[++i]);
      }
      continue;
    }
    args.push_back(a);
  }
  const auto cmds = Commands();
  if (args.empty() || args[0] == "--help" || args[0] == "-h" ||
      args[0] == "help") {
    PrintTopHelp(cmds);
    return args.empty() ? 2 : 0;
  }
  if (args[0] == "--version" || args[0] == "version") {
    std::cout << "dpopt 0.1.0\n";
    return 0;
  }
  // Longest command path that prefixes the arguments.
  const Command* cmd = nullptr;
  size_t used = 0;
  for (const auto& c : cmds) {
    std::vector<std::string> words = absl::StrSplit(c.path, ' ');
    if (words.size() > args.size()) continue;
    bool match = true;
    for (size_t i = 0; i < words.size(); ++i) match &= args[i] == words[i];
    if (match && words.size() > used) {
      cmd = &c;
      used = words.size();
    }
  }
  if (cmd == nullptr) {
    // A command group ("dpopt job", "dpopt job --help"): list its commands.
    std::vector<const Command*> group;
    for (const auto& c : cmds) {
      if (absl::StartsWith(c.path, args[0] + " ")) group.push_back(&c);
    }
    if (group.empty()) {
      std::cerr << "error: unknown command '" << args[0]
                << "'. Run 'dpopt --help'.\n";
      return 2;
    }
    const bool help = args.size() == 2 && (args[1] == "--help" ||
                                           args[1] == "-h");
    if (args.size() > 1 && !help) {
      std::cerr << "error: unknown command '" << args[0] << " " << args[1]
                << "'.\n";
    }
    (help ? std::cout : std::cerr)
        << "usage: dpopt " << args[0] << " COMMAND [ARGS] [flags]\n\n"
        << "commands:\n";
    for (const Command* c : group) {
      (help ? std::cout : std::cerr) << absl::StrFormat(
          "  %-34s %s\n", absl::StrCat(c->path, " ", c->args), c->summary);
    }
    (help ? std::cout : std::cerr)
        << "\nRun 'dpopt " << args[0] << " COMMAND --help' for its flags.\n";
    return help ? 0 : 2;
  }
  std::vector<std::string> rest(args.begin() + used, args.end());
  rest.insert(rest.end(), leading.begin(), leading.end());
  auto parsed = ParseArgs(rest, WithGlobals(cmd->flags));
  if (!parsed.ok()) return UsageError(parsed.status());
  if (parsed->GetBool("help")) {
    PrintCommandHelp(*cmd);
    return 0;
  }
  Globals g;
  const char* env = std::getenv("DPOPT_SERVER");
  g.server =
      parsed->Get("server", env != nullptr && *env ? env : kDefaultServer);
  g.json = parsed->GetBool("json");
  auto timeout = parsed->GetDouble("timeout", 120.0);
  if (!timeout.ok() || *timeout <= 0) {
    return UsageError("--timeout must be a positive number of seconds");
  }
  g.timeout_s = *timeout;
  if (absl::Status creds = ResolveCredentials(*parsed, g); !creds.ok()) {
    return UsageError(creds);
  }
  return cmd->run(*parsed, g);
}

}  // namespace
}  // namespace dpopt::client

int main(int argc, char** argv) { return dpopt::client::Main(argc, argv); }
