// Deleted datasets stay deleted: the deletion record beside the database
// (storage/deletion_record.h), its replay when an older backup is restored
// or opened, the pending WAL truncation the checkpointer retries
// (storage/checkpointer.h), the tombstone's cleared statistics, the one
// indexed visibility query (AccessStore::DatasetVisibleTo) and the grant
// re-check inside the admission transaction (ChargeRequest::require_grant).
#include <sys/stat.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "core/common/status_macros.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "storage/backup.h"
#include "storage/checkpointer.h"
#include "storage/database.h"
#include "storage/deletion_record.h"
#include "storage/file_util.h"
#include "tests/common/status_matchers.h"
#include "tests/storage/storage_test_util.h"

namespace dpopt::storage {
namespace {

using ::dpopt::storage::testing::ReadFileOrDie;
using ::dpopt::storage::testing::TempDir;
using ::dpopt::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// A value no other row, page or record holds: its 8 bytes are searched for
// in the database files.
constexpr double kCanary = 271828.18284590452;
constexpr char kCanaryFeature[] = "canary_feature_name_q7x";

std::string CanaryBytes() {
  std::string bytes(sizeof(double), '\0');
  std::memcpy(bytes.data(), &kCanary, sizeof(double));
  return bytes;
}

// Whether `path` (if it exists) holds the canary's bytes or feature name.
bool HoldsCanary(const std::string& path) {
  if (!std::filesystem::exists(path)) return false;
  const std::string bytes = ReadFileOrDie(path);
  return absl::StrContains(bytes, CanaryBytes()) ||
         absl::StrContains(bytes, kCanaryFeature);
}

bool DatabaseHoldsCanary(const std::string& db_path) {
  return HoldsCanary(db_path) || HoldsCanary(db_path + "-wal");
}

// Dense CSV, 2 features: `rows` rows, each with the canary as first value.
std::string CanaryCsv(int rows) {
  std::string out;
  for (int i = 0; i < rows; ++i) {
    absl::StrAppend(&out, absl::StrFormat("%.17g", kCanary), ",", i % 7, ",",
                    i % 2 == 0 ? "1" : "-1", "\n");
  }
  return out;
}

ImportOptions SecretOptions(const std::string& name) {
  ImportOptions o = testing::Csv(name, 2);
  o.feature_names = {kCanaryFeature, "other"};
  return o;
}

Database::Options WithRecord(const std::string& record) {
  Database::Options o;
  o.deletion_record_path = record;
  return o;
}

int64_t FileMode(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return -1;
  return st.st_mode & 0777;
}

// Every file in `dir` (none may be readable by group or others).
std::vector<std::string> Files(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    out.push_back(e.path().filename().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<std::string> ReapplyAudits(Database& db) {
  std::vector<std::string> out;
  AuditFilter filter;
  auto records = db.access().ListAudit(filter);
  EXPECT_TRUE(records.ok()) << records.status();
  if (!records.ok()) return out;
  for (const AuditRecord& r : *records) {
    if (r.method == "Server/ReapplyDeletion") out.push_back(r.dataset);
  }
  return out;
}

TEST(DeletionRecordTest, RoundTripsAndRefusesMalformedFiles) {
  TempDir dir;
  const std::string path = dir.File("r");
  ASSERT_OK_AND_ASSIGN(std::vector<DeletionEntry> none,
                       DeletionRecord::Read(path));
  EXPECT_TRUE(none.empty());
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<DeletionRecord> record,
                       DeletionRecord::Load(path));
  DeletionEntry a{3, 100, 200, "a name with spaces\n"};
  DeletionEntry b{7, 300, 400, "b"};
  ASSERT_OK(record->Add(a));
  ASSERT_OK(record->Add(b));
  EXPECT_EQ(FileMode(path), 0600);
  ASSERT_OK_AND_ASSIGN(std::vector<DeletionEntry> read,
                       DeletionRecord::Read(path));
  ASSERT_EQ(read.size(), 2u);
  EXPECT_EQ(read[0].dataset_id, 3);
  EXPECT_EQ(read[0].created_at_micros, 100);
  EXPECT_EQ(read[0].deleted_at_micros, 200);
  EXPECT_EQ(read[0].name, a.name);
  EXPECT_EQ(read[1].name, "b");
  ASSERT_OK(record->Remove(3));
  ASSERT_OK_AND_ASSIGN(read, DeletionRecord::Read(path));
  ASSERT_EQ(read.size(), 1u);
  EXPECT_EQ(read[0].dataset_id, 7);

  EXPECT_EQ(DeletionRecord::DefaultPath("/v/dpopt.db.ledger-mark"),
            "/v/dpopt.db.deletions");
  EXPECT_EQ(DeletionRecord::DefaultPath("/elsewhere/mark"),
            "/elsewhere/mark.deletions");

  for (const char* bad :
       {"", "dpopt-deletions v1", "dpopt-deletions v2\n",
        "dpopt-deletions v1\ndataset id=1 created_at=2 deleted_at=3\n",
        "dpopt-deletions v1\ndataset id=-1 created_at=2 deleted_at=3 name=61\n",
        "dpopt-deletions v1\ndataset id=1 created_at=2 deleted_at=3 name=6\n",
        "dpopt-deletions v1\ndataset id=1 created_at=2 deleted_at=3 "
        "name=zz\n"}) {
    ASSERT_OK(WriteFileDurably(path, bad));
    EXPECT_THAT(DeletionRecord::Read(path),
                StatusIs(absl::StatusCode::kDataLoss))
        << bad;
    EXPECT_THAT(Database::Open(dir.File("x.db"), WithRecord(path)),
                StatusIs(absl::StatusCode::kDataLoss));
  }
}

TEST(DeletionTest, DeleteRecordsTheDatasetAndClearsItsStatistics) {
  TempDir dir;
  const std::string db_path = dir.File("d.db");
  const std::string record = dir.File("d.db.deletions");
  ASSERT_OK_AND_ASSIGN(auto db, Database::Open(db_path, WithRecord(record)));
  ASSERT_OK_AND_ASSIGN(
      DatasetRecord imported,
      db->datasets().Import(SecretOptions("secret"), CanaryCsv(5000)));
  EXPECT_EQ(imported.nonzeros, 10000);
  ASSERT_OK_AND_ASSIGN(DeletedDataset d, db->datasets().Delete("secret"));
  EXPECT_FALSE(d.wal_truncation_pending);
  EXPECT_EQ(d.record.nonzeros, 0);
  ASSERT_OK_AND_ASSIGN(
      int64_t nonzeros,
      DatabaseTestPeer::QueryInt(
          *db, "SELECT nonzeros FROM datasets WHERE name = 'secret'"));
  EXPECT_EQ(nonzeros, 0);
  ASSERT_OK_AND_ASSIGN(bool pending, db->datasets().WalTruncationPending());
  EXPECT_FALSE(pending);
  EXPECT_FALSE(DatabaseHoldsCanary(db_path));
  ASSERT_OK_AND_ASSIGN(std::vector<DeletionEntry> entries,
                       DeletionRecord::Read(record));
  ASSERT_EQ(entries.size(), 1u);
  EXPECT_EQ(entries[0].dataset_id, imported.id);
  EXPECT_EQ(entries[0].created_at_micros, imported.created_at_micros);
  EXPECT_EQ(entries[0].deleted_at_micros, d.record.deleted_at_micros);
  EXPECT_EQ(entries[0].name, "secret");
  EXPECT_EQ(FileMode(record), 0600);
}

TEST(DeletionTest, RestoringAnOlderBackupDoesNotBringADeletedDatasetBack) {
  TempDir dir;
  const std::string db_path = dir.File("d.db");
  const std::string record = dir.File("d.db.deletions");
  const std::string backup = dir.File("before-delete.backup");
  {
    ASSERT_OK_AND_ASSIGN(auto db, Database::Open(db_path, WithRecord(record)));
    ASSERT_OK(db->datasets()
                  .Import(SecretOptions("secret"), CanaryCsv(5000))
                  .status());
    ASSERT_OK(db->datasets()
                  .Import(testing::Csv("kept", 2), "1,2,1\n3,4,-1\n")
                  .status());
    ASSERT_OK(BackupDatabase(db_path, backup).status());
    ASSERT_OK(db->datasets().Delete("secret").status());
  }
  // The test is meaningful: the backup holds the rows, the database not.
  ASSERT_TRUE(HoldsCanary(backup));
  ASSERT_FALSE(DatabaseHoldsCanary(db_path));

  RestoreOptions restore;
  restore.from = backup;
  restore.db_path = db_path;
  restore.deletion_record_path = record;
  ASSERT_OK_AND_ASSIGN(RestoreReport r, RestoreDatabase(restore));
  ASSERT_EQ(r.reapplied_deletions.size(), 1u);
  EXPECT_EQ(r.reapplied_deletions[0].name, "secret");
  EXPECT_TRUE(r.moved_aside.empty());
  EXPECT_EQ(r.removed.size(), 1u);  // the old database (its WAL was empty)
  // Erased before the restored file took the database's place.
  EXPECT_FALSE(DatabaseHoldsCanary(db_path));
  // Nothing left behind but the restored database, the backup, the record
  // and the lock; everything owner-only.
  EXPECT_THAT(Files(dir.path()), ElementsAre("before-delete.backup", "d.db",
                                             "d.db.deletions", "d.db.lock"));
  for (const std::string& f : Files(dir.path())) {
    EXPECT_EQ(FileMode(dir.File(f)) & 077, 0) << f;
  }

  ASSERT_OK_AND_ASSIGN(auto db, Database::Open(db_path, WithRecord(record)));
  EXPECT_TRUE(db->reapplied_deletions().empty());  // done by the restore
  EXPECT_THAT(db->datasets().Get("secret"),
              StatusIs(absl::StatusCode::kNotFound,
                       HasSubstr("dataset \"secret\" not found")));
  EXPECT_FALSE(db->datasets().Load("secret").ok());
  ASSERT_OK(db->datasets().Load("kept").status());
  EXPECT_THAT(ReapplyAudits(*db), ElementsAre("secret"));
  ASSERT_OK_AND_ASSIGN(
      int64_t blocks,
      DatabaseTestPeer::QueryInt(*db, "SELECT count(*) FROM dataset_blocks"));
  EXPECT_EQ(blocks, 1);  // kept's
}

TEST(DeletionTest, KeepOldKeepsThePreviousFilesOwnerOnly) {
  TempDir dir;
  const std::string db_path = dir.File("d.db");
  const std::string record = dir.File("d.db.deletions");
  {
    ASSERT_OK_AND_ASSIGN(auto db, Database::Open(db_path, WithRecord(record)));
    ASSERT_OK(db->datasets().Import(testing::Csv("a", 2), "1,2,1\n").status());
    ASSERT_OK(BackupDatabase(db_path, dir.File("b.backup")).status());
  }
  RestoreOptions restore;
  restore.from = dir.File("b.backup");
  restore.db_path = db_path;
  restore.deletion_record_path = record;
  restore.keep_old = true;
  ASSERT_OK_AND_ASSIGN(RestoreReport r, RestoreDatabase(restore));
  ASSERT_EQ(r.moved_aside.size(), 1u);
  EXPECT_TRUE(r.removed.empty());
  EXPECT_THAT(r.moved_aside[0], HasSubstr("d.db.pre-restore-"));
  for (const std::string& f : Files(dir.path())) {
    EXPECT_EQ(FileMode(dir.File(f)) & 077, 0) << f;
  }
}

TEST(DeletionTest, OpeningAnOlderCopyErasesRecordedDatasetsAndAuditsIt) {
  // A copy of an older backup put in place by hand (no `restore`): the
  // server's open erases the recorded dataset before anything is served.
  TempDir dir;
  const std::string db_path = dir.File("d.db");
  const std::string record = dir.File("d.db.deletions");
  const std::string backup = dir.File("b.backup");
  int64_t created_at = 0;
  {
    ASSERT_OK_AND_ASSIGN(auto db, Database::Open(db_path, WithRecord(record)));
    ASSERT_OK_AND_ASSIGN(
        DatasetRecord rec,
        db->datasets().Import(SecretOptions("secret"), CanaryCsv(3000)));
    created_at = rec.created_at_micros;
    ASSERT_OK(BackupDatabase(db_path, backup).status());
    ASSERT_OK(db->datasets().Delete("secret").status());
  }
  std::filesystem::remove(db_path);
  std::filesystem::copy_file(backup, db_path);
  ASSERT_TRUE(HoldsCanary(db_path));
  ASSERT_OK_AND_ASSIGN(auto db, Database::Open(db_path, WithRecord(record)));
  ASSERT_EQ(db->reapplied_deletions().size(), 1u);
  EXPECT_EQ(db->reapplied_deletions()[0].created_at_micros, created_at);
  EXPECT_THAT(db->datasets().Get("secret"),
              StatusIs(absl::StatusCode::kNotFound));
  EXPECT_THAT(ReapplyAudits(*db), ElementsAre("secret"));
  ASSERT_OK_AND_ASSIGN(
      AuditChainReport chain,
      DatabaseTestPeer::WithConnection(*db, [](Connection& conn) {
        return AccessStore::VerifyAuditChain(conn);
      }));
  EXPECT_TRUE(chain.ok());
  EXPECT_FALSE(DatabaseHoldsCanary(db_path));
  db.reset();
  // Idempotent: the next open finds nothing to erase.
  ASSERT_OK_AND_ASSIGN(db, Database::Open(db_path, WithRecord(record)));
  EXPECT_TRUE(db->reapplied_deletions().empty());
}

TEST(DeletionTest, ADifferentDatasetWithTheSameIdIsNotTouched) {
  TempDir dir;
  const std::string record = dir.File("r");
  DeletionRecord::Write(record, {{1, 12345, 67890, "other"}}).IgnoreError();
  ASSERT_OK_AND_ASSIGN(auto db,
                       Database::Open(dir.File("d.db"), WithRecord(record)));
  ASSERT_OK(db->datasets().Import(testing::Csv("mine", 2), "1,2,1\n").status());
  db.reset();
  ASSERT_OK_AND_ASSIGN(db,
                       Database::Open(dir.File("d.db"), WithRecord(record)));
  EXPECT_TRUE(db->reapplied_deletions().empty());
  ASSERT_OK(db->datasets().Get("mine").status());
}

TEST(DeletionTest, APendingWalTruncationIsRetriedUntilItCompletes) {
  TempDir dir;
  const std::string db_path = dir.File("d.db");
  Database::Options options = WithRecord(dir.File("d.db.deletions"));
  options.wal_truncate_wait = absl::Milliseconds(300);
  ASSERT_OK_AND_ASSIGN(auto db, Database::Open(db_path, options));
  ASSERT_OK(
      db->datasets().Import(SecretOptions("secret"), CanaryCsv(5000)).status());
  // A reader that keeps using the WAL (a long query, a backup in progress).
  ConnectionOptions reader_options;
  reader_options.create_if_missing = false;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Connection> reader,
                       Connection::Open(db_path, reader_options));
  ASSERT_OK(reader->Execute("BEGIN; SELECT count(*) FROM dataset_blocks;"));

  ASSERT_OK_AND_ASSIGN(DeletedDataset d, db->datasets().Delete("secret"));
  EXPECT_TRUE(d.wal_truncation_pending);
  ASSERT_OK_AND_ASSIGN(bool pending, db->datasets().WalTruncationPending());
  EXPECT_TRUE(pending);
  EXPECT_TRUE(db->checkpointer().truncate_pending());
  // The rows are gone from the tables at once.
  EXPECT_THAT(db->datasets().Get("secret"),
              StatusIs(absl::StatusCode::kNotFound));
  // Still busy: the retries do not give up.
  absl::SleepFor(absl::Milliseconds(1500));
  EXPECT_TRUE(db->checkpointer().truncate_pending());
  EXPECT_GE(db->checkpointer().stats().truncate_attempts, 1);

  ASSERT_OK(reader->Execute("COMMIT"));
  reader.reset();
  const absl::Time released = absl::Now();
  const absl::Time deadline = released + absl::Seconds(20);
  while (db->checkpointer().truncate_pending() && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(50));
  }
  EXPECT_FALSE(db->checkpointer().truncate_pending());
  EXPECT_EQ(db->checkpointer().stats().truncations, 1);
  std::cout << "[figure] truncation completed "
            << absl::ToDoubleMilliseconds(absl::Now() - released)
            << " ms after the reader ended, after "
            << db->checkpointer().stats().truncate_attempts << " attempts"
            << std::endl;
  ASSERT_OK_AND_ASSIGN(pending, db->datasets().WalTruncationPending());
  EXPECT_FALSE(pending);
  EXPECT_FALSE(DatabaseHoldsCanary(db_path));
}

TEST(DeletionTest, APendingTruncationSurvivesARestart) {
  TempDir dir;
  const std::string db_path = dir.File("d.db");
  Database::Options options = WithRecord(dir.File("d.db.deletions"));
  options.wal_truncate_wait = absl::ZeroDuration();
  ConnectionOptions reader_options;
  reader_options.create_if_missing = false;
  std::unique_ptr<Connection> reader;
  {
    ASSERT_OK_AND_ASSIGN(auto db, Database::Open(db_path, options));
    ASSERT_OK(db->datasets()
                  .Import(SecretOptions("secret"), CanaryCsv(3000))
                  .status());
    ASSERT_OK_AND_ASSIGN(reader, Connection::Open(db_path, reader_options));
    ASSERT_OK(reader->Execute("BEGIN; SELECT count(*) FROM dataset_blocks;"));
    ASSERT_OK_AND_ASSIGN(DeletedDataset d, db->datasets().Delete("secret"));
    EXPECT_TRUE(d.wal_truncation_pending);
    // The server stops (or dies) before the retry succeeds: the flag is in
    // the database, committed with the deletion.
  }
  {
    ASSERT_OK_AND_ASSIGN(auto db, Database::Open(db_path, options));
    EXPECT_TRUE(db->checkpointer().truncate_pending());
    ASSERT_OK(reader->Execute("COMMIT"));
    reader.reset();
    const absl::Time deadline = absl::Now() + absl::Seconds(20);
    while (db->checkpointer().truncate_pending() && absl::Now() < deadline) {
      absl::SleepFor(absl::Milliseconds(50));
    }
    EXPECT_FALSE(db->checkpointer().truncate_pending());
    ASSERT_OK_AND_ASSIGN(bool pending, db->datasets().WalTruncationPending());
    EXPECT_FALSE(pending);
    EXPECT_FALSE(DatabaseHoldsCanary(db_path));
  }
}

// ------------------------------------------------------------ visibility

TEST(VisibilityTest, OneIndexedQueryDecides) {
  TempDir dir;
  ASSERT_OK_AND_ASSIGN(auto db, Database::Open(dir.File("d.db")));
  ASSERT_OK(db->access().CreatePrincipal("alice", Role::kAnalyst).status());
  ASSERT_OK(db->access().CreatePrincipal("bob", Role::kAnalyst).status());
  ASSERT_OK(
      db->datasets().Import(testing::Csv("granted", 2), "1,2,1\n").status());
  ASSERT_OK(
      db->datasets().Import(testing::Csv("ungranted", 2), "1,2,1\n").status());
  ImportOptions pub = testing::Csv("public", 2);
  pub.is_public = true;
  pub.epsilon_budget = 0;
  pub.delta_budget = 0;
  ASSERT_OK(db->datasets().Import(pub, "1,2,1\n").status());
  ASSERT_OK(db->datasets().Import(testing::Csv("gone", 2), "1,2,1\n").status());
  ASSERT_OK(db->access().Grant("alice", "granted", 0).status());
  ASSERT_OK(db->access().Grant("alice", "gone", 0).status());
  ASSERT_OK(db->datasets().Delete("gone").status());

  auto visible = [&](const char* who, const char* what) {
    absl::StatusOr<bool> v = db->access().DatasetVisibleTo(who, what);
    EXPECT_TRUE(v.ok()) << v.status();
    return v.ok() && *v;
  };
  EXPECT_TRUE(visible("alice", "granted"));
  EXPECT_TRUE(visible("alice", "public"));
  EXPECT_TRUE(visible("bob", "public"));
  EXPECT_FALSE(visible("alice", "ungranted"));
  EXPECT_FALSE(visible("bob", "granted"));
  EXPECT_FALSE(visible("alice", "missing"));
  EXPECT_FALSE(visible("alice", "gone"));
  EXPECT_FALSE(visible("nobody", "granted"));

  // The plan: index lookups only, no table scan ("SCAN CONSTANT ROW" is
  // the outer SELECT EXISTS of no table).
  std::vector<std::string> plan;
  ASSERT_OK(DatabaseTestPeer::WithConnection(
      *db, [&](Connection& conn) -> absl::Status {
        ASSIGN_OR_RETURN(Statement st, conn.Prepare(absl::StrCat(
                                           "EXPLAIN QUERY PLAN ",
                                           AccessStore::kVisibilitySql)));
        for (;;) {
          ASSIGN_OR_RETURN(bool row, st.Step());
          if (!row) return absl::OkStatus();
          plan.push_back(st.ColumnText(3));
        }
      }));
  ASSERT_FALSE(plan.empty());
  for (const std::string& step : plan) {
    if (step == "SCAN CONSTANT ROW") continue;
    EXPECT_FALSE(absl::StartsWith(step, "SCAN")) << step;
  }
}

TEST(VisibilityTest, AGrantRevokedBeforeTheChargeAdmitsNothing) {
  TempDir dir;
  ASSERT_OK_AND_ASSIGN(auto db, Database::Open(dir.File("d.db")));
  ASSERT_OK(db->access().CreatePrincipal("alice", Role::kAnalyst).status());
  ASSERT_OK(db->datasets().Import(testing::Csv("d", 2), "1,2,1\n").status());
  ASSERT_OK(db->access().Grant("alice", "d", 0).status());
  ChargeRequest c;
  c.dataset = "d";
  c.event_json = "{}";
  c.accountant = "rdp";
  c.cost_blob = "blob";
  c.epsilon = 0.1;
  c.principal = "alice";
  c.require_grant = true;
  JobRecord j;
  j.dataset = "d";
  j.principal = "alice";
  j.spec = "spec";
  j.steps_total = 1;
  auto admit_all = [](const DatasetRecord&, const std::vector<std::string>&) {
    return absl::OkStatus();
  };
  ASSERT_OK(db->ledger().ChargeAndCreateJob(c, j, admit_all).status());
  ASSERT_OK(db->access().RevokeGrant("alice", "d"));
  EXPECT_THAT(db->ledger().ChargeAndCreateJob(c, j, admit_all),
              StatusIs(absl::StatusCode::kNotFound,
                       HasSubstr("dataset \"d\" not found")));
  ASSERT_OK_AND_ASSIGN(std::vector<LedgerEntry> entries,
                       db->ledger().List("d"));
  EXPECT_EQ(entries.size(), 1u);
  ASSERT_OK_AND_ASSIGN(int64_t jobs, DatabaseTestPeer::QueryInt(
                                         *db, "SELECT count(*) FROM jobs"));
  EXPECT_EQ(jobs, 1);
  // A curator's charge (require_grant false) needs no grant.
  c.principal = "curator";
  c.require_grant = false;
  j.principal = "curator";
  ASSERT_OK(db->ledger().ChargeAndCreateJob(c, j, admit_all).status());
}

}  // namespace
}  // namespace dpopt::storage
