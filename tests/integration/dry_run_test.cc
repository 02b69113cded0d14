// Dry runs (JobSpec.dry_run): every example of examples/ runs as a dry run
// on every dataset kind its job type accepts; nothing is charged, the job
// and its result say they are synthetic, and no private row is read: the
// private datasets' stored rows are made unreadable before the dry runs
// (every label blob emptied, so loading them fails with DATA_LOSS, which a
// control job shows), and the dry runs still succeed. A public dummy
// attached to a private dataset is used instead of generated rows, and its
// schema is checked at import. Dry runs keep the validation, the public work
// bound and the per-principal limits of real jobs, and are audited as dry
// runs.
#include <sqlite3.h>

#include <chrono>
#include <cstdio>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "tests/integration/stored_rows.h"
#include "tests/integration/test_server.h"

namespace dpopt::testing {
namespace {

using ::testing::HasSubstr;

std::string Read(const std::string& relative) {
  return ReadFileOrDie(DataPath(relative));
}

std::vector<std::string> JobTypes() {
  const google::protobuf::OneofDescriptor* oneof =
      v1::AlgorithmSpec::descriptor()->FindOneofByName("algorithm");
  std::vector<std::string> out;
  for (int i = 0; i < oneof->field_count(); ++i) {
    out.push_back(oneof->field(i)->name());
  }
  return out;
}

v1::JobSpec Example(const std::string& type) {
  v1::JobSpec spec;
  const auto parsed = google::protobuf::util::JsonStringToMessage(
      Read("examples/" + type + ".json"), &spec);
  EXPECT_TRUE(parsed.ok()) << parsed.message();
  return spec;
}

int64_t LedgerEntries(TestServer& server, const std::string& dataset) {
  grpc::ClientContext ctx;
  v1::ListLedgerRequest req;
  req.set_dataset(dataset);
  v1::ListLedgerResponse resp;
  const grpc::Status s = server.budget().ListLedger(&ctx, req, &resp);
  EXPECT_TRUE(s.ok()) << s.error_message();
  return resp.entries_size();
}

grpc::Status Submit(v1::JobService::Stub& jobs, const v1::JobSpec& spec,
                    v1::Job* job) {
  grpc::ClientContext ctx;
  v1::SubmitJobRequest req;
  *req.mutable_spec() = spec;
  return jobs.SubmitJob(&ctx, req, job);
}

const char* const kPrivate[] = {"adult", "quadratic-q", "max-affine"};

TEST(DryRunTest, EveryExampleDryRunsOnEveryDatasetKindItAcceptsWithoutRows) {
  TestServer server;
  // The datasets examples/README.md imports (adult cut to 4000 rows, so the
  // dry runs take seconds).
  ASSERT_TRUE(server
                  .Import(ExampleLibsvmHeader("adult", false),
                          FirstLines(Read("data/adult/a9a"), 4000))
                  .ok());
  ASSERT_TRUE(server
                  .Import(ExampleLibsvmHeader("adult-test", true),
                          FirstLines(Read("data/adult/a9a.t"), 2000))
                  .ok());
  ASSERT_TRUE(server
                  .Import(ExampleCsvHeader("quadratic-q"),
                          Read("examples/data/quadratic_q.csv"))
                  .ok());
  for (bool is_public : {false, true}) {
    const grpc::Status st = server.Import(
        ExampleMaxAffineHeader(is_public ? "max-affine-public" : "max-affine",
                               is_public),
        Read("examples/data/max_affine.csv"));
    ASSERT_TRUE(st.ok()) << st.error_message();
  }
  // From here on, reading a private dataset's rows fails.
  for (const char* name : kPrivate) MakeRowsUnreadable(server, name);

  const std::vector<std::string> datasets = {
      "adult", "adult-test", "quadratic-q", "max-affine", "max-affine-public"};
  std::map<std::string, std::set<std::string>> ran;
  int dry_runs = 0;
  for (const std::string& type : JobTypes()) {
    SCOPED_TRACE(type);
    const v1::JobSpec example = Example(type);
    for (const std::string& dataset : datasets) {
      SCOPED_TRACE(dataset);
      v1::JobSpec spec = example;
      spec.set_dry_run(true);
      if (dataset != example.dataset()) {
        spec.set_dataset(dataset);
        // adult-test evaluates models of adult only.
        if (dataset != "adult") spec.clear_evaluate_on();
      }
      // Whether the job type accepts this dataset: the estimate (the same
      // validation and calibration as a submission) says.
      grpc::ClientContext ectx;
      v1::EstimateJobRequest ereq;
      *ereq.mutable_spec() = spec;
      v1::JobEstimate estimate;
      const grpc::Status est =
          server.jobs().EstimateJob(&ectx, ereq, &estimate);
      if (!est.ok()) {
        EXPECT_NE(dataset, example.dataset()) << est.error_message();
        EXPECT_TRUE(est.error_code() == grpc::INVALID_ARGUMENT ||
                    est.error_code() == grpc::FAILED_PRECONDITION ||
                    est.error_code() == grpc::PERMISSION_DENIED)
            << est.error_message();
        continue;
      }
      EXPECT_THAT(estimate.message(), HasSubstr("dry run"));
      const auto start = std::chrono::steady_clock::now();
      v1::Job job;
      const grpc::Status sub = Submit(server.jobs(), spec, &job);
      ASSERT_TRUE(sub.ok()) << sub.error_message();
      EXPECT_TRUE(job.synthetic_data());
      EXPECT_TRUE(job.spec().dry_run());
      EXPECT_FALSE(job.cost().charged());
      // The cost shown is the real job's.
      EXPECT_DOUBLE_EQ(job.cost().epsilon(), estimate.cost().epsilon());
      const v1::Job done = server.WaitForJob(job.id());
      EXPECT_EQ(done.state(), v1::JOB_STATE_SUCCEEDED) << done.message();
      EXPECT_TRUE(done.synthetic_data());
      EXPECT_THAT(done.synthetic_source(), HasSubstr(dataset));
      EXPECT_GT(done.finished_at().seconds(), 0);
      std::printf("%-24s %-18s %8.2f s\n", type.c_str(), dataset.c_str(),
                  std::chrono::duration<double>(
                      std::chrono::steady_clock::now() - start)
                      .count());
      grpc::ClientContext rctx;
      v1::GetJobResultRequest rreq;
      rreq.set_id(job.id());
      v1::JobResult result;
      const grpc::Status r = server.jobs().GetJobResult(&rctx, rreq, &result);
      ASSERT_TRUE(r.ok()) << r.error_message();
      EXPECT_TRUE(result.synthetic_data());
      EXPECT_FALSE(result.cost().charged());
      EXPECT_GT(result.trace_points_total(), 0);
      ran[type].insert(dataset);
      ++dry_runs;
    }
    // Every job type dry-runs at least on its example's dataset.
    EXPECT_EQ(ran[type].count(example.dataset()), 1u);
  }
  std::printf("[figure] %d dry runs of %zu job types\n", dry_runs,
              JobTypes().size());
  // Some job types accept several kinds (e.g. the gradient methods run on
  // public and private examples datasets).
  EXPECT_GT(dry_runs, static_cast<int>(JobTypes().size()));

  // Nothing charged anywhere.
  for (const char* name : kPrivate) {
    EXPECT_EQ(LedgerEntries(server, name), 0) << name;
  }
  // Every submission is audited as a dry run.
  {
    grpc::ClientContext ctx;
    v1::ListAuditRequest req;
    req.set_limit(100000);
    v1::ListAuditResponse audit;
    ASSERT_TRUE(server.admin().ListAudit(&ctx, req, &audit).ok());
    int submits = 0;
    for (const v1::AuditEntry& e : audit.entries()) {
      if (e.method() != "JobService/SubmitJob") continue;
      ++submits;
      EXPECT_EQ(e.detail(), "dry run");
      EXPECT_EQ(e.code(), 0);
    }
    EXPECT_EQ(submits, dry_runs);
  }
  // The control: a real job on a private dataset reads its rows, and fails.
  v1::JobSpec real = Example("dp_sgd");
  real.set_dataset("adult");
  v1::Job job;
  ASSERT_TRUE(Submit(server.jobs(), real, &job).ok());
  const v1::Job failed = server.WaitForJob(job.id());
  EXPECT_EQ(failed.state(), v1::JOB_STATE_FAILED);
  EXPECT_THAT(failed.message(), HasSubstr("DATA_LOSS"));
  EXPECT_FALSE(failed.synthetic_data());
  EXPECT_EQ(LedgerEntries(server, "adult"), 1);  // charged before reading
}

v1::ImportHeader Dummy(const std::string& name, const std::string& for_name,
                       int dimension = 2) {
  v1::ImportHeader h = SmallCsvHeader(name, 0, /*is_public=*/true);
  h.set_dimension(dimension);
  h.set_dummy_for(for_name);
  return h;
}

std::string Csv3(int n) {
  std::string out;
  for (int i = 0; i < n; ++i) absl::StrAppend(&out, "0.1,0.2,0.3,1\n");
  return out;
}

TEST(DryRunTest, APublicDummyIsReadInsteadOfGeneratedRows) {
  TestServer server;
  ASSERT_TRUE(server.Import(SmallCsvHeader("private", 5), SmallCsv(200)).ok());
  ASSERT_TRUE(
      server.Import(SmallCsvHeader("other", 5, true), SmallCsv(50)).ok());
  MakeRowsUnreadable(server, "private");

  // Without a dummy: generated rows.
  v1::JobSpec spec = QuickDpGdSpec("private", 1);
  spec.set_dry_run(true);
  v1::Job job;
  ASSERT_TRUE(Submit(server.jobs(), spec, &job).ok());
  v1::Job done = server.WaitForJob(job.id());
  EXPECT_EQ(done.state(), v1::JOB_STATE_SUCCEEDED) << done.message();
  EXPECT_THAT(done.synthetic_source(),
              HasSubstr("generated from the public schema of dataset private"));

  // The schema is checked at import.
  v1::ImportHeader not_public = Dummy("d1", "private");
  not_public.set_public_(false);
  not_public.set_epsilon_budget(1);
  EXPECT_EQ(server.Import(not_public, SmallCsv(10)).error_code(),
            grpc::INVALID_ARGUMENT);
  const grpc::Status wide = server.Import(Dummy("d2", "private", 3), Csv3(10));
  EXPECT_EQ(wide.error_code(), grpc::FAILED_PRECONDITION);
  EXPECT_THAT(wide.error_message(), HasSubstr("dimension 3 instead of 2"));
  v1::ImportHeader real_labels = Dummy("d3", "private");
  real_labels.set_label_type(v1::LABEL_TYPE_REAL);
  EXPECT_EQ(server.Import(real_labels, SmallCsv(10)).error_code(),
            grpc::FAILED_PRECONDITION);
  EXPECT_EQ(server.Import(Dummy("d4", "other"), SmallCsv(10)).error_code(),
            grpc::FAILED_PRECONDITION);  // a public dataset has no dummy
  EXPECT_EQ(server.Import(Dummy("d5", "missing"), SmallCsv(10)).error_code(),
            grpc::NOT_FOUND);

  v1::DatasetInfo info;
  ASSERT_TRUE(
      server.Import(Dummy("private-dummy", "private"), SmallCsv(30), &info)
          .ok());
  EXPECT_EQ(info.dummy_for(), "private");
  {
    grpc::ClientContext ctx;
    v1::GetDatasetRequest req;
    req.set_name("private");
    v1::DatasetInfo p;
    ASSERT_TRUE(server.datasets().GetDataset(&ctx, req, &p).ok());
    EXPECT_EQ(p.dummy_dataset(), "private-dummy");
  }
  // One dummy at a time.
  EXPECT_EQ(server.Import(Dummy("d6", "private"), SmallCsv(10)).error_code(),
            grpc::ALREADY_EXISTS);

  ASSERT_TRUE(Submit(server.jobs(), spec, &job).ok());
  EXPECT_EQ(job.synthetic_source(), "public dummy dataset private-dummy");
  done = server.WaitForJob(job.id());
  EXPECT_EQ(done.state(), v1::JOB_STATE_SUCCEEDED) << done.message();

  // The dummy's rows are what the dry run reads: made unreadable, the dry
  // run fails on them (the private dataset is never named).
  MakeRowsUnreadable(server, "private-dummy");
  server.Stop();  // a fresh dataset cache (it kept the dummy's rows)
  server.Start();
  ASSERT_TRUE(Submit(server.jobs(), spec, &job).ok());
  done = server.WaitForJob(job.id());
  EXPECT_EQ(done.state(), v1::JOB_STATE_FAILED);
  EXPECT_THAT(done.message(), HasSubstr("private-dummy"));
  EXPECT_THAT(done.message(), ::testing::Not(HasSubstr("\"private\"")));
  EXPECT_EQ(LedgerEntries(server, "private"), 0);
}

TEST(DryRunTest, ADummyNeitherNamesAnInvisibleDatasetNorOutgrowsIt) {
  TestServer server;
  ASSERT_TRUE(server.Import(SmallCsvHeader("private", 5), SmallCsv(200)).ok());
  // A CSV dummy whose dimension is inferred from its file is accepted.
  v1::ImportHeader inferred = Dummy("private-dummy", "private");
  inferred.set_dimension(0);
  v1::DatasetInfo info;
  ASSERT_TRUE(server.Import(inferred, SmallCsv(300), &info).ok());
  EXPECT_EQ(info.dimension(), 2);
  EXPECT_EQ(info.dummy_for(), "private");

  // An analyst who cannot see "private" sees the public dummy but not the
  // name of the dataset it stands in for; with a grant, she sees it.
  auto channel = TokenChannel(server.target(), server.CreateAnalyst("mallory"));
  auto datasets = v1::DatasetService::NewStub(channel);
  const auto dummy_for_seen = [&] {
    grpc::ClientContext ctx;
    v1::GetDatasetRequest req;
    req.set_name("private-dummy");
    v1::DatasetInfo d;
    EXPECT_TRUE(datasets->GetDataset(&ctx, req, &d).ok());
    grpc::ClientContext list_ctx;
    v1::ListDatasetsResponse all;
    EXPECT_TRUE(
        datasets->ListDatasets(&list_ctx, v1::ListDatasetsRequest(), &all)
            .ok());
    int listed_dummies = 0;
    for (const v1::DatasetInfo& listed : all.datasets()) {
      if (listed.name() != "private-dummy") continue;
      ++listed_dummies;
      EXPECT_EQ(listed.dummy_for(), d.dummy_for());
    }
    EXPECT_EQ(listed_dummies, 1);
    return d.dummy_for();
  };
  EXPECT_EQ(dummy_for_seen(), "");
  ASSERT_TRUE(server.Grant("mallory", "private").ok());
  EXPECT_EQ(dummy_for_seen(), "private");

  // The dummy has more rows (300) than the dataset (200): a dry run, bounded
  // on the dataset's public row count, is refused before it runs.
  v1::JobSpec spec = QuickDpGdSpec("private", 1);
  spec.set_dry_run(true);
  v1::Job job;
  const grpc::Status refused = Submit(server.jobs(), spec, &job);
  EXPECT_EQ(refused.error_code(), grpc::FAILED_PRECONDITION);
  EXPECT_THAT(refused.error_message(),
              HasSubstr("300 rows, more than the dataset's 200"));
  EXPECT_EQ(LedgerEntries(server, "private"), 0);
}

TEST(DryRunTest, DryRunsKeepValidationWorkBoundAndPrincipalLimits) {
  TestServer server([](server::ServerOptions& o) {
    o.max_job_work = 1e8;
    o.limits.max_active_jobs = 1;
  });
  ASSERT_TRUE(server.Import(SmallCsvHeader("private", 1), SmallCsv(200)).ok());
  const std::string alice = server.CreateAnalyst("alice");
  ASSERT_TRUE(server.Grant("alice", "private", /*cap=*/0.5).ok());
  auto channel = TokenChannel(server.target(), alice);
  auto jobs = v1::JobService::NewStub(channel);

  // Validation: an invalid spec is refused as for a real job.
  v1::JobSpec bad = QuickDpGdSpec("private", 1);
  bad.set_dry_run(true);
  bad.set_trace_every(-1);
  v1::Job job;
  EXPECT_EQ(Submit(*jobs, bad, &job).error_code(), grpc::INVALID_ARGUMENT);
  // The public work bound.
  v1::JobSpec big = QuickDpGdSpec("private", 1, /*steps=*/1000000);
  big.set_dry_run(true);
  const grpc::Status work = Submit(*jobs, big, &job);
  EXPECT_EQ(work.error_code(), grpc::INVALID_ARGUMENT);
  EXPECT_THAT(work.error_message(), HasSubstr("max-job-work"));
  // Access: a dataset the analyst may not see.
  ASSERT_TRUE(server.Import(SmallCsvHeader("secret", 1), SmallCsv(20)).ok());
  v1::JobSpec hidden = QuickDpGdSpec("secret", 1);
  hidden.set_dry_run(true);
  EXPECT_EQ(Submit(*jobs, hidden, &job).error_code(), grpc::NOT_FOUND);

  // Over the analyst's cap: the real job would be refused (the estimate
  // says so), the dry run is not (it charges nothing).
  // Long enough (100,000 steps) to still be running when the next
  // submission comes.
  v1::JobSpec over = QuickDpGdSpec("private", 0.9, /*steps=*/100000);
  over.set_dry_run(true);
  {
    grpc::ClientContext ctx;
    v1::EstimateJobRequest req;
    *req.mutable_spec() = over;
    v1::JobEstimate est;
    ASSERT_TRUE(jobs->EstimateJob(&ctx, req, &est).ok());
    EXPECT_FALSE(est.admissible());
    EXPECT_THAT(est.message(), HasSubstr("dry run"));
  }
  ASSERT_TRUE(Submit(*jobs, over, &job).ok());
  EXPECT_TRUE(job.synthetic_data());
  // The per-principal job limit (1) counts dry runs.
  v1::Job second;
  const grpc::Status limited = Submit(*jobs, over, &second);
  EXPECT_EQ(limited.error_code(), grpc::RESOURCE_EXHAUSTED);
  {
    grpc::ClientContext ctx;
    v1::CancelJobRequest req;
    req.set_id(job.id());
    v1::Job cancelled;
    ASSERT_TRUE(jobs->CancelJob(&ctx, req, &cancelled).ok());
  }
  const v1::Job done = server.WaitForJob(job.id());
  EXPECT_EQ(done.state(), v1::JOB_STATE_CANCELLED) << done.message();
  EXPECT_THAT(done.message(), HasSubstr("dry run: nothing was charged"));
  EXPECT_EQ(LedgerEntries(server, "private"), 0);
  // Listed as a dry run.
  {
    grpc::ClientContext ctx;
    v1::ListJobsRequest req;
    v1::ListJobsResponse resp;
    ASSERT_TRUE(jobs->ListJobs(&ctx, req, &resp).ok());
    ASSERT_EQ(resp.jobs_size(), 1);
    EXPECT_TRUE(resp.jobs(0).synthetic_data());
  }
  grpc::ClientContext bctx;
  v1::GetBudgetRequest breq;
  breq.set_dataset("private");
  v1::BudgetStatus budget;
  ASSERT_TRUE(server.budget().GetBudget(&bctx, breq, &budget).ok());
  EXPECT_EQ(budget.epsilon_spent(), 0);
  EXPECT_EQ(budget.charges(), 0);
}

}  // namespace
}  // namespace dpopt::testing
