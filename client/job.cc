// dpopt CLI: job estimate, submit, get, watch, list, cancel and result.
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
#include "dpopt/v1/dpopt.grpc.pb.h"
#include "google/protobuf/util/json_util.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/grpcpp.h"

namespace dpopt::client {
namespace {

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
  // Calibration.noise_stddev (proto/dpopt/v1/dpopt.proto): on the noised
  // vector itself, before any averaging.
  std::cout << absl::StrFormat(
      "  noise      multiplier %s; %s\n"
      "  steps      %d, sampling rate %s (expected batch %s), clip norm %s\n",
      Num(c.noise_multiplier()),
      c.noise_stddev() > 0
          ? absl::StrCat("std ", Num(c.noise_stddev()),
                         " per coordinate of the noised vector (gradient "
                         "jobs: the clipped gradient sum, before averaging)")
          : std::string("no additive noise"),
      c.steps(), Num(c.sampling_rate()), Num(c.expected_batch_size()),
      Num(c.clip_norm()));
  if (c.work_units() > 0) {
    std::cout << absl::StrFormat(
        "  work       at most %s row-coordinate operations (public bound, "
        "checked against the server's limit before charging)\n",
        Num(c.work_units()));
  }
  for (const auto& n : c.notes()) std::cout << "  note       " << n << "\n";
}

// A dry run's loud marker: its numbers come from synthetic data.
void PrintSynthetic(const std::string& source) {
  std::cout << "  DRY RUN    SYNTHETIC DATA (" << source
            << "): the results say nothing about the dataset; nothing was "
               "charged\n";
}

void PrintCost(const pb::PrivacyCost& c, bool dry_run = false,
               pb::JobState state = pb::JOB_STATE_UNSPECIFIED) {
  if (state == pb::JOB_STATE_PENDING_APPROVAL ||
      state == pb::JOB_STATE_REJECTED) {
    std::cout << absl::StrFormat(
        "  cost       epsilon %s at delta %s (%s), %s\n", Num(c.epsilon()),
        Num(c.delta()), c.accountant(),
        state == pb::JOB_STATE_REJECTED
            ? "never charged (rejected)"
            : "charged only if a curator approves the job");
    return;
  }
  if (dry_run) {
    if (c.epsilon() > 0) {
      std::cout << absl::StrFormat(
          "  cost       none charged (dry run); the real job: epsilon %s at "
          "delta %s (%s)\n",
          Num(c.epsilon()), Num(c.delta()), c.accountant());
    } else {
      std::cout << "  cost       none charged (dry run)\n";
    }
    return;
  }
  if (!c.charged()) {
    std::cout << "  cost       none (public dataset, non-private job)\n";
    return;
  }
  std::cout << absl::StrFormat("  cost       epsilon %s at delta %s (%s)\n",
                               Num(c.epsilon()), Num(c.delta()),
                               c.accountant());
  // A pure-DP job whose charge differs from its guarantee (e.g.
  // pa_subgradient under an RDP filter) shows both.
  if (c.guarantee_epsilon() > 0 &&
      (c.guarantee_epsilon() != c.epsilon() || c.delta() != 0)) {
    std::cout << absl::StrFormat(
        "  guarantee  pure epsilon %s (delta 0); the ledger is charged the "
        "cost above\n",
        Num(c.guarantee_epsilon()));
  }
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
  if (j.synthetic_data()) PrintSynthetic(j.synthetic_source());
  if (!j.message().empty()) std::cout << "  message    " << j.message() << "\n";
  if (j.has_started_at() && j.has_finished_at()) {
    const int64_t ms =
        (j.finished_at().seconds() - j.started_at().seconds()) * 1000 +
        (j.finished_at().nanos() - j.started_at().nanos()) / 1000000;
    std::cout << absl::StrFormat("  run time   %.3f s\n", ms / 1000.0);
  }
  if (j.has_calibration()) PrintCalibration(j.calibration());
  if (j.state() == pb::JOB_STATE_PENDING_APPROVAL) {
    std::cout << "  approval   waiting for a curator (expires "
              << absl::FormatTime(
                     "%Y-%m-%d %H:%M:%S UTC",
                     absl::FromUnixSeconds(j.approval_expires_at().seconds()),
                     absl::UTCTimeZone())
              << ")\n";
  }
  if (j.has_cost()) PrintCost(j.cost(), j.synthetic_data(), j.state());
  if (j.has_evaluation() && j.evaluation().rows() > 0) {
    std::cout << absl::StrFormat(
        "  evaluation on %s (%d rows, public): accuracy %.4f, loss %.4f\n",
        j.evaluation().dataset(), j.evaluation().rows(),
        j.evaluation().accuracy(), j.evaluation().loss());
  }
}

// Streams a job's events until it ends. Returns the final job. A watch the
// server dropped because it fell behind (RESOURCE_EXHAUSTED) is opened again;
// the server then replays the stored trace, whose points already shown are
// skipped.
absl::StatusOr<pb::Job> Watch(Client& c, const std::string& id,
                              const Globals& g, grpc::Status* rpc_status) {
  pb::WatchJobRequest req;
  req.set_id(id);
  pb::Job last;
  ProgressBar bar(!g.json);
  int64_t total = 0;
  int64_t shown_step = -1;
  constexpr int kMaxWatches = 10;
  for (int watch = 1;; ++watch) {
    auto ctx = c.Context(/*deadline=*/false);
    auto reader = c.jobs().WatchJob(ctx.get(), req);
    pb::JobEvent ev;
    bool ended = false;
    while (reader->Read(&ev)) {
      if (ev.has_trace()) {
        if (ev.trace().step() <= shown_step) continue;
        shown_step = ev.trace().step();
      }
      if (g.json) std::cout << ToJsonLine(ev) << std::endl;
      if (ev.has_job()) {
        last = ev.job();
        total = last.steps_total();
        if (Terminal(last.state())) {
          ended = true;
          break;
        }
      } else if (ev.has_trace()) {
        bar.Update(ev.trace(), total);
      }
    }
    ctx->TryCancel();
    grpc::Status s = reader->Finish();
    if (!ended && s.error_code() == grpc::RESOURCE_EXHAUSTED &&
        absl::StrContains(s.error_message(), "dropped") &&
        watch < kMaxWatches) {
      continue;
    }
    bar.Done();
    if (!s.ok() && s.error_code() != grpc::CANCELLED) {
      *rpc_status = s;
      return absl::UnknownError("watch failed");
    }
    return last;
  }
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
    return UsageError("usage: dpopt job submit SPEC.json [--wait] [--dry-run]");
  }
  auto spec = ReadSpec(a.positional()[0]);
  if (!spec.ok()) return UsageError(spec.status());
  if (a.GetBool("dry-run")) spec->set_dry_run(true);
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
    std::cout << (job.synthetic_data() ? "submitted dry run "
                                       : "submitted job ")
              << job.id() << "\n";
    if (job.synthetic_data()) PrintSynthetic(job.synthetic_source());
    if (job.state() == pb::JOB_STATE_PENDING_APPROVAL) {
      std::cout << "  PENDING APPROVAL  " << job.message() << "\n";
    }
    PrintCalibration(job.calibration());
    PrintCost(job.cost(), job.synthetic_data(), job.state());
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
  pb::ListJobsRequest req;
  req.set_dataset(a.Get("dataset"));
  auto size = a.GetInt("page-size", 0);
  if (!size.ok()) return UsageError(size.status());
  if (*size < 0 || *size > 1000) {
    return UsageError("--page-size must be between 1 and 1000");
  }
  req.set_page_size(static_cast<int32_t>(*size));
  req.set_page_token(a.Get("page-token"));
  req.set_newest_first(a.GetBool("newest-first"));
  const bool all = a.GetBool("all");
  if (all && a.Has("page-token")) {
    return UsageError("--all starts at the first page; drop --page-token");
  }
  pb::ListJobsResponse resp;
  // One page, or (--all) every page in turn.
  for (;;) {
    auto ctx = c.Context();
    pb::ListJobsResponse page;
    grpc::Status s = c.jobs().ListJobs(ctx.get(), req, &page);
    if (!s.ok()) return ReportRpcError(s, g);
    for (auto& j : *page.mutable_jobs()) *resp.add_jobs() = std::move(j);
    resp.set_next_page_token(page.next_page_token());
    if (!all || page.next_page_token().empty()) break;
    req.set_page_token(page.next_page_token());
  }
  if (g.json) {
    std::cout << ToJson(resp) << std::endl;
    return 0;
  }
  std::cout << absl::StrFormat("%-36s %-10s %-14s %-17s %12s %9s\n", "ID",
                               "STATE", "DATASET", "ALGORITHM", "EPSILON",
                               "ACCURACY");
  for (const auto& j : resp.jobs()) {
    // The oneof field's name: dp_sgd, accel_dp_nag, dp_blsgd, ...
    const auto* field = pb::AlgorithmSpec::descriptor()->FindFieldByNumber(
        j.spec().algorithm().algorithm_case());
    const std::string algo = field != nullptr ? field->name() : "-";
    std::cout << absl::StrFormat(
        "%-36s %-10s %-14s %-17s %12s %9s\n", j.id(), StateName(j.state()),
        j.spec().dataset(), algo,
        j.synthetic_data() ? "dry-run"
        : j.state() == pb::JOB_STATE_PENDING_APPROVAL ||
                j.state() == pb::JOB_STATE_REJECTED
            ? absl::StrCat("(", Num(j.cost().epsilon()), ")")
        : j.cost().charged() ? Num(j.cost().epsilon())
                             : "-",
        j.evaluation().rows() > 0
            ? absl::StrFormat("%.4f", j.evaluation().accuracy())
            : "-");
  }
  if (!resp.next_page_token().empty()) {
    std::cout << "more jobs: dpopt job list --page-token="
              << resp.next_page_token()
              << (req.newest_first() ? " --newest-first" : "")
              << (req.dataset().empty() ? "" : " --dataset=" + req.dataset())
              << "   (or --all)\n";
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
              << (job.synthetic_data() ? " (a dry run: nothing was charged)\n"
                                       : " (its privacy cost stays charged)\n");
  }
  return 0;
}

