// The ledger high-water mark (storage/ledger_mark.h), the database lock, and
// online backup / offline restore (storage/backup.h).
#include "storage/backup.h"

#include <atomic>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "storage/database.h"
#include "storage/file_util.h"
#include "storage/ledger_mark.h"
#include "tests/common/status_matchers.h"
#include "tests/storage/storage_test_util.h"

namespace dpopt::storage {
namespace {

using ::dpopt::storage::testing::ReadFileOrDie;
using ::dpopt::storage::testing::TempDir;
using ::dpopt::testing::StatusIs;
using ::testing::HasSubstr;

void WriteFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
}

ImportOptions Private(const std::string& name) {
  ImportOptions o;
  o.name = name;
  o.dimension = 2;
  o.epsilon_budget = 1000;
  o.delta_budget = 1e-6;
  return o;
}

absl::StatusOr<LedgerEntry> Charge(Database& db, const std::string& dataset) {
  ChargeRequest c;
  c.dataset = dataset;
  c.event_json = R"({"gaussian":{"noise_multiplier":1.0}})";
  c.accountant = "rdp";
  c.cost_blob = "eps=0.1";
  c.epsilon = 0.1;
  c.delta = 1e-7;
  c.principal = "alice";
  c.note = "test";
  JobRecord j;
  j.dataset = dataset;
  j.principal = "alice";
  j.spec = "spec";
  j.steps_total = 1;
  return db.ledger().ChargeAndCreateJob(
      c, j, [](const DatasetRecord&, const std::vector<std::string>&) {
        return absl::OkStatus();
      });
}

Database::Options WithMark(const std::string& mark, bool allow = false) {
  Database::Options o;
  o.ledger_mark_path = mark;
  o.allow_ledger_rollback = allow;
  return o;
}

TEST(LedgerMarkTest, ReadWriteAdvance) {
  TempDir dir;
  const std::string path = dir.File("m");
  ASSERT_OK_AND_ASSIGN(std::optional<int64_t> none, LedgerMark::Read(path));
  EXPECT_FALSE(none.has_value());
  ASSERT_OK(LedgerMark::Write(path, 7));
  EXPECT_EQ(ReadFileOrDie(path), "dpopt-ledger-mark v1 seq=7\n");
  LedgerMark mark(path, 7);
  ASSERT_OK(mark.Advance(9));
  ASSERT_OK(mark.Advance(8));  // out of order: stays at 9
  EXPECT_EQ(mark.current(), 9);
  ASSERT_OK_AND_ASSIGN(std::optional<int64_t> nine, LedgerMark::Read(path));
  EXPECT_EQ(nine, 9);
  EXPECT_THAT(LedgerMark::Write(path, -1),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(LedgerMarkTest, MalformedIsDataLoss) {
  TempDir dir;
  const std::string path = dir.File("m");
  for (const char* text :
       {"", "dpopt-ledger-mark v1 seq=\n", "dpopt-ledger-mark v1 seq=12",
        "dpopt-ledger-mark v1 seq=-3\n", "dpopt-ledger-mark v1 seq=1 2\n",
        "dpopt-ledger-mark v2 seq=1\n", "dpopt-ledger-mark v1 seq=1\n\n",
        "dpopt-ledger-mark v1 seq=99999999999999999999\n"}) {
    WriteFile(path, text);
    EXPECT_THAT(LedgerMark::Read(path), StatusIs(absl::StatusCode::kDataLoss))
        << text;
  }
}

TEST(LedgerMarkTest, ConcurrentAdvancesKeepTheMaximum) {
  TempDir dir;
  const std::string path = dir.File("m");
  LedgerMark mark(path, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&mark, t] {
      for (int i = 1; i <= 25; ++i) ASSERT_OK(mark.Advance(4 * i - t));
    });
  }
  for (auto& t : threads) t.join();
  ASSERT_OK_AND_ASSIGN(std::optional<int64_t> v, LedgerMark::Read(path));
  EXPECT_EQ(v, 100);
  EXPECT_EQ(mark.current(), 100);
}

// Group commit: a thread whose seq another thread's write covered returns
// without writing, but never before the file records its seq.
TEST(LedgerMarkTest, AnAdvanceReturnsOnlyOnceTheFileCoversIt) {
  TempDir dir;
  const std::string path = dir.File("m");
  LedgerMark mark(path, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 6; ++t) {
    threads.emplace_back([&mark, &path, t] {
      for (int i = 1; i <= 20; ++i) {
        const int64_t seq = 6 * i - t;
        ASSERT_OK(mark.Advance(seq));
        absl::StatusOr<std::optional<int64_t>> v = LedgerMark::Read(path);
        ASSERT_OK(v.status());
        ASSERT_TRUE(v->has_value());
        EXPECT_GE(**v, seq);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(mark.current(), 120);
}

TEST(DatabaseMarkTest, CreatedCaughtUpAndRefusedWhenBehind) {
  TempDir dir;
  const std::string db_path = dir.File("d.db");
  const std::string mark = dir.File("d.db.ledger-mark");
  {
    ASSERT_OK_AND_ASSIGN(auto db, Database::Open(db_path, WithMark(mark)));
    EXPECT_TRUE(db->ledger_mark_check().checked);
    EXPECT_FALSE(db->ledger_mark_check().mark_seq.has_value());
    ASSERT_OK_AND_ASSIGN(auto m, LedgerMark::Read(mark));
    EXPECT_EQ(m, 0);  // created at open
    ASSERT_OK(db->datasets().Import(Private("a"), "1 1:1\n-1 2:1\n"));
    ASSERT_OK_AND_ASSIGN(LedgerEntry e1, Charge(*db, "a"));
    ASSERT_OK_AND_ASSIGN(LedgerEntry e2, Charge(*db, "a"));
    EXPECT_EQ(e2.seq, e1.seq + 1);
    // The admission path advances the mark (server/job_manager.cc); a crash
    // before that leaves it behind the ledger.
    ASSERT_OK(db->ledger_mark()->Advance(e1.seq));
  }
  {
    // Mark behind the ledger (crash between commit and mark): accepted and
    // caught up.
    ASSERT_OK_AND_ASSIGN(auto db, Database::Open(db_path, WithMark(mark)));
    EXPECT_EQ(db->ledger_mark_check().mark_seq, 1);
    EXPECT_EQ(db->ledger_mark_check().ledger_seq, 2);
    EXPECT_FALSE(db->ledger_mark_check().rolled_back);
    ASSERT_OK_AND_ASSIGN(auto m, LedgerMark::Read(mark));
    EXPECT_EQ(m, 2);
  }
  // Mark ahead of the ledger (a rolled-back database): refused, nothing
  // changed.
  ASSERT_OK(LedgerMark::Write(mark, 5));
  EXPECT_THAT(
      Database::Open(db_path, WithMark(mark)),
      StatusIs(
          absl::StatusCode::kFailedPrecondition,
          AllOf(HasSubstr("ends at charge #2"), HasSubstr("records charge #5"),
                HasSubstr("--allow-ledger-rollback-respending-budget"))));
  ASSERT_OK_AND_ASSIGN(auto still, LedgerMark::Read(mark));
  EXPECT_EQ(still, 5);
  // Without a mark path nothing is checked (tools, storage tests).
  ASSERT_OK(Database::Open(db_path).status());
  // Forced: audited first, then the mark follows the ledger.
  {
    ASSERT_OK_AND_ASSIGN(auto db,
                         Database::Open(db_path, WithMark(mark, true)));
    EXPECT_TRUE(db->ledger_mark_check().rolled_back);
    ASSERT_OK_AND_ASSIGN(auto audit, db->access().ListAudit({}));
    ASSERT_FALSE(audit.empty());
    EXPECT_EQ(audit[0].method, "Server/AllowLedgerRollback");
    EXPECT_THAT(audit[0].detail,
                HasSubstr("rolled back from charge #5 to #2: 3 charge(s)"));
    ASSERT_OK_AND_ASSIGN(auto m, LedgerMark::Read(mark));
    EXPECT_EQ(m, 2);
    // New charges continue after the ledger's last one.
    ASSERT_OK_AND_ASSIGN(LedgerEntry e3, Charge(*db, "a"));
    EXPECT_EQ(e3.seq, 3);
  }
  // A malformed mark is refused; forced, it is reset.
  WriteFile(mark, "garbage");
  EXPECT_THAT(
      Database::Open(db_path, WithMark(mark)),
      StatusIs(absl::StatusCode::kDataLoss, HasSubstr("cannot tell whether")));
  ASSERT_OK_AND_ASSIGN(auto db, Database::Open(db_path, WithMark(mark, true)));
  EXPECT_TRUE(db->ledger_mark_check().mark_unreadable);
  ASSERT_OK_AND_ASSIGN(auto m, LedgerMark::Read(mark));
  EXPECT_EQ(m, 3);  // reset to the ledger's last charge, e3
}

TEST(FileLockTest, ExclusiveUntilReleased) {
  TempDir dir;
  const std::string path = dir.File("x.lock");
  ASSERT_OK_AND_ASSIGN(auto lock, FileLock::TryAcquire(path));
  EXPECT_THAT(
      FileLock::TryAcquire(path),
      StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("is locked")));
  lock.reset();
  ASSERT_OK(FileLock::TryAcquire(path).status());
}

TEST(BackupTest, OnlineBackupWhileChargingIsConsistent) {
  TempDir dir;
  const std::string db_path = dir.File("live.db");
  ASSERT_OK_AND_ASSIGN(auto db, Database::Open(db_path));
  ASSERT_OK(db->datasets().Import(Private("a"), "1 1:1\n-1 2:1\n"));
  // A writer charges continuously while backups are taken from another
  // connection (as `dpopt-server backup` does from another process).
  std::atomic<bool> stop{false};
  std::atomic<int> charged{0};
  std::thread writer([&] {
    while (!stop.load() && charged.load() < 2000) {
      if (Charge(*db, "a").ok()) ++charged;
    }
  });
  std::vector<int64_t> seen;
  for (int i = 0; i < 5; ++i) {
    while (charged.load() < 10 * (i + 1)) std::this_thread::yield();
    const std::string to = dir.File(absl::StrCat("b", i, ".db"));
    ASSERT_OK_AND_ASSIGN(DatabaseFileInfo info, BackupDatabase(db_path, to));
    EXPECT_EQ(info.path, to);
    // A snapshot: every charge has its job, and seqs are dense.
    EXPECT_EQ(info.charges, info.ledger_seq);
    EXPECT_EQ(info.jobs, info.charges);
    EXPECT_GE(info.ledger_seq, 10 * (i + 1));
    seen.push_back(info.ledger_seq);
    // The file is self-contained (no WAL needed) and a dpopt database.
    ASSERT_OK_AND_ASSIGN(DatabaseFileInfo again, InspectDatabaseFile(to));
    EXPECT_EQ(again.ledger_seq, info.ledger_seq);
    ASSERT_OK_AND_ASSIGN(auto copy, Database::Open(to));
    ASSERT_OK_AND_ASSIGN(auto entries, copy->ledger().List("a"));
    EXPECT_EQ(static_cast<int64_t>(entries.size()), info.charges);
  }
  stop = true;
  writer.join();
  EXPECT_TRUE(std::is_sorted(seen.begin(), seen.end()));
  // Never over an existing file.
  EXPECT_THAT(BackupDatabase(db_path, dir.File("b0.db")),
              StatusIs(absl::StatusCode::kAlreadyExists));
  EXPECT_THAT(BackupDatabase(dir.File("missing.db"), dir.File("z.db")),
              StatusIs(absl::StatusCode::kNotFound));
}

TEST(BackupTest, InspectRejectsDamagedAndForeignFiles) {
  TempDir dir;
  WriteFile(dir.File("junk"), std::string(8192, 'x'));
  EXPECT_THAT(InspectDatabaseFile(dir.File("junk")),
              StatusIs(absl::StatusCode::kDataLoss));
  EXPECT_THAT(InspectDatabaseFile(dir.File("absent")),
              StatusIs(absl::StatusCode::kNotFound));
  // A valid database with a damaged page: integrity_check catches it.
  const std::string db_path = dir.File("d.db");
  {
    ASSERT_OK_AND_ASSIGN(auto db, Database::Open(db_path));
    ASSERT_OK(db->datasets().Import(Private("a"), "1 1:1\n-1 2:1\n"));
    for (int i = 0; i < 50; ++i) ASSERT_OK(Charge(*db, "a").status());
  }
  ASSERT_OK(BackupDatabase(db_path, dir.File("good.db")).status());
  std::string bytes = ReadFileOrDie(dir.File("good.db"));
  ASSERT_GT(bytes.size(), 8192u);
  for (size_t i = bytes.size() - 4096 + 100; i < bytes.size() - 100; ++i) {
    bytes[i] = static_cast<char>(0x5a);
  }
  WriteFile(dir.File("bad.db"), bytes);
  EXPECT_THAT(InspectDatabaseFile(dir.File("bad.db")),
              StatusIs(absl::StatusCode::kDataLoss));
}

RestoreOptions Restore(const std::string& from, const std::string& db_path,
                       const std::string& mark, bool keep_old = false) {
  RestoreOptions o;
  o.from = from;
  o.db_path = db_path;
  o.ledger_mark_path = mark;
  o.keep_old = keep_old;
  return o;
}

TEST(RestoreTest, RestoresMovesAsideWithKeepOldAndRefusesUnderALock) {
  TempDir dir;
  const std::string db_path = dir.File("d.db");
  const std::string mark = dir.File("d.db.ledger-mark");
  {
    ASSERT_OK_AND_ASSIGN(auto db, Database::Open(db_path, WithMark(mark)));
    ASSERT_OK(db->datasets().Import(Private("a"), "1 1:1\n-1 2:1\n"));
    ASSERT_OK_AND_ASSIGN(LedgerEntry e, Charge(*db, "a"));
    ASSERT_OK(db->ledger_mark()->Advance(e.seq));
    ASSERT_OK(BackupDatabase(db_path, dir.File("old.db")).status());
    for (int i = 0; i < 3; ++i) {
      ASSERT_OK_AND_ASSIGN(LedgerEntry later, Charge(*db, "a"));
      ASSERT_OK(db->ledger_mark()->Advance(later.seq));
    }
  }
  {
    // A running server holds the lock: no restore under it.
    ASSERT_OK_AND_ASSIGN(auto lock,
                         FileLock::TryAcquire(DatabaseLockPath(db_path)));
    EXPECT_THAT(RestoreDatabase(Restore(dir.File("old.db"), db_path, mark)),
                StatusIs(absl::StatusCode::kFailedPrecondition));
  }
  EXPECT_THAT(RestoreDatabase(Restore(dir.File("none.db"), db_path, mark)),
              StatusIs(absl::StatusCode::kNotFound));
  ASSERT_OK_AND_ASSIGN(
      RestoreReport r,
      RestoreDatabase(Restore(dir.File("old.db"), db_path, mark, true)));
  EXPECT_TRUE(r.removed.empty());
  EXPECT_EQ(r.restored.ledger_seq, 1);
  EXPECT_EQ(r.mark_seq, 4);
  ASSERT_FALSE(r.moved_aside.empty());
  // The replaced database is kept, complete.
  ASSERT_OK_AND_ASSIGN(DatabaseFileInfo before,
                       InspectDatabaseFile(r.moved_aside[0]));
  EXPECT_EQ(before.ledger_seq, 4);
  // The restored ledger is behind the untouched mark: refused, unless forced.
  EXPECT_THAT(Database::Open(db_path, WithMark(mark)),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("3 charge(s)")));
  ASSERT_OK_AND_ASSIGN(auto db, Database::Open(db_path, WithMark(mark, true)));
  ASSERT_OK_AND_ASSIGN(auto entries, db->ledger().List("a"));
  EXPECT_EQ(entries.size(), 1u);
}

}  // namespace
}  // namespace dpopt::storage
