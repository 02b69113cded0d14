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

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "storage/blob_codec.h"
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

// The test cost blobs are "eps=<x>".
double EpsOf(const std::string& blob) {
  double x = -1;
  EXPECT_TRUE(absl::StartsWith(blob, "eps=") &&
              absl::SimpleAtod(blob.substr(4), &x))
      << blob;
  return x;
}

// A folder for "eps=" blobs: their sum (exact for the quarter multiples the
// tests use). DATA_LOSS for anything else, as the privacy filter's Fold.
absl::StatusOr<std::string> SumFolder(const DatasetRecord&,
                                      const std::vector<std::string>& costs) {
  double sum = 0;
  for (const std::string& c : costs) {
    double x = 0;
    if (!absl::StartsWith(c, "eps=") || !absl::SimpleAtod(c.substr(4), &x)) {
      return absl::DataLossError(absl::StrCat("corrupt cost '", c, "'"));
    }
    sum += x;
  }
  return absl::StrCat("eps=", sum);
}

// Admits while the sum of epsilons stays within the dataset's budget.
AdmitFn SumRule(double epsilon, std::atomic<int>* calls = nullptr) {
  return [epsilon, calls](const DatasetRecord& d,
                          const std::vector<std::string>& prior_costs) {
    if (calls != nullptr) ++*calls;
    double spent = 0;
    for (const std::string& c : prior_costs) spent += EpsOf(c);
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
                   const std::vector<std::string>& prior_costs) {
    EXPECT_EQ(d.name, "adult");
    seen_sizes.push_back(prior_costs.size());
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
  auto refuse = [](const DatasetRecord&, const std::vector<std::string>&) {
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
        [&](const DatasetRecord&, const std::vector<std::string>&) {
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
                          const std::vector<std::string>& prior_costs) {
    absl::Status s = rule(d, prior_costs);
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

// 10 handles on the file (as 10 processes would be), with or without folds.
void RunConcurrentChargesAcrossHandles(const std::string& path, bool fold) {
  Database::Options options;
  options.busy_timeout_ms = 60000;
  std::vector<std::unique_ptr<Database>> owned;
  std::vector<Database*> handles;
  for (int i = 0; i < 10; ++i) {
    ASSERT_OK_AND_ASSIGN(auto db, Database::Open(path, options));
    if (fold) db->ledger().SetCostFolder(&SumFolder);
    handles.push_back(db.get());
    owned.push_back(std::move(db));
  }
  RunConcurrentCharges(handles);
}

TEST_F(LedgerTest, ConcurrentChargesAcrossConnectionsNeverOverspend) {
  RunConcurrentChargesAcrossHandles(path_, /*fold=*/false);
}

TEST_F(LedgerTest, FoldedConcurrentChargesAcrossConnectionsNeverOverspend) {
  RunConcurrentChargesAcrossHandles(path_, /*fold=*/true);
}

// With a folder, `admit` gets one blob: the fold of every committed charge,
// including those appended through other handles (other processes) since
// this handle last looked.
TEST_F(LedgerTest, FoldCoversChargesFromOtherHandles) {
  db_->ledger().SetCostFolder(&SumFolder);
  ASSERT_OK_AND_ASSIGN(auto other, Database::Open(path_));
  other->ledger().SetCostFolder(&SumFolder);
  std::vector<std::vector<std::string>> seen;
  auto record = [&](const DatasetRecord&,
                    const std::vector<std::string>& prior_costs) {
    seen.push_back(prior_costs);
    return absl::OkStatus();
  };
  ASSERT_OK(db_->ledger().ChargeAndCreateJob(Charge("adult", 0.25),
                                             Job("adult"), record));
  ASSERT_OK(other->ledger().ChargeAndCreateJob(Charge("adult", 0.5),
                                               Job("adult"), record));
  ASSERT_OK(other->ledger().ChargeAndCreateJob(Charge("adult", 0.75),
                                               Job("adult"), record));
  ASSERT_OK(db_->ledger().ChargeAndCreateJob(Charge("adult", 1.0), Job("adult"),
                                             record));
  using V = std::vector<std::string>;
  EXPECT_EQ(seen,
            (std::vector<V>{V{}, V{"eps=0.25"}, V{"eps=0.75"}, V{"eps=1.5"}}));
  ASSERT_OK_AND_ASSIGN(LedgerTotals t, db_->ledger().Totals("adult", "alice"));
  EXPECT_EQ(t.charges, 4);
  EXPECT_EQ(t.costs, V{"eps=2.5"});
  EXPECT_EQ(t.principal_charges, 4);
  EXPECT_EQ(t.principal_costs, V{"eps=2.5"});
  EXPECT_EQ(t.dataset.epsilon_budget, kBudget);
  // The budget of 3 now admits 0.5 but not 0.75, through either handle.
  EXPECT_THAT(other->ledger().ChargeAndCreateJob(Charge("adult", 0.75),
                                                 Job("adult"), SumRule(0.75)),
              StatusIs(absl::StatusCode::kResourceExhausted));
  EXPECT_OK(db_->ledger().ChargeAndCreateJob(Charge("adult", 0.5), Job("adult"),
                                             SumRule(0.5)));
  EXPECT_THAT(other->ledger().ChargeAndCreateJob(Charge("adult", 0.25),
                                                 Job("adult"), SumRule(0.25)),
              StatusIs(absl::StatusCode::kResourceExhausted));
  EXPECT_EQ(Count("ledger"), 5);
}

// Totals give the same numbers with and without a folder, per principal too,
// and per dataset (folds never mix datasets).
TEST_F(LedgerTest, TotalsWithAndWithoutFolderAgree) {
  ASSERT_OK(db_->datasets().Import(Private("bank"), "1 1:1\n"));
  const std::vector<std::pair<std::string, double>> charges = {
      {"alice", 0.25}, {"bob", 0.5}, {"alice", 0.125}, {"carol", 1.0}};
  for (const auto& [who, eps] : charges) {
    ChargeRequest c = Charge("adult", eps);
    c.principal = who;
    ASSERT_OK(db_->ledger().ChargeAndCreateJob(c, Job("adult"), SumRule(eps)));
  }
  ChargeRequest c = Charge("bank", 2.0);
  c.principal = "alice";
  ASSERT_OK(db_->ledger().ChargeAndCreateJob(c, Job("bank"), SumRule(2.0)));

  ASSERT_OK_AND_ASSIGN(auto folded, Database::Open(path_));
  folded->ledger().SetCostFolder(&SumFolder);
  for (const std::string who : {"alice", "bob", "dave", ""}) {
    ASSERT_OK_AND_ASSIGN(LedgerTotals plain,
                         db_->ledger().Totals("adult", who));
    ASSERT_OK_AND_ASSIGN(LedgerTotals fold,
                         folded->ledger().Totals("adult", who));
    double plain_sum = 0, plain_own = 0;
    for (const auto& b : plain.costs) plain_sum += EpsOf(b);
    for (const auto& b : plain.principal_costs) plain_own += EpsOf(b);
    EXPECT_EQ(plain.charges, 4);
    EXPECT_EQ(fold.charges, 4);
    EXPECT_EQ(plain_sum, 1.875);
    ASSERT_EQ(fold.costs.size(), 1u);
    EXPECT_EQ(EpsOf(fold.costs[0]), 1.875);
    EXPECT_EQ(fold.principal_charges, plain.principal_charges) << who;
    const double want_own = who == "alice" ? 0.375 : who == "bob" ? 0.5 : 0;
    EXPECT_EQ(plain_own, want_own) << who;
    double fold_own = 0;
    for (const auto& b : fold.principal_costs) fold_own += EpsOf(b);
    EXPECT_EQ(fold_own, want_own) << who;
  }
  ASSERT_OK_AND_ASSIGN(LedgerTotals bank,
                       folded->ledger().Totals("bank", "alice"));
  EXPECT_EQ(bank.charges, 1);
  EXPECT_EQ(bank.costs, std::vector<std::string>{"eps=2"});
  EXPECT_THAT(folded->ledger().Totals("nope"),
              StatusIs(absl::StatusCode::kNotFound));
}

// A corrupt charge is DATA_LOSS for a handle that folds it; the folder's own
// refusal (a cost it cannot parse) is returned as well, and nothing is
// written.
TEST_F(LedgerTest, FoldOfCorruptChargeIsDataLoss) {
  ASSERT_OK(db_->ledger().ChargeAndCreateJob(Charge("adult", 1.0),
                                             Job("adult", "j"), SumRule(1.0)));
  ASSERT_OK(DatabaseTestPeer::Execute(
      *db_,
      "DROP TRIGGER ledger_no_update; UPDATE ledger SET cost_blob = 'junk';"));
  ASSERT_OK_AND_ASSIGN(auto folded, Database::Open(path_));
  folded->ledger().SetCostFolder(&SumFolder);
  EXPECT_THAT(folded->ledger().ChargeAndCreateJob(Charge("adult", 0.1),
                                                  Job("adult"), SumRule(0.1)),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("junk")));
  EXPECT_THAT(folded->ledger().Totals("adult"),
              StatusIs(absl::StatusCode::kDataLoss));
  EXPECT_EQ(Count("ledger"), 1);
  EXPECT_EQ(Count("jobs"), 1);
}

}  // namespace
}  // namespace dpopt::storage

// Curator approval: a job created PENDING_APPROVAL is uncharged; its
// approval charges it and queues it in one transaction; a refusal, a job that
// is no longer pending or an expired one writes nothing.
namespace dpopt::storage {
namespace {

JobRecord Pending(const std::string& id, int64_t expires_in_micros) {
  JobRecord j = Job("adult", id);
  j.state = JobState::kPendingApproval;
  j.approval_expires_at_micros = internal::NowMicros() + expires_in_micros;
  return j;
}

TEST_F(LedgerTest, APendingJobIsChargedOnlyByItsApproval) {
  ASSERT_OK(db_->jobs().Create(Pending("job-p", 60'000'000)).status());
  ASSERT_OK_AND_ASSIGN(JobRecord stored, db_->jobs().Get("job-p"));
  EXPECT_EQ(stored.state, JobState::kPendingApproval);
  EXPECT_GT(stored.approval_expires_at_micros, internal::NowMicros());
  EXPECT_EQ(Count("ledger"), 0);
  // A pending job without an expiry, or a private-dataset job that is
  // neither pending nor a dry run, is refused.
  JobRecord no_expiry = Pending("job-q", 0);
  no_expiry.approval_expires_at_micros = 0;
  EXPECT_THAT(db_->jobs().Create(no_expiry),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(db_->jobs().Create(Job("adult", "job-r")),
              StatusIs(absl::StatusCode::kFailedPrecondition));
  JobRecord dry = Job("adult", "job-dry");
  dry.synthetic_source = "generated from the public schema of dataset adult";
  EXPECT_OK(db_->jobs().Create(dry).status());
  EXPECT_EQ(Count("ledger"), 0);

  // Refused by the admission rule: nothing written, still pending.
  auto refuse = [](const DatasetRecord&, const std::vector<std::string>&) {
    return absl::ResourceExhaustedError("only 0.25 epsilon left");
  };
  EXPECT_THAT(
      db_->ledger().ChargeAndQueuePendingJob(Charge("adult", 1.0), "job-p",
                                             refuse),
      StatusIs(absl::StatusCode::kResourceExhausted, "only 0.25 epsilon left"));
  EXPECT_EQ(Count("ledger"), 0);
  ASSERT_OK_AND_ASSIGN(stored, db_->jobs().Get("job-p"));
  EXPECT_EQ(stored.state, JobState::kPendingApproval);

  ASSERT_OK_AND_ASSIGN(LedgerEntry e,
                       db_->ledger().ChargeAndQueuePendingJob(
                           Charge("adult", 1.0), "job-p", SumRule(1.0)));
  EXPECT_EQ(e.job_id, "job-p");
  EXPECT_EQ(Count("ledger"), 1);
  ASSERT_OK_AND_ASSIGN(stored, db_->jobs().Get("job-p"));
  EXPECT_EQ(stored.state, JobState::kQueued);
  // Approved once only.
  EXPECT_THAT(db_->ledger().ChargeAndQueuePendingJob(Charge("adult", 1.0),
                                                     "job-p", SumRule(1.0)),
              StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_EQ(Count("ledger"), 1);

  // Rejected: terminal, never charged.
  ASSERT_OK(db_->jobs().Create(Pending("job-s", 60'000'000)).status());
  ASSERT_OK(
      db_->jobs().UpdateState("job-s", JobState::kRejected, "too costly"));
  EXPECT_THAT(db_->ledger().ChargeAndQueuePendingJob(Charge("adult", 1.0),
                                                     "job-s", SumRule(1.0)),
              StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_THAT(db_->jobs().UpdateState("job-s", JobState::kQueued),
              StatusIs(absl::StatusCode::kFailedPrecondition));

  // Expired: refused, nothing charged.
  ASSERT_OK(db_->jobs().Create(Pending("job-t", 1)).status());
  absl::SleepFor(absl::Milliseconds(2));
  EXPECT_THAT(
      db_->ledger().ChargeAndQueuePendingJob(Charge("adult", 0.5), "job-t",
                                             SumRule(0.5)),
      StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("expired")));
  EXPECT_EQ(Count("ledger"), 1);
}

TEST_F(LedgerTest, GrantsKeepTheirApprovalThreshold) {
  ASSERT_OK(db_->access().CreatePrincipal("alice", Role::kAnalyst).status());
  ASSERT_OK_AND_ASSIGN(GrantRecord g,
                       db_->access().Grant("alice", "adult", 2.0, 0.5, 3600));
  EXPECT_EQ(g.approval_above_epsilon, 0.5);
  EXPECT_EQ(g.approval_timeout_seconds, 3600);
  ASSERT_OK_AND_ASSIGN(std::optional<GrantRecord> found,
                       db_->access().FindGrant("alice", "adult"));
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(found->approval_above_epsilon, 0.5);
  EXPECT_THAT(db_->access().Grant("alice", "adult", 2.0, -1, 0),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(db_->access().Grant("alice", "adult", 2.0, 0.5, -5),
              StatusIs(absl::StatusCode::kInvalidArgument));
  // Granting again without a threshold clears it.
  ASSERT_OK_AND_ASSIGN(g, db_->access().Grant("alice", "adult", 2.0));
  EXPECT_EQ(g.approval_above_epsilon, 0);
}

}  // namespace
}  // namespace dpopt::storage
