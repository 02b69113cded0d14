#include "storage/ledger.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "storage/database.h"
#include "tests/common/status_matchers.h"
#include "tests/storage/storage_test_util.h"

namespace dpopt::storage {
namespace {

using ::dpopt::storage::testing::TempDir;
using ::dpopt::testing::StatusIs;
using ::testing::HasSubstr;

constexpr double kBudget = 3.0;

ImportOptions Private(const std::string& name) {
  ImportOptions o;
  o.name = name;
  o.dimension = 2;
  o.epsilon_budget = kBudget;
  o.delta_budget = 1e-6;
  return o;
}

ChargeRequest Charge(const std::string& dataset, double epsilon) {
  ChargeRequest c;
  c.dataset = dataset;
  c.event_json = R"({"gaussian":{"noise_multiplier":1.0}})";
  c.accountant = "rdp";
  c.cost_blob = absl::StrCat("eps=", epsilon);
  c.epsilon = epsilon;
  c.delta = 1e-7;
  c.principal = "alice";
  c.note = "test";
  return c;
}

JobRecord Job(const std::string& dataset, const std::string& id = "") {
  JobRecord j;
  j.id = id;
  j.dataset = dataset;
  j.principal = "alice";
  j.spec = std::string("spec\0bytes", 10);
  j.steps_total = 100;
  return j;
}

// Admits while the sum of epsilons stays within the dataset's budget.
AdmitFn SumRule(double epsilon, std::atomic<int>* calls = nullptr) {
  return [epsilon, calls](const DatasetRecord& d,
                          const std::vector<LedgerEntry>& existing) {
    if (calls != nullptr) ++*calls;
    double spent = 0;
    for (const LedgerEntry& e : existing) spent += e.epsilon;
    if (spent + epsilon > d.epsilon_budget + 1e-12) {
      return absl::ResourceExhaustedError(
          absl::StrCat("remaining epsilon ", d.epsilon_budget - spent));
    }
    return absl::OkStatus();
  };
}

class LedgerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = dir_.File("l.db");
    ASSERT_OK_AND_ASSIGN(db_, Database::Open(path_));
    ASSERT_OK(db_->datasets().Import(Private("adult"), "1 1:1\n-1 2:1\n"));
    ImportOptions pub = Private("public");
    pub.is_public = true;
    pub.epsilon_budget = 0;
    pub.delta_budget = 0;
    ASSERT_OK(db_->datasets().Import(pub, "1 1:1\n"));
  }

  int64_t Count(absl::string_view table) {
    auto n = DatabaseTestPeer::QueryInt(
        *db_, absl::StrCat("SELECT count(*) FROM ", table));
    EXPECT_TRUE(n.ok()) << n.status();
    return n.value_or(-1);
  }

  TempDir dir_;
  std::string path_;
  std::unique_ptr<Database> db_;
};

