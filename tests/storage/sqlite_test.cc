#include "storage/sqlite.h"

#include <sqlite3.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "storage/database.h"
#include "storage/schema.h"
#include "tests/common/status_matchers.h"
#include "tests/storage/storage_test_util.h"

namespace dpopt::storage {
namespace {

using ::dpopt::storage::testing::TempDir;
using ::dpopt::testing::StatusIs;
using ::testing::HasSubstr;

std::unique_ptr<Connection> OpenOrDie(const std::string& path,
                                      int busy_timeout_ms = 1000) {
  ConnectionOptions options;
  options.busy_timeout_ms = busy_timeout_ms;
  auto conn = Connection::Open(path, options);
  EXPECT_TRUE(conn.ok()) << conn.status();
  return conn.ok() ? std::move(*conn) : nullptr;
}

int64_t QueryInt(Connection& conn, absl::string_view sql) {
  auto st = conn.Prepare(sql);
  EXPECT_TRUE(st.ok()) << st.status();
  auto row = st->Step();
  EXPECT_TRUE(row.ok() && *row);
  return st->ColumnInt64(0);
}

std::string QueryText(Connection& conn, absl::string_view sql) {
  auto st = conn.Prepare(sql);
  EXPECT_TRUE(st.ok()) << st.status();
  auto row = st->Step();
  EXPECT_TRUE(row.ok() && *row);
  return st->ColumnText(0);
}

struct CodeCase {
  int code;
  absl::StatusCode expected;
};

class SqliteStatusTest : public ::testing::TestWithParam<CodeCase> {};

TEST_P(SqliteStatusTest, MapsCode) {
  EXPECT_EQ(SqliteStatus(GetParam().code, "ctx").code(), GetParam().expected);
}

INSTANTIATE_TEST_SUITE_P(
    Codes, SqliteStatusTest,
    ::testing::Values(
        CodeCase{SQLITE_OK, absl::StatusCode::kOk},
        CodeCase{SQLITE_DONE, absl::StatusCode::kOk},
        CodeCase{SQLITE_BUSY, absl::StatusCode::kUnavailable},
        CodeCase{SQLITE_BUSY_SNAPSHOT, absl::StatusCode::kUnavailable},
        CodeCase{SQLITE_LOCKED, absl::StatusCode::kUnavailable},
        CodeCase{SQLITE_CORRUPT, absl::StatusCode::kDataLoss},
        CodeCase{SQLITE_NOTADB, absl::StatusCode::kDataLoss},
        CodeCase{SQLITE_CONSTRAINT_UNIQUE, absl::StatusCode::kAlreadyExists},
        CodeCase{SQLITE_CONSTRAINT_PRIMARYKEY,
                 absl::StatusCode::kAlreadyExists},
        CodeCase{SQLITE_CONSTRAINT_TRIGGER,
                 absl::StatusCode::kFailedPrecondition},
        CodeCase{SQLITE_CONSTRAINT_FOREIGNKEY,
                 absl::StatusCode::kFailedPrecondition},
        CodeCase{SQLITE_FULL, absl::StatusCode::kUnavailable},
        CodeCase{SQLITE_IOERR_FSYNC, absl::StatusCode::kUnavailable},
        CodeCase{SQLITE_READONLY, absl::StatusCode::kFailedPrecondition},
        CodeCase{SQLITE_MISUSE, absl::StatusCode::kInternal}));

TEST(ConnectionTest, OpensWithWalForeignKeysAndFullSync) {
  TempDir dir;
  auto conn = OpenOrDie(dir.File("a.db"));
  ASSERT_NE(conn, nullptr);
  EXPECT_EQ(QueryText(*conn, "PRAGMA journal_mode"), "wal");
  EXPECT_EQ(QueryInt(*conn, "PRAGMA foreign_keys"), 1);
  EXPECT_EQ(QueryInt(*conn, "PRAGMA synchronous"), 2);  // FULL
  EXPECT_EQ(QueryInt(*conn, "PRAGMA busy_timeout"), 1000);
}

TEST(ConnectionTest, CachedStatementsAreResetAndIndependent) {
  TempDir dir;
  auto conn = OpenOrDie(dir.File("a.db"));
  ASSERT_NE(conn, nullptr);
  ASSERT_OK(conn->Execute("CREATE TABLE t(a INTEGER)"));
  const char kInsert[] = "INSERT INTO t(a) VALUES(?)";
  const char kSum[] = "SELECT count(*), total(a), ? FROM t";
  for (int i = 1; i <= 3; ++i) {  // the same text, reused from the cache
    ASSERT_OK_AND_ASSIGN(Statement ins, conn->Prepare(kInsert));
    ASSERT_OK(ins.BindInt64(1, i));
    ASSERT_OK(ins.Run());
  }
  {
    ASSERT_OK_AND_ASSIGN(Statement a, conn->Prepare(kSum));
    ASSERT_OK(a.BindInt64(1, 7));
    ASSERT_OK_AND_ASSIGN(bool row, a.Step());
    ASSERT_TRUE(row);
    // A second live statement of the same text is a different one, and an
    // earlier statement's bindings do not leak into a later one.
    ASSERT_OK_AND_ASSIGN(Statement b, conn->Prepare(kSum));
    ASSERT_OK_AND_ASSIGN(bool row_b, b.Step());
    ASSERT_TRUE(row_b);
    EXPECT_TRUE(b.ColumnIsNull(2));
    EXPECT_EQ(a.ColumnInt64(0), 3);
    EXPECT_EQ(a.ColumnInt64(2), 7);
  }
  {
    ASSERT_OK_AND_ASSIGN(Statement c, conn->Prepare(kSum));
    ASSERT_OK_AND_ASSIGN(bool row, c.Step());
    ASSERT_TRUE(row);
    EXPECT_TRUE(c.ColumnIsNull(2));  // bindings cleared on reuse
    EXPECT_EQ(c.ColumnDouble(1), 6.0);
  }
  // A schema change recompiles cached statements transparently.
  ASSERT_OK(conn->Execute("ALTER TABLE t ADD COLUMN b INTEGER DEFAULT 5"));
  EXPECT_EQ(QueryInt(*conn, "SELECT count(*) FROM t"), 3);
  {
    ASSERT_OK_AND_ASSIGN(Statement ins, conn->Prepare(kInsert));
    ASSERT_OK(ins.BindInt64(1, 4));
    ASSERT_OK(ins.Run());
  }
  EXPECT_EQ(QueryInt(*conn, "SELECT count(*) FROM t"), 4);
  // A finished read releases its snapshot: another connection's write is
  // visible to the next use of the cached statement.
  auto other = OpenOrDie(dir.File("a.db"));
  ASSERT_OK(other->Execute("INSERT INTO t(a) VALUES(10)"));
  EXPECT_EQ(QueryInt(*conn, "SELECT count(*) FROM t"), 5);
  // Closing with statements in the cache releases the file: it can be
  // removed and recreated.
  conn.reset();
  other.reset();
  ASSERT_TRUE(std::filesystem::remove(dir.File("a.db")));
  auto again = OpenOrDie(dir.File("a.db"));
  EXPECT_EQ(QueryInt(*again, "SELECT count(*) FROM sqlite_master"), 0);
}

TEST(ConnectionTest, MissingFileWithoutCreateIsNotFound) {
  TempDir dir;
  ConnectionOptions options;
  options.create_if_missing = false;
  EXPECT_THAT(Connection::Open(dir.File("missing.db"), options),
              StatusIs(absl::StatusCode::kNotFound));
}

TEST(ConnectionTest, NonDatabaseFileIsDataLoss) {
  TempDir dir;
  const std::string path = dir.File("garbage.db");
  {
    std::ofstream out(path, std::ios::binary);
    for (int i = 0; i < 200; ++i) out << "this is not a sqlite file ";
  }
  EXPECT_THAT(Connection::Open(path, ConnectionOptions()),
              StatusIs(absl::StatusCode::kDataLoss));
}

TEST(ConnectionTest, RejectsBadOptionsAndPath) {
  ConnectionOptions options;
  options.busy_timeout_ms = -1;
  EXPECT_THAT(Connection::Open("/tmp/x.db", options),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(Connection::Open("", ConnectionOptions()),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(StatementTest, BindAndColumnRoundTrip) {
  TempDir dir;
  auto conn = OpenOrDie(dir.File("a.db"));
  ASSERT_OK(
      conn->Execute("CREATE TABLE t(i INTEGER, d REAL, s TEXT, b BLOB, "
                    "n BLOB, e BLOB)"));
  ASSERT_OK_AND_ASSIGN(Statement ins,
                       conn->Prepare("INSERT INTO t VALUES(?, ?, ?, ?, ?, ?)"));
  const std::string blob("a\0b\xff", 4);
  ASSERT_OK(ins.BindInt64(1, -(int64_t{1} << 40)));
  ASSERT_OK(ins.BindDouble(2, 0.1));
  ASSERT_OK(ins.BindText(3, "héllo"));
  ASSERT_OK(ins.BindBlob(4, blob));
  ASSERT_OK(ins.BindNull(5));
  ASSERT_OK(ins.BindBlob(6, ""));
  ASSERT_OK(ins.Run());
  EXPECT_EQ(conn->Changes(), 1);
  EXPECT_EQ(conn->LastInsertRowId(), 1);

  ASSERT_OK_AND_ASSIGN(Statement sel, conn->Prepare("SELECT * FROM t"));
  ASSERT_OK_AND_ASSIGN(bool row, sel.Step());
  ASSERT_TRUE(row);
  EXPECT_EQ(sel.ColumnInt64(0), -(int64_t{1} << 40));
  EXPECT_EQ(sel.ColumnDouble(1), 0.1);
  EXPECT_EQ(sel.ColumnText(2), "héllo");
  EXPECT_EQ(sel.ColumnBlob(3), blob);
  EXPECT_TRUE(sel.ColumnIsNull(4));
  EXPECT_FALSE(sel.ColumnIsNull(5));  // empty blob is not NULL
  EXPECT_EQ(sel.ColumnBlob(5), "");
  ASSERT_OK_AND_ASSIGN(row, sel.Step());
  EXPECT_FALSE(row);
}

TEST(StatementTest, ResetRerunsWithNewBindings) {
  TempDir dir;
  auto conn = OpenOrDie(dir.File("a.db"));
  ASSERT_OK(conn->Execute("CREATE TABLE t(i INTEGER)"));
  ASSERT_OK_AND_ASSIGN(Statement ins, conn->Prepare("INSERT INTO t VALUES(?)"));
  for (int i = 1; i <= 3; ++i) {
    ASSERT_OK(ins.Reset());
    ASSERT_OK(ins.BindInt64(1, i));
    ASSERT_OK(ins.Run());
  }
  EXPECT_EQ(QueryInt(*conn, "SELECT sum(i) FROM t"), 6);
}

TEST(StatementTest, PrepareRejectsMultipleStatementsAndBadSql) {
  TempDir dir;
  auto conn = OpenOrDie(dir.File("a.db"));
  EXPECT_THAT(conn->Prepare("SELECT 1; SELECT 2"),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(conn->Prepare("   "),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_OK(conn->Prepare("SELECT 1;"));
  EXPECT_THAT(conn->Prepare("SELEC 1"), StatusIs(absl::StatusCode::kInternal));
}

TEST(StatementTest, ConstraintErrorsAreMapped) {
  TempDir dir;
  auto conn = OpenOrDie(dir.File("a.db"));
  ASSERT_OK(
      conn->Execute("CREATE TABLE p(id INTEGER PRIMARY KEY, name TEXT UNIQUE);"
                    "CREATE TABLE c(pid INTEGER NOT NULL REFERENCES p(id));"
                    "INSERT INTO p VALUES(1, 'x');"));
  EXPECT_THAT(conn->Execute("INSERT INTO p VALUES(2, 'x')"),
              StatusIs(absl::StatusCode::kAlreadyExists, HasSubstr("UNIQUE")));
  EXPECT_THAT(conn->Execute("INSERT INTO c VALUES(7)"),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("FOREIGN KEY")));
  ASSERT_OK_AND_ASSIGN(Statement st, conn->Prepare("INSERT INTO c VALUES(?)"));
  ASSERT_OK(st.BindInt64(1, 9));
  EXPECT_THAT(st.Run(), StatusIs(absl::StatusCode::kFailedPrecondition));
}

TEST(TransactionTest, RollsBackInDestructorUnlessCommitted) {
  TempDir dir;
  auto conn = OpenOrDie(dir.File("a.db"));
  ASSERT_OK(conn->Execute("CREATE TABLE t(i INTEGER)"));
  {
    Transaction txn(*conn);
    ASSERT_OK(txn.Begin(Transaction::Mode::kImmediate));
    ASSERT_OK(conn->Execute("INSERT INTO t VALUES(1)"));
    EXPECT_TRUE(conn->InTransaction());
  }  // no Commit
  EXPECT_FALSE(conn->InTransaction());
  EXPECT_EQ(QueryInt(*conn, "SELECT count(*) FROM t"), 0);
  {
    Transaction txn(*conn);
    ASSERT_OK(txn.Begin(Transaction::Mode::kDeferred));
    ASSERT_OK(conn->Execute("INSERT INTO t VALUES(2)"));
    ASSERT_OK(txn.Commit());
    EXPECT_THAT(txn.Commit(), StatusIs(absl::StatusCode::kFailedPrecondition));
  }
  EXPECT_EQ(QueryInt(*conn, "SELECT count(*) FROM t"), 1);
  {
    Transaction txn(*conn);
    ASSERT_OK(txn.Begin(Transaction::Mode::kDeferred));
    ASSERT_OK(conn->Execute("INSERT INTO t VALUES(3)"));
    ASSERT_OK(txn.Rollback());
  }
  EXPECT_EQ(QueryInt(*conn, "SELECT count(*) FROM t"), 1);
}

TEST(CommitHookTest, RunsInsideWriteTransactionsAndFailsThemAtomically) {
  TempDir dir;
  auto conn = OpenOrDie(dir.File("a.db"));
  ASSERT_OK(conn->Execute("CREATE TABLE t(i INTEGER)"));
  ASSERT_OK(conn->Execute("CREATE TABLE log(i INTEGER)"));
  bool fail = false;
  {
    ScopedCommitHook hook([&](Connection& c) -> absl::Status {
      EXPECT_TRUE(c.InTransaction());  // before COMMIT, same transaction
      if (fail) return absl::InternalError("audit refused");
      return c.Execute("INSERT INTO log VALUES(1)");
    });
    {
      Transaction txn(*conn);
      ASSERT_OK(txn.Begin(Transaction::Mode::kImmediate));
      ASSERT_OK(conn->Execute("INSERT INTO t VALUES(1)"));
      ASSERT_OK(txn.Commit());
    }
    EXPECT_EQ(hook.commits(), 1);
    EXPECT_EQ(QueryInt(*conn, "SELECT count(*) FROM log"), 1);
    // A failing hook rolls the change back.
    fail = true;
    {
      Transaction txn(*conn);
      ASSERT_OK(txn.Begin(Transaction::Mode::kImmediate));
      ASSERT_OK(conn->Execute("INSERT INTO t VALUES(2)"));
      EXPECT_THAT(txn.Commit(), StatusIs(absl::StatusCode::kInternal));
    }
    EXPECT_FALSE(conn->InTransaction());
    EXPECT_EQ(QueryInt(*conn, "SELECT count(*) FROM t"), 1);
    EXPECT_EQ(hook.commits(), 1);
    // Read (deferred) transactions never run it.
    {
      Transaction txn(*conn);
      ASSERT_OK(txn.Begin(Transaction::Mode::kDeferred));
      EXPECT_EQ(QueryInt(*conn, "SELECT count(*) FROM t"), 1);
      ASSERT_OK(txn.Commit());
    }
    EXPECT_EQ(hook.commits(), 1);
  }
  // Out of scope: no hook.
  {
    Transaction txn(*conn);
    ASSERT_OK(txn.Begin(Transaction::Mode::kImmediate));
    ASSERT_OK(conn->Execute("INSERT INTO t VALUES(3)"));
    ASSERT_OK(txn.Commit());
  }
  EXPECT_EQ(QueryInt(*conn, "SELECT count(*) FROM t"), 2);
  EXPECT_EQ(QueryInt(*conn, "SELECT count(*) FROM log"), 1);
}

TEST(TransactionTest, RelaxedDurabilityIsScopedToTheTransaction) {
  TempDir dir;
  auto conn = OpenOrDie(dir.File("a.db"));
  ASSERT_OK(conn->Execute("CREATE TABLE t(i INTEGER)"));
  {
    Transaction txn(*conn);
    ASSERT_OK(txn.Begin(Transaction::Mode::kImmediate,
                        Transaction::Durability::kRelaxed));
    EXPECT_EQ(QueryInt(*conn, "PRAGMA synchronous"), 1);  // NORMAL
    ASSERT_OK(conn->Execute("INSERT INTO t VALUES(1)"));
    ASSERT_OK(txn.Commit());
  }
  EXPECT_EQ(QueryInt(*conn, "PRAGMA synchronous"), 2);  // FULL again
  {
    Transaction txn(*conn);
    ASSERT_OK(txn.Begin(Transaction::Mode::kDeferred,
                        Transaction::Durability::kRelaxed));
  }  // rolled back
  EXPECT_EQ(QueryInt(*conn, "PRAGMA synchronous"), 2);
  EXPECT_EQ(QueryInt(*conn, "SELECT count(*) FROM t"), 1);
}

TEST(TransactionTest, DoesNotNest) {
  TempDir dir;
  auto conn = OpenOrDie(dir.File("a.db"));
  Transaction outer(*conn);
  ASSERT_OK(outer.Begin(Transaction::Mode::kDeferred));
  Transaction inner(*conn);
  EXPECT_THAT(inner.Begin(Transaction::Mode::kDeferred),
              StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_THAT(outer.Begin(Transaction::Mode::kDeferred),
              StatusIs(absl::StatusCode::kFailedPrecondition));
}

TEST(TransactionTest, ImmediateExcludesOtherWritersWithUnavailable) {
  TempDir dir;
  const std::string path = dir.File("a.db");
  auto a = OpenOrDie(path);
  auto b = OpenOrDie(path, /*busy_timeout_ms=*/0);
  ASSERT_OK(a->Execute("CREATE TABLE t(i INTEGER)"));
  Transaction ta(*a);
  ASSERT_OK(ta.Begin(Transaction::Mode::kImmediate));
  Transaction tb(*b);
  EXPECT_THAT(tb.Begin(Transaction::Mode::kImmediate),
              StatusIs(absl::StatusCode::kUnavailable));
  // Readers are not blocked by the writer (WAL).
  EXPECT_EQ(QueryInt(*b, "SELECT count(*) FROM t"), 0);
  ASSERT_OK(ta.Commit());
  Transaction tb2(*b);
  EXPECT_OK(tb2.Begin(Transaction::Mode::kImmediate));
}

// --- schema / migrations -------------------------------------------------

TEST(SchemaTest, FreshFileIsMigratedToLatest) {
  TempDir dir;
  auto conn = OpenOrDie(dir.File("a.db"));
  ASSERT_OK_AND_ASSIGN(int before, ReadSchemaVersion(*conn));
  EXPECT_EQ(before, 0);
  ASSERT_OK(ApplyMigrations(*conn, SchemaMigrations()));
  ASSERT_OK_AND_ASSIGN(int after, ReadSchemaVersion(*conn));
  EXPECT_EQ(after, LatestSchemaVersion());
  EXPECT_GE(LatestSchemaVersion(), 1);
  for (const char* table : {"datasets", "dataset_blocks", "dataset_features",
                            "jobs", "job_trace", "ledger"}) {
    EXPECT_EQ(QueryInt(*conn, absl::StrCat("SELECT count(*) FROM "
                                           "sqlite_master WHERE type='table' "
                                           "AND name='",
                                           table, "'")),
              1)
        << table;
  }
  // Idempotent.
  ASSERT_OK(ApplyMigrations(*conn, SchemaMigrations()));
  ASSERT_OK_AND_ASSIGN(after, ReadSchemaVersion(*conn));
  EXPECT_EQ(after, LatestSchemaVersion());
}

// A database written before access control (schema version 1, every job
// and charge by "anonymous") opens at the latest version with its jobs and
// charges attributed to the bootstrap curator, nothing lost, and the ledger
// append-only again afterwards.
TEST(SchemaTest, PreAccessControlDatabaseMigratesToCurator) {
  TempDir dir;
  const std::string path = dir.File("old.db");
  {
    auto conn = OpenOrDie(path);
    ASSERT_OK(ApplyMigrations(*conn, {SchemaMigrations().front()}));
    ASSERT_OK_AND_ASSIGN(int version, ReadSchemaVersion(*conn));
    ASSERT_EQ(version, 1);
    ASSERT_OK(conn->Execute(
        "INSERT INTO datasets(name, num_rows, dimension, nonzeros, is_public, "
        "sparse, format, label_kind, num_classes, relation, epsilon_budget, "
        "delta_budget, budget_filter, description, created_at) VALUES "
        "('old', 1, 2, 1, 0, 1, 'libsvm', 0, 2, 'add_remove', 2.0, 1e-6, "
        "'basic', '', 1);"
        "INSERT INTO jobs(id, dataset_id, principal, state, message, spec, "
        "calibration, cost, steps_done, steps_total, result, evaluation, "
        "created_at, started_at, finished_at) VALUES ('job-old', 1, "
        "'anonymous', 3, '', x'', x'', x'', 5, 5, x'', x'', 1, 1, 1);"
        "INSERT INTO ledger(dataset_id, job_id, event_json, accountant, "
        "cost_blob, epsilon, delta, principal, note, created_at) VALUES (1, "
        "'job-old', '{}', 'rdp', 'dpopt.cost.v1|basic|500000000000|0', 0.5, "
        "0, 'anonymous', 'old job', 1);"));
  }
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Database> db, Database::Open(path));
  ASSERT_OK_AND_ASSIGN(std::vector<LedgerEntry> entries,
                       db->ledger().List("old"));
  ASSERT_EQ(entries.size(), 1u);
  EXPECT_EQ(entries[0].principal, "curator");
  EXPECT_EQ(entries[0].job_id, "job-old");
  EXPECT_EQ(entries[0].epsilon, 0.5);
  EXPECT_EQ(entries[0].cost_blob, "dpopt.cost.v1|basic|500000000000|0");
  ASSERT_OK_AND_ASSIGN(JobRecord job, db->jobs().Get("job-old"));
  EXPECT_EQ(job.principal, "curator");
  EXPECT_EQ(job.steps_done, 5);
  ASSERT_OK_AND_ASSIGN(DatasetRecord dataset, db->datasets().Get("old"));
  EXPECT_EQ(dataset.epsilon_budget, 2.0);
  db.reset();
  auto conn = OpenOrDie(path);
  ASSERT_OK_AND_ASSIGN(int version, ReadSchemaVersion(*conn));
  EXPECT_EQ(version, LatestSchemaVersion());
  EXPECT_THAT(conn->Execute("UPDATE ledger SET principal = 'mallory'"),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("append-only")));
}

TEST(SchemaTest, MigrationsApplyInOrderAndFailingOneRollsBack) {
  TempDir dir;
  auto conn = OpenOrDie(dir.File("a.db"));
  std::vector<Migration> v1 = {{1, "CREATE TABLE a(x INTEGER);"}};
  ASSERT_OK(ApplyMigrations(*conn, v1));
  ASSERT_OK(conn->Execute("INSERT INTO a VALUES(5)"));
  std::vector<Migration> v3 = {
      {1, "CREATE TABLE a(x INTEGER);"},
      {2, "ALTER TABLE a ADD COLUMN y INTEGER DEFAULT 7;"},
      {3, "CREATE TABLE b(x); SELECT * FROM no_such_table;"}};
  EXPECT_THAT(ApplyMigrations(*conn, v3),
              StatusIs(absl::StatusCode::kInternal,
                       HasSubstr("migration to version 3")));
  ASSERT_OK_AND_ASSIGN(int version, ReadSchemaVersion(*conn));
  EXPECT_EQ(version, 2);
  EXPECT_EQ(QueryInt(*conn, "SELECT y FROM a"), 7);  // v2 applied to old rows
  EXPECT_EQ(QueryInt(*conn,
                     "SELECT count(*) FROM sqlite_master WHERE "
                     "name='b'"),
            0);  // v3 rolled back entirely
}

TEST(SchemaTest, RejectsMisnumberedMigrations) {
  TempDir dir;
  auto conn = OpenOrDie(dir.File("a.db"));
  std::vector<Migration> bad = {{1, "SELECT 1"}, {3, "SELECT 1"}};
  EXPECT_THAT(ApplyMigrations(*conn, bad),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(SchemaTest, NewerSchemaIsFailedPrecondition) {
  TempDir dir;
  auto conn = OpenOrDie(dir.File("a.db"));
  std::vector<Migration> v2 = {{1, "SELECT 1"}, {2, "SELECT 1"}};
  ASSERT_OK(ApplyMigrations(*conn, v2));
  std::vector<Migration> v1 = {{1, "SELECT 1"}};
  EXPECT_THAT(
      ApplyMigrations(*conn, v1),
      StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("newer")));
}

}  // namespace
}  // namespace dpopt::storage
