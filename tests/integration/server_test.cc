// Integration tests: the real server in-process, real SQLite, real gRPC.
#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "tests/integration/test_server.h"

namespace dpopt::testing {
namespace {

using ::testing::HasSubstr;

v1::ImportHeader PrivateLibsvm(const std::string& name, double eps,
                               double delta, int64_t dim = 123) {
  v1::ImportHeader h;
  h.set_name(name);
  h.set_format(v1::DATASET_FORMAT_LIBSVM);
  h.set_dimension(dim);
  h.set_epsilon_budget(eps);
  h.set_delta_budget(delta);
  return h;
}

v1::ImportHeader PublicLibsvm(const std::string& name, int64_t dim = 123) {
  v1::ImportHeader h;
  h.set_name(name);
  h.set_format(v1::DATASET_FORMAT_LIBSVM);
  h.set_dimension(dim);
  h.set_public_(true);
  return h;
}

v1::JobSpec ParseSpec(const std::string& json) {
  v1::JobSpec spec;
  auto st = google::protobuf::util::JsonStringToMessage(json, &spec);
  EXPECT_TRUE(st.ok()) << st.message();
  return spec;
}

// A small synthetic, linearly separable-ish LIBSVM dataset (public data).
std::string SmallLibsvm(int rows, int dim) {
  std::string out;
  for (int i = 0; i < rows; ++i) {
    const int label = (i % 2 == 0) ? 1 : -1;
    absl::StrAppend(&out, label > 0 ? "+1" : "-1");
    // Feature 1 is a constant bias column; the others are shifted by the
    // label, so a linear model separates the classes well.
    absl::StrAppend(&out, " 1:1");
    for (int j = 2; j <= dim; ++j) {
      const double v = ((i * 7 + j * 3) % 5) / 5.0 + (label > 0 ? 0.3 : -0.3);
      absl::StrAppendFormat(&out, " %d:%.3f", j, v);
    }
    out += "\n";
  }
  return out;
}

struct Counts {
  int64_t ledger_entries = 0;
  double epsilon_spent = 0;
  double epsilon_remaining = 0;
};

v1::ListLedgerResponse Ledger(TestServer& s, const std::string& dataset) {
  grpc::ClientContext ctx;
  v1::ListLedgerRequest req;
  req.set_dataset(dataset);
  v1::ListLedgerResponse resp;
  grpc::Status st = s.budget().ListLedger(&ctx, req, &resp);
  EXPECT_TRUE(st.ok()) << st.error_message();
  return resp;
}

Counts LedgerCounts(TestServer& s, const std::string& dataset) {
  const v1::ListLedgerResponse resp = Ledger(s, dataset);
  return {resp.entries_size(), resp.budget().epsilon_spent(),
          resp.budget().epsilon_remaining()};
}

grpc::Status Submit(TestServer& s, const v1::JobSpec& spec, v1::Job* job) {
  grpc::ClientContext ctx;
  v1::SubmitJobRequest req;
  *req.mutable_spec() = spec;
  return s.jobs().SubmitJob(&ctx, req, job);
}

grpc::Status Estimate(TestServer& s, const v1::JobSpec& spec,
                      v1::JobEstimate* est) {
  grpc::ClientContext ctx;
  v1::EstimateJobRequest req;
  *req.mutable_spec() = spec;
  return s.jobs().EstimateJob(&ctx, req, est);
}

constexpr char kAdultSpec[] = R"json({
  "dataset": "adult", "model": {"logistic_regression": {"l2": 0.0001}},
  "privacy": {"epsilon": 1.0, "delta": 1e-6},
  "algorithm": {"dp_sgd": {"sampling_rate": 0.01, "steps": 2000,
                           "clip_norm": 1.0, "learning_rate": 0.5}},
  "evaluate_on": "adult-test"})json";