int JobPending(const ParsedArgs& a, const Globals& g) {
  Client c(g);
  auto ctx = c.Context();
  pb::ListPendingJobsRequest req;
  req.set_dataset(a.Get("dataset"));
  pb::ListJobsResponse resp;
  grpc::Status s = c.jobs().ListPendingJobs(ctx.get(), req, &resp);
  if (!s.ok()) return ReportRpcError(s, g);
  if (g.json) {
    std::cout << ToJson(resp) << std::endl;
    return 0;
  }
  std::cout << absl::StrFormat("%-36s %-14s %-14s %-17s %12s  %s\n", "ID",
                               "PRINCIPAL", "DATASET", "ALGORITHM", "EPSILON",
                               "EXPIRES");
  for (const auto& j : resp.jobs()) {
    const auto* field = pb::AlgorithmSpec::descriptor()->FindFieldByNumber(
        j.spec().algorithm().algorithm_case());
    std::cout << absl::StrFormat(
        "%-36s %-14s %-14s %-17s %12s  %s\n", j.id(), j.principal(),
        j.spec().dataset(), field != nullptr ? field->name() : "-",
        Num(j.cost().epsilon()),
        absl::FormatTime(
            "%Y-%m-%d %H:%M:%S UTC",
            absl::FromUnixSeconds(j.approval_expires_at().seconds()),
            absl::UTCTimeZone()));
  }
  if (resp.jobs_size() == 0) std::cout << "no job is waiting for approval\n";
  return 0;
}

