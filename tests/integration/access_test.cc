// Access control end to end: every RPC of every service against
// every role (table-driven, and the table must name every method of the
// proto services), revocation, expiry, analyst isolation, per-analyst caps
// under 50 concurrent submitters, TLS and mutual TLS.
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "gmock/gmock.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "server/auth.h"
#include "storage/database.h"
#include "storage/file_util.h"
#include "tests/integration/test_server.h"

namespace dpopt::testing {
namespace {

using ::testing::HasSubstr;

v1::ImportHeader Header(const std::string& name, double eps,
                        bool is_public = false) {
  return SmallCsvHeader(name, eps, is_public);
}

v1::JobSpec Spec(const std::string& dataset, double eps, int steps = 5) {
  return QuickDpGdSpec(dataset, eps, steps);
}

// Stubs of every service on a channel carrying one token.
struct Stubs {
  explicit Stubs(std::shared_ptr<grpc::Channel> ch)
      : datasets(v1::DatasetService::NewStub(ch)),
        budget(v1::BudgetService::NewStub(ch)),
        jobs(v1::JobService::NewStub(ch)),
        admin(v1::AdminService::NewStub(ch)) {}
  std::unique_ptr<v1::DatasetService::Stub> datasets;
  std::unique_ptr<v1::BudgetService::Stub> budget;
  std::unique_ptr<v1::JobService::Stub> jobs;
  std::unique_ptr<v1::AdminService::Stub> admin;
};

class AccessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(server_.Import(Header("private", 100), SmallCsv(200)).ok());
    ASSERT_TRUE(server_.Import(Header("secret", 100), SmallCsv(200)).ok());
    ASSERT_TRUE(server_.Import(Header("open", 0, true), SmallCsv(50)).ok());
    alice_token_ = server_.CreateAnalyst("alice");
    bob_token_ = server_.CreateAnalyst("bob");
    ASSERT_TRUE(server_.Grant("alice", "private").ok());
    ASSERT_TRUE(server_.Grant("bob", "private").ok());
  }
  Stubs As(const std::string& token) {
    return Stubs(TokenChannel(server_.target(), token));
  }
  // Submits a small job as `who`; returns its id ("" on failure).
  std::string Submit(Stubs& who, const std::string& dataset, double eps,
                     grpc::Status* status = nullptr) {
    grpc::ClientContext ctx;
    v1::SubmitJobRequest req;
    *req.mutable_spec() = Spec(dataset, eps);
    v1::Job job;
    grpc::Status s = who.jobs->SubmitJob(&ctx, req, &job);
    if (status) *status = s;
    return s.ok() ? job.id() : "";
  }

  TestServer server_;
  std::string alice_token_, bob_token_;
};

// ---------------------------------------------------------------- the table

struct Rpc {
  std::string method;  // "dpopt.v1.JobService.SubmitJob"
  // Calls the RPC as `s`; `job` is a job of alice on "private".
  std::function<grpc::Status(Stubs& s, const std::string& job)> call;
  // Expected codes for: curator, analyst alice (granted "private", owns
  // `job`), analyst carol (no grant, no job).
  grpc::StatusCode curator, alice, carol;
};

template <typename Req, typename Resp, typename Stub, typename Fn>
grpc::Status Unary(Stub& stub, Fn fn, const Req& req) {
  grpc::ClientContext ctx;
  Resp resp;
  return (stub.*fn)(&ctx, req, &resp);
}