TEST_F(LedgerTest, ChargeCreatesJobAndEntryWithExistingCharges) {
  std::vector<size_t> seen_sizes;
  auto admit = [&](const DatasetRecord& d,
                   const std::vector<LedgerEntry>& existing) {
    EXPECT_EQ(d.name, "adult");
    seen_sizes.push_back(existing.size());
    return absl::OkStatus();
  };
  ASSERT_OK_AND_ASSIGN(LedgerEntry e1,
                       db_->ledger().ChargeAndCreateJob(
                           Charge("adult", 1.0), Job("adult", "job-1"), admit));
  EXPECT_EQ(e1.job_id, "job-1");
  EXPECT_EQ(e1.dataset, "adult");
  EXPECT_EQ(e1.epsilon, 1.0);
  EXPECT_GT(e1.seq, 0);
  ASSERT_OK_AND_ASSIGN(LedgerEntry e2,
                       db_->ledger().ChargeAndCreateJob(Charge("adult", 0.5),
                                                        Job("adult"), admit));
  EXPECT_GT(e2.seq, e1.seq);
  EXPECT_THAT(e2.job_id, HasSubstr("job-"));  // generated
  EXPECT_EQ(seen_sizes, (std::vector<size_t>{0, 1}));

  ASSERT_OK_AND_ASSIGN(std::vector<LedgerEntry> entries,
                       db_->ledger().List("adult"));
  ASSERT_EQ(entries.size(), 2u);
  EXPECT_EQ(entries[0].seq, e1.seq);
  EXPECT_EQ(entries[0].job_id, "job-1");
  EXPECT_EQ(entries[0].event_json, R"({"gaussian":{"noise_multiplier":1.0}})");
  EXPECT_EQ(entries[0].accountant, "rdp");
  EXPECT_EQ(entries[0].cost_blob, "eps=1");
  EXPECT_EQ(entries[0].delta, 1e-7);
  EXPECT_EQ(entries[0].principal, "alice");
  EXPECT_EQ(entries[0].note, "test");
  EXPECT_EQ(entries[1].job_id, e2.job_id);

  ASSERT_OK_AND_ASSIGN(JobRecord job, db_->jobs().Get("job-1"));
  EXPECT_EQ(job.state, JobState::kQueued);
  EXPECT_EQ(job.dataset, "adult");
  EXPECT_EQ(job.spec, std::string("spec\0bytes", 10));
  EXPECT_EQ(job.steps_total, 100);

  ASSERT_OK_AND_ASSIGN(LedgerSnapshot snap, db_->ledger().Snapshot("adult"));
  EXPECT_EQ(snap.dataset.epsilon_budget, kBudget);
  EXPECT_EQ(snap.entries.size(), 2u);
  ASSERT_OK_AND_ASSIGN(entries, db_->ledger().List("public"));
  EXPECT_TRUE(entries.empty());
  EXPECT_THAT(db_->ledger().List("nope"),
              StatusIs(absl::StatusCode::kNotFound));
}

TEST_F(LedgerTest, AdmitRefusalIsReturnedUnchangedAndWritesNothing) {
  auto refuse = [](const DatasetRecord&, const std::vector<LedgerEntry>&) {
    return absl::ResourceExhaustedError("only 0.25 epsilon left");
  };
  EXPECT_THAT(
      db_->ledger().ChargeAndCreateJob(Charge("adult", 1.0),
                                       Job("adult", "job-x"), refuse),
      StatusIs(absl::StatusCode::kResourceExhausted, "only 0.25 epsilon left"));
  EXPECT_EQ(Count("ledger"), 0);
  EXPECT_EQ(Count("jobs"), 0);
  EXPECT_THAT(db_->jobs().Get("job-x"), StatusIs(absl::StatusCode::kNotFound));
}

TEST_F(LedgerTest, InvalidRequestsWriteNothing) {
  ChargeRequest bad = Charge("adult", 1.0);
  bad.epsilon = -1;
  EXPECT_THAT(
      db_->ledger().ChargeAndCreateJob(bad, Job("adult"), SumRule(1.0)),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("epsilon")));
  bad = Charge("adult", 1.0);
  bad.cost_blob = "";
  EXPECT_THAT(
      db_->ledger().ChargeAndCreateJob(bad, Job("adult"), SumRule(1.0)),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("cost_blob")));
  EXPECT_THAT(db_->ledger().ChargeAndCreateJob(Charge("adult", 1.0),
                                               Job("public"), SumRule(1.0)),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(db_->ledger().ChargeAndCreateJob(Charge("nope", 1.0), Job("nope"),
                                               SumRule(1.0)),
              StatusIs(absl::StatusCode::kNotFound));
  EXPECT_THAT(
      db_->ledger().ChargeAndCreateJob(Charge("public", 1.0), Job("public"),
                                       SumRule(1.0)),
      StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("public")));
  EXPECT_THAT(db_->ledger().ChargeAndCreateJob(
                  Charge("adult", 1.0), Job("adult", "bad id!"), SumRule(1.0)),
              StatusIs(absl::StatusCode::kInvalidArgument));
  JobRecord running = Job("adult");
  running.state = JobState::kRunning;
  EXPECT_THAT(db_->ledger().ChargeAndCreateJob(Charge("adult", 1.0), running,
                                               SumRule(1.0)),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_EQ(Count("ledger"), 0);
  EXPECT_EQ(Count("jobs"), 0);

  // Duplicate job id: the second charge is not written.
  ASSERT_OK(db_->ledger().ChargeAndCreateJob(
      Charge("adult", 1.0), Job("adult", "same"), SumRule(1.0)));
  EXPECT_THAT(db_->ledger().ChargeAndCreateJob(
                  Charge("adult", 1.0), Job("adult", "same"), SumRule(1.0)),
              StatusIs(absl::StatusCode::kAlreadyExists));
  EXPECT_EQ(Count("ledger"), 1);
  EXPECT_EQ(Count("jobs"), 1);
}

