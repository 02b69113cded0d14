// Curator approval of costly jobs (Grant.approval_above_epsilon): a job of
// an analyst whose cost exceeds its grant's threshold waits in
// PENDING_APPROVAL, uncharged; a curator approves it (the normal admission
// charges it and it runs), rejects it with a reason (nothing charged), or
// lets it expire (nothing charged); an approval the budget can no longer
// pay for is refused with RESOURCE_EXHAUSTED and charges nothing; analysts
// can neither list, approve nor reject. Everything is audited.
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/integration/test_server.h"

namespace dpopt::testing {
namespace {

using ::testing::HasSubstr;

class ApprovalTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // Budget 2 under basic composition: a small job (0.3) and an approved
    // one (1) leave less than 1.
    v1::ImportHeader h = SmallCsvHeader("private", 2);
    h.set_budget_filter(v1::BUDGET_FILTER_BASIC);
    ASSERT_TRUE(server_.Import(h, SmallCsv(200)).ok());
    alice_ = v1::JobService::NewStub(
        TokenChannel(server_.target(), server_.CreateAnalyst("alice")));
    Grant("alice", "private", 0.5, 0);
  }

  void Grant(const std::string& principal, const std::string& dataset,
             double above, int64_t timeout) {
    grpc::ClientContext ctx;
    v1::GrantDatasetRequest req;
    req.set_principal(principal);
    req.set_dataset(dataset);
    req.set_approval_above_epsilon(above);
    req.set_approval_timeout_seconds(timeout);
    v1::Grant g;
    const grpc::Status s = server_.admin().GrantDataset(&ctx, req, &g);
    ASSERT_TRUE(s.ok()) << s.error_message();
    EXPECT_EQ(g.approval_above_epsilon(), above);
  }

  v1::Job SubmitAsAlice(double epsilon, grpc::Status* status = nullptr) {
    grpc::ClientContext ctx;
    v1::SubmitJobRequest req;
    *req.mutable_spec() = QuickDpGdSpec("private", epsilon);
    v1::Job job;
    const grpc::Status s = alice_->SubmitJob(&ctx, req, &job);
    if (status != nullptr) {
      *status = s;
    } else {
      EXPECT_TRUE(s.ok()) << s.error_message();
    }
    return job;
  }

  int LedgerEntries() {
    grpc::ClientContext ctx;
    v1::ListLedgerRequest req;
    req.set_dataset("private");
    v1::ListLedgerResponse resp;
    EXPECT_TRUE(server_.budget().ListLedger(&ctx, req, &resp).ok());
    return resp.entries_size();
  }

  grpc::Status Approve(v1::JobService::Stub& jobs, const std::string& id,
                       v1::Job* out) {
    grpc::ClientContext ctx;
    v1::ApproveJobRequest req;
    req.set_id(id);
    return jobs.ApproveJob(&ctx, req, out);
  }

  grpc::Status Reject(v1::JobService::Stub& jobs, const std::string& id,
                      const std::string& reason, v1::Job* out) {
    grpc::ClientContext ctx;
    v1::RejectJobRequest req;
    req.set_id(id);
    req.set_reason(reason);
    return jobs.RejectJob(&ctx, req, out);
  }

  v1::Job GetAsAlice(const std::string& id) {
    grpc::ClientContext ctx;
    v1::GetJobRequest req;
    req.set_id(id);
    v1::Job job;
    EXPECT_TRUE(alice_->GetJob(&ctx, req, &job).ok());
    return job;
  }

  TestServer server_;
  std::unique_ptr<v1::JobService::Stub> alice_;
};

