// Accelerated through the real server (in-process, real SQLite and gRPC): the
// six accelerated methods are job types, charge exactly their epsilon to
// the ledger (pure DP, basic composition), return privatized traces, and
// reject bad specs before anything is charged.
#include <cmath>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "tests/integration/test_server.h"

namespace dpopt::testing {
namespace {

using ::testing::HasSubstr;

// n rows of d features in [0, 1] (label last, -1/+1), deterministic.
std::string SmallCsv(int n, int d) {
  std::string out;
  for (int i = 0; i < n; ++i) {
    double sum = 0;
    for (int j = 0; j < d; ++j) {
      const double v = ((i * 13 + j * 7) % 11) / 10.0;
      sum += v;
      absl::StrAppendFormat(&out, "%.1f,", v);
    }
    out += sum > d / 2.0 ? "1\n" : "-1\n";
  }
  return out;
}

v1::ImportHeader CsvHeader(const std::string& name, v1::NeighbouringRelation r,
                           double eps) {
  v1::ImportHeader h;
  h.set_name(name);
  h.set_format(v1::DATASET_FORMAT_CSV);
  h.set_dimension(5);
  h.set_epsilon_budget(eps);
  h.set_delta_budget(0);
  h.set_budget_filter(v1::BUDGET_FILTER_BASIC);
  h.set_relation(r);
  h.set_label_type(v1::LABEL_TYPE_BINARY);
  h.set_label_last(true);
  return h;
}

v1::JobSpec Spec(const std::string& dataset, const std::string& algo,
                 double eps, int steps, int batch,
                 const std::string& extra = "") {
  const std::string json = absl::StrFormat(
      R"({"dataset": "%s", "model": {"logistic_regression": {"l2": 0.1}},
          "privacy": {"epsilon": %g},
          "algorithm": {"%s": {"common": {"steps": %d, "batch_size": %d,
              "clip_norm": 5, "smoothness": 2, "step_scale": 1 %s}}},
          "trace_every": 1, "trace_iterates": true})",
      dataset, eps, algo, steps, batch, extra);
  v1::JobSpec spec;
  auto st = google::protobuf::util::JsonStringToMessage(json, &spec);
  EXPECT_TRUE(st.ok()) << st.message();
  return spec;
}

double Spent(TestServer& s, const std::string& dataset) {
  grpc::ClientContext ctx;
  v1::GetBudgetRequest req;
  req.set_dataset(dataset);
  v1::BudgetStatus b;
  EXPECT_TRUE(s.budget().GetBudget(&ctx, req, &b).ok());
  return b.epsilon_spent();
}

class AcceleratedTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(
        server_.Import(CsvHeader("ar", v1::ADD_REMOVE, 3), SmallCsv(400, 5))
            .ok());
    ASSERT_TRUE(
        server_.Import(CsvHeader("ro", v1::REPLACE_ONE, 3), SmallCsv(400, 5))
            .ok());
  }
  TestServer server_;
};

TEST_F(AcceleratedTest, EveryMethodEstimatesExactlyItsEpsilon) {
  for (const char* algo :
       {"accel_dp_gd", "accel_dp_hb", "accel_dp_nag", "accel_dp_nag_opt",
        "accel_dp_masg", "accel_dp_masg_opt"}) {
    for (int batch : {0, 40}) {
      grpc::ClientContext ctx;
      v1::EstimateJobRequest req;
      *req.mutable_spec() = Spec("ar", algo, 0.75, 120, batch);
      v1::JobEstimate est;
      const grpc::Status st = server_.jobs().EstimateJob(&ctx, req, &est);
      ASSERT_TRUE(st.ok()) << algo << ": " << st.error_message();
      EXPECT_TRUE(est.admissible()) << algo;
      EXPECT_NEAR(est.cost().epsilon(), 0.75, 1e-9) << algo;
      EXPECT_LE(est.calibration().steps(), 120) << algo;
      EXPECT_DOUBLE_EQ(est.calibration().sampling_rate(),
                       batch == 0 ? 1.0 : 0.1);
    }
  }
  EXPECT_EQ(Spent(server_, "ar"), 0);
}

