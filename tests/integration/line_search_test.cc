// Line-search (DP backtracking line search) through the in-process server:
// spec translation, reservation charged once to the ledger, job runs to a
// clean budget-exhausted stop with a privatized model, bad specs refused with
// nothing charged.
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "dpopt/v1/dpopt.grpc.pb.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "tests/integration/test_server.h"

namespace dpopt::testing {
namespace {

using ::testing::HasSubstr;

// Labels +-1; a bias column and two features shifted by the label.
std::string Blobs(int rows) {
  std::string out;
  for (int i = 0; i < rows; ++i) {
    const int y = i % 2 == 0 ? 1 : -1;
    const double a = ((i * 7) % 11) / 11.0 * 0.5 + (y > 0 ? 0.45 : 0.05);
    const double b = ((i * 5) % 13) / 13.0 * 0.5 + (y > 0 ? 0.05 : 0.45);
    absl::StrAppendFormat(&out, "%s 1:1 2:%.4f 3:%.4f\n", y > 0 ? "+1" : "-1",
                          a, b);
  }
  return out;
}

v1::ImportHeader Header(const std::string& name, bool is_public) {
  v1::ImportHeader h;
  h.set_name(name);
  h.set_format(v1::DATASET_FORMAT_LIBSVM);
  h.set_dimension(3);
  h.set_public_(is_public);
  if (!is_public) {
    h.set_epsilon_budget(5);
    h.set_delta_budget(1e-5);
  }
  return h;
}

v1::JobSpec Spec(const std::string& algorithm_json, double epsilon = 1.0) {
  v1::JobSpec spec;
  const std::string json = absl::StrCat(
      R"({"dataset": "blobs", "model": {"logistic_regression": {"l2": 0.001}},
          "privacy": {"epsilon": )",
      epsilon, R"(, "delta": 1e-8}, "algorithm": )", algorithm_json,
      R"(, "evaluate_on": "blobs-test"})");
  auto st = google::protobuf::util::JsonStringToMessage(json, &spec);
  EXPECT_TRUE(st.ok()) << st.message();
  return spec;
}

int64_t Charges(TestServer& s) {
  grpc::ClientContext ctx;
  v1::ListLedgerRequest req;
  req.set_dataset("blobs");
  v1::ListLedgerResponse resp;
  EXPECT_TRUE(s.budget().ListLedger(&ctx, req, &resp).ok());
  return resp.entries_size();
}

class LineSearchIntegrationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(s_.Import(Header("blobs", false), Blobs(20000)).ok());
    ASSERT_TRUE(s_.Import(Header("blobs-test", true), Blobs(600)).ok());
  }
  TestServer s_;
};

TEST_F(LineSearchIntegrationTest,
       EachVariantRunsAndIsChargedItsReservationOnce) {
  for (const char* algo :
       {R"({"dp_blsgd": {"planned_iterations": 20}})",
        R"({"dp_blsgd_ac": {"sampling_rate": 0.2, "planned_iterations": 20}})",
        R"({"dp_blgd": {"planned_iterations": 20}})"}) {
    SCOPED_TRACE(algo);
    const int64_t before = Charges(s_);
    v1::Job job;
    {
      grpc::ClientContext ctx;
      v1::SubmitJobRequest req;
      *req.mutable_spec() = Spec(algo);
      grpc::Status st = s_.jobs().SubmitJob(&ctx, req, &job);
      ASSERT_TRUE(st.ok()) << st.error_message();
    }
    EXPECT_EQ(Charges(s_), before + 1);
    EXPECT_LE(job.cost().epsilon(), 1.0 + 1e-9);
    EXPECT_THAT(job.calibration().notes(0), HasSubstr("SOUND accounting"));
    v1::Job done = s_.WaitForJob(job.id());
    ASSERT_EQ(done.state(), v1::JOB_STATE_SUCCEEDED) << done.message();
    // Budget-determined run length: it stopped well before the cap.
    EXPECT_GT(done.steps_done(), 0);
    EXPECT_LT(done.steps_done(), done.steps_total());
    grpc::ClientContext ctx;
    v1::GetJobResultRequest rreq;
    rreq.set_id(job.id());
    v1::JobResult result;
    ASSERT_TRUE(s_.jobs().GetJobResult(&ctx, rreq, &result).ok());
    EXPECT_EQ(result.model().weights_size(), 3);
    EXPECT_GT(result.evaluation().accuracy(), 0.8);
    EXPECT_EQ(Charges(s_), before + 1);  // the run charged nothing more
  }
}