std::vector<Rpc> Table() {
  using C = grpc::StatusCode;
  const C ok = C::OK, nf = C::NOT_FOUND, pd = C::PERMISSION_DENIED;
  auto ds = [](const std::string& n) {
    v1::GetDatasetRequest r;
    r.set_name(n);
    return r;
  };
  return {
      {"dpopt.v1.DatasetService.ImportDataset",
       [](Stubs& s, const std::string&) {
         grpc::ClientContext ctx;
         v1::DatasetInfo info;
         auto w = s.datasets->ImportDataset(&ctx, &info);
         v1::ImportDatasetRequest h;
         *h.mutable_header() = Header("x-import", 0, true);
         w->Write(h);
         v1::ImportDatasetRequest c;
         c.set_chunk(SmallCsv(5));
         w->Write(c);
         w->WritesDone();
         return w->Finish();
       },
       ok, pd, pd},
      {"dpopt.v1.DatasetService.ListDatasets",
       [](Stubs& s, const std::string&) {
         return Unary<v1::ListDatasetsRequest, v1::ListDatasetsResponse>(
             *s.datasets, &v1::DatasetService::Stub::ListDatasets, {});
       },
       ok, ok, ok},
      {"dpopt.v1.DatasetService.GetDataset",
       [ds](Stubs& s, const std::string&) {
         return Unary<v1::GetDatasetRequest, v1::DatasetInfo>(
             *s.datasets, &v1::DatasetService::Stub::GetDataset, ds("private"));
       },
       ok, ok, nf},
      {"dpopt.v1.DatasetService.DeleteDataset",
       [](Stubs& s, const std::string&) {
         v1::DeleteDatasetRequest r;
         r.set_name("no-such-dataset");
         return Unary<v1::DeleteDatasetRequest, v1::DeleteDatasetResponse>(
             *s.datasets, &v1::DatasetService::Stub::DeleteDataset, r);
       },
       nf, pd, pd},
      // This server has no worker pool: the curator is told so.
      {"dpopt.v1.DatasetService.PlaceDataset",
       [](Stubs& s, const std::string&) {
         v1::PlaceDatasetRequest r;
         r.set_name("private");
         return Unary<v1::PlaceDatasetRequest, v1::PlaceDatasetResponse>(
             *s.datasets, &v1::DatasetService::Stub::PlaceDataset, r);
       },
       C::FAILED_PRECONDITION, pd, pd},
      {"dpopt.v1.BudgetService.GetBudget",
       [](Stubs& s, const std::string&) {
         v1::GetBudgetRequest r;
         r.set_dataset("private");
         return Unary<v1::GetBudgetRequest, v1::BudgetStatus>(
             *s.budget, &v1::BudgetService::Stub::GetBudget, r);
       },
       ok, ok, nf},
      {"dpopt.v1.BudgetService.ListLedger",
       [](Stubs& s, const std::string&) {
         v1::ListLedgerRequest r;
         r.set_dataset("private");
         return Unary<v1::ListLedgerRequest, v1::ListLedgerResponse>(
             *s.budget, &v1::BudgetService::Stub::ListLedger, r);
       },
       ok, ok, nf},
      {"dpopt.v1.JobService.EstimateJob",
       [](Stubs& s, const std::string&) {
         v1::EstimateJobRequest r;
         *r.mutable_spec() = Spec("private", 0.1);
         return Unary<v1::EstimateJobRequest, v1::JobEstimate>(
             *s.jobs, &v1::JobService::Stub::EstimateJob, r);
       },
       ok, ok, nf},
      {"dpopt.v1.JobService.SubmitJob",
       [](Stubs& s, const std::string&) {
         v1::SubmitJobRequest r;
         *r.mutable_spec() = Spec("private", 0.1);
         return Unary<v1::SubmitJobRequest, v1::Job>(
             *s.jobs, &v1::JobService::Stub::SubmitJob, r);
       },
       ok, ok, nf},
      {"dpopt.v1.JobService.GetJob",
       [](Stubs& s, const std::string& job) {
         v1::GetJobRequest r;
         r.set_id(job);
         return Unary<v1::GetJobRequest, v1::Job>(
             *s.jobs, &v1::JobService::Stub::GetJob, r);
       },
       ok, ok, nf},
      {"dpopt.v1.JobService.ListJobs",
       [](Stubs& s, const std::string&) {
         return Unary<v1::ListJobsRequest, v1::ListJobsResponse>(
             *s.jobs, &v1::JobService::Stub::ListJobs, {});
       },
       ok, ok, ok},
      {"dpopt.v1.JobService.WatchJob",
       [](Stubs& s, const std::string& job) {
         grpc::ClientContext ctx;
         v1::WatchJobRequest r;
         r.set_id(job);
         auto reader = s.jobs->WatchJob(&ctx, r);
         v1::JobEvent e;
         while (reader->Read(&e)) {
         }
         return reader->Finish();
       },
       ok, ok, nf},
      {"dpopt.v1.JobService.CancelJob",
       [](Stubs& s, const std::string& job) {
         v1::CancelJobRequest r;
         r.set_id(job);
         return Unary<v1::CancelJobRequest, v1::Job>(
             *s.jobs, &v1::JobService::Stub::CancelJob, r);
       },
       // The job has finished: cancelling it is a state error for whoever
       // may see it, NOT_FOUND for everyone else.
       C::FAILED_PRECONDITION, C::FAILED_PRECONDITION, nf},
      {"dpopt.v1.JobService.GetJobResult",
       [](Stubs& s, const std::string& job) {
         v1::GetJobResultRequest r;
         r.set_id(job);
         return Unary<v1::GetJobResultRequest, v1::JobResult>(
             *s.jobs, &v1::JobService::Stub::GetJobResult, r);
       },
       ok, ok, nf},
      {"dpopt.v1.JobService.ListPendingJobs",
       [](Stubs& s, const std::string&) {
         return Unary<v1::ListPendingJobsRequest, v1::ListJobsResponse>(
             *s.jobs, &v1::JobService::Stub::ListPendingJobs, {});
       },
       ok, pd, pd},
      {"dpopt.v1.JobService.ApproveJob",
       [](Stubs& s, const std::string& job) {
         v1::ApproveJobRequest r;
         r.set_id(job);
         return Unary<v1::ApproveJobRequest, v1::Job>(
             *s.jobs, &v1::JobService::Stub::ApproveJob, r);
       },
       // Curators only; the job has finished, so it is not waiting.
       C::FAILED_PRECONDITION, pd, pd},
      {"dpopt.v1.JobService.RejectJob",
       [](Stubs& s, const std::string& job) {
         v1::RejectJobRequest r;
         r.set_id(job);
         r.set_reason("no");
         return Unary<v1::RejectJobRequest, v1::Job>(
             *s.jobs, &v1::JobService::Stub::RejectJob, r);
       },
       C::FAILED_PRECONDITION, pd, pd},
      {"dpopt.v1.AdminService.WhoAmI",
       [](Stubs& s, const std::string&) {
         return Unary<v1::WhoAmIRequest, v1::Principal>(
             *s.admin, &v1::AdminService::Stub::WhoAmI, {});
       },
       ok, ok, ok},
      {"dpopt.v1.AdminService.CreatePrincipal",
       [](Stubs& s, const std::string&) {
         v1::CreatePrincipalRequest r;
         static std::atomic<int> n{0};
         r.set_name(absl::StrCat("p", n++));
         return Unary<v1::CreatePrincipalRequest, v1::CreatedToken>(
             *s.admin, &v1::AdminService::Stub::CreatePrincipal, r);
       },
       ok, pd, pd},
      {"dpopt.v1.AdminService.ListPrincipals",
       [](Stubs& s, const std::string&) {
         return Unary<v1::ListPrincipalsRequest, v1::ListPrincipalsResponse>(
             *s.admin, &v1::AdminService::Stub::ListPrincipals, {});
       },
       ok, pd, pd},
      {"dpopt.v1.AdminService.RevokePrincipal",
       [](Stubs& s, const std::string&) {
         v1::RevokePrincipalRequest r;
         r.set_name("nobody");
         return Unary<v1::RevokePrincipalRequest, v1::Principal>(
             *s.admin, &v1::AdminService::Stub::RevokePrincipal, r);
       },
       nf, pd, pd},
      {"dpopt.v1.AdminService.SetPrincipalLimits",
       [](Stubs& s, const std::string&) {
         v1::SetPrincipalLimitsRequest r;
         r.set_name("nobody");
         return Unary<v1::SetPrincipalLimitsRequest, v1::Principal>(
             *s.admin, &v1::AdminService::Stub::SetPrincipalLimits, r);
       },
       nf, pd, pd},
      {"dpopt.v1.AdminService.CreateToken",
       [](Stubs& s, const std::string&) {
         v1::CreateTokenRequest r;
         r.set_principal("bob");
         return Unary<v1::CreateTokenRequest, v1::CreatedToken>(
             *s.admin, &v1::AdminService::Stub::CreateToken, r);
       },
       ok, pd, pd},
      {"dpopt.v1.AdminService.RevokeToken",
       [](Stubs& s, const std::string&) {
         v1::RevokeTokenRequest r;
         r.set_id("0000000000000000");
         return Unary<v1::RevokeTokenRequest, v1::TokenInfo>(
             *s.admin, &v1::AdminService::Stub::RevokeToken, r);
       },
       nf, pd, pd},
      {"dpopt.v1.AdminService.ListTokens",
       [](Stubs& s, const std::string&) {
         return Unary<v1::ListTokensRequest, v1::ListTokensResponse>(
             *s.admin, &v1::AdminService::Stub::ListTokens, {});
       },
       ok, pd, pd},
      {"dpopt.v1.AdminService.GrantDataset",
       [](Stubs& s, const std::string&) {
         v1::GrantDatasetRequest r;
         r.set_principal("bob");
         r.set_dataset("open");
         return Unary<v1::GrantDatasetRequest, v1::Grant>(
             *s.admin, &v1::AdminService::Stub::GrantDataset, r);
       },
       ok, pd, pd},
      {"dpopt.v1.AdminService.RevokeGrant",
       [](Stubs& s, const std::string&) {
         v1::RevokeGrantRequest r;
         r.set_principal("bob");
         r.set_dataset("secret");
         return Unary<v1::RevokeGrantRequest, v1::Grant>(
             *s.admin, &v1::AdminService::Stub::RevokeGrant, r);
       },
       nf, pd, pd},
      {"dpopt.v1.AdminService.ListGrants",
       [](Stubs& s, const std::string&) {
         return Unary<v1::ListGrantsRequest, v1::ListGrantsResponse>(
             *s.admin, &v1::AdminService::Stub::ListGrants, {});
       },
       ok, pd, pd},
      {"dpopt.v1.AdminService.ListAudit",
       [](Stubs& s, const std::string&) {
         return Unary<v1::ListAuditRequest, v1::ListAuditResponse>(
             *s.admin, &v1::AdminService::Stub::ListAudit, {});
       },
       ok, pd, pd},
  };
}