TEST_F(ApprovalTest, ApprovedJobsAreChargedAndRunRejectedOnesAreNot) {
  // Below the threshold: admitted and charged at once.
  v1::Job small = SubmitAsAlice(0.3);
  EXPECT_NE(small.state(), v1::JOB_STATE_PENDING_APPROVAL);
  EXPECT_EQ(server_.WaitForJob(small.id()).state(), v1::JOB_STATE_SUCCEEDED);
  EXPECT_EQ(LedgerEntries(), 1);

  // Above it: the estimate says it would wait; submitted, it waits,
  // uncharged.
  {
    grpc::ClientContext ctx;
    v1::EstimateJobRequest req;
    *req.mutable_spec() = QuickDpGdSpec("private", 1.0);
    v1::JobEstimate est;
    ASSERT_TRUE(alice_->EstimateJob(&ctx, req, &est).ok());
    EXPECT_THAT(est.message(), HasSubstr("approval"));
  }
  v1::Job costly = SubmitAsAlice(1.0);
  EXPECT_EQ(costly.state(), v1::JOB_STATE_PENDING_APPROVAL);
  EXPECT_THAT(costly.message(), HasSubstr("approval"));
  EXPECT_FALSE(costly.cost().charged());
  EXPECT_GT(costly.cost().epsilon(), 0.5);
  EXPECT_GT(costly.approval_expires_at().seconds(),
            absl::ToUnixSeconds(absl::Now()) + 6 * 24 * 3600);
  EXPECT_EQ(LedgerEntries(), 1);

  // Analysts may not list, approve or reject.
  v1::Job out;
  EXPECT_EQ(Approve(*alice_, costly.id(), &out).error_code(),
            grpc::PERMISSION_DENIED);
  EXPECT_EQ(Reject(*alice_, costly.id(), "", &out).error_code(),
            grpc::PERMISSION_DENIED);
  {
    grpc::ClientContext ctx;
    v1::ListJobsResponse resp;
    EXPECT_EQ(alice_->ListPendingJobs(&ctx, {}, &resp).error_code(),
              grpc::PERMISSION_DENIED);
  }
  EXPECT_EQ(GetAsAlice(costly.id()).state(), v1::JOB_STATE_PENDING_APPROVAL);
  EXPECT_EQ(LedgerEntries(), 1);

  // The curator sees it and approves it: charged, then it runs.
  {
    grpc::ClientContext ctx;
    v1::ListJobsResponse resp;
    ASSERT_TRUE(server_.jobs().ListPendingJobs(&ctx, {}, &resp).ok());
    ASSERT_EQ(resp.jobs_size(), 1);
    EXPECT_EQ(resp.jobs(0).id(), costly.id());
    EXPECT_EQ(resp.jobs(0).principal(), "alice");
  }
  const grpc::Status approved = Approve(server_.jobs(), costly.id(), &out);
  ASSERT_TRUE(approved.ok()) << approved.error_message();
  EXPECT_EQ(LedgerEntries(), 2);
  const v1::Job done = server_.WaitForJob(costly.id());
  EXPECT_EQ(done.state(), v1::JOB_STATE_SUCCEEDED) << done.message();
  EXPECT_TRUE(done.cost().charged());
  EXPECT_EQ(Approve(server_.jobs(), costly.id(), &out).error_code(),
            grpc::FAILED_PRECONDITION);

  // Rejected with a reason: nothing charged, the analyst sees why.
  v1::Job second = SubmitAsAlice(1.0);
  ASSERT_EQ(second.state(), v1::JOB_STATE_PENDING_APPROVAL);
  ASSERT_TRUE(
      Reject(server_.jobs(), second.id(), "too costly this month", &out).ok());
  EXPECT_EQ(out.state(), v1::JOB_STATE_REJECTED);
  const v1::Job seen = GetAsAlice(second.id());
  EXPECT_EQ(seen.state(), v1::JOB_STATE_REJECTED);
  EXPECT_THAT(seen.message(), HasSubstr("too costly this month"));
  EXPECT_FALSE(seen.cost().charged());
  EXPECT_EQ(LedgerEntries(), 2);
  EXPECT_EQ(Approve(server_.jobs(), second.id(), &out).error_code(),
            grpc::FAILED_PRECONDITION);
  EXPECT_EQ(LedgerEntries(), 2);

  // Approval once the budget is gone (1.3 of 2 spent): refused, nothing
  // charged, the job still waits (and can then be rejected).
  v1::Job third = SubmitAsAlice(1.0);
  ASSERT_EQ(third.state(), v1::JOB_STATE_PENDING_APPROVAL);
  const grpc::Status broke = Approve(server_.jobs(), third.id(), &out);
  EXPECT_EQ(broke.error_code(), grpc::RESOURCE_EXHAUSTED)
      << broke.error_message();
  EXPECT_THAT(broke.error_message(), HasSubstr("remain"));
  EXPECT_EQ(LedgerEntries(), 2);
  EXPECT_EQ(GetAsAlice(third.id()).state(), v1::JOB_STATE_PENDING_APPROVAL);
  // The analyst may cancel its own waiting job: nothing charged.
  {
    grpc::ClientContext ctx;
    v1::CancelJobRequest req;
    req.set_id(third.id());
    v1::Job cancelled;
    ASSERT_TRUE(alice_->CancelJob(&ctx, req, &cancelled).ok());
    EXPECT_EQ(cancelled.state(), v1::JOB_STATE_CANCELLED);
  }
  EXPECT_EQ(LedgerEntries(), 2);

  // Audited: the waiting submission, the approval and the rejection.
  grpc::ClientContext actx;
  v1::ListAuditRequest areq;
  areq.set_limit(1000);
  v1::ListAuditResponse audit;
  ASSERT_TRUE(server_.admin().ListAudit(&actx, areq, &audit).ok());
  int pending = 0, approvals = 0, rejections = 0, denied = 0;
  for (const v1::AuditEntry& e : audit.entries()) {
    if (e.method() == "JobService/SubmitJob" &&
        e.detail() == "pending approval")
      ++pending;
    if (e.method() == "JobService/ApproveJob" && e.code() == 0) ++approvals;
    if (e.method() == "JobService/RejectJob" && e.code() == 0) {
      ++rejections;
      EXPECT_THAT(e.detail(), HasSubstr("too costly this month"));
      EXPECT_EQ(e.dataset(), "private");
    }
    if (e.principal() == "alice" && e.code() == grpc::PERMISSION_DENIED)
      ++denied;
  }
  EXPECT_EQ(pending, 3);
  EXPECT_EQ(approvals, 1);
  EXPECT_EQ(rejections, 1);
  EXPECT_EQ(denied, 3);
}

