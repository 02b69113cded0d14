#include "server/console/pages.h"

#include <chrono>
#include <cmath>
#include <map>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "google/protobuf/util/json_util.h"
#include "server/console/html.h"
#include "server/console/svg_plot.h"

namespace dpopt::server::console {
namespace {

// Jobs per console table (newest first; ListJobs pages).
constexpr int32_t kConsoleJobs = 200;

constexpr auto kDeadline = std::chrono::seconds(30);
// How long a page of a running job reads its event stream (the recorded
// trace comes first, at once).
constexpr auto kLiveTraceWait = std::chrono::milliseconds(300);

bool Printable(const std::string& s) {
  if (s.size() > 1024) return false;
  for (unsigned char c : s) {
    if (c < 0x20 || c > 0x7e) return false;
  }
  return true;
}

// gRPC's codes are absl's codes (same numbers and names).
std::string CodeName(grpc::StatusCode code) {
  return absl::StatusCodeToString(static_cast<absl::StatusCode>(code));
}

// The API's own message (never private data: docs/architecture.md,
// invariant "nothing unprivatized leaves the server"), escaped.
Page ErrorPage(const grpc::Status& s) {
  Page p;
  p.http_status = HttpStatus(s.error_code());
  p.body = absl::StrCat("<div class=\"error\" data-code=\"",
                        CodeName(s.error_code()), "\"><strong>",
                        CodeName(s.error_code()),
                        "</strong>: ", Esc(s.error_message()), "</div>");
  return p;
}

std::string StateName(v1::JobState s) {
  std::string name = v1::JobState_Name(s);
  return name.substr(std::string("JOB_STATE_").size());
}

bool Terminal(v1::JobState s) {
  return s == v1::JOB_STATE_SUCCEEDED || s == v1::JOB_STATE_FAILED ||
         s == v1::JOB_STATE_CANCELLED || s == v1::JOB_STATE_REJECTED;
}

std::string AlgorithmName(const v1::JobSpec& spec) {
  const auto* oneof =
      v1::AlgorithmSpec::descriptor()->FindOneofByName("algorithm");
  const auto* field = spec.algorithm().GetReflection()->GetOneofFieldDescriptor(
      spec.algorithm(), oneof);
  return field == nullptr ? "-" : field->name();
}

std::string PrettyJson(const google::protobuf::Message& m) {
  std::string out;
  google::protobuf::util::JsonPrintOptions o;
  o.add_whitespace = true;
  o.preserve_proto_field_names = true;
  (void)google::protobuf::util::MessageToJsonString(m, &out, o);
  return out;
}

std::string StateBadge(v1::JobState s) {
  const std::string name = StateName(s);
  return absl::StrCat("<span class=\"state state-", Esc(name), "\">", Esc(name),
                      "</span>");
}

std::string Progress(int64_t done, int64_t total) {
  return absl::StrCat("<progress value=\"", done, "\" max=\"",
                      std::max<int64_t>(total, 1), "\"></progress> ", done, "/",
                      total);
}

std::string BudgetFacts(const v1::BudgetStatus& b) {
  std::vector<std::pair<std::string, std::string>> facts = {
      {"total", absl::StrCat("&epsilon; = ", Number(b.epsilon_total()),
                             " at &delta; = ", Number(b.delta_total()))},
      {"spent", absl::StrCat("<span class=\"eps-spent\">",
                             Number(b.epsilon_spent()), "</span> ",
                             BudgetBar(b.epsilon_spent(), b.epsilon_total()))},
      {"remaining", absl::StrCat("<span class=\"eps-remaining\">",
                                 Number(b.epsilon_remaining()), "</span>")},
      {"charges", absl::StrCat(b.charges())},
      {"accounting", Esc(b.accounting())},
  };
  if (b.caller_epsilon_cap() > 0) {
    facts.push_back(
        {"your cap",
         absl::StrCat("&epsilon; = ", Number(b.caller_epsilon_cap()),
                      ", spent ", Number(b.caller_epsilon_spent()))});
  }
  return DefinitionList(facts);
}

std::string JobsTable(const v1::ListJobsResponse& jobs, bool* live) {
  Table t("jobs", {"job", "label", "dataset", "algorithm", "principal", "state",
                   "progress", "epsilon", "accuracy", "created"});
  for (const v1::Job& j : jobs.jobs()) {
    if (!Terminal(j.state())) *live = true;
    t.Row({Link("jobs", j.id(), j.id()), Esc(j.spec().label()),
           Esc(j.spec().dataset()), Esc(AlgorithmName(j.spec())),
           Esc(j.principal()),
           j.synthetic_data()
               ? absl::StrCat(StateBadge(j.state()),
                              " <span class=\"dry-run\">dry run</span>")
               : StateBadge(j.state()),
           Progress(j.steps_done(), j.steps_total()),
           j.synthetic_data()   ? "dry run: not charged"
           : j.cost().charged() ? Number(j.cost().epsilon())
                                : "not charged",
           j.evaluation().dataset().empty() ? "-"
                                            : Number(j.evaluation().accuracy()),
           Time(j.created_at())});
  }
  if (jobs.next_page_token().empty()) return t.Html();
  return absl::StrCat(t.Html(), "<p>The newest ", jobs.jobs_size(),
                      " jobs; <code>dpopt job list --all</code> lists every "
                      "job.</p>");
}

std::string Section(const std::string& title, const std::string& body,
                    const std::string& id = "") {
  return absl::StrCat("<section", id.empty() ? "" : " id=\"" + id + "\"",
                      "><h2>", Esc(title), "</h2>", body, "</section>");
}

// Time axis of the spending plot: seconds, minutes, hours or days since the
// first charge, whichever reads best.
std::pair<double, const char*> TimeUnit(double span_seconds) {
  if (span_seconds < 120) return {1.0, "seconds"};
  if (span_seconds < 3 * 3600) return {60.0, "minutes"};
  if (span_seconds < 3 * 86400) return {3600.0, "hours"};
  return {86400.0, "days"};
}

// Cumulative per-charge epsilon over time (a basic-composition upper bound
// of what the ledger's filter reports as spent).
std::string SpendingPlot(const v1::ListLedgerResponse& ledger) {
  PlotSeries cumulative{"sum of per-charge ε", {}, {}, "#e67e22", true};
  const double t0 =
      ledger.entries().empty() ? 0 : Seconds(ledger.entries(0).created_at());
  const double span =
      ledger.entries().empty()
          ? 0
          : Seconds(ledger.entries().rbegin()->created_at()) - t0;
  const auto [unit, unit_name] = TimeUnit(span);
  double sum = 0;
  for (const v1::LedgerEntry& e : ledger.entries()) {
    sum += e.epsilon();
    cumulative.x.push_back((Seconds(e.created_at()) - t0) / unit);
    cumulative.y.push_back(sum);
  }
  const double x_end = cumulative.x.empty() || cumulative.x.back() <= 0
                           ? 1.0
                           : cumulative.x.back();
  const v1::BudgetStatus& b = ledger.budget();
  PlotSeries total{
      "budget",  {0.0, x_end}, {b.epsilon_total(), b.epsilon_total()},
      "#c0392b", false,        true};
  PlotSeries spent{"spent (filter, now)",
                   {0.0, x_end},
                   {b.epsilon_spent(), b.epsilon_spent()},
                   "#2c7fb8",
                   false,
                   true};
  PlotOptions o;
  o.title = "Spending over time";
  o.width = 560;
  o.x_label = ledger.entries().empty()
                  ? "no charges yet"
                  : absl::StrCat(unit_name, " since the first charge (",
                                 Time(ledger.entries(0).created_at()), ")");
  o.y_label = "epsilon";
  o.y_from_zero = true;
  std::vector<PlotSeries> series = {cumulative, spent};
  if (b.epsilon_total() > 0) series.push_back(total);
  return LinePlot(series, o);
}

std::string SharesTable(const v1::ListLedgerResponse& ledger,
                        const v1::ListGrantsResponse* grants) {
  struct Share {
    int64_t charges = 0;
    double epsilon = 0;
    double cap = 0;
    bool granted = false;
  };
  std::map<std::string, Share> by;
  double sum = 0;
  for (const v1::LedgerEntry& e : ledger.entries()) {
    Share& s = by[e.principal()];
    ++s.charges;
    s.epsilon += e.epsilon();
    sum += e.epsilon();
  }
  if (grants != nullptr) {
    for (const v1::Grant& g : grants->grants()) {
      Share& s = by[g.principal()];
      s.granted = true;
      s.cap = g.epsilon_cap();
    }
  }
  Table t("shares", {"principal", "charges", "sum of per-charge ε", "share",
                     "grant cap"});
  for (const auto& [name, s] : by) {
    t.Row({Esc(name), absl::StrCat(s.charges), Number(s.epsilon),
           sum > 0 ? absl::StrFormat("%.1f%%", 100 * s.epsilon / sum)
                   : std::string("-"),
           !s.granted  ? std::string("-")
           : s.cap > 0 ? Number(s.cap)
                       : std::string("no cap")});
  }
  return t.Html();
}

template <typename Points>
std::string TracePlots(const Points& trace) {
  PlotSeries loss{"public loss", {}, {}, "#1f77b4"};
  PlotSeries acc{"public accuracy", {}, {}, "#2ca02c"};
  PlotSeries iterate{"iterate norm", {}, {}, "#9467bd"};
  PlotSeries grad{"noisy gradient norm", {}, {}, "#d62728"};
  for (const v1::TracePoint& p : trace) {
    const double step = static_cast<double>(p.step());
    if (p.has_public_eval()) {
      loss.x.push_back(step);
      loss.y.push_back(p.public_loss());
      acc.x.push_back(step);
      acc.y.push_back(p.public_accuracy());
    }
    iterate.x.push_back(step);
    iterate.y.push_back(p.iterate_norm());
    grad.x.push_back(step);
    grad.y.push_back(p.noisy_gradient_norm());
  }
  PlotOptions o;
  o.x_label = "step";
  std::string out = "<div class=\"plots\">";
  o.title = "Loss on the public evaluation set";
  absl::StrAppend(&out, LinePlot({loss}, o));
  o.title = "Accuracy on the public evaluation set";
  absl::StrAppend(&out, LinePlot({acc}, o));
  o.title = "Norms of the privatized iterates and gradients";
  o.y_from_zero = true;
  absl::StrAppend(&out, LinePlot({iterate, grad}, o));
  return out + "</div>";
}

// The result's trace for the plots: `trace`, every page of it.
std::string ResultSection(const v1::JobResult& r,
                          const std::vector<v1::TracePoint>& trace,
                          bool had_iterates) {
  double norm2 = 0;
  for (double w : r.model().weights()) norm2 += w * w;
  std::string body =
      DefinitionList({{"loss", Esc(r.model().loss())},
                      {"parameters", absl::StrCat(r.model().weights_size())},
                      {"dimension", absl::StrCat(r.model().dimension())},
                      {"weights' L2 norm", Number(std::sqrt(norm2))}});
  if (r.released_size() > 0) {
    Table t("released", {"output", "values", "description"});
    for (const v1::ReleasedOutput& o : r.released()) {
      std::vector<std::string> head;
      for (int i = 0; i < o.values_size() && i < 8; ++i) {
        head.push_back(Number(o.values(i)));
      }
      t.Row({Esc(o.name()),
             absl::StrCat(absl::StrJoin(head, ", "),
                          o.values_size() > 8 ? ", ..." : "", " (",
                          o.values_size(), ")"),
             Esc(o.description())});
    }
    body += t.Html();
  }
  std::string note =
      absl::StrCat("<p class=\"note\">", trace.size(), " trace points");
  if (had_iterates) {
    absl::StrAppend(&note,
                    "; their privatized iterates are in the API's result "
                    "(<code>dpopt job result ",
                    Esc(r.job_id()), "</code>), not on this page");
  }
  absl::StrAppend(&note, ".</p>");
  return Section("Trace (privatized)", TracePlots(trace) + note, "trace") +
         Section("Released model", body, "model");
}

}  // namespace

int HttpStatus(grpc::StatusCode code) {
  switch (code) {
    case grpc::OK:
      return 200;
    case grpc::UNAUTHENTICATED:
      return 401;
    case grpc::PERMISSION_DENIED:
      return 403;
    case grpc::NOT_FOUND:
      return 404;
    case grpc::INVALID_ARGUMENT:
    case grpc::FAILED_PRECONDITION:
    case grpc::OUT_OF_RANGE:
      return 400;
    case grpc::RESOURCE_EXHAUSTED:
      return 429;
    case grpc::UNAVAILABLE:
    case grpc::DEADLINE_EXCEEDED:
      return 503;
    default:
      return 500;
  }
}

Pages::Pages(std::shared_ptr<grpc::Channel> api)
    : datasets_(v1::DatasetService::NewStub(api)),
      budget_(v1::BudgetService::NewStub(api)),
      jobs_(v1::JobService::NewStub(api)),
      admin_(v1::AdminService::NewStub(api)) {}

std::unique_ptr<grpc::ClientContext> Pages::Context(
    const std::string& authorization) const {
  auto ctx = std::make_unique<grpc::ClientContext>();
  ctx->set_deadline(std::chrono::system_clock::now() + kDeadline);
  if (!authorization.empty() && Printable(authorization)) {
    ctx->AddMetadata("authorization", authorization);
  }
  return ctx;
}

Page Pages::WhoAmI(const std::string& authorization) {
  v1::Principal p;
  grpc::Status s =
      admin_->WhoAmI(Context(authorization).get(), v1::WhoAmIRequest(), &p);
  if (!s.ok()) return ErrorPage(s);
  Page page;
  page.content_type = "application/json";
  google::protobuf::util::JsonPrintOptions o;
  o.preserve_proto_field_names = true;
  (void)google::protobuf::util::MessageToJsonString(p, &page.body, o);
  return page;
}

Page Pages::Datasets(const std::string& authorization) {
  v1::ListDatasetsResponse list;
  grpc::Status s = datasets_->ListDatasets(Context(authorization).get(),
                                           v1::ListDatasetsRequest(), &list);
  if (!s.ok()) return ErrorPage(s);
  Table t("datasets", {"dataset", "rows", "dimension", "kind", "spent",
                       "remaining", "charges", "ledger"});
  for (const v1::DatasetInfo& d : list.datasets()) {
    if (d.public_()) {
      t.Row({Link("datasets", d.name(), d.name()), absl::StrCat(d.rows()),
             absl::StrCat(d.dimension()), "public", "-", "-", "-", "-"});
      continue;
    }
    const v1::BudgetStatus& b = d.budget();
    t.Row({Link("datasets", d.name(), d.name()), absl::StrCat(d.rows()),
           absl::StrCat(d.dimension()), "private",
           absl::StrCat(BudgetBar(b.epsilon_spent(), b.epsilon_total()), " ",
                        Number(b.epsilon_spent()), " of ",
                        Number(b.epsilon_total())),
           Number(b.epsilon_remaining()), absl::StrCat(b.charges()),
           Link("ledger", d.name(), "ledger")});
  }
  Page p;
  p.body = absl::StrCat("<div data-page=\"datasets\"><h1>Datasets</h1>",
                        t.Html(), "</div>");
  return p;
}

Page Pages::Dataset(const std::string& authorization, const std::string& name) {
  v1::GetDatasetRequest get;
  get.set_name(name);
  v1::DatasetInfo d;
  grpc::Status s = datasets_->GetDataset(Context(authorization).get(), get, &d);
  if (!s.ok()) return ErrorPage(s);
  std::string body = absl::StrCat(
      "<div data-page=\"dataset\" data-dataset=\"", Esc(d.name()),
      "\"><h1>Dataset ", Esc(d.name()), "</h1>",
      DefinitionList({{"kind", d.public_() ? "public" : "private"},
                      {"rows", absl::StrCat(d.rows())},
                      {"dimension", absl::StrCat(d.dimension())},
                      {"labels", Esc(v1::LabelType_Name(d.label_type()))},
                      {"neighbouring relation",
                       Esc(v1::NeighbouringRelation_Name(d.relation()))},
                      {"created", Time(d.created_at())},
                      {"description", Esc(d.description())}}));
  if (!d.public_()) {
    v1::GetBudgetRequest breq;
    breq.set_dataset(name);
    v1::BudgetStatus b;
    s = budget_->GetBudget(Context(authorization).get(), breq, &b);
    if (!s.ok()) return ErrorPage(s);
    v1::ListLedgerRequest lreq;
    lreq.set_dataset(name);
    v1::ListLedgerResponse ledger;
    s = budget_->ListLedger(Context(authorization).get(), lreq, &ledger);
    if (!s.ok()) return ErrorPage(s);
    // Grants are for curators; an analyst's PERMISSION_DENIED just leaves
    // the caps out (and tells us the ledger holds only the caller's charges).
    v1::ListGrantsRequest greq;
    greq.set_dataset(name);
    v1::ListGrantsResponse grants;
    const bool curator =
        admin_->ListGrants(Context(authorization).get(), greq, &grants).ok();
    absl::StrAppend(
        &body, Section("Budget", BudgetFacts(b), "budget"),
        Section("Spending over time",
                absl::StrCat(
                    SpendingPlot(ledger),
                    "<p class=\"note\">Orange: the running sum of each "
                    "charge's own epsilon (basic composition, an upper "
                    "bound). Blue: what the dataset's filter reports as "
                    "spent now, which composes the charges more tightly.",
                    curator ? "" : " You see only your own charges.", "</p>"),
                "spending"),
        Section(
            curator ? "Per-analyst shares" : "Your share",
            absl::StrCat(SharesTable(ledger, curator ? &grants : nullptr),
                         "<p>", Link("ledger", name, "Full ledger"), "</p>"),
            "shares"));
  }
  v1::ListJobsRequest jreq;
  jreq.set_dataset(name);
  jreq.set_newest_first(true);
  jreq.set_page_size(kConsoleJobs);
  v1::ListJobsResponse jobs;
  s = jobs_->ListJobs(Context(authorization).get(), jreq, &jobs);
  if (!s.ok()) return ErrorPage(s);
  bool live = false;
  const std::string table = JobsTable(jobs, &live);  // before reading `live`
  absl::StrAppend(&body, Section("Jobs", table, "jobs"),
                  live ? "<span data-live=\"1\"></span>" : "", "</div>");
  Page p;
  p.body = std::move(body);
  return p;
}

Page Pages::Ledger(const std::string& authorization,
                   const std::string& dataset) {
  v1::ListLedgerRequest req;
  req.set_dataset(dataset);
  v1::ListLedgerResponse ledger;
  grpc::Status s =
      budget_->ListLedger(Context(authorization).get(), req, &ledger);
  if (!s.ok()) return ErrorPage(s);
  Table t("ledger", {"#", "time", "principal", "job", "epsilon", "delta",
                     "accountant", "note", "DP event"});
  for (const v1::LedgerEntry& e : ledger.entries()) {
    t.Row({absl::StrCat(e.sequence()), Time(e.created_at()), Esc(e.principal()),
           e.job_id().empty() ? "-" : Link("jobs", e.job_id(), e.job_id()),
           Number(e.epsilon()), Number(e.delta()), Esc(e.accountant()),
           Esc(e.note()),
           absl::StrCat("<details><summary>event</summary><pre>",
                        Esc(e.event_json()), "</pre></details>")});
  }
  Page p;
  p.body = absl::StrCat("<div data-page=\"ledger\" data-dataset=\"",
                        Esc(dataset), "\"><h1>Ledger of ",
                        Link("datasets", dataset, dataset), "</h1>",
                        ledger.has_budget() ? BudgetFacts(ledger.budget()) : "",
                        t.Html(), "</div>");
  return p;
}

Page Pages::Jobs(const std::string& authorization) {
  v1::ListJobsResponse jobs;
  v1::ListJobsRequest req;
  req.set_newest_first(true);
  req.set_page_size(kConsoleJobs);
  grpc::Status s = jobs_->ListJobs(Context(authorization).get(), req, &jobs);
  if (!s.ok()) return ErrorPage(s);
  bool live = false;
  const std::string table = JobsTable(jobs, &live);
  Page p;
  p.body =
      absl::StrCat("<div data-page=\"jobs\"", live ? " data-live=\"1\"" : "",
                   "><h1>Jobs</h1>", table, "</div>");
  return p;
}

Page Pages::Job(const std::string& authorization, const std::string& id) {
  v1::GetJobRequest req;
  req.set_id(id);
  v1::Job j;
  grpc::Status s = jobs_->GetJob(Context(authorization).get(), req, &j);
  if (!s.ok()) return ErrorPage(s);
  const v1::Calibration& c = j.calibration();
  std::vector<std::pair<std::string, std::string>> facts = {
      {"state", StateBadge(j.state())},
      {"progress", Progress(j.steps_done(), j.steps_total())},
      {"dataset", Link("datasets", j.spec().dataset(), j.spec().dataset())},
      {"algorithm", Esc(AlgorithmName(j.spec()))},
      {"label", Esc(j.spec().label())},
      {"principal", Esc(j.principal())},
      {"created", Time(j.created_at())},
      {"started", Time(j.started_at())},
      {"finished", Time(j.finished_at())}};
  if (!j.message().empty()) facts.push_back({"message", Esc(j.message())});
  if (j.state() == v1::JOB_STATE_PENDING_APPROVAL) {
    facts.push_back({"approval", absl::StrCat("waiting for a curator until ",
                                              Time(j.approval_expires_at()),
                                              "; not charged")});
  }
  if (j.synthetic_data()) {
    facts.insert(
        facts.begin(),
        std::pair<std::string, std::string>{
            "dry run",
            absl::StrCat("<span class=\"dry-run\">SYNTHETIC DATA</span> ",
                         Esc(j.synthetic_source()),
                         ": the results say nothing about the dataset; "
                         "nothing was charged")});
  }
  if (!j.evaluation().dataset().empty()) {
    facts.push_back(
        {"evaluation",
         absl::StrCat("accuracy <span class=\"accuracy\">",
                      Number(j.evaluation().accuracy()), "</span>, loss ",
                      Number(j.evaluation().loss()), " on ",
                      Esc(j.evaluation().dataset()), " (",
                      j.evaluation().rows(), " public rows)")});
  }
  std::string calibration =
      DefinitionList({{"noise multiplier", Number(c.noise_multiplier())},
                      {"noise std per coordinate of the noised vector "
                       "(gradient sum, before averaging)",
                       Number(c.noise_stddev())},
                      {"steps", absl::StrCat(c.steps())},
                      {"sampling rate", Number(c.sampling_rate())},
                      {"expected batch size", Number(c.expected_batch_size())},
                      {"clip norm", Number(c.clip_norm())}});
  if (c.notes_size() > 0) {
    calibration += "<ul class=\"notes\">";
    for (const std::string& n : c.notes()) {
      absl::StrAppend(&calibration, "<li>", Esc(n), "</li>");
    }
    calibration += "</ul>";
  }
  const v1::PrivacyCost& cost = j.cost();
  const std::string cost_html = absl::StrCat(
      DefinitionList(
          {{"epsilon", Number(cost.epsilon())},
           {"delta", Number(cost.delta())},
           {"accountant", Esc(cost.accountant())},
           {"charged", j.synthetic_data() ? "no (dry run)"
                       : j.state() == v1::JOB_STATE_PENDING_APPROVAL
                           ? "not yet (waiting for approval)"
                       : j.state() == v1::JOB_STATE_REJECTED ? "no (rejected)"
                       : cost.charged()                      ? "yes"
                                        : "no (public data)"}}),
      "<details><summary>DP event</summary><pre>", Esc(cost.event_json()),
      "</pre></details>");
  std::string body =
      absl::StrCat("<div data-page=\"job\" data-job=\"", Esc(j.id()),
                   "\" data-state=\"", Esc(StateName(j.state())), "\"",
                   Terminal(j.state()) ? "" : " data-live=\"1\"", "><h1>Job ",
                   Esc(j.id()), "</h1>", DefinitionList(facts),
                   Section("Calibration", calibration, "calibration"),
                   Section("Privacy cost", cost_html, "cost"),
                   Section("Job spec",
                           absl::StrCat("<pre class=\"spec\">",
                                        Esc(PrettyJson(j.spec())), "</pre>"),
                           "spec"));
  if (j.state() == v1::JOB_STATE_SUCCEEDED) {
    // The server sends the trace a bounded page at a time; the plots need
    // only each point's scalar values, so the iterates are not kept.
    v1::GetJobResultRequest rreq;
    rreq.set_id(id);
    v1::JobResult r;
    std::vector<v1::TracePoint> trace;
    bool had_iterates = false;
    for (;;) {
      v1::JobResult page;
      s = jobs_->GetJobResult(Context(authorization).get(), rreq, &page);
      if (!s.ok()) return ErrorPage(s);
      for (v1::TracePoint& t : *page.mutable_trace()) {
        had_iterates = had_iterates || t.iterate_size() > 0;
        t.clear_iterate();
        trace.push_back(std::move(t));
      }
      page.clear_trace();
      const int64_t next = page.next_trace_offset();
      if (rreq.trace_offset() == 0) r = std::move(page);
      if (next <= rreq.trace_offset() ||
          static_cast<int64_t>(trace.size()) >= r.trace_points_total()) {
        break;
      }
      rreq.set_trace_offset(next);
    }
    body += ResultSection(r, trace, had_iterates);
  } else if (!Terminal(j.state())) {
    // The trace so far, from the job's event stream (which replays the
    // recorded points first); the page polls again in 2 s.
    std::vector<v1::TracePoint> trace;
    auto ctx = Context(authorization);
    ctx->set_deadline(std::chrono::system_clock::now() + kLiveTraceWait);
    v1::WatchJobRequest wreq;
    wreq.set_id(id);
    auto reader = jobs_->WatchJob(ctx.get(), wreq);
    v1::JobEvent ev;
    while (reader->Read(&ev)) {
      if (!ev.has_trace()) continue;
      ev.mutable_trace()->clear_iterate();  // the plots need only the norms
      trace.push_back(std::move(*ev.mutable_trace()));
    }
    reader->Finish();  // DEADLINE_EXCEEDED: the job is still running
    body += Section(
        "Trace so far (privatized)",
        absl::StrCat(TracePlots(trace),
                     "<p class=\"note\">Live: this page refreshes itself "
                     "while the job runs.</p>"),
        "trace");
  }
  body += "</div>";
  Page p;
  p.body = std::move(body);
  return p;
}

}  // namespace dpopt::server::console