// The acceptance run: DP-SGD on a9a at (1, 1e-6) reaches >= 0.80 on
// a9a.t, through the whole service (import, estimate, charge, run, result).
TEST(ServerIntegrationTest, AdultDpSgdEndToEnd) {
  TestServer s;
  v1::DatasetInfo info;
  ASSERT_TRUE(s.Import(PrivateLibsvm("adult", 3, 1e-6),
                       ReadFileOrDie(DataPath("data/adult/a9a")), &info)
                  .ok());
  EXPECT_EQ(info.rows(), 32561);
  EXPECT_EQ(info.dimension(), 123);
  EXPECT_FALSE(info.public_());
  EXPECT_DOUBLE_EQ(info.budget().epsilon_remaining(), 3.0);
  // Only declared metadata of a private dataset: no row statistics.
  EXPECT_EQ(info.nonzeros(), 0);
  ASSERT_TRUE(s.Import(PublicLibsvm("adult-test"),
                       ReadFileOrDie(DataPath("data/adult/a9a.t")), &info)
                  .ok());
  EXPECT_EQ(info.rows(), 16281);
  EXPECT_TRUE(info.public_());
  EXPECT_GT(info.nonzeros(), 0);

  const v1::JobSpec spec = ParseSpec(kAdultSpec);
  v1::JobEstimate est;
  ASSERT_TRUE(Estimate(s, spec, &est).ok());
  EXPECT_TRUE(est.admissible());
  EXPECT_GT(est.calibration().noise_multiplier(), 0.5);
  EXPECT_LE(est.cost().epsilon(), 1.0 + 1e-9);
  EXPECT_LT(est.budget_after().epsilon_remaining(),
            est.budget_before().epsilon_remaining());
  EXPECT_EQ(LedgerCounts(s, "adult").ledger_entries, 0);  // nothing charged

  v1::Job job;
  ASSERT_TRUE(Submit(s, spec, &job).ok());
  EXPECT_EQ(LedgerCounts(s, "adult").ledger_entries, 1);  // charged at submit
  v1::Job done = s.WaitForJob(job.id());
  ASSERT_EQ(done.state(), v1::JOB_STATE_SUCCEEDED) << done.message();
  EXPECT_EQ(done.steps_done(), 2000);
  std::printf("DP-SGD a9a eps=1 delta=1e-6: test accuracy %.4f loss %.4f\n",
              done.evaluation().accuracy(), done.evaluation().loss());
  EXPECT_GE(done.evaluation().accuracy(), 0.80);

  grpc::ClientContext ctx;
  v1::GetJobResultRequest rreq;
  rreq.set_id(job.id());
  v1::JobResult result;
  ASSERT_TRUE(s.jobs().GetJobResult(&ctx, rreq, &result).ok());
  EXPECT_EQ(result.model().weights_size(), 123);
  EXPECT_GT(result.trace_size(), 10);
  EXPECT_TRUE(result.trace(0).has_public_eval());
  EXPECT_DOUBLE_EQ(result.evaluation().accuracy(),
                   done.evaluation().accuracy());

  const Counts c = LedgerCounts(s, "adult");
  EXPECT_EQ(c.ledger_entries, 1);
  EXPECT_GT(c.epsilon_spent, 0);
  EXPECT_LT(c.epsilon_remaining, 3.0);
}

class SmallDatasetTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(
        s_.Import(PrivateLibsvm("small", 3, 1e-5, 5), SmallLibsvm(400, 5))
            .ok());
    ASSERT_TRUE(
        s_.Import(PublicLibsvm("small-public", 5), SmallLibsvm(100, 5)).ok());
  }
  v1::JobSpec Spec(double eps, int64_t steps = 20) {
    return ParseSpec(absl::StrFormat(R"json({
      "dataset": "small", "model": {"logistic_regression": {"l2": 0.001}},
      "privacy": {"epsilon": %g, "delta": 1e-6},
      "algorithm": {"dp_sgd": {"sampling_rate": 0.1, "steps": %d,
                               "clip_norm": 1.0, "learning_rate": 0.1}}})json",
                                     eps, steps));
  }
  TestServer s_;
};