int JobApprove(const ParsedArgs& a, const Globals& g) {
  if (a.positional().size() != 1) {
    return UsageError("usage: dpopt job approve ID");
  }
  Client c(g);
  auto ctx = c.Context();
  pb::ApproveJobRequest req;
  req.set_id(a.positional()[0]);
  pb::Job job;
  grpc::Status s = c.jobs().ApproveJob(ctx.get(), req, &job);
  if (!s.ok()) return ReportRpcError(s, g);
  if (g.json) {
    std::cout << ToJson(job) << std::endl;
  } else {
    std::cout << "approved job " << job.id() << ": it is "
              << StateName(job.state()) << " and charged\n";
    PrintCost(job.cost());
  }
  return 0;
}

int JobReject(const ParsedArgs& a, const Globals& g) {
  if (a.positional().size() != 1) {
    return UsageError("usage: dpopt job reject ID --reason=TEXT");
  }
  Client c(g);
  auto ctx = c.Context();
  pb::RejectJobRequest req;
  req.set_id(a.positional()[0]);
  req.set_reason(a.Get("reason"));
  pb::Job job;
  grpc::Status s = c.jobs().RejectJob(ctx.get(), req, &job);
  if (!s.ok()) return ReportRpcError(s, g);
  if (g.json) {
    std::cout << ToJson(job) << std::endl;
  } else {
    std::cout << "rejected job " << job.id() << " (nothing was charged)\n";
  }
  return 0;
}