TEST_F(LedgerTest, LedgerRowsCannotBeUpdatedOrDeleted) {
  ASSERT_OK(db_->ledger().ChargeAndCreateJob(Charge("adult", 1.0),
                                             Job("adult", "j"), SumRule(1.0)));
  EXPECT_THAT(DatabaseTestPeer::Execute(*db_, "UPDATE ledger SET epsilon = 0"),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("append-only")));
  EXPECT_THAT(DatabaseTestPeer::Execute(*db_, "DELETE FROM ledger"),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("append-only")));
  // Deleting the charged job or dataset is refused by foreign keys.
  EXPECT_THAT(DatabaseTestPeer::Execute(*db_, "DELETE FROM jobs"),
              StatusIs(absl::StatusCode::kFailedPrecondition));
  ASSERT_OK_AND_ASSIGN(std::vector<LedgerEntry> entries,
                       db_->ledger().List("adult"));
  ASSERT_EQ(entries.size(), 1u);
  EXPECT_EQ(entries[0].epsilon, 1.0);
}

TEST_F(LedgerTest, ChargesSurviveReopenAndJobFailure) {
  ASSERT_OK(db_->ledger().ChargeAndCreateJob(Charge("adult", 1.0),
                                             Job("adult", "j1"), SumRule(1.0)));
  ASSERT_OK(db_->jobs().UpdateState("j1", JobState::kRunning));
  db_.reset();
  ASSERT_OK_AND_ASSIGN(db_, Database::Open(path_));
  ASSERT_OK_AND_ASSIGN(int failed, db_->jobs().FailInterruptedJobs("restart"));
  EXPECT_EQ(failed, 1);
  ASSERT_OK_AND_ASSIGN(std::vector<LedgerEntry> entries,
                       db_->ledger().List("adult"));
  ASSERT_EQ(entries.size(), 1u);
  EXPECT_EQ(entries[0].job_id, "j1");
  ASSERT_OK_AND_ASSIGN(JobRecord j, db_->jobs().Get("j1"));
  EXPECT_EQ(j.state, JobState::kFailed);
}

TEST_F(LedgerTest, CorruptStoredChargeIsDataLoss) {
  ASSERT_OK(db_->ledger().ChargeAndCreateJob(Charge("adult", 1.0),
                                             Job("adult", "j"), SumRule(1.0)));
  // Bypass the append-only trigger as an attacker with file access could.
  ASSERT_OK(DatabaseTestPeer::Execute(
      *db_, "DROP TRIGGER ledger_no_update; UPDATE ledger SET epsilon = -5;"));
  EXPECT_THAT(db_->ledger().List("adult"),
              StatusIs(absl::StatusCode::kDataLoss));
  EXPECT_THAT(db_->ledger().ChargeAndCreateJob(Charge("adult", 0.1),
                                               Job("adult"), SumRule(0.1)),
              StatusIs(absl::StatusCode::kDataLoss));
}