TEST_F(SmallDatasetTest, OverBudgetIsRefusedWithNothingCharged) {
  v1::Job job;
  const v1::JobSpec big = Spec(50.0);
  grpc::Status st = Submit(s_, big, &job);
  EXPECT_EQ(st.error_code(), grpc::RESOURCE_EXHAUSTED) << st.error_message();
  EXPECT_THAT(st.error_message(), HasSubstr("remain"));
  const Counts c = LedgerCounts(s_, "small");
  EXPECT_EQ(c.ledger_entries, 0);
  EXPECT_DOUBLE_EQ(c.epsilon_remaining, 3.0);
  v1::JobEstimate est;
  ASSERT_TRUE(Estimate(s_, big, &est).ok());
  EXPECT_FALSE(est.admissible());
}

// Gradient noise is a post-processing of the continuous Gaussian mechanism,
// so a job may ask for the PLD accountant: it calibrates less noise than RDP
// for the same target, runs, and the ledger records "pld" and the Gaussian
// event it charged.
TEST_F(SmallDatasetTest, PldAccountantPricesDpSgdJobs) {
  auto spec_with = [&](const char* accountant) {
    return ParseSpec(absl::StrFormat(R"json({
      "dataset": "small", "model": {"logistic_regression": {"l2": 0.001}},
      "privacy": {"epsilon": 0.5, "delta": 1e-6, "accountant": "%s"},
      "algorithm": {"dp_sgd": {"sampling_rate": 0.05, "steps": 200,
                               "clip_norm": 1.0, "learning_rate": 0.1}}})json",
                                     accountant));
  };
  v1::JobEstimate rdp, pld;
  ASSERT_TRUE(Estimate(s_, spec_with("ACCOUNTANT_RDP"), &rdp).ok());
  grpc::Status st = Estimate(s_, spec_with("ACCOUNTANT_PLD"), &pld);
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_TRUE(pld.admissible());
  EXPECT_LT(pld.calibration().noise_multiplier(),
            rdp.calibration().noise_multiplier());
  EXPECT_LE(pld.cost().epsilon(), 0.5);

  v1::Job job;
  st = Submit(s_, spec_with("ACCOUNTANT_PLD"), &job);
  ASSERT_TRUE(st.ok()) << st.error_message();
  v1::Job done = s_.WaitForJob(job.id());
  ASSERT_EQ(done.state(), v1::JOB_STATE_SUCCEEDED) << done.message();

  const v1::ListLedgerResponse ledger = Ledger(s_, "small");
  ASSERT_EQ(ledger.entries_size(), 1);
  const v1::LedgerEntry& entry = ledger.entries(0);
  EXPECT_EQ(entry.accountant(), "pld");
  EXPECT_LE(entry.epsilon(), 0.5 + 1e-9);
  EXPECT_THAT(entry.event_json(), HasSubstr("\"poisson_sampled\""));
  EXPECT_THAT(entry.event_json(), HasSubstr("\"gaussian\""));
  EXPECT_THAT(entry.event_json(),
              ::testing::Not(HasSubstr("discrete_gaussian")));
}

