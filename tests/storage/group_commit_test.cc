#include "storage/group_commit.h"

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "storage/database.h"
#include "storage/ledger.h"
#include "storage/sqlite.h"
#include "tests/common/status_matchers.h"
#include "tests/storage/storage_test_util.h"

namespace dpopt::storage {
namespace {

using ::dpopt::storage::testing::TempDir;
using ::dpopt::testing::StatusIs;

class GroupCommitTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_OK_AND_ASSIGN(db_, Database::Open(dir_.File("g.db")));
    ASSERT_OK(DatabaseTestPeer::Execute(*db_, "CREATE TABLE t(v TEXT)"));
  }
  int64_t Count(const std::string& where = "1") {
    absl::StatusOr<int64_t> n = DatabaseTestPeer::QueryInt(
        *db_, "SELECT count(*) FROM t WHERE " + where);
    EXPECT_TRUE(n.ok()) << n.status();
    return n.value_or(-1);
  }
  static absl::Status Insert(Connection& conn, const std::string& v) {
    return conn.Execute("INSERT INTO t VALUES('" + v + "')");
  }

  TempDir dir_;
  std::unique_ptr<Database> db_;
};

TEST_F(GroupCommitTest, AFailingUnitIsUndoneAloneAndItsErrorReturned) {
  GroupCommit& group = db_->group_commit();
  ASSERT_OK(group.Run([](Connection& c) { return Insert(c, "a"); }));
  EXPECT_THAT(group.Run([](Connection& c) -> absl::Status {
    EXPECT_TRUE(c.InTransaction());
    EXPECT_OK(Insert(c, "b"));
    return absl::ResourceExhaustedError("over budget");
  }),
              StatusIs(absl::StatusCode::kResourceExhausted));
  ASSERT_OK(group.Run([](Connection& c) { return Insert(c, "c"); }));
  EXPECT_EQ(Count(), 2);
  EXPECT_EQ(Count("v = 'b'"), 0);
}

TEST_F(GroupCommitTest, TheCallersCommitHookRunsInsideItsUnit) {
  GroupCommit& group = db_->group_commit();
  bool fail = false;
  ScopedCommitHook hook([&](Connection& c) -> absl::Status {
    if (fail) return absl::InternalError("audit refused");
    return Insert(c, "audit");
  });
  ASSERT_OK(group.Run([](Connection& c) { return Insert(c, "change"); }));
  EXPECT_EQ(hook.commits(), 1);
  EXPECT_EQ(Count("v = 'audit'"), 1);
  // A failing hook undoes the unit's change too.
  fail = true;
  EXPECT_THAT(group.Run([](Connection& c) { return Insert(c, "lost"); }),
              StatusIs(absl::StatusCode::kInternal));
  EXPECT_EQ(hook.commits(), 1);
  EXPECT_EQ(Count("v = 'lost'"), 0);
  // A unit that fails runs no hook.
  fail = false;
  EXPECT_THAT(
      group.Run([](Connection&) { return absl::NotFoundError("no such job"); }),
      StatusIs(absl::StatusCode::kNotFound));
  EXPECT_EQ(Count("v = 'audit'"), 1);
}

TEST_F(GroupCommitTest, AUnitThatEndsTheTransactionWritesNothing) {
  // SQLite rolls the whole transaction back after some errors (a full
  // disk, an I/O error): the unit's caller must not be told it committed.
  EXPECT_THAT(db_->group_commit().Run([](Connection& c) -> absl::Status {
    EXPECT_OK(Insert(c, "x"));
    return c.Execute("ROLLBACK");
  }),
              StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_EQ(Count(), 0);
  ASSERT_OK(
      db_->group_commit().Run([](Connection& c) { return Insert(c, "y"); }));
  EXPECT_EQ(Count(), 1);
}

// Concurrent check-and-write units stay serialized: each sees the units
// committed or queued before it, so a limit checked inside the unit is
// never exceeded, whatever batches the callers were grouped in.
TEST_F(GroupCommitTest, ConcurrentCheckAndWriteUnitsNeverExceedTheirLimit) {
  constexpr int kThreads = 8;
  constexpr int kEach = 25;
  constexpr int kLimit = 120;
  std::atomic<int> admitted{0};
  std::atomic<int> refused{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kEach; ++i) {
        absl::Status s =
            db_->group_commit().Run([](Connection& c) -> absl::Status {
              absl::StatusOr<Statement> st =
                  c.Prepare("SELECT count(*) FROM t");
              if (!st.ok()) return st.status();
              absl::StatusOr<bool> row = st->Step();
              if (!row.ok()) return row.status();
              if (st->ColumnInt64(0) >= kLimit) {
                return absl::ResourceExhaustedError("full");
              }
              return Insert(c, "row");
            });
        if (s.ok()) {
          ++admitted;
        } else if (absl::IsResourceExhausted(s)) {
          ++refused;
        } else {
          ADD_FAILURE() << s;
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(admitted.load(), kLimit);
  EXPECT_EQ(refused.load(), kThreads * kEach - kLimit);
  EXPECT_EQ(Count(), kLimit);
}

// The ledger's charges go through the group commit: concurrent charges
// are each admitted over every charge before them, so a budget of N
// charges admits exactly N.
TEST_F(GroupCommitTest, ConcurrentChargesNeverOverspend) {
  ImportOptions priv;
  priv.name = "priv";
  priv.dimension = 1;
  priv.epsilon_budget = 1;
  ASSERT_OK(db_->datasets().Import(priv, "1 1:1\n"));
  constexpr int kThreads = 8;
  constexpr int kEach = 10;
  constexpr size_t kBudget = 30;
  AdmitFn admit = [](const DatasetRecord&,
                     const std::vector<std::string>& prior) -> absl::Status {
    if (prior.size() >= kBudget) return absl::ResourceExhaustedError("spent");
    return absl::OkStatus();
  };
  std::atomic<int> charged{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kEach; ++i) {
        ChargeRequest c;
        c.dataset = "priv";
        c.event_json = "{}";
        c.accountant = "rdp";
        c.cost_blob = "x";
        c.epsilon = 0.01;
        JobRecord j;
        j.id = "job-" + std::to_string(t) + "-" + std::to_string(i);
        j.dataset = "priv";
        j.principal = "bob";
        j.spec = "spec";
        absl::StatusOr<LedgerEntry> e =
            db_->ledger().ChargeAndCreateJob(c, j, admit);
        if (e.ok()) {
          ++charged;
          EXPECT_EQ(e->job_id, j.id);
        } else {
          EXPECT_TRUE(absl::IsResourceExhausted(e.status())) << e.status();
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(charged.load(), static_cast<int>(kBudget));
  ASSERT_OK_AND_ASSIGN(std::vector<LedgerEntry> ledger,
                       db_->ledger().List("priv"));
  EXPECT_EQ(ledger.size(), kBudget);
  ASSERT_OK_AND_ASSIGN(std::vector<JobRecord> jobs, db_->jobs().List());
  EXPECT_EQ(jobs.size(), kBudget);  // no job without its charge
}

}  // namespace
}  // namespace dpopt::storage
