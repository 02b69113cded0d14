// Backup and restore end to end: an online backup taken while the
// server admits and runs jobs, a restore of that (now old) backup, the
// server's refusal to start on the rolled-back ledger, and the forced start
// that the curator must ask for explicitly (recorded in the audit log).
#include "storage/backup.h"

#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "storage/ledger_mark.h"
#include "tests/integration/test_server.h"

namespace dpopt::testing {
namespace {

using ::testing::HasSubstr;

v1::SubmitJobRequest Submit(const std::string& dataset, double eps,
                            int steps = 5) {
  v1::SubmitJobRequest req;
  *req.mutable_spec() = QuickDpGdSpec(dataset, eps, steps);
  return req;
}

std::string SubmitAndWait(TestServer& s, const std::string& dataset,
                          double eps) {
  grpc::ClientContext ctx;
  v1::Job job;
  const grpc::Status st = s.jobs().SubmitJob(&ctx, Submit(dataset, eps), &job);
  EXPECT_TRUE(st.ok()) << st.error_message();
  EXPECT_EQ(s.WaitForJob(job.id()).state(), v1::JOB_STATE_SUCCEEDED);
  return job.id();
}

v1::ListLedgerResponse Ledger(TestServer& s, const std::string& dataset) {
  grpc::ClientContext ctx;
  v1::ListLedgerRequest req;
  req.set_dataset(dataset);
  v1::ListLedgerResponse out;
  EXPECT_TRUE(s.budget().ListLedger(&ctx, req, &out).ok());
  return out;
}

TEST(BackupRestoreTest, OldBackupIsRefusedUnlessTheRollbackIsForced) {
  TestServer server;
  ASSERT_TRUE(server.Import(SmallCsvHeader("census", 10), SmallCsv(200)).ok());
  const std::string mark_path =
      storage::LedgerMark::DefaultPath(server.db_path());
  const std::string first = SubmitAndWait(server, "census", 0.5);

  // Online backup while a long job runs and more charges are admitted.
  grpc::ClientContext lctx;
  v1::Job running;
  ASSERT_TRUE(server.jobs()
                  .SubmitJob(&lctx, Submit("census", 0.5, 200000), &running)
                  .ok());
  const std::string backup = server.db_path() + ".backup-1";
  auto info = storage::BackupDatabase(server.db_path(), backup);
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->charges, 2);
  EXPECT_EQ(info->ledger_seq, 2);
  {
    grpc::ClientContext c;
    v1::CancelJobRequest req;
    req.set_id(running.id());
    v1::Job out;
    ASSERT_TRUE(server.jobs().CancelJob(&c, req, &out).ok());
    EXPECT_EQ(server.WaitForJob(running.id()).state(), v1::JOB_STATE_CANCELLED);
  }
  // Two more charges after the backup: the budget they spent is what a
  // restore would forget.
  SubmitAndWait(server, "census", 1.0);
  SubmitAndWait(server, "census", 1.0);
  const v1::ListLedgerResponse before = Ledger(server, "census");
  ASSERT_EQ(before.entries_size(), 4);
  auto mark = storage::LedgerMark::Read(mark_path);
  ASSERT_TRUE(mark.ok());
  EXPECT_EQ(**mark, before.entries(3).sequence());

  // The restore refuses to run under the live server.
  storage::RestoreOptions restore;
  restore.from = backup;
  restore.db_path = server.db_path();
  restore.ledger_mark_path = mark_path;
  EXPECT_EQ(storage::RestoreDatabase(restore).status().code(),
            absl::StatusCode::kFailedPrecondition);
  server.Stop();
  auto restored = storage::RestoreDatabase(restore);
  ASSERT_TRUE(restored.ok()) << restored.status();
  EXPECT_EQ(restored->restored.ledger_seq, 2);
  EXPECT_EQ(restored->mark_seq, 4);

  // Refused: the restored ledger is two charges behind its mark.
  const absl::Status refused = server.TryStart();
  EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(refused.message()),
              HasSubstr("forget 2 charge(s) and let their privacy budget be "
                        "spent again"));
  EXPECT_THAT(std::string(refused.message()),
              HasSubstr("--allow-ledger-rollback-respending-budget"));
  // Refusing changed nothing: the mark still stands.
  mark = storage::LedgerMark::Read(mark_path);
  ASSERT_TRUE(mark.ok());
  EXPECT_EQ(**mark, 4);

  // Forced: the server starts on the backup's ledger, the rollback is in the
  // audit log, and the mark follows the restored ledger.
  ASSERT_TRUE(server.TryStart(/*allow_ledger_rollback=*/true).ok());
  const v1::ListLedgerResponse after = Ledger(server, "census");
  ASSERT_EQ(after.entries_size(), 2);
  EXPECT_EQ(after.entries(0).job_id(), first);
  EXPECT_LT(after.budget().epsilon_spent(), before.budget().epsilon_spent());
  {
    grpc::ClientContext c;
    v1::ListAuditRequest req;
    v1::ListAuditResponse out;
    ASSERT_TRUE(server.admin().ListAudit(&c, req, &out).ok());
    bool found = false;
    for (const v1::AuditEntry& e : out.entries()) {
      if (e.method() == "Server/AllowLedgerRollback") {
        found = true;
        EXPECT_THAT(e.detail(), HasSubstr("from charge #4 to #2"));
      }
    }
    EXPECT_TRUE(found) << "the forced rollback is not in the audit log";
  }
  mark = storage::LedgerMark::Read(mark_path);
  ASSERT_TRUE(mark.ok());
  EXPECT_EQ(**mark, 2);
  // New charges continue the restored ledger, and a normal restart works.
  SubmitAndWait(server, "census", 0.5);
  server.Stop();
  ASSERT_TRUE(server.TryStart().ok());
  EXPECT_EQ(Ledger(server, "census").entries_size(), 3);
}

TEST(BackupRestoreTest, ASecondServerOnTheSameDatabaseIsRefused) {
  TestServer server;
  server::ServerOptions o;
  o.db_path = server.db_path();
  o.listen = "127.0.0.1:0";
  auto second = server::DpoptServer::Start(o);
  EXPECT_EQ(second.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(second.status().message()), HasSubstr("is locked"));
}

}  // namespace
}  // namespace dpopt::testing