TEST_F(SmallDatasetTest, BadRequestsGetClearCodesAndChargeNothing) {
  struct Case {
    std::string name;
    std::string json;
    grpc::StatusCode code;
  };
  const std::vector<Case> cases = {
      {"unknown dataset",
       R"({"dataset": "nope", "model": {"logistic_regression": {}},
           "privacy": {"epsilon": 1, "delta": 1e-6},
           "algorithm": {"dp_gd": {"steps": 5, "clip_norm": 1, "learning_rate": 0.1}}})",
       grpc::NOT_FOUND},
      {"negative epsilon",
       R"({"dataset": "small", "model": {"logistic_regression": {}},
           "privacy": {"epsilon": -1, "delta": 1e-6},
           "algorithm": {"dp_gd": {"steps": 5, "clip_norm": 1, "learning_rate": 0.1}}})",
       grpc::INVALID_ARGUMENT},
      {"absurd steps",
       R"({"dataset": "small", "model": {"logistic_regression": {}},
           "privacy": {"epsilon": 1, "delta": 1e-6},
           "algorithm": {"dp_sgd": {"sampling_rate": 0.1, "steps": 1000000000,
                                    "clip_norm": 1, "learning_rate": 0.1}}})",
       grpc::INVALID_ARGUMENT},
      {"sampling rate above one",
       R"({"dataset": "small", "model": {"logistic_regression": {}},
           "privacy": {"epsilon": 1, "delta": 1e-6},
           "algorithm": {"dp_sgd": {"sampling_rate": 2, "steps": 10,
                                    "clip_norm": 1, "learning_rate": 0.1}}})",
       grpc::INVALID_ARGUMENT},
      {"no model",
       R"({"dataset": "small", "privacy": {"epsilon": 1, "delta": 1e-6},
           "algorithm": {"dp_gd": {"steps": 5, "clip_norm": 1, "learning_rate": 0.1}}})",
       grpc::INVALID_ARGUMENT},
      {"no algorithm",
       R"({"dataset": "small", "model": {"logistic_regression": {}},
           "privacy": {"epsilon": 1, "delta": 1e-6}})",
       grpc::INVALID_ARGUMENT},
      {"non-private on private data",
       R"({"dataset": "small", "model": {"logistic_regression": {}},
           "algorithm": {"gd": {"steps": 5, "learning_rate": 0.1}}})",
       grpc::PERMISSION_DENIED},
      {"evaluate on a private dataset",
       R"({"dataset": "small", "model": {"logistic_regression": {}},
           "privacy": {"epsilon": 1, "delta": 1e-6}, "evaluate_on": "small",
           "algorithm": {"dp_gd": {"steps": 5, "clip_norm": 1, "learning_rate": 0.1}}})",
       grpc::PERMISSION_DENIED},
      {"zero clip norm",
       R"({"dataset": "small", "model": {"logistic_regression": {}},
           "privacy": {"epsilon": 1, "delta": 1e-6},
           "algorithm": {"dp_gd": {"steps": 5, "clip_norm": 0, "learning_rate": 0.1}}})",
       grpc::INVALID_ARGUMENT},
      {"softmax on binary labels",
       R"({"dataset": "small", "model": {"softmax_regression": {"num_classes": 3}},
           "privacy": {"epsilon": 1, "delta": 1e-6},
           "algorithm": {"dp_gd": {"steps": 5, "clip_norm": 1, "learning_rate": 0.1}}})",
       grpc::INVALID_ARGUMENT},
  };
  for (const auto& c : cases) {
    v1::Job job;
    grpc::Status st = Submit(s_, ParseSpec(c.json), &job);
    EXPECT_EQ(st.error_code(), c.code) << c.name << ": " << st.error_message();
    EXPECT_FALSE(st.error_message().empty()) << c.name;
    v1::JobEstimate est;
    st = Estimate(s_, ParseSpec(c.json), &est);
    EXPECT_EQ(st.error_code(), c.code) << c.name << ": " << st.error_message();
  }
  EXPECT_EQ(LedgerCounts(s_, "small").ledger_entries, 0);

  // Evaluation set of the wrong dimension.
  ASSERT_TRUE(
      s_.Import(PublicLibsvm("wide-public", 7), SmallLibsvm(10, 7)).ok());
  v1::JobSpec spec = Spec(1.0);
  spec.set_evaluate_on("wide-public");
  v1::Job job;
  EXPECT_EQ(Submit(s_, spec, &job).error_code(), grpc::INVALID_ARGUMENT);
  EXPECT_EQ(LedgerCounts(s_, "small").ledger_entries, 0);
}

