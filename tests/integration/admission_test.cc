// The estimate and the admission apply one rule (storage::ApplyAdmissionRule):
// on the same ledger, an estimate says "admissible" exactly when the submit
// of the same spec by the same principal is admitted, with the same message
// when it is not, whether the dataset's budget or an analyst's cap binds.
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/integration/test_server.h"

namespace dpopt::testing {
namespace {

struct Stubs {
  explicit Stubs(std::shared_ptr<grpc::Channel> c)
      : jobs(v1::JobService::NewStub(c)) {}
  std::unique_ptr<v1::JobService::Stub> jobs;
};

// Alternates estimate and submit of growing jobs by a capped analyst, an
// uncapped analyst and the curator on one dataset until everything is
// refused, checking after every step that the estimate predicted the
// submit. Bounded: at most kRounds rounds.
TEST(AdmissionAgreementTest, EstimateAgreesWithSubmitUnderBudgetAndCaps) {
  TestServer server;
  // Basic composition: epsilons add up, so both limits bind within the run.
  v1::ImportHeader header = SmallCsvHeader("d", /*eps=*/6.0);
  header.set_budget_filter(v1::BUDGET_FILTER_BASIC);
  ASSERT_TRUE(server.Import(header, SmallCsv(200)).ok());
  const std::string capped = server.CreateAnalyst("capped");
  const std::string free = server.CreateAnalyst("free");
  ASSERT_TRUE(server.Grant("capped", "d", /*cap=*/0.8).ok());
  ASSERT_TRUE(server.Grant("free", "d").ok());
  std::vector<std::pair<std::string, std::string>> who = {
      {"capped", capped}, {"free", free}, {"curator", server.curator_token()}};

  constexpr int kRounds = 40;
  int admitted = 0, refused_by_cap = 0, refused_by_budget = 0;
  for (int round = 0; round < kRounds; ++round) {
    const auto& [name, token] = who[round % who.size()];
    Stubs s(TokenChannel(server.target(), token));
    const double eps = 0.15 + 0.05 * (round % 5);
    const v1::JobSpec spec = QuickDpGdSpec("d", eps);
    SCOPED_TRACE(name + " round " + std::to_string(round));

    grpc::ClientContext ectx;
    v1::EstimateJobRequest ereq;
    *ereq.mutable_spec() = spec;
    v1::JobEstimate est;
    ASSERT_TRUE(s.jobs->EstimateJob(&ectx, ereq, &est).ok());

    grpc::ClientContext sctx;
    v1::SubmitJobRequest sreq;
    *sreq.mutable_spec() = spec;
    v1::Job job;
    const grpc::Status st = s.jobs->SubmitJob(&sctx, sreq, &job);
    if (est.admissible()) {
      EXPECT_TRUE(st.ok()) << "estimate admitted, submit refused: "
                           << st.error_message();
      if (st.ok()) {
        ++admitted;
        server.WaitForJob(job.id());
      }
    } else {
      EXPECT_EQ(st.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED)
          << "estimate refused (" << est.message() << "), submit said "
          << st.error_message();
      EXPECT_EQ(st.error_message(), est.message());
      if (est.message().find("over the cap") != std::string::npos) {
        ++refused_by_cap;
      } else {
        ++refused_by_budget;
      }
    }
  }
  // The run exercised both limits and admissions.
  EXPECT_GT(admitted, 0);
  EXPECT_GT(refused_by_cap, 0);
  EXPECT_GT(refused_by_budget, 0);
}

}  // namespace
}  // namespace dpopt::testing