int JobResult(const ParsedArgs& a, const Globals& g) {
  if (a.positional().size() != 1) {
    return UsageError("usage: dpopt job result ID [--output FILE]");
  }
  Client c(g);
  pb::GetJobResultRequest req;
  req.set_id(a.positional()[0]);
  pb::JobResult r;
  {
    auto ctx = c.Context();
    grpc::Status s = c.jobs().GetJobResult(ctx.get(), req, &r);
    if (!s.ok()) return ReportRpcError(s, g);
  }
  // The server sends the trace a bounded page at a time: fetch the rest.
  while (r.next_trace_offset() > 0 && r.trace_size() < r.trace_points_total()) {
    req.set_trace_offset(r.next_trace_offset());
    pb::JobResult page;
    auto ctx = c.Context();
    grpc::Status s = c.jobs().GetJobResult(ctx.get(), req, &page);
    if (!s.ok()) return ReportRpcError(s, g);
    if (page.trace_size() == 0) break;
    for (pb::TracePoint& t : *page.mutable_trace()) {
      *r.add_trace() = std::move(t);
    }
    r.set_next_trace_offset(page.next_trace_offset());
  }
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
  if (r.synthetic_data()) PrintSynthetic(r.synthetic_source());
  PrintCost(r.cost(), r.synthetic_data());
  if (r.evaluation().rows() > 0) {
    std::cout << absl::StrFormat(
        "  evaluation on %s (public): accuracy %.4f, loss %.4f\n",
        r.evaluation().dataset(), r.evaluation().accuracy(),
        r.evaluation().loss());
  }
  if (a.Has("output")) std::cout << "  written to " << a.Get("output") << "\n";
  return 0;
}

}  // namespace

std::vector<Command> JobCommands() {
  return {
      {"job estimate",
       "SPEC.json",
       "calibrated noise, steps and privacy cost of a job; charges nothing",
       {},
       JobEstimate},
      {"job submit",
       "SPEC.json",
       "submit a job (charges its privacy cost)",
       {{"wait", true, "watch the job with a progress bar until it ends"},
        {"dry-run", true,
         "run it on synthetic data with the dataset's public schema (or its "
         "public dummy): nothing charged, no private row read"}},
       JobSubmit},
      {"job get", "ID", "state of a job", {}, JobGet},
      {"job watch",
       "ID",
       "follow a job's privatized trace until it ends",
       {},
       JobWatch},
      {"job list",
       "",
       "list jobs, a page at a time (oldest first)",
       {{"dataset", false, "only jobs on this dataset", "NAME"},
        {"page-size", false, "jobs per page (default 100, at most 1000)", "N"},
        {"page-token", false, "continue after the page that printed this token",
         "TOKEN"},
        {"newest-first", true, "newest jobs first"},
        {"all", true, "fetch every page"}},
       JobList},
      {"job pending",
       "",
       "jobs waiting for a curator's approval (curator)",
       {{"dataset", false, "only jobs on this dataset", "NAME"}},
       JobPending},
      {"job approve",
       "ID",
       "approve a job waiting for approval: it is charged (if the budget and "
       "cap still have room) and runs (curator)",
       {},
       JobApprove},
      {"job reject",
       "ID",
       "reject a job waiting for approval; nothing is charged (curator)",
       {{"reason", false, "why (shown to the analyst)", "TEXT"}},
       JobReject},
      {"job cancel",
       "ID",
       "cancel a job (its cost stays charged)",
       {},
       JobCancel},
      {"job result",
       "ID",
       "the privatized model of a finished job and its whole trace",
       {{"output", false, "write the result JSON to FILE", "FILE"}},
       JobResult},
  };
}

}  // namespace dpopt::client