TEST_F(SmallDatasetTest, BadImportsAreRejectedAndNothingIsImported) {
  struct Case {
    std::string name;
    v1::ImportHeader header;
    std::string file;
    grpc::StatusCode code;
  };
  const std::vector<Case> cases = {
      {"NaN value", PrivateLibsvm("bad1", 1, 1e-6, 3), "+1 1:nan 2:1\n",
       grpc::INVALID_ARGUMENT},
      {"Inf value", PrivateLibsvm("bad2", 1, 1e-6, 3), "+1 1:inf\n",
       grpc::INVALID_ARGUMENT},
      {"index beyond dimension", PrivateLibsvm("bad3", 1, 1e-6, 3),
       "+1 1:1\n-1 4:1\n", grpc::INVALID_ARGUMENT},
      {"empty file", PrivateLibsvm("bad4", 1, 1e-6, 3), "",
       grpc::INVALID_ARGUMENT},
      {"malformed token", PrivateLibsvm("bad5", 1, 1e-6, 3), "+1 1:1 zz\n",
       grpc::INVALID_ARGUMENT},
      {"negative budget", PrivateLibsvm("bad6", -1, 1e-6, 3), "+1 1:1\n",
       grpc::INVALID_ARGUMENT},
      {"duplicate name", PrivateLibsvm("small", 1, 1e-6, 5), "+1 1:1\n",
       grpc::ALREADY_EXISTS},
  };
  for (const auto& c : cases) {
    grpc::Status st = s_.Import(c.header, c.file);
    EXPECT_EQ(st.error_code(), c.code) << c.name << ": " << st.error_message();
  }
  grpc::ClientContext ctx;
  v1::ListDatasetsResponse list;
  ASSERT_TRUE(
      s_.datasets().ListDatasets(&ctx, v1::ListDatasetsRequest(), &list).ok());
  EXPECT_EQ(list.datasets_size(), 2);  // only the fixture's datasets
}

