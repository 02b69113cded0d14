// Every example of examples/ against a real server on the bundled data (under
// AddressSanitizer on the first rows of Adult, see ExamplesTest), with
// the datasets imported as examples/README.md says: each example is
// estimated (admissible, charged only in the estimate's words), and each is
// submitted and must succeed. The job types come from the descriptor, so a
// job type without an example fails here.
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "tests/common/sanitizers.h"
#include "tests/integration/test_server.h"

namespace dpopt::testing {
namespace {

std::string Read(const std::string& relative) {
  return ReadFileOrDie(DataPath(relative));
}

// How many rows of the Adult files (a9a, a9a.t) a test imports.
struct AdultRows {
  int train;
  int test;
};
// All of them (32561 and 16281 rows).
constexpr AdultRows kAllAdultRows = {1 << 30, 1 << 30};
// The cut the dry-run test also uses, on which every example is admissible.
constexpr AdultRows kAdultCut = {4000, 2000};

// Imports the bundled datasets the examples name (examples/README.md), the
// Adult files cut to `rows`.
void ImportExampleData(TestServer& server, AdultRows rows) {
  ASSERT_TRUE(server
                  .Import(ExampleLibsvmHeader("adult", false),
                          FirstLines(Read("data/adult/a9a"), rows.train))
                  .ok());
  ASSERT_TRUE(server
                  .Import(ExampleLibsvmHeader("adult-test", true),
                          FirstLines(Read("data/adult/a9a.t"), rows.test))
                  .ok());
  ASSERT_TRUE(server
                  .Import(ExampleCsvHeader("quadratic-q"),
                          Read("examples/data/quadratic_q.csv"))
                  .ok());
  for (bool is_public : {false, true}) {
    const grpc::Status st = server.Import(
        ExampleMaxAffineHeader(is_public ? "max-affine-public" : "max-affine",
                               is_public),
        Read("examples/data/max_affine.csv"));
    ASSERT_TRUE(st.ok()) << st.error_message();
  }
}

class ExamplesTest : public ::testing::Test {
 protected:
  // Every example on all of Adult; under AddressSanitizer on the cut (each
  // row costs several times more there): every job type still runs its
  // whole path under the sanitizers (import, estimate, charge, training on
  // the stored rows, evaluation on adult-test), on fewer rows, and the
  // ordinary build runs the examples as examples/README.md does.
  static void SetUpTestSuite() {
    server_ = new TestServer();
    ImportExampleData(*server_,
                      kUnderAddressSanitizer ? kAdultCut : kAllAdultRows);
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  static TestServer* server_;
};

TestServer* ExamplesTest::server_ = nullptr;

std::vector<std::string> JobTypes() {
  const google::protobuf::OneofDescriptor* oneof =
      v1::AlgorithmSpec::descriptor()->FindOneofByName("algorithm");
  std::vector<std::string> out;
  for (int i = 0; i < oneof->field_count(); ++i) {
    out.push_back(oneof->field(i)->name());
  }
  return out;
}

TEST_F(ExamplesTest, EveryExampleIsAdmissibleAndSucceeds) {
  for (const std::string& type : JobTypes()) {
    SCOPED_TRACE(type);
    v1::JobSpec spec;
    const auto parsed = google::protobuf::util::JsonStringToMessage(
        Read("examples/" + type + ".json"), &spec);
    ASSERT_TRUE(parsed.ok()) << parsed.message();

    grpc::ClientContext ectx;
    v1::EstimateJobRequest ereq;
    *ereq.mutable_spec() = spec;
    v1::JobEstimate estimate;
    const grpc::Status est =
        server_->jobs().EstimateJob(&ectx, ereq, &estimate);
    ASSERT_TRUE(est.ok()) << est.error_message();
    EXPECT_TRUE(estimate.admissible()) << estimate.message();
    // Every job type bounds its work from public values.
    EXPECT_GT(estimate.calibration().work_units(), 0);

    const auto start = std::chrono::steady_clock::now();
    grpc::ClientContext sctx;
    v1::SubmitJobRequest sreq;
    *sreq.mutable_spec() = spec;
    v1::Job job;
    const grpc::Status sub = server_->jobs().SubmitJob(&sctx, sreq, &job);
    ASSERT_TRUE(sub.ok()) << sub.error_message();
    const v1::Job done = server_->WaitForJob(job.id());
    EXPECT_EQ(done.state(), v1::JOB_STATE_SUCCEEDED) << done.message();
    // The charge is the estimate's (nothing on public datasets).
    EXPECT_EQ(done.cost().charged(), estimate.cost().charged());
    EXPECT_DOUBLE_EQ(done.cost().epsilon(), estimate.cost().epsilon());
    std::printf(
        "%-24s %8.2f s\n", type.c_str(),
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count());
  }
}

// Every job type's work is bounded before charging: on a server whose
// limit is below every bound, every example is refused with
// INVALID_ARGUMENT by the estimate and by the submission, and nothing is
// charged.
// The Adult cut is enough: every job type's bound exceeds 1 on it.
TEST(ExampleWorkBoundsTest, EveryJobTypeIsRefusedAboveTheServerLimit) {
  TestServer server([](server::ServerOptions& o) { o.max_job_work = 1; });
  ImportExampleData(server, kAdultCut);
  for (const std::string& type : JobTypes()) {
    SCOPED_TRACE(type);
    v1::JobSpec spec;
    const auto parsed = google::protobuf::util::JsonStringToMessage(
        Read("examples/" + type + ".json"), &spec);
    ASSERT_TRUE(parsed.ok()) << parsed.message();
    grpc::ClientContext ectx;
    v1::EstimateJobRequest ereq;
    *ereq.mutable_spec() = spec;
    v1::JobEstimate estimate;
    const grpc::Status est = server.jobs().EstimateJob(&ectx, ereq, &estimate);
    EXPECT_EQ(est.error_code(), grpc::INVALID_ARGUMENT) << est.error_message();
    EXPECT_THAT(est.error_message(), ::testing::HasSubstr("max-job-work"));
    grpc::ClientContext sctx;
    v1::SubmitJobRequest sreq;
    *sreq.mutable_spec() = spec;
    v1::Job job;
    EXPECT_EQ(server.jobs().SubmitJob(&sctx, sreq, &job).error_code(),
              grpc::INVALID_ARGUMENT);
  }
  for (const char* dataset : {"adult", "quadratic-q", "max-affine"}) {
    grpc::ClientContext ctx;
    v1::ListLedgerRequest req;
    req.set_dataset(dataset);
    v1::ListLedgerResponse resp;
    ASSERT_TRUE(server.budget().ListLedger(&ctx, req, &resp).ok());
    EXPECT_EQ(resp.entries_size(), 0) << dataset;
  }
}

}  // namespace
}  // namespace dpopt::testing