TEST_F(ApprovalTest, ApprovalKeepsTheSubmittersOwnJobLimit) {
  // A curator limits alice to one active job.
  {
    grpc::ClientContext ctx;
    v1::SetPrincipalLimitsRequest req;
    req.set_name("alice");
    req.mutable_limits()->set_max_active_jobs(1);
    v1::Principal p;
    ASSERT_TRUE(server_.admin().SetPrincipalLimits(&ctx, req, &p).ok());
  }
  const v1::Job costly = SubmitAsAlice(1.0);
  ASSERT_EQ(costly.state(), v1::JOB_STATE_PENDING_APPROVAL);
  // Her one active job: long (cancelled below), below the threshold.
  v1::Job running;
  {
    grpc::ClientContext ctx;
    v1::SubmitJobRequest req;
    *req.mutable_spec() = QuickDpGdSpec("private", 0.3, 1'000'000);
    ASSERT_TRUE(alice_->SubmitJob(&ctx, req, &running).ok());
  }
  v1::Job out;
  const grpc::Status busy = Approve(server_.jobs(), costly.id(), &out);
  EXPECT_EQ(busy.error_code(), grpc::RESOURCE_EXHAUSTED)
      << busy.error_message();
  EXPECT_EQ(GetAsAlice(costly.id()).state(), v1::JOB_STATE_PENDING_APPROVAL);
  EXPECT_EQ(LedgerEntries(), 1);  // the running job's charge only
  {
    grpc::ClientContext ctx;
    v1::CancelJobRequest req;
    req.set_id(running.id());
    v1::Job cancelled;
    ASSERT_TRUE(alice_->CancelJob(&ctx, req, &cancelled).ok());
  }
  server_.WaitForJob(running.id());
  // Her slot is released once the job's runner finishes with it.
  grpc::Status approved;
  for (int i = 0; i < 100; ++i) {
    approved = Approve(server_.jobs(), costly.id(), &out);
    if (approved.error_code() != grpc::RESOURCE_EXHAUSTED) break;
    absl::SleepFor(absl::Milliseconds(50));
  }
  EXPECT_TRUE(approved.ok()) << approved.error_message();
  EXPECT_EQ(LedgerEntries(), 2);
}

TEST_F(ApprovalTest, AWaitingJobExpiresUncharged) {
  Grant("alice", "private", 0.5, /*timeout=*/1);
  v1::Job job = SubmitAsAlice(1.0);
  ASSERT_EQ(job.state(), v1::JOB_STATE_PENDING_APPROVAL);
  absl::SleepFor(absl::Milliseconds(1500));
  const v1::Job expired = GetAsAlice(job.id());
  EXPECT_EQ(expired.state(), v1::JOB_STATE_REJECTED);
  EXPECT_THAT(expired.message(), HasSubstr("expired"));
  v1::Job out;
  EXPECT_EQ(Approve(server_.jobs(), job.id(), &out).error_code(),
            grpc::FAILED_PRECONDITION);
  EXPECT_EQ(LedgerEntries(), 0);
  // The expiry is audited as the server's decision.
  grpc::ClientContext actx;
  v1::ListAuditRequest areq;
  areq.set_limit(1000);
  v1::ListAuditResponse audit;
  ASSERT_TRUE(server_.admin().ListAudit(&actx, areq, &audit).ok());
  int expiries = 0;
  for (const v1::AuditEntry& e : audit.entries()) {
    if (e.method() == "Server/ExpireJob" && e.job_id() == job.id()) ++expiries;
  }
  EXPECT_EQ(expiries, 1);
}

TEST_F(ApprovalTest, AWatcherSeesTheRejection) {
  v1::Job job = SubmitAsAlice(1.0);
  ASSERT_EQ(job.state(), v1::JOB_STATE_PENDING_APPROVAL);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  v1::WatchJobRequest req;
  req.set_id(job.id());
  auto reader = alice_->WatchJob(&ctx, req);
  v1::JobEvent ev;
  ASSERT_TRUE(reader->Read(&ev));
  EXPECT_EQ(ev.job().state(), v1::JOB_STATE_PENDING_APPROVAL);
  v1::Job out;
  ASSERT_TRUE(Reject(server_.jobs(), job.id(), "no", &out).ok());
  v1::JobState last = v1::JOB_STATE_UNSPECIFIED;
  while (reader->Read(&ev)) {
    if (ev.has_job()) last = ev.job().state();
  }
  EXPECT_TRUE(reader->Finish().ok());
  EXPECT_EQ(last, v1::JOB_STATE_REJECTED);
}

}  // namespace
}  // namespace dpopt::testing