TEST(AccessTable, NamesEveryMethodOfEveryDpoptService) {
  std::set<std::string> in_table;
  for (const Rpc& r : Table()) in_table.insert(r.method);
  const auto* file =
      google::protobuf::DescriptorPool::generated_pool()->FindFileByName(
          "dpopt/v1/dpopt.proto");
  ASSERT_NE(file, nullptr);
  std::set<std::string> in_proto;
  for (int i = 0; i < file->service_count(); ++i) {
    const auto* svc = file->service(i);
    for (int m = 0; m < svc->method_count(); ++m) {
      in_proto.insert(svc->method(m)->full_name());
    }
  }
  EXPECT_EQ(in_table, in_proto)
      << "a new RPC must be added to the access table (with its rules)";
}

TEST_F(AccessTest, EveryRpcAgainstEveryRole) {
  Stubs curator = As(server_.curator_token());
  Stubs alice = As(alice_token_);
  Stubs carol = As(server_.CreateAnalyst("carol"));
  Stubs none = As("");
  Stubs wrong = As(absl::StrCat("0123456789abcdef.", std::string(64, '0')));
  const std::string job = Submit(alice, "private", 0.1);
  ASSERT_FALSE(job.empty());
  ASSERT_EQ(server_.WaitForJob(job).state(), v1::JOB_STATE_SUCCEEDED);
  for (const Rpc& r : Table()) {
    SCOPED_TRACE(r.method);
    EXPECT_EQ(r.call(none, job).error_code(), grpc::UNAUTHENTICATED);
    EXPECT_EQ(r.call(wrong, job).error_code(), grpc::UNAUTHENTICATED);
    EXPECT_EQ(r.call(carol, job).error_code(), r.carol);
    EXPECT_EQ(r.call(alice, job).error_code(), r.alice);
    EXPECT_EQ(r.call(curator, job).error_code(), r.curator);
  }
}

TEST_F(AccessTest, AnalystsAreIsolated) {
  Stubs alice = As(alice_token_);
  Stubs bob = As(bob_token_);
  const std::string job = Submit(alice, "private", 0.1);
  ASSERT_FALSE(job.empty());
  server_.WaitForJob(job);
  // Bob cannot read, watch the result of, or cancel Alice's job: NOT_FOUND,
  // with exactly the message of a job that does not exist.
  grpc::ClientContext c1, c2;
  v1::GetJobRequest get;
  get.set_id(job);
  v1::Job out;
  const grpc::Status theirs = bob.jobs->GetJob(&c1, get, &out);
  get.set_id("job-does-not-exist");
  const grpc::Status missing = bob.jobs->GetJob(&c2, get, &out);
  EXPECT_EQ(theirs.error_code(), grpc::NOT_FOUND);
  EXPECT_EQ(missing.error_code(), grpc::NOT_FOUND);
  EXPECT_EQ(theirs.error_message(),
            absl::StrCat("job \"", job, "\" not found"));
  // Listing shows only one's own jobs; the ledger only one's own charges.
  grpc::ClientContext c3;
  v1::ListJobsResponse list;
  ASSERT_TRUE(bob.jobs->ListJobs(&c3, {}, &list).ok());
  EXPECT_EQ(list.jobs_size(), 0);
  grpc::ClientContext c4;
  v1::ListLedgerRequest lr;
  lr.set_dataset("private");
  v1::ListLedgerResponse ledger;
  ASSERT_TRUE(bob.budget->ListLedger(&c4, lr, &ledger).ok());
  EXPECT_EQ(ledger.entries_size(), 0);
  // Ungranted datasets are invisible and indistinguishable from missing.
  grpc::ClientContext c5, c6, c7;
  v1::ListDatasetsResponse ds;
  ASSERT_TRUE(bob.datasets->ListDatasets(&c5, {}, &ds).ok());
  std::set<std::string> names;
  for (const auto& d : ds.datasets()) names.insert(d.name());
  EXPECT_EQ(names, (std::set<std::string>{"private", "open"}));
  v1::GetDatasetRequest g;
  g.set_name("secret");
  v1::DatasetInfo info;
  const grpc::Status hidden = bob.datasets->GetDataset(&c6, g, &info);
  g.set_name("nothing-here");
  const grpc::Status absent = bob.datasets->GetDataset(&c7, g, &info);
  EXPECT_EQ(hidden.error_code(), grpc::NOT_FOUND);
  EXPECT_EQ(absent.error_code(), grpc::NOT_FOUND);
  EXPECT_EQ(hidden.error_message(), "dataset \"secret\" not found");
  EXPECT_EQ(absent.error_message(), "dataset \"nothing-here\" not found");
  // Nothing was charged to "secret" by the refused estimate/submit.
  grpc::Status s;
  EXPECT_TRUE(Submit(bob, "secret", 0.1, &s).empty());
  EXPECT_EQ(s.error_code(), grpc::NOT_FOUND);
  grpc::ClientContext c8;
  v1::GetBudgetRequest br;
  br.set_dataset("secret");
  v1::BudgetStatus b;
  ASSERT_TRUE(server_.budget().GetBudget(&c8, br, &b).ok());
  EXPECT_EQ(b.charges(), 0);
}

