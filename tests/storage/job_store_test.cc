#include "storage/job_store.h"

#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "storage/database.h"
#include "storage/ledger.h"
#include "tests/common/status_matchers.h"
#include "tests/storage/storage_test_util.h"

namespace dpopt::storage {
namespace {

using ::dpopt::storage::testing::TempDir;
using ::dpopt::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

class JobStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = dir_.File("j.db");
    ASSERT_OK_AND_ASSIGN(db_, Database::Open(path_));
    ImportOptions pub;
    pub.name = "pub";
    pub.dimension = 1;
    pub.is_public = true;
    ASSERT_OK(db_->datasets().Import(pub, "1 1:1\n"));
    ImportOptions priv = pub;
    priv.name = "priv";
    priv.is_public = false;
    priv.epsilon_budget = 1;
    ASSERT_OK(db_->datasets().Import(priv, "1 1:1\n"));
  }

  JobRecord NewJob(const std::string& id, const std::string& dataset = "pub",
                   const std::string& principal = "bob") {
    JobRecord j;
    j.id = id;
    j.dataset = dataset;
    j.principal = principal;
    j.spec = "spec";
    j.calibration = "cal";
    j.cost = "cost";
    j.steps_total = 10;
    return j;
  }

  // A charged job on the private dataset.
  void Charged(const std::string& id) {
    ChargeRequest c;
    c.dataset = "priv";
    c.event_json = "{}";
    c.accountant = "rdp";
    c.cost_blob = "x";
    c.epsilon = 0.1;
    ASSERT_OK(db_->ledger().ChargeAndCreateJob(
        c, NewJob(id, "priv"),
        [](const DatasetRecord&, const std::vector<std::string>&) {
          return absl::OkStatus();
        }));
  }

  TempDir dir_;
  std::string path_;
  std::unique_ptr<Database> db_;
};

TEST(JobStateTest, Transitions) {
  using S = JobState;
  const S all[] = {S::kQueued, S::kRunning, S::kSucceeded, S::kFailed,
                   S::kCancelled};
  int legal = 0;
  for (S from : all) {
    for (S to : all) legal += IsLegalTransition(from, to) ? 1 : 0;
  }
  EXPECT_EQ(legal, 6);
  EXPECT_TRUE(IsLegalTransition(S::kQueued, S::kRunning));
  EXPECT_TRUE(IsLegalTransition(S::kQueued, S::kCancelled));
  EXPECT_TRUE(IsLegalTransition(S::kQueued, S::kFailed));
  EXPECT_TRUE(IsLegalTransition(S::kRunning, S::kSucceeded));
  EXPECT_TRUE(IsLegalTransition(S::kRunning, S::kFailed));
  EXPECT_TRUE(IsLegalTransition(S::kRunning, S::kCancelled));
  EXPECT_FALSE(IsLegalTransition(S::kQueued, S::kSucceeded));
  EXPECT_TRUE(IsTerminal(S::kCancelled));
  EXPECT_FALSE(IsTerminal(S::kRunning));
  EXPECT_EQ(JobStateName(S::kSucceeded), "SUCCEEDED");
}