// A process killed with SIGKILL while holding the ledger's write transaction
// (inside `admit` of its second charge) leaves exactly its committed charge,
// and the restarted store fails its RUNNING job and keeps the charge.
TEST_F(LedgerTest, SigkillMidChargeLeavesConsistentLedger) {
  int to_parent[2];
  ASSERT_EQ(pipe(to_parent), 0);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    close(to_parent[0]);
    auto db = Database::Open(path_);
    if (!db.ok()) _exit(2);
    if (!(*db)
             ->ledger()
             .ChargeAndCreateJob(Charge("adult", 1.0), Job("adult", "k1"),
                                 SumRule(1.0))
             .ok() ||
        !(*db)->jobs().UpdateState("k1", JobState::kRunning).ok() ||
        !(*db)->jobs().RecordProgress("k1", 3, {{0, "t0"}}).ok()) {
      _exit(3);
    }
    (void)(*db)->ledger().ChargeAndCreateJob(
        Charge("adult", 1.0), Job("adult", "k2"),
        [&](const DatasetRecord&, const std::vector<LedgerEntry>&) {
          const char c = 'x';
          (void)!write(to_parent[1], &c, 1);
          for (;;) pause();  // killed here, holding BEGIN IMMEDIATE
          return absl::OkStatus();
        });
    _exit(4);
  }
  close(to_parent[1]);
  char c = 0;
  ASSERT_EQ(read(to_parent[0], &c, 1), 1) << "child failed before charge 2";
  close(to_parent[0]);
  ASSERT_EQ(kill(pid, SIGKILL), 0);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFSIGNALED(status));

  // "Restart": a fresh handle on the file.
  db_.reset();
  ASSERT_OK_AND_ASSIGN(db_, Database::Open(path_));
  ASSERT_OK_AND_ASSIGN(int failed, db_->jobs().FailInterruptedJobs("crash"));
  EXPECT_EQ(failed, 1);
  ASSERT_OK_AND_ASSIGN(std::vector<LedgerEntry> entries,
                       db_->ledger().List("adult"));
  ASSERT_EQ(entries.size(), 1u);
  EXPECT_EQ(entries[0].job_id, "k1");
  ASSERT_OK_AND_ASSIGN(JobRecord k1, db_->jobs().Get("k1"));
  EXPECT_EQ(k1.state, JobState::kFailed);
  EXPECT_EQ(k1.steps_done, 3);
  EXPECT_THAT(db_->jobs().Get("k2"), StatusIs(absl::StatusCode::kNotFound));
  // The dead process's write lock is gone.
  EXPECT_OK(db_->ledger().ChargeAndCreateJob(Charge("adult", 1.0),
                                             Job("adult", "k3"), SumRule(1.0)));
}

// 50 concurrent charges of 0.25 against a budget of 3: exactly 12 succeed.
void RunConcurrentCharges(const std::vector<Database*>& handles) {
  constexpr int kThreads = 50;
  constexpr double kEps = 0.25;
  std::atomic<int> ok{0}, exhausted{0}, other{0}, admit_calls{0};
  AdmitFn rule = SumRule(kEps, &admit_calls);
  AdmitFn slow_rule = [&](const DatasetRecord& d,
                          const std::vector<LedgerEntry>& existing) {
    absl::Status s = rule(d, existing);
    // Widen the window between the check and the write.
    std::this_thread::sleep_for(std::chrono::microseconds(300));
    return s;
  };
  std::atomic<bool> go{false};
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      while (!go.load()) std::this_thread::yield();
      Database* db = handles[i % handles.size()];
      auto r = db->ledger().ChargeAndCreateJob(Charge("adult", kEps),
                                               Job("adult"), slow_rule);
      if (r.ok()) {
        ++ok;
      } else if (absl::IsResourceExhausted(r.status())) {
        ++exhausted;
      } else {
        ADD_FAILURE() << r.status();
        ++other;
      }
    });
  }
  go = true;
  for (auto& t : threads) t.join();
  EXPECT_EQ(ok.load(), 12);
  EXPECT_EQ(exhausted.load(), kThreads - 12);
  EXPECT_EQ(other.load(), 0);
  EXPECT_EQ(admit_calls.load(), kThreads);
  auto entries = handles[0]->ledger().List("adult");
  ASSERT_TRUE(entries.ok()) << entries.status();
  double spent = 0;
  for (const LedgerEntry& e : *entries) spent += e.epsilon;
  EXPECT_EQ(entries->size(), 12u);
  EXPECT_LE(spent, kBudget);
  auto jobs = handles[0]->jobs().List();
  ASSERT_TRUE(jobs.ok());
  EXPECT_EQ(jobs->size(), 12u);  // one job per charge, none for refusals
}

TEST_F(LedgerTest, ConcurrentChargesOnSharedHandleNeverOverspend) {
  RunConcurrentCharges({db_.get()});
}

TEST_F(LedgerTest, ConcurrentChargesAcrossConnectionsNeverOverspend) {
  Database::Options options;
  options.busy_timeout_ms = 60000;
  std::vector<std::unique_ptr<Database>> owned;
  std::vector<Database*> handles;
  for (int i = 0; i < 10; ++i) {
    ASSERT_OK_AND_ASSIGN(auto db, Database::Open(path_, options));
    handles.push_back(db.get());
    owned.push_back(std::move(db));
  }
  RunConcurrentCharges(handles);
}

}  // namespace
}  // namespace dpopt::storage