TEST_F(AccessTest, RevocationAndExpiryAreImmediate) {
  Stubs alice = As(alice_token_);
  grpc::ClientContext c1;
  v1::Principal me;
  ASSERT_TRUE(alice.admin->WhoAmI(&c1, {}, &me).ok());
  EXPECT_EQ(me.name(), "alice");
  EXPECT_EQ(me.role(), v1::ROLE_ANALYST);
  // A second token, then revoke only it.
  grpc::ClientContext c2;
  v1::CreateTokenRequest tr;
  tr.set_principal("alice");
  v1::CreatedToken second;
  ASSERT_TRUE(server_.admin().CreateToken(&c2, tr, &second).ok());
  EXPECT_EQ(second.token().size(), 16u + 1 + 64);  // 256-bit secret
  Stubs alice2 = As(second.token());
  grpc::ClientContext c3;
  ASSERT_TRUE(alice2.admin->WhoAmI(&c3, {}, &me).ok());
  grpc::ClientContext c4;
  v1::RevokeTokenRequest rt;
  rt.set_id(second.info().id());
  v1::TokenInfo ti;
  ASSERT_TRUE(server_.admin().RevokeToken(&c4, rt, &ti).ok());
  grpc::ClientContext c5, c6;
  EXPECT_EQ(alice2.admin->WhoAmI(&c5, {}, &me).error_code(),
            grpc::UNAUTHENTICATED);
  EXPECT_TRUE(alice.admin->WhoAmI(&c6, {}, &me).ok());
  // Revoking the principal kills all its tokens.
  grpc::ClientContext c7, c8;
  v1::RevokePrincipalRequest rp;
  rp.set_name("alice");
  ASSERT_TRUE(server_.admin().RevokePrincipal(&c7, rp, &me).ok());
  EXPECT_EQ(alice.admin->WhoAmI(&c8, {}, &me).error_code(),
            grpc::UNAUTHENTICATED);
  // An expiring token stops working after its lifetime.
  grpc::ClientContext c9;
  tr.set_principal("bob");
  tr.set_ttl_seconds(1);
  v1::CreatedToken shortlived;
  ASSERT_TRUE(server_.admin().CreateToken(&c9, tr, &shortlived).ok());
  Stubs bob = As(shortlived.token());
  grpc::ClientContext c10;
  EXPECT_TRUE(bob.admin->WhoAmI(&c10, {}, &me).ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(1200));
  grpc::ClientContext c11;
  EXPECT_EQ(bob.admin->WhoAmI(&c11, {}, &me).error_code(),
            grpc::UNAUTHENTICATED);
}

TEST_F(AccessTest, TokensGetTheServersMaximumLifetimeUnlessToldOtherwise) {
  const int64_t max = server::TokenLifetimeOptions().max_ttl_seconds;
  ASSERT_GT(max, 0);
  auto create = [&](const std::string& principal, int64_t ttl, bool no_expiry,
                    v1::CreatedToken* out) {
    grpc::ClientContext ctx;
    v1::CreateTokenRequest r;
    r.set_principal(principal);
    r.set_ttl_seconds(ttl);
    r.set_no_expiry(no_expiry);
    return server_.admin().CreateToken(&ctx, r, out);
  };
  // No lifetime asked: the maximum.
  v1::CreatedToken t;
  ASSERT_TRUE(create("alice", 0, false, &t).ok());
  ASSERT_TRUE(t.info().has_expires_at());
  EXPECT_NEAR(t.info().expires_at().seconds() - t.info().created_at().seconds(),
              max, 2);
  // Shorter: as asked; longer: refused, naming the flag.
  ASSERT_TRUE(create("alice", 3600, false, &t).ok());
  EXPECT_NEAR(t.info().expires_at().seconds() - t.info().created_at().seconds(),
              3600, 2);
  grpc::Status s = create("alice", max + 1, false, &t);
  EXPECT_EQ(s.error_code(), grpc::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("--max-token-ttl-days"));
  // Never expiring: refused for an analyst, allowed for a curator, and
  // never together with a lifetime.
  s = create("alice", 0, true, &t);
  EXPECT_EQ(s.error_code(), grpc::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("only curator tokens"));
  EXPECT_EQ(create("curator", 60, true, &t).error_code(),
            grpc::INVALID_ARGUMENT);
  ASSERT_TRUE(create("curator", 0, true, &t).ok());
  EXPECT_FALSE(t.info().has_expires_at());
  // The same rules for a new principal's first token, checked before the
  // principal is created.
  grpc::ClientContext c1;
  v1::CreatePrincipalRequest cp;
  cp.set_name("carol");
  cp.set_token_no_expiry(true);
  EXPECT_EQ(server_.admin().CreatePrincipal(&c1, cp, &t).error_code(),
            grpc::INVALID_ARGUMENT);
  grpc::ClientContext c2;
  v1::ListPrincipalsResponse principals;
  ASSERT_TRUE(server_.admin().ListPrincipals(&c2, {}, &principals).ok());
  for (const auto& p : principals.principals()) EXPECT_NE(p.name(), "carol");
}