TEST_F(AcceleratedTest, NagOptJobChargesEpsilonAndReturnsTFinalIterates) {
  grpc::ClientContext ctx;
  v1::SubmitJobRequest req;
  *req.mutable_spec() = Spec("ar", "accel_dp_nag_opt", 1.0, 300, 40);
  v1::Job job;
  ASSERT_TRUE(server_.jobs().SubmitJob(&ctx, req, &job).ok());
  EXPECT_NEAR(Spent(server_, "ar"), 1.0, 1e-9);  // charged before running
  const v1::Job done = server_.WaitForJob(job.id());
  ASSERT_EQ(done.state(), v1::JOB_STATE_SUCCEEDED) << done.message();
  grpc::ClientContext rctx;
  v1::GetJobResultRequest rreq;
  rreq.set_id(job.id());
  v1::JobResult result;
  ASSERT_TRUE(server_.jobs().GetJobResult(&rctx, rreq, &result).ok());
  const int64_t t_final = result.calibration().steps();
  EXPECT_GE(t_final, 1);
  EXPECT_LE(t_final, 300);
  ASSERT_EQ(result.trace_size(), t_final);
  EXPECT_EQ(result.trace(t_final - 1).step(), t_final);
  EXPECT_EQ(result.trace(0).iterate_size(), 5);
  EXPECT_THAT(result.calibration().notes(0), HasSubstr("T = "));
  EXPECT_NEAR(Spent(server_, "ar"), 1.0, 1e-9);

  // Basic composition: 1 + 2 <= 3 fits, 1 + 2.5 does not.
  grpc::ClientContext c2;
  v1::SubmitJobRequest over;
  *over.mutable_spec() = Spec("ar", "accel_dp_gd", 2.5, 10, 0);
  v1::Job j2;
  EXPECT_EQ(server_.jobs().SubmitJob(&c2, over, &j2).error_code(),
            grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_NEAR(Spent(server_, "ar"), 1.0, 1e-9);
}

TEST_F(AcceleratedTest, ReplaceOneRunsFullBatchAndRefusesMinibatches) {
  {
    grpc::ClientContext ctx;
    v1::SubmitJobRequest req;
    *req.mutable_spec() = Spec("ro", "accel_dp_masg", 1.0, 50, 0);
    v1::Job job;
    ASSERT_TRUE(server_.jobs().SubmitJob(&ctx, req, &job).ok());
    EXPECT_EQ(server_.WaitForJob(job.id()).state(), v1::JOB_STATE_SUCCEEDED);
    EXPECT_NEAR(Spent(server_, "ro"), 1.0, 1e-9);
  }
  {
    grpc::ClientContext ctx;
    v1::SubmitJobRequest req;
    *req.mutable_spec() = Spec("ro", "accel_dp_nag", 1.0, 50, 40);
    v1::Job job;
    const grpc::Status st = server_.jobs().SubmitJob(&ctx, req, &job);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_THAT(st.error_message(), HasSubstr("add/remove"));
  }
  EXPECT_NEAR(Spent(server_, "ro"), 1.0, 1e-9);
}

TEST_F(AcceleratedTest, BadSpecsAreRefusedWithNothingCharged) {
  const std::string bad[] = {
      // smoothness missing
      R"({"dataset": "ar", "model": {"logistic_regression": {"l2": 0.1}},
          "privacy": {"epsilon": 1},
          "algorithm": {"accel_dp_nag": {"common": {"steps": 10,
              "clip_norm": 5}}}})",
      // MASG with c > 1
      R"({"dataset": "ar", "model": {"logistic_regression": {"l2": 0.1}},
          "privacy": {"epsilon": 1},
          "algorithm": {"accel_dp_masg": {"common": {"steps": 10,
              "clip_norm": 5, "smoothness": 2, "step_scale": 1.5}}}})",
      // batch larger than the dataset
      R"({"dataset": "ar", "model": {"logistic_regression": {"l2": 0.1}},
          "privacy": {"epsilon": 1},
          "algorithm": {"accel_dp_gd": {"common": {"steps": 10,
              "clip_norm": 5, "smoothness": 2, "batch_size": 1000}}}})",
      // Gaussian without delta
      R"({"dataset": "ar", "model": {"logistic_regression": {"l2": 0.1}},
          "privacy": {"epsilon": 1},
          "algorithm": {"accel_dp_hb": {"common": {"steps": 10,
              "clip_norm": 5, "smoothness": 2,
              "noise": "ACCEL_NOISE_GAUSSIAN"}}}})",
  };
  for (const std::string& json : bad) {
    v1::JobSpec spec;
    ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(json, &spec).ok());
    grpc::ClientContext ctx;
    v1::SubmitJobRequest req;
    *req.mutable_spec() = spec;
    v1::Job job;
    EXPECT_EQ(server_.jobs().SubmitJob(&ctx, req, &job).error_code(),
              grpc::StatusCode::INVALID_ARGUMENT)
        << json;
  }
  EXPECT_EQ(Spent(server_, "ar"), 0);
}

}  // namespace
}  // namespace dpopt::testing