// 50 concurrent submissions against one dataset never overspend: with basic
// composition, a budget of 3 and jobs of 0.5 exactly 6 are admitted.
TEST(ServerConcurrencyTest, FiftyConcurrentSubmissionsNeverOverspend) {
  TestServer s(/*workers=*/2, /*queue_capacity=*/64);
  v1::ImportHeader h = PrivateLibsvm("basic", 3, 1e-5, 5);
  h.set_budget_filter(v1::BUDGET_FILTER_BASIC);
  ASSERT_TRUE(s.Import(h, SmallLibsvm(200, 5)).ok());
  const v1::JobSpec spec = ParseSpec(R"json({
      "dataset": "basic", "model": {"logistic_regression": {}},
      "privacy": {"epsilon": 0.5, "delta": 1e-6},
      "algorithm": {"dp_gd": {"steps": 3, "clip_norm": 1, "learning_rate": 0.1}}})json");
  std::atomic<int> ok{0}, exhausted{0}, other{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < 50; ++i) {
    threads.emplace_back([&] {
      v1::Job job;
      grpc::Status st = Submit(s, spec, &job);
      if (st.ok()) {
        ++ok;
      } else if (st.error_code() == grpc::RESOURCE_EXHAUSTED) {
        ++exhausted;
      } else {
        ++other;
        ADD_FAILURE() << st.error_message();
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(other.load(), 0);
  EXPECT_EQ(ok.load(), 6);
  EXPECT_EQ(exhausted.load(), 44);
  const Counts c = LedgerCounts(s, "basic");
  EXPECT_EQ(c.ledger_entries, 6);
  EXPECT_GE(c.epsilon_remaining, 0.0);
  EXPECT_LE(c.epsilon_spent, 3.0);
}

// The same race under the default RDP filter: whatever is admitted, the
// filter's own view never goes negative and the ledger matches the
// successful submissions.
TEST(ServerConcurrencyTest, ConcurrentSubmissionsUnderRdpFilter) {
  TestServer s(/*workers=*/2, /*queue_capacity=*/64);
  ASSERT_TRUE(
      s.Import(PrivateLibsvm("rdp", 2, 1e-5, 5), SmallLibsvm(200, 5)).ok());
  const v1::JobSpec spec = ParseSpec(R"json({
      "dataset": "rdp", "model": {"logistic_regression": {}},
      "privacy": {"epsilon": 0.5, "delta": 1e-6},
      "algorithm": {"dp_gd": {"steps": 3, "clip_norm": 1, "learning_rate": 0.1}}})json");
  std::atomic<int> ok{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < 50; ++i) {
    threads.emplace_back([&] {
      v1::Job job;
      if (Submit(s, spec, &job).ok()) ++ok;
    });
  }
  for (auto& t : threads) t.join();
  const Counts c = LedgerCounts(s, "rdp");
  EXPECT_GT(ok.load(), 0);
  EXPECT_LT(ok.load(), 50);
  EXPECT_EQ(c.ledger_entries, ok.load());
  EXPECT_GE(c.epsilon_remaining, 0.0);
  // One more is refused.
  v1::Job job;
  EXPECT_EQ(Submit(s, spec, &job).error_code(), grpc::RESOURCE_EXHAUSTED);
}

TEST_F(SmallDatasetTest, CancelStopsTheJobAndKeepsTheCharge) {
  v1::Job job;
  // A long full-batch job (no subsampling: its cost is tight at any length).
  ASSERT_TRUE(Submit(s_, ParseSpec(R"json({
      "dataset": "small", "model": {"logistic_regression": {}},
      "privacy": {"epsilon": 1, "delta": 1e-6},
      "algorithm": {"dp_gd": {"steps": 1000000, "clip_norm": 1,
                              "learning_rate": 0.1}}})json"),
                     &job)
                  .ok());
  grpc::ClientContext ctx;
  v1::CancelJobRequest req;
  req.set_id(job.id());
  v1::Job after;
  ASSERT_TRUE(s_.jobs().CancelJob(&ctx, req, &after).ok());
  v1::Job done = s_.WaitForJob(job.id(), 60);
  EXPECT_EQ(done.state(), v1::JOB_STATE_CANCELLED);
  EXPECT_LT(done.steps_done(), 1000000);
  EXPECT_EQ(LedgerCounts(s_, "small").ledger_entries, 1);
  // No result for a cancelled job.
  grpc::ClientContext rctx;
  v1::GetJobResultRequest rreq;
  rreq.set_id(job.id());
  v1::JobResult result;
  EXPECT_EQ(s_.jobs().GetJobResult(&rctx, rreq, &result).error_code(),
            grpc::FAILED_PRECONDITION);
}

TEST_F(SmallDatasetTest, WatchStreamsTracesAndTheFinalState) {
  v1::Job job;
  ASSERT_TRUE(Submit(s_, Spec(1.0, 200), &job).ok());
  grpc::ClientContext ctx;
  v1::WatchJobRequest req;
  req.set_id(job.id());
  auto reader = s_.jobs().WatchJob(&ctx, req);
  v1::JobEvent ev;
  int jobs = 0;
  v1::JobState last = v1::JOB_STATE_UNSPECIFIED;
  while (reader->Read(&ev)) {
    if (ev.has_job()) {
      ++jobs;
      last = ev.job().state();
    }
  }
  EXPECT_TRUE(reader->Finish().ok());
  EXPECT_GE(jobs, 1);
  EXPECT_EQ(last, v1::JOB_STATE_SUCCEEDED);
}

// Trace points are stored in batches (every 100 ms, the last ones with the
// result) and published once stored: a watch opened while the job runs gets
// every point (the stored ones replayed, then the live ones), in order,
// exactly the stored trace, and then the final state.
TEST_F(SmallDatasetTest, AWatchedJobsTraceIsCompleteAndEqualsTheStoredOne) {
  for (int run = 0; run < 2; ++run) {
    v1::Job job;
    // Long enough (tenths of a second) for the watch to begin first, and
    // for batches stored while it runs.
    v1::JobSpec spec = Spec(0.3, 20000);
    spec.set_trace_every(2000);
    ASSERT_TRUE(Submit(s_, spec, &job).ok());
    grpc::ClientContext ctx;
    v1::WatchJobRequest req;
    req.set_id(job.id());
    auto reader = s_.jobs().WatchJob(&ctx, req);
    v1::JobEvent ev;
    ASSERT_TRUE(reader->Read(&ev));
    ASSERT_TRUE(ev.has_job());
    ASSERT_NE(ev.job().state(), v1::JOB_STATE_SUCCEEDED)
        << "the job ended before the watch began; make it longer";
    std::vector<int64_t> watched;
    v1::JobState last = ev.job().state();
    while (reader->Read(&ev)) {
      if (ev.has_trace()) {
        EXPECT_NE(last, v1::JOB_STATE_SUCCEEDED) << "a point after the end";
        watched.push_back(ev.trace().step());
      }
      if (ev.has_job()) last = ev.job().state();
    }
    ASSERT_TRUE(reader->Finish().ok());
    ASSERT_EQ(last, v1::JOB_STATE_SUCCEEDED);
    grpc::ClientContext rctx;
    v1::GetJobResultRequest rreq;
    rreq.set_id(job.id());
    v1::JobResult result;
    ASSERT_TRUE(s_.jobs().GetJobResult(&rctx, rreq, &result).ok());
    std::vector<int64_t> stored;
    for (const v1::TracePoint& t : result.trace()) stored.push_back(t.step());
    // Steps 1, 2000, 4000, ..., 20000.
    ASSERT_EQ(stored.size(), 11u);
    EXPECT_EQ(stored.front(), 1);
    EXPECT_EQ(stored.back(), 20000);
    EXPECT_EQ(watched, stored);
    EXPECT_EQ(s_.WaitForJob(job.id(), 60).steps_done(), 20000);
  }
}

// A watcher that arrives late (the web console polls) first gets the trace
// recorded so far, then the live points, without duplicates.
TEST_F(SmallDatasetTest, WatchReplaysTheTraceSoFarThenGoesLive) {
  v1::Job job;
  v1::JobSpec spec = Spec(1.0, 1000000);
  spec.set_trace_every(200);
  ASSERT_TRUE(Submit(s_, spec, &job).ok());
  v1::Job now;
  for (int i = 0; i < 600 && now.steps_done() < 1000; ++i) {
    grpc::ClientContext ctx;
    v1::GetJobRequest req;
    req.set_id(job.id());
    ASSERT_TRUE(s_.jobs().GetJob(&ctx, req, &now).ok());
    absl::SleepFor(absl::Milliseconds(50));
  }
  ASSERT_GE(now.steps_done(), 1000) << "the job did not get going";
  grpc::ClientContext ctx;
  v1::WatchJobRequest req;
  req.set_id(job.id());
  auto reader = s_.jobs().WatchJob(&ctx, req);
  v1::JobEvent ev;
  ASSERT_TRUE(reader->Read(&ev));
  ASSERT_TRUE(ev.has_job());
  std::vector<int64_t> steps;
  while (reader->Read(&ev)) {
    if (ev.has_trace()) steps.push_back(ev.trace().step());
    // Enough once live points beyond what was recorded at the start came.
    if (!steps.empty() && steps.back() > now.steps_done() + 1000) break;
  }
  ctx.TryCancel();
  reader->Finish();
  ASSERT_GE(steps.size(), 6u);
  EXPECT_EQ(steps[0], 1);  // the first point, recorded before the watch
  EXPECT_EQ(steps[1], 200);
  for (size_t i = 1; i < steps.size(); ++i) {
    EXPECT_LT(steps[i - 1], steps[i]) << "duplicate or out of order at " << i;
  }
  grpc::ClientContext cctx;
  v1::CancelJobRequest creq;
  creq.set_id(job.id());
  v1::Job cancelled;
  ASSERT_TRUE(s_.jobs().CancelJob(&cctx, creq, &cancelled).ok());
  EXPECT_EQ(s_.WaitForJob(job.id(), 60).state(), v1::JOB_STATE_CANCELLED);
}

TEST_F(SmallDatasetTest, PublicDatasetsAllowNonPrivateBaselinesUncharged) {
  v1::Job job;
  ASSERT_TRUE(Submit(s_, ParseSpec(R"json({
      "dataset": "small-public", "model": {"logistic_regression": {}},
      "algorithm": {"gd": {"steps": 50, "learning_rate": 0.5}},
      "evaluate_on": "small-public"})json"),
                     &job)
                  .ok());
  EXPECT_FALSE(job.cost().charged());
  v1::Job done = s_.WaitForJob(job.id());
  EXPECT_EQ(done.state(), v1::JOB_STATE_SUCCEEDED) << done.message();
  EXPECT_GT(done.evaluation().accuracy(), 0.5);
  grpc::ClientContext ctx;
  v1::GetBudgetRequest req;
  req.set_dataset("small-public");
  v1::BudgetStatus b;
  EXPECT_EQ(s_.budget().GetBudget(&ctx, req, &b).error_code(),
            grpc::FAILED_PRECONDITION);
}