TEST(TokenLifetimeTest, WithoutAMaximumAnalystTokensMayNeverExpire) {
  TestServer server(
      [](server::ServerOptions& o) { o.tokens.max_ttl_seconds = 0; });
  grpc::ClientContext c1;
  v1::CreatePrincipalRequest cp;
  cp.set_name("dave");
  v1::CreatedToken t;
  ASSERT_TRUE(server.admin().CreatePrincipal(&c1, cp, &t).ok());
  EXPECT_FALSE(t.info().has_expires_at());  // the default: no maximum
  grpc::ClientContext c2;
  v1::CreateTokenRequest r;
  r.set_principal("dave");
  r.set_no_expiry(true);
  ASSERT_TRUE(server.admin().CreateToken(&c2, r, &t).ok());
  EXPECT_FALSE(t.info().has_expires_at());
}

TEST(TokenLifetimeTest, RotatingTheCuratorTokenRevokesTheOldOne) {
  TestServer server;
  const std::string old_token = server.curator_token();
  // A token the curator made for itself survives the rotation.
  grpc::ClientContext c1;
  v1::CreateTokenRequest r;
  r.set_principal("curator");
  r.set_label("laptop");
  v1::CreatedToken laptop;
  ASSERT_TRUE(server.admin().CreateToken(&c1, r, &laptop).ok());
  const std::string token_file = server.db_path() + ".curator-token";
  ASSERT_EQ(ReadFileOrDie(token_file), old_token + "\n");
  server.Stop();
  std::string new_token;
  {
    auto lock = storage::FileLock::TryAcquire(
        storage::DatabaseLockPath(server.db_path()));
    ASSERT_TRUE(lock.ok()) << lock.status();
    auto db = storage::Database::Open(server.db_path());
    ASSERT_TRUE(db.ok()) << db.status();
    server::Authenticator auth(db->get());
    auto rotated = auth.RotateBootstrapToken(token_file);
    ASSERT_TRUE(rotated.ok()) << rotated.status();
    ASSERT_EQ(rotated->revoked_token_ids.size(), 1u);
    EXPECT_EQ(rotated->revoked_token_ids[0], old_token.substr(0, 16));
    new_token = ReadFileOrDie(token_file);
    ASSERT_FALSE(new_token.empty());
    new_token.pop_back();  // "\n"
    EXPECT_EQ(new_token.substr(0, 16), rotated->new_token_id);
    struct stat st;
    ASSERT_EQ(stat(token_file.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0600);
  }
  server.Start();
  v1::Principal me;
  grpc::ClientContext c2, c3, c4;
  EXPECT_EQ(Stubs(TokenChannel(server.target(), old_token))
                .admin->WhoAmI(&c2, {}, &me)
                .error_code(),
            grpc::UNAUTHENTICATED);
  ASSERT_TRUE(Stubs(TokenChannel(server.target(), new_token))
                  .admin->WhoAmI(&c3, {}, &me)
                  .ok());
  EXPECT_EQ(me.name(), "curator");
  EXPECT_TRUE(Stubs(TokenChannel(server.target(), laptop.token()))
                  .admin->WhoAmI(&c4, {}, &me)
                  .ok());
  // Audited.
  grpc::ClientContext c5;
  v1::ListAuditResponse audit;
  ASSERT_TRUE(Stubs(TokenChannel(server.target(), new_token))
                  .admin->ListAudit(&c5, {}, &audit)
                  .ok());
  bool audited = false;
  for (const auto& e : audit.entries()) {
    audited |= e.method() == "rotate-curator-token";
  }
  EXPECT_TRUE(audited);
}

TEST(PrincipalLimitsTest, ACuratorOverridesTheServersLimitsPerPrincipal) {
  TestServer server(
      [](server::ServerOptions& o) { o.limits.max_estimates_per_second = 2; });
  ASSERT_TRUE(server.Import(Header("d", 100), SmallCsv(200)).ok());
  std::map<std::string, std::string> tokens;
  for (const char* who : {"alice", "bob", "carol"}) {
    tokens[who] = server.CreateAnalyst(who);
    ASSERT_TRUE(server.Grant(who, "d").ok());
  }
  auto set = [&](const std::string& who, std::optional<int> estimates,
                 std::optional<int> watches) {
    grpc::ClientContext ctx;
    v1::SetPrincipalLimitsRequest r;
    r.set_name(who);
    if (estimates) r.mutable_limits()->set_max_estimates_per_second(*estimates);
    if (watches) r.mutable_limits()->set_max_watch_streams(*watches);
    v1::Principal p;
    grpc::Status s = server.admin().SetPrincipalLimits(&ctx, r, &p);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return p;
  };
  const v1::Principal alice = set("alice", 6, 1);
  EXPECT_EQ(alice.limits().max_estimates_per_second(), 6);
  EXPECT_FALSE(set("carol", 0, std::nullopt).limits().has_max_watch_streams());
  // A burst of estimates within one second: bob has the server's 2,
  // alice her own 6, carol none (0).
  auto burst = [&](const std::string& who) {
    Stubs as(TokenChannel(server.target(), tokens[who]));
    int admitted = 0;
    std::string refusal;
    for (int i = 0; i < 10; ++i) {
      grpc::ClientContext ctx;
      v1::EstimateJobRequest r;
      *r.mutable_spec() = Spec("d", 0.1);
      v1::JobEstimate e;
      grpc::Status s = as.jobs->EstimateJob(&ctx, r, &e);
      if (s.ok()) {
        ++admitted;
      } else {
        EXPECT_EQ(s.error_code(), grpc::RESOURCE_EXHAUSTED);
        refusal = s.error_message();
      }
    }
    return std::make_pair(admitted, refusal);
  };
  auto [bob_n, bob_msg] = burst("bob");
  auto [alice_n, alice_msg] = burst("alice");
  auto [carol_n, carol_msg] = burst("carol");
  EXPECT_GE(bob_n, 2);
  EXPECT_LE(bob_n, 3);  // a token may refill during the burst
  EXPECT_THAT(bob_msg, HasSubstr("--max-estimates-per-second"));
  EXPECT_GE(alice_n, 6);
  EXPECT_LE(alice_n, 8);
  EXPECT_THAT(alice_msg, HasSubstr("its own limit"));
  EXPECT_EQ(carol_n, 10);
  // Out of range: refused, nothing changed.
  grpc::ClientContext bad;
  v1::SetPrincipalLimitsRequest r;
  r.set_name("alice");
  r.mutable_limits()->set_max_active_jobs(-1);
  v1::Principal p;
  EXPECT_EQ(server.admin().SetPrincipalLimits(&bad, r, &p).error_code(),
            grpc::INVALID_ARGUMENT);
}

TEST_F(AccessTest, TokensAreStoredOnlyAsHashesAndNeverInTheAuditLog) {
  const std::string db = ReadFileOrDie(server_.db_path());
  std::string wal;
  {
    std::ifstream in(server_.db_path() + "-wal", std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    wal = ss.str();
  }
  for (const std::string& tok :
       {alice_token_, bob_token_, server_.curator_token()}) {
    const std::string secret = tok.substr(17);
    EXPECT_EQ(db.find(secret), std::string::npos);
    EXPECT_EQ(wal.find(secret), std::string::npos);
  }
  grpc::ClientContext ctx;
  v1::ListAuditResponse audit;
  ASSERT_TRUE(server_.admin().ListAudit(&ctx, {}, &audit).ok());
  ASSERT_GT(audit.entries_size(), 0);
  bool saw_grant = false;
  for (const auto& e : audit.entries()) {
    EXPECT_EQ(e.detail().find(alice_token_.substr(17)), std::string::npos);
    if (e.method() == "AdminService/GrantDataset" && e.target() == "alice") {
      saw_grant = true;
      EXPECT_EQ(e.principal(), "curator");
      EXPECT_EQ(e.dataset(), "private");
      EXPECT_EQ(e.code(), 0);
    }
  }
  EXPECT_TRUE(saw_grant);
}

std::vector<v1::AuditEntry> AuditOf(TestServer& server,
                                    const std::string& method) {
  grpc::ClientContext ctx;
  v1::ListAuditResponse audit;
  EXPECT_TRUE(server.admin().ListAudit(&ctx, {}, &audit).ok());
  std::vector<v1::AuditEntry> out;
  for (const auto& e : audit.entries()) {
    if (e.method() == method) out.push_back(e);
  }
  return out;
}

// A change and its audit record commit in one transaction.
TEST_F(AccessTest, AuditRecordsCommitWithTheChangeTheyRecord) {
  Stubs alice = As(alice_token_);
  const std::string job = Submit(alice, "private", 0.5);
  ASSERT_FALSE(job.empty());
  grpc::Status refused;
  EXPECT_TRUE(Submit(alice, "private", 1000, &refused).empty());
  EXPECT_EQ(refused.error_code(), grpc::RESOURCE_EXHAUSTED);
  const auto submits = AuditOf(server_, "JobService/SubmitJob");
  ASSERT_EQ(submits.size(), 2u);
  // Newest first: the refusal (no job), then the admitted job, named by
  // the record written in its admission transaction.
  EXPECT_EQ(submits[0].code(), grpc::RESOURCE_EXHAUSTED);
  EXPECT_EQ(submits[0].job_id(), "");
  EXPECT_EQ(submits[1].code(), 0);
  EXPECT_EQ(submits[1].job_id(), job);
  EXPECT_EQ(submits[1].principal(), "alice");
  EXPECT_EQ(submits[1].dataset(), "private");

  // If the audit record cannot be written, the change does not happen.
  {
    sqlite3* raw = nullptr;
    ASSERT_EQ(sqlite3_open(server_.db_path().c_str(), &raw), SQLITE_OK);
    sqlite3_busy_timeout(raw, 5000);
    ASSERT_EQ(sqlite3_exec(raw,
                           "CREATE TRIGGER refuse_audit BEFORE INSERT ON audit "
                           "BEGIN SELECT RAISE(ABORT, 'audit refused'); END;",
                           nullptr, nullptr, nullptr),
              SQLITE_OK);
    sqlite3_close(raw);
  }
  grpc::ClientContext ctx;
  v1::CreatePrincipalRequest req;
  req.set_name("mallory");
  req.set_role(v1::ROLE_ANALYST);
  v1::CreatedToken created;
  EXPECT_FALSE(server_.admin().CreatePrincipal(&ctx, req, &created).ok());
  grpc::Status lost;
  EXPECT_TRUE(Submit(alice, "private", 0.5, &lost).empty());
  EXPECT_FALSE(lost.ok());
  {
    sqlite3* raw = nullptr;
    ASSERT_EQ(sqlite3_open(server_.db_path().c_str(), &raw), SQLITE_OK);
    sqlite3_busy_timeout(raw, 5000);
    ASSERT_EQ(sqlite3_exec(raw, "DROP TRIGGER refuse_audit", nullptr, nullptr,
                           nullptr),
              SQLITE_OK);
    sqlite3_close(raw);
  }
  grpc::ClientContext lctx;
  v1::ListPrincipalsResponse principals;
  ASSERT_TRUE(server_.admin().ListPrincipals(&lctx, {}, &principals).ok());
  for (const auto& p : principals.principals()) {
    EXPECT_NE(p.name(), "mallory");
  }
  // Only the first job was charged and created.
  grpc::ClientContext bctx;
  v1::ListLedgerRequest lr;
  lr.set_dataset("private");
  v1::ListLedgerResponse ledger;
  ASSERT_TRUE(server_.budget().ListLedger(&bctx, lr, &ledger).ok());
  ASSERT_EQ(ledger.entries_size(), 1);
  grpc::ClientContext jctx;
  v1::ListJobsResponse jobs;
  ASSERT_TRUE(server_.jobs().ListJobs(&jctx, {}, &jobs).ok());
  EXPECT_EQ(jobs.jobs_size(), 1);
}

// 50 concurrent submitters spread over 5 analysts: whichever
// limit binds, the analyst caps or the dataset's budget, neither is ever
// exceeded.
struct Round {
  int admitted = 0, refused_by_cap = 0, refused_by_budget = 0;
};

Round RunSubmitters(AccessTest* t, TestServer& server,
                    const std::string& dataset,
                    const std::vector<std::string>& tokens) {
  std::atomic<int> admitted{0}, by_cap{0}, by_budget{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < 50; ++i) {
    threads.emplace_back([&, i] {
      Stubs s(TokenChannel(server.target(), tokens[i % tokens.size()]));
      grpc::ClientContext ctx;
      v1::SubmitJobRequest req;
      *req.mutable_spec() = Spec(dataset, 0.25);
      v1::Job job;
      const grpc::Status st = s.jobs->SubmitJob(&ctx, req, &job);
      if (st.ok()) {
        ++admitted;
      } else if (st.error_code() == grpc::RESOURCE_EXHAUSTED &&
                 st.error_message().find("over the cap") != std::string::npos) {
        ++by_cap;
      } else if (st.error_code() == grpc::RESOURCE_EXHAUSTED) {
        ++by_budget;
      } else {
        ADD_FAILURE() << st.error_message();
      }
    });
  }
  for (auto& th : threads) th.join();
  return {admitted.load(), by_cap.load(), by_budget.load()};
}

void ExpectWithinLimits(TestServer& server, const std::string& dataset,
                        const std::vector<std::string>& tokens, double cap) {
  grpc::ClientContext ctx;
  v1::GetBudgetRequest br;
  br.set_dataset(dataset);
  v1::BudgetStatus b;
  ASSERT_TRUE(server.budget().GetBudget(&ctx, br, &b).ok());
  EXPECT_LE(b.epsilon_spent(), b.epsilon_total() + 1e-9);
  for (size_t a = 0; a < tokens.size(); ++a) {
    Stubs s(TokenChannel(server.target(), tokens[a]));
    grpc::ClientContext c;
    v1::BudgetStatus mine;
    ASSERT_TRUE(s.budget->GetBudget(&c, br, &mine).ok());
    EXPECT_DOUBLE_EQ(mine.caller_epsilon_cap(), cap);
    EXPECT_LE(mine.caller_epsilon_spent(), cap + 1e-9) << "analyst " << a;
  }
}

TEST_F(AccessTest, ConcurrentSubmittersNeverExceedTheirCaps) {
  // A large dataset budget: the caps bind.
  ASSERT_TRUE(server_.Import(Header("shared", 50.0), SmallCsv(200)).ok());
  std::vector<std::string> tokens;
  for (int a = 0; a < 5; ++a) {
    const std::string name = absl::StrCat("an", a);
    tokens.push_back(server_.CreateAnalyst(name));
    ASSERT_TRUE(server_.Grant(name, "shared", /*cap=*/0.6).ok());
  }
  const Round r = RunSubmitters(this, server_, "shared", tokens);
  EXPECT_EQ(r.admitted + r.refused_by_cap + r.refused_by_budget, 50);
  EXPECT_GE(r.admitted, 5);  // everyone fits at least one job
  EXPECT_GT(r.refused_by_cap, 0);
  EXPECT_EQ(r.refused_by_budget, 0);
  ExpectWithinLimits(server_, "shared", tokens, 0.6);
  // An estimate tells a capped analyst its next job would be refused.
  Stubs s0 = As(tokens[0]);
  grpc::ClientContext ctx;
  v1::EstimateJobRequest req;
  *req.mutable_spec() = Spec("shared", 0.25);
  v1::JobEstimate est;
  ASSERT_TRUE(s0.jobs->EstimateJob(&ctx, req, &est).ok());
  EXPECT_FALSE(est.admissible());
  EXPECT_THAT(est.message(), HasSubstr("over the cap of 0.6"));
}

TEST_F(AccessTest, ConcurrentSubmittersNeverExceedTheDatasetBudget) {
  // Caps larger than the dataset's budget: the dataset's filter binds.
  ASSERT_TRUE(server_.Import(Header("scarce", 1.0), SmallCsv(200)).ok());
  std::vector<std::string> tokens;
  for (int a = 0; a < 5; ++a) {
    const std::string name = absl::StrCat("bn", a);
    tokens.push_back(server_.CreateAnalyst(name));
    ASSERT_TRUE(server_.Grant(name, "scarce", /*cap=*/0.9).ok());
  }
  const Round r = RunSubmitters(this, server_, "scarce", tokens);
  EXPECT_EQ(r.admitted + r.refused_by_cap + r.refused_by_budget, 50);
  EXPECT_GT(r.admitted, 0);
  EXPECT_GT(r.refused_by_budget, 0);
  ExpectWithinLimits(server_, "scarce", tokens, 0.9);
}

// ---------------------------------------------------------------- deletion

std::string FileBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The 8 bytes of a double as stored (little-endian, native layout).
std::string Bytes(double v) {
  return std::string(reinterpret_cast<const char*>(&v), sizeof(v));
}

TEST_F(AccessTest, DeletionErasesRowsKeepsLedgerAndCancelsJobs) {
  // Distinctive row values, easy to find in the database files.
  const double marks[] = {31415.926535897931, -27182.818284590452};
  std::string csv;
  for (int i = 0; i < 300; ++i) {
    absl::StrAppendFormat(&csv, "%.17g,%d,%s\n", i % 2 ? marks[0] : marks[1],
                          i % 3, i % 2 ? "1" : "-1");
  }
  ASSERT_TRUE(server_.Import(Header("doomed", 50), csv).ok());
  auto contains_marks = [&] {
    const std::string files =
        FileBytes(server_.db_path()) + FileBytes(server_.db_path() + "-wal");
    return files.find(Bytes(marks[0])) != std::string::npos ||
           files.find(Bytes(marks[1])) != std::string::npos;
  };
  ASSERT_TRUE(contains_marks()) << "the test cannot see stored rows";
  // One finished job (charged) and one long job that will be running.
  Stubs curator = As(server_.curator_token());
  const std::string done = Submit(curator, "doomed", 0.5);
  ASSERT_EQ(server_.WaitForJob(done).state(), v1::JOB_STATE_SUCCEEDED);
  grpc::ClientContext sctx;
  v1::SubmitJobRequest long_req;
  *long_req.mutable_spec() = Spec("doomed", 0.5, /*steps=*/200000);
  v1::Job running;
  ASSERT_TRUE(curator.jobs->SubmitJob(&sctx, long_req, &running).ok());

  grpc::ClientContext dctx;
  v1::DeleteDatasetRequest del;
  del.set_name("doomed");
  v1::DeleteDatasetResponse out;
  const grpc::Status st = curator.datasets->DeleteDataset(&dctx, del, &out);
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_EQ(out.cancelled_jobs(), 1);
  EXPECT_GT(out.blocks_deleted(), 0);
  EXPECT_EQ(server_.WaitForJob(running.id()).state(), v1::JOB_STATE_CANCELLED);
  // No row value is left in the database file or its WAL.
  EXPECT_FALSE(contains_marks());
  // The dataset is gone for everyone...
  grpc::ClientContext g;
  v1::GetDatasetRequest gr;
  gr.set_name("doomed");
  v1::DatasetInfo info;
  EXPECT_EQ(curator.datasets->GetDataset(&g, gr, &info).error_code(),
            grpc::NOT_FOUND);
  grpc::Status sub;
  Submit(curator, "doomed", 0.1, &sub);
  EXPECT_EQ(sub.error_code(), grpc::NOT_FOUND);
  // ...but its ledger (both charges) and audit history are kept, and the
  // name stays reserved.
  grpc::ClientContext l;
  v1::ListLedgerRequest lr;
  lr.set_dataset("doomed");
  v1::ListLedgerResponse ledger;
  ASSERT_TRUE(curator.budget->ListLedger(&l, lr, &ledger).ok());
  EXPECT_EQ(ledger.entries_size(), 2);
  EXPECT_THAT(
      server_.Import(Header("doomed", 50), SmallCsv(10)).error_message(),
      HasSubstr("already exists"));
  grpc::ClientContext a;
  v1::ListAuditRequest ar;
  ar.set_dataset("doomed");
  v1::ListAuditResponse audit;
  ASSERT_TRUE(server_.admin().ListAudit(&a, ar, &audit).ok());
  bool saw = false;
  for (const auto& e : audit.entries()) {
    saw |= e.method() == "DatasetService/DeleteDataset" && e.code() == 0;
  }
  EXPECT_TRUE(saw);
  // Deleting again: NOT_FOUND.
  grpc::ClientContext d2;
  EXPECT_EQ(curator.datasets->DeleteDataset(&d2, del, &out).error_code(),
            grpc::NOT_FOUND);
}

// ---------------------------------------------------------------- TLS

class TlsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    char tmpl[] = "/tmp/dpopt-tls-XXXXXX";
    dir_ = new std::string(mkdtemp(tmpl));
    const std::string cmd =
        DataPath("tests/common/make-test-certs.sh") + " " + *dir_;
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  }
  static std::string File(const std::string& name) {
    return *dir_ + "/" + name;
  }
  static std::string* dir_;
};
std::string* TlsTest::dir_ = nullptr;