TEST_F(JobStoreTest, CreateAndGet) {
  ASSERT_OK_AND_ASSIGN(JobRecord j, db_->jobs().Create(NewJob("a1")));
  EXPECT_EQ(j.id, "a1");
  EXPECT_GT(j.created_at_micros, 0);
  ASSERT_OK_AND_ASSIGN(JobRecord got, db_->jobs().Get("a1"));
  EXPECT_EQ(got.dataset, "pub");
  EXPECT_EQ(got.principal, "bob");
  EXPECT_EQ(got.state, JobState::kQueued);
  EXPECT_EQ(got.spec, "spec");
  EXPECT_EQ(got.calibration, "cal");
  EXPECT_EQ(got.cost, "cost");
  EXPECT_EQ(got.steps_total, 10);
  EXPECT_EQ(got.started_at_micros, 0);
  EXPECT_EQ(got.finished_at_micros, 0);

  ASSERT_OK_AND_ASSIGN(JobRecord gen, db_->jobs().Create(NewJob("")));
  EXPECT_TRUE(IsValidJobId(gen.id));
  EXPECT_NE(gen.id, "a1");

  EXPECT_THAT(db_->jobs().Create(NewJob("a1")),
              StatusIs(absl::StatusCode::kAlreadyExists));
  EXPECT_THAT(db_->jobs().Get("zzz"), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_THAT(db_->jobs().Create(NewJob("x", "nope")),
              StatusIs(absl::StatusCode::kNotFound));
  EXPECT_THAT(db_->jobs().Create(NewJob("bad id")),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST_F(JobStoreTest, PrivateDatasetJobsNeedACharge) {
  EXPECT_THAT(
      db_->jobs().Create(NewJob("p1", "priv")),
      StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("charge")));
  EXPECT_THAT(db_->jobs().Get("p1"), StatusIs(absl::StatusCode::kNotFound));
}

TEST_F(JobStoreTest, LifecycleAndIllegalTransitions) {
  ASSERT_OK(db_->jobs().Create(NewJob("a")));
  EXPECT_THAT(db_->jobs().UpdateProgress("a", 1),
              StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_THAT(db_->jobs().SetResult("a", "r", "e"),
              StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_THAT(
      db_->jobs().UpdateState("a", JobState::kSucceeded),
      StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("QUEUED")));
  ASSERT_OK(db_->jobs().UpdateState("a", JobState::kRunning, "started"));
  ASSERT_OK(db_->jobs().UpdateProgress("a", 4));
  EXPECT_THAT(db_->jobs().UpdateProgress("a", -1),
              StatusIs(absl::StatusCode::kInvalidArgument));
  ASSERT_OK_AND_ASSIGN(JobRecord j, db_->jobs().Get("a"));
  EXPECT_EQ(j.state, JobState::kRunning);
  EXPECT_EQ(j.message, "started");
  EXPECT_EQ(j.steps_done, 4);
  EXPECT_GT(j.started_at_micros, 0);
  EXPECT_EQ(j.finished_at_micros, 0);

  ASSERT_OK(db_->jobs().SetResult("a", std::string("model\0", 6), "eval"));
  ASSERT_OK_AND_ASSIGN(j, db_->jobs().Get("a"));
  EXPECT_EQ(j.state, JobState::kSucceeded);
  EXPECT_EQ(j.result, std::string("model\0", 6));
  EXPECT_EQ(j.evaluation, "eval");
  EXPECT_GE(j.finished_at_micros, j.started_at_micros);
  for (JobState to : {JobState::kQueued, JobState::kRunning, JobState::kFailed,
                      JobState::kCancelled}) {
    EXPECT_THAT(db_->jobs().UpdateState("a", to),
                StatusIs(absl::StatusCode::kFailedPrecondition));
  }
  EXPECT_THAT(db_->jobs().SetResult("a", "r2", ""),
              StatusIs(absl::StatusCode::kFailedPrecondition));
  ASSERT_OK_AND_ASSIGN(j, db_->jobs().Get("a"));
  EXPECT_EQ(j.result, std::string("model\0", 6));

  ASSERT_OK(db_->jobs().Create(NewJob("b")));
  ASSERT_OK(db_->jobs().UpdateState("b", JobState::kCancelled, "by user"));
  ASSERT_OK_AND_ASSIGN(j, db_->jobs().Get("b"));
  EXPECT_EQ(j.state, JobState::kCancelled);
  EXPECT_EQ(j.message, "by user");
  EXPECT_GT(j.finished_at_micros, 0);
  EXPECT_THAT(db_->jobs().UpdateState("zzz", JobState::kRunning),
              StatusIs(absl::StatusCode::kNotFound));
}

TEST_F(JobStoreTest, UpdateStateFromMovesOnlyFromTheExpectedState) {
  // A cancel that read the job as waiting for approval must not cancel it
  // once an approval has queued it: nothing is written, ABORTED.
  ASSERT_OK(db_->jobs().Create(NewJob("c")));  // QUEUED
  EXPECT_THAT(db_->jobs().UpdateStateFrom("c", JobState::kPendingApproval,
                                          JobState::kCancelled, "no charge"),
              StatusIs(absl::StatusCode::kAborted, HasSubstr("QUEUED")));
  ASSERT_OK_AND_ASSIGN(JobRecord j, db_->jobs().Get("c"));
  EXPECT_EQ(j.state, JobState::kQueued);
  EXPECT_EQ(j.message, "");
  ASSERT_OK(db_->jobs().UpdateStateFrom("c", JobState::kQueued,
                                        JobState::kCancelled, "by user"));
  ASSERT_OK_AND_ASSIGN(j, db_->jobs().Get("c"));
  EXPECT_EQ(j.state, JobState::kCancelled);
  EXPECT_EQ(j.message, "by user");
  EXPECT_THAT(db_->jobs().UpdateStateFrom("zzz", JobState::kQueued,
                                          JobState::kCancelled),
              StatusIs(absl::StatusCode::kNotFound));
}

TEST_F(JobStoreTest, ListFilters) {
  ASSERT_OK(db_->jobs().Create(NewJob("j1", "pub", "bob")));
  ASSERT_OK(db_->jobs().Create(NewJob("j2", "pub", "carol")));
  Charged("j3");
  ASSERT_OK(db_->jobs().UpdateState("j2", JobState::kRunning));
  auto ids = [](const std::vector<JobRecord>& jobs) {
    std::vector<std::string> out;
    for (const auto& j : jobs) out.push_back(j.id);
    return out;
  };
  ASSERT_OK_AND_ASSIGN(auto all, db_->jobs().List());
  EXPECT_THAT(ids(all), ElementsAre("j1", "j2", "j3"));
  auto by_dataset = [](const std::string& d) {
    JobFilter f;
    f.dataset = d;
    return f;
  };
  ASSERT_OK_AND_ASSIGN(auto pub, db_->jobs().List(by_dataset("pub")));
  EXPECT_THAT(ids(pub), ElementsAre("j1", "j2"));
  ASSERT_OK_AND_ASSIGN(auto priv, db_->jobs().List(by_dataset("priv")));
  EXPECT_THAT(ids(priv), ElementsAre("j3"));
  JobFilter carol_filter;
  carol_filter.principal = "carol";
  ASSERT_OK_AND_ASSIGN(auto carol, db_->jobs().List(carol_filter));
  EXPECT_THAT(ids(carol), ElementsAre("j2"));
  JobFilter queued;
  queued.state = JobState::kQueued;
  ASSERT_OK_AND_ASSIGN(auto q, db_->jobs().List(queued));
  EXPECT_THAT(ids(q), ElementsAre("j1", "j3"));
  ASSERT_OK_AND_ASSIGN(auto none, db_->jobs().List(by_dataset("nope")));
  EXPECT_TRUE(none.empty());
}

TEST_F(JobStoreTest, Trace) {
  ASSERT_OK(db_->jobs().Create(NewJob("t")));
  ASSERT_OK(db_->jobs().AppendTrace("t", 0, "s0"));
  ASSERT_OK(db_->jobs().AppendTrace("t", 5,
                                    std::string("s\0"
                                                "5",
                                                3)));
  ASSERT_OK(db_->jobs().AppendTrace("t", 2, "s2"));
  EXPECT_THAT(db_->jobs().AppendTrace("t", 2, "again"),
              StatusIs(absl::StatusCode::kAlreadyExists));
  EXPECT_THAT(db_->jobs().AppendTrace("t", -1, "neg"),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(db_->jobs().AppendTrace("zzz", 0, "x"),
              StatusIs(absl::StatusCode::kNotFound));
  ASSERT_OK_AND_ASSIGN(auto trace, db_->jobs().ListTrace("t"));
  ASSERT_EQ(trace.size(), 3u);
  EXPECT_EQ(trace[0].step, 0);
  EXPECT_EQ(trace[0].data, "s0");
  EXPECT_EQ(trace[1].step, 2);
  EXPECT_EQ(trace[2].step, 5);
  EXPECT_EQ(trace[2].data, std::string("s\0"
                                       "5",
                                       3));
  ASSERT_OK_AND_ASSIGN(auto tail, db_->jobs().ListTrace("t", 2));
  ASSERT_EQ(tail.size(), 1u);
  EXPECT_EQ(tail[0].step, 5);
  EXPECT_THAT(db_->jobs().ListTrace("zzz"),
              StatusIs(absl::StatusCode::kNotFound));
}

TEST_F(JobStoreTest, TracePagesAreBoundedInCountAndBytes) {
  ASSERT_OK(db_->jobs().Create(NewJob("p")));
  for (int step = 1; step <= 10; ++step) {
    ASSERT_OK(db_->jobs().AppendTrace("p", step, std::string(100, 'a')));
  }
  JobStore::TracePageQuery q;
  ASSERT_OK_AND_ASSIGN(JobStore::TracePage all,
                       db_->jobs().ListTracePage("p", q));
  EXPECT_EQ(all.total, 10);
  EXPECT_EQ(all.entries.size(), 10u);
  q.offset = 2;
  q.max_entries = 3;
  ASSERT_OK_AND_ASSIGN(JobStore::TracePage page,
                       db_->jobs().ListTracePage("p", q));
  ASSERT_EQ(page.entries.size(), 3u);
  EXPECT_EQ(page.entries[0].step, 3);
  EXPECT_EQ(page.total, 10);
  // 250 bytes hold two records of 100; the first record always comes.
  q.max_entries = 0;
  q.max_bytes = 250;
  ASSERT_OK_AND_ASSIGN(page, db_->jobs().ListTracePage("p", q));
  EXPECT_EQ(page.entries.size(), 2u);
  q.max_bytes = 10;
  ASSERT_OK_AND_ASSIGN(page, db_->jobs().ListTracePage("p", q));
  EXPECT_EQ(page.entries.size(), 1u);
  // After a step, and past the end.
  q = JobStore::TracePageQuery();
  q.after_step = 8;
  ASSERT_OK_AND_ASSIGN(page, db_->jobs().ListTracePage("p", q));
  ASSERT_EQ(page.entries.size(), 2u);
  EXPECT_EQ(page.entries[0].step, 9);
  q.offset = 5;
  ASSERT_OK_AND_ASSIGN(page, db_->jobs().ListTracePage("p", q));
  EXPECT_TRUE(page.entries.empty());
  q.offset = -1;
  EXPECT_THAT(db_->jobs().ListTracePage("p", q),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(db_->jobs().ListTracePage("zzz", JobStore::TracePageQuery()),
              StatusIs(absl::StatusCode::kNotFound));
}

TEST_F(JobStoreTest, RecordProgressIsAllOrNothing) {
  ASSERT_OK(db_->jobs().Create(NewJob("r")));
  EXPECT_THAT(db_->jobs().RecordProgress("r", 1, {{0, "a"}}),
              StatusIs(absl::StatusCode::kFailedPrecondition));
  ASSERT_OK(db_->jobs().UpdateState("r", JobState::kRunning));
  ASSERT_OK(db_->jobs().RecordProgress("r", 2, {{0, "a"}, {1, "b"}}));
  // Step 1 repeats: nothing of this call is applied.
  EXPECT_THAT(db_->jobs().RecordProgress("r", 3, {{2, "c"}, {1, "dup"}}),
              StatusIs(absl::StatusCode::kAlreadyExists));
  ASSERT_OK_AND_ASSIGN(JobRecord j, db_->jobs().Get("r"));
  EXPECT_EQ(j.steps_done, 2);
  ASSERT_OK_AND_ASSIGN(auto trace, db_->jobs().ListTrace("r"));
  ASSERT_EQ(trace.size(), 2u);
  EXPECT_EQ(trace[1].data, "b");
  ASSERT_OK(db_->jobs().RecordProgress("r", 3, {{2, "c"}}));
  ASSERT_OK_AND_ASSIGN(trace, db_->jobs().ListTrace("r", 1));
  ASSERT_EQ(trace.size(), 1u);
  EXPECT_EQ(trace[0].data, "c");
  // Relaxed durability is scoped to those transactions.
  EXPECT_EQ(*DatabaseTestPeer::QueryInt(*db_, "PRAGMA synchronous"), 2);
}

TEST_F(JobStoreTest, MarkRunningStartsOnlyQueuedJobs) {
  ASSERT_OK(db_->jobs().Create(NewJob("m")));
  ASSERT_OK(db_->jobs().MarkRunning("m"));
  ASSERT_OK_AND_ASSIGN(JobRecord j, db_->jobs().Get("m"));
  EXPECT_EQ(j.state, JobState::kRunning);
  EXPECT_GT(j.started_at_micros, 0);
  EXPECT_EQ(j.finished_at_micros, 0);
  EXPECT_THAT(
      db_->jobs().MarkRunning("m"),
      StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("RUNNING")));
  ASSERT_OK(db_->jobs().Create(NewJob("c")));
  ASSERT_OK(db_->jobs().UpdateState("c", JobState::kCancelled));
  EXPECT_THAT(db_->jobs().MarkRunning("c"),
              StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_THAT(db_->jobs().MarkRunning("zzz"),
              StatusIs(absl::StatusCode::kNotFound));
  // Relaxed durability is scoped to its transaction.
  EXPECT_EQ(*DatabaseTestPeer::QueryInt(*db_, "PRAGMA synchronous"), 2);
}

TEST_F(JobStoreTest, SetResultStoresTheLastTraceAndStepsWithTheResult) {
  ASSERT_OK(db_->jobs().Create(NewJob("f")));
  ASSERT_OK(db_->jobs().MarkRunning("f"));
  ASSERT_OK(db_->jobs().RecordProgress("f", 1, {{1, "a"}}));
  // A repeated step: nothing of the call is applied; the job still runs.
  EXPECT_THAT(db_->jobs().SetResult("f", "r", "e", 10, {{5, "b"}, {1, "dup"}}),
              StatusIs(absl::StatusCode::kAlreadyExists));
  ASSERT_OK_AND_ASSIGN(JobRecord j, db_->jobs().Get("f"));
  EXPECT_EQ(j.state, JobState::kRunning);
  EXPECT_EQ(j.steps_done, 1);
  EXPECT_EQ(j.result, "");
  ASSERT_OK_AND_ASSIGN(auto trace, db_->jobs().ListTrace("f"));
  EXPECT_EQ(trace.size(), 1u);

  ASSERT_OK(db_->jobs().SetResult("f", "r", "e", 10, {{5, "b"}, {10, "c"}}));
  ASSERT_OK_AND_ASSIGN(j, db_->jobs().Get("f"));
  EXPECT_EQ(j.state, JobState::kSucceeded);
  EXPECT_EQ(j.steps_done, 10);
  EXPECT_EQ(j.result, "r");
  EXPECT_EQ(j.evaluation, "e");
  ASSERT_OK_AND_ASSIGN(trace, db_->jobs().ListTrace("f"));
  ASSERT_EQ(trace.size(), 3u);
  EXPECT_EQ(trace[1].step, 5);
  EXPECT_EQ(trace[1].data, "b");
  EXPECT_EQ(trace[2].step, 10);

  // Without steps_done (negative), the recorded one stays.
  ASSERT_OK(db_->jobs().Create(NewJob("g")));
  ASSERT_OK(db_->jobs().MarkRunning("g"));
  ASSERT_OK(db_->jobs().UpdateProgress("g", 3));
  ASSERT_OK(db_->jobs().SetResult("g", "r", "e"));
  ASSERT_OK_AND_ASSIGN(j, db_->jobs().Get("g"));
  EXPECT_EQ(j.steps_done, 3);
  EXPECT_EQ(j.state, JobState::kSucceeded);
}

TEST_F(JobStoreTest, FailInterruptedJobsAfterRestartKeepsCharges) {
  ASSERT_OK(db_->jobs().Create(NewJob("queued")));
  ASSERT_OK(db_->jobs().Create(NewJob("running")));
  ASSERT_OK(db_->jobs().UpdateState("running", JobState::kRunning));
  ASSERT_OK(db_->jobs().Create(NewJob("done")));
  ASSERT_OK(db_->jobs().UpdateState("done", JobState::kRunning));
  ASSERT_OK(db_->jobs().SetResult("done", "r", "e"));
  ASSERT_OK(db_->jobs().Create(NewJob("cancelled")));
  ASSERT_OK(db_->jobs().UpdateState("cancelled", JobState::kCancelled));
  Charged("charged-running");
  ASSERT_OK(db_->jobs().UpdateState("charged-running", JobState::kRunning));

  // Simulated crash: drop the handle without any shutdown step.
  db_.reset();
  ASSERT_OK_AND_ASSIGN(db_, Database::Open(path_));
  ASSERT_OK_AND_ASSIGN(int n,
                       db_->jobs().FailInterruptedJobs("server restarted"));
  EXPECT_EQ(n, 3);
  for (const char* id : {"queued", "running", "charged-running"}) {
    ASSERT_OK_AND_ASSIGN(JobRecord j, db_->jobs().Get(id));
    EXPECT_EQ(j.state, JobState::kFailed) << id;
    EXPECT_EQ(j.message, "server restarted");
    EXPECT_GT(j.finished_at_micros, 0);
  }
  ASSERT_OK_AND_ASSIGN(JobRecord done, db_->jobs().Get("done"));
  EXPECT_EQ(done.state, JobState::kSucceeded);
  ASSERT_OK_AND_ASSIGN(JobRecord c, db_->jobs().Get("cancelled"));
  EXPECT_EQ(c.state, JobState::kCancelled);
  ASSERT_OK_AND_ASSIGN(auto charges, db_->ledger().List("priv"));
  ASSERT_EQ(charges.size(), 1u);
  EXPECT_EQ(charges[0].job_id, "charged-running");
  ASSERT_OK_AND_ASSIGN(n, db_->jobs().FailInterruptedJobs("again"));
  EXPECT_EQ(n, 0);
}

}  // namespace
}  // namespace dpopt::storage