TEST_F(SmallDatasetTest, LedgerAndJobsSurviveARestart) {
  v1::Job job;
  ASSERT_TRUE(Submit(s_, Spec(1.0, 20), &job).ok());
  s_.WaitForJob(job.id());
  const Counts before = LedgerCounts(s_, "small");
  s_.Stop();
  s_.Start();
  const Counts after = LedgerCounts(s_, "small");
  EXPECT_EQ(after.ledger_entries, before.ledger_entries);
  EXPECT_DOUBLE_EQ(after.epsilon_remaining, before.epsilon_remaining);
  grpc::ClientContext ctx;
  v1::GetJobRequest req;
  req.set_id(job.id());
  v1::Job again;
  ASSERT_TRUE(s_.jobs().GetJob(&ctx, req, &again).ok());
  EXPECT_EQ(again.state(), v1::JOB_STATE_SUCCEEDED);
}

}  // namespace
}  // namespace dpopt::testing

namespace dpopt::testing {
namespace {

// One neighbouring relation per dataset (docs/architecture.md). On a
// replace-one dataset full-batch DP-GD is charged through the group-privacy
// conversion; Poisson-sampled DP-SGD (analysed under add/remove) is refused,
// uncharged.
TEST(ServerRelationTest, ReplaceOneDatasets) {
  TestServer s;
  v1::ImportHeader h = PrivateLibsvm("r1", 3, 1e-5, 5);
  h.set_relation(v1::REPLACE_ONE);
  ASSERT_TRUE(s.Import(h, SmallLibsvm(200, 5)).ok());
  v1::Job job;
  grpc::Status st = Submit(s, ParseSpec(R"json({
      "dataset": "r1", "model": {"logistic_regression": {}},
      "privacy": {"epsilon": 1, "delta": 1e-6},
      "algorithm": {"dp_sgd": {"sampling_rate": 0.1, "steps": 10,
                               "clip_norm": 1, "learning_rate": 0.1}}})json"),
                           &job);
  EXPECT_EQ(st.error_code(), grpc::FAILED_PRECONDITION) << st.error_message();
  EXPECT_EQ(LedgerCounts(s, "r1").ledger_entries, 0);
  ASSERT_TRUE(Submit(s, ParseSpec(R"json({
      "dataset": "r1", "model": {"logistic_regression": {}},
      "privacy": {"epsilon": 1, "delta": 1e-6},
      "algorithm": {"dp_gd": {"steps": 10, "clip_norm": 1,
                              "learning_rate": 0.1}}})json"),
                     &job)
                  .ok());
  EXPECT_EQ(s.WaitForJob(job.id()).state(), v1::JOB_STATE_SUCCEEDED);
  const v1::ListLedgerResponse ledger = Ledger(s, "r1");
  ASSERT_EQ(ledger.entries_size(), 1);
  // Priced after the conversion, at the dataset's delta (1e-5 >= the job's
  // 1e-6), the stand-alone cost is at most the job's target.
  EXPECT_LE(ledger.entries(0).epsilon(), 1.0 + 1e-9);
  EXPECT_GT(ledger.entries(0).epsilon(), 0.5);
}

}  // namespace
}  // namespace dpopt::testing

namespace dpopt::testing {
namespace {

TEST(ServerLimitsTest, TooManyTracePointsAreRefusedUncharged) {
  TestServer s;
  ASSERT_TRUE(
      s.Import(PrivateLibsvm("lim", 3, 1e-5, 5), SmallLibsvm(50, 5)).ok());
  v1::Job job;
  grpc::Status st = Submit(s, ParseSpec(R"json({
      "dataset": "lim", "model": {"logistic_regression": {}},
      "privacy": {"epsilon": 1, "delta": 1e-6}, "trace_every": 1,
      "algorithm": {"dp_gd": {"steps": 20000, "clip_norm": 1,
                              "learning_rate": 0.1}}})json"),
                           &job);
  EXPECT_EQ(st.error_code(), grpc::INVALID_ARGUMENT);
  EXPECT_THAT(st.error_message(), HasSubstr("trace_every >= 2"));
  EXPECT_EQ(LedgerCounts(s, "lim").ledger_entries, 0);
}

}  // namespace
}  // namespace dpopt::testing