std::unique_ptr<server::DpoptServer> StartTls(const std::string& db,
                                              const std::string& client_ca,
                                              const std::string& dir) {
  server::ServerOptions o;
  o.db_path = db;
  o.listen = "127.0.0.1:0";
  o.tls_cert = dir + "/server.crt";
  o.tls_key = dir + "/server.key";
  o.tls_client_ca = client_ca;
  auto s = server::DpoptServer::Start(o);
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? std::move(*s) : nullptr;
}

grpc::Status WhoAmI(const std::string& target,
                    std::shared_ptr<grpc::ChannelCredentials> creds,
                    const std::string& token) {
  auto ch = grpc::CreateChannel(target, creds);
  auto stub = v1::AdminService::NewStub(ch);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  ctx.AddMetadata("authorization", "Bearer " + token);
  v1::Principal p;
  return stub->WhoAmI(&ctx, {}, &p);
}

TEST_F(TlsTest, TlsAndMutualTlsHandshakes) {
  const std::string ca = ReadFileOrDie(File("ca.crt"));
  for (bool mutual : {false, true}) {
    SCOPED_TRACE(mutual ? "mutual TLS" : "TLS");
    const std::string db = absl::StrCat(*dir_, "/db", mutual, ".sqlite");
    auto server = StartTls(db, mutual ? File("ca.crt") : "", *dir_);
    ASSERT_NE(server, nullptr);
    const std::string token = [&] {
      std::string t = ReadFileOrDie(db + ".curator-token");
      t.pop_back();
      return t;
    }();
    const std::string target = absl::StrCat("localhost:", server->port());
    grpc::SslCredentialsOptions good;
    good.pem_root_certs = ca;
    grpc::SslCredentialsOptions with_client = good;
    with_client.pem_cert_chain = ReadFileOrDie(File("client.crt"));
    with_client.pem_private_key = ReadFileOrDie(File("client.key"));
    grpc::SslCredentialsOptions wrong_ca;
    wrong_ca.pem_root_certs = ReadFileOrDie(File("other-ca.crt"));
    // The right CA (and, for mTLS, a client certificate) works.
    EXPECT_TRUE(
        WhoAmI(target, grpc::SslCredentials(mutual ? with_client : good), token)
            .ok());
    // A client that does not trust the server's CA cannot connect.
    EXPECT_EQ(
        WhoAmI(target, grpc::SslCredentials(wrong_ca), token).error_code(),
        grpc::UNAVAILABLE);
    // Plaintext to a TLS port fails.
    EXPECT_EQ(
        WhoAmI(target, grpc::InsecureChannelCredentials(), token).error_code(),
        grpc::UNAVAILABLE);
    if (mutual) {
      // Without a client certificate the handshake is refused.
      EXPECT_EQ(WhoAmI(target, grpc::SslCredentials(good), token).error_code(),
                grpc::UNAVAILABLE);
    }
    server->Shutdown();
  }
}