// The Gaussian line search (the paper's Gaussian NOISYBTLS, charged through
// the GaussianSparseVector DpEvent) as a job option.
TEST_F(LineSearchIntegrationTest,
       GaussianLineSearchJobIsChargedOnceAndSucceeds) {
  v1::Job job;
  {
    grpc::ClientContext ctx;
    v1::SubmitJobRequest req;
    *req.mutable_spec() = Spec(
        R"({"dp_blgd": {"planned_iterations": 20, "gaussian_line_search": true}})",
        2.0);
    ASSERT_TRUE(req.spec().algorithm().dp_blgd().gaussian_line_search());
    grpc::Status st = s_.jobs().SubmitJob(&ctx, req, &job);
    ASSERT_TRUE(st.ok()) << st.error_message();
  }
  EXPECT_EQ(Charges(s_), 1);
  EXPECT_LE(job.cost().epsilon(), 2.0 + 1e-9);
  EXPECT_GT(job.cost().epsilon(), 1.0);
  ASSERT_GE(job.calibration().notes_size(), 2);
  EXPECT_THAT(job.calibration().notes(0), HasSubstr("SOUND accounting"));
  EXPECT_THAT(job.calibration().notes(1), HasSubstr("Gaussian sparse vector"));
  v1::Job done = s_.WaitForJob(job.id());
  ASSERT_EQ(done.state(), v1::JOB_STATE_SUCCEEDED) << done.message();
  EXPECT_GT(done.steps_done(), 0);
  grpc::ClientContext ctx;
  v1::GetJobResultRequest rreq;
  rreq.set_id(job.id());
  v1::JobResult result;
  ASSERT_TRUE(s_.jobs().GetJobResult(&ctx, rreq, &result).ok());
  EXPECT_EQ(result.model().weights_size(), 3);
  EXPECT_EQ(Charges(s_), 1);  // the run charged nothing more
}

// reserve_amplified through the API: the estimate calibrates less noise for
// the same target and says how the gradients were reserved; nothing is
// charged by estimates.
TEST_F(LineSearchIntegrationTest, AmplifiedReservationIsAJobOption) {
  auto estimate = [&](const char* algo, v1::JobEstimate* est) {
    grpc::ClientContext ctx;
    v1::EstimateJobRequest req;
    *req.mutable_spec() = Spec(algo, 0.5);
    return s_.jobs().EstimateJob(&ctx, req, est);
  };
  v1::JobEstimate raw, amp;
  ASSERT_TRUE(estimate(R"({"dp_blsgd": {}})", &raw).ok());
  grpc::Status st =
      estimate(R"({"dp_blsgd": {"reserve_amplified": true}})", &amp);
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_LT(amp.calibration().noise_multiplier(),
            0.5 * raw.calibration().noise_multiplier());
  EXPECT_LE(amp.cost().epsilon(), 0.5 + 1e-9);
  std::string notes;
  for (const std::string& n : amp.calibration().notes()) notes += n + "\n";
  EXPECT_THAT(notes, HasSubstr("Poisson-amplified"));
  EXPECT_EQ(Charges(s_), 0);
}

TEST_F(LineSearchIntegrationTest, BadSpecsAreRefusedAndChargeNothing) {
  for (const char* algo : {R"({"dp_blgd": {"sampling_rate": 0.5}})",
                           R"({"dp_blsgd": {"shrink": 1.5}})",
                           R"({"dp_blsgd": {"planned_iterations": -3}})",
                           R"({"dp_blsgd_ac": {"clip_obj": -1}})"}) {
    SCOPED_TRACE(algo);
    grpc::ClientContext ctx;
    v1::SubmitJobRequest req;
    *req.mutable_spec() = Spec(algo);
    v1::Job job;
    EXPECT_EQ(s_.jobs().SubmitJob(&ctx, req, &job).error_code(),
              grpc::INVALID_ARGUMENT);
  }
  EXPECT_EQ(Charges(s_), 0);
}

}  // namespace
}  // namespace dpopt::testing