TEST(ListenPolicyTest, PlaintextIsRefusedOffLoopback) {
  server::ServerOptions o;
  o.db_path = "/tmp/unused.db";
  // Only literal loopback addresses count: a name (localhost included) can
  // resolve anywhere, and "unix" or "127." as a prefix of a name is not a
  // socket or a loopback address.
  for (const char* addr :
       {"0.0.0.0:50051", "10.1.2.3:1", "[::]:5", "example.org:50051",
        "localhost:50051", "unixhost:50051", "127.x.example.com:50051"}) {
    o.listen = addr;
    const absl::Status s = o.Validate();
    EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << addr;
    EXPECT_THAT(std::string(s.message()), HasSubstr("without TLS")) << addr;
  }
  for (const char* addr :
       {"127.0.0.1:0", "127.3.4.5:1", "[::1]:9", "unix:/tmp/dpopt.sock"}) {
    o.listen = addr;
    EXPECT_TRUE(o.Validate().ok()) << addr;
  }
  o.listen = "0.0.0.0:50051";
  o.insecure = true;
  EXPECT_TRUE(o.Validate().ok());
  o.insecure = false;
  o.tls_cert = "/x.crt";
  o.tls_key = "/x.key";
  EXPECT_TRUE(o.Validate().ok());
}

}  // namespace
}  // namespace dpopt::testing
