// Distributed-DDA (dp_dda) through the real server (in-process, real SQLite and
// gRPC): the example spec is priced by the estimate, the chargeable modes
// follow the dataset's relation (Poisson add/remove, WBK replace-one), jobs
// run in simulation and release the network average with its trace, the
// paper's calibration is refused on private data, and MPI on a server
// without MPI is refused before anything is charged.
#include <cmath>
#include <fstream>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "tests/integration/test_server.h"

namespace dpopt::testing {
namespace {

using ::testing::HasSubstr;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream buf;
  buf << in.rdbuf();
  return buf.str();
}

v1::ImportHeader A9aHeader(const std::string& name, bool is_public,
                           v1::NeighbouringRelation relation) {
  v1::ImportHeader h;
  h.set_name(name);
  h.set_format(v1::DATASET_FORMAT_LIBSVM);
  h.set_dimension(123);
  h.set_label_type(v1::LABEL_TYPE_BINARY);
  h.set_public_(is_public);
  if (!is_public) {
    h.set_epsilon_budget(3);
    h.set_delta_budget(1e-6);
    h.set_relation(relation);
  }
  return h;
}

v1::JobSpec Parse(const std::string& json) {
  v1::JobSpec spec;
  auto st = google::protobuf::util::JsonStringToMessage(json, &spec);
  EXPECT_TRUE(st.ok()) << st.message() << "\n" << json;
  return spec;
}

v1::JobSpec SmallSpec(const std::string& dataset, const std::string& extra) {
  return Parse(absl::StrFormat(
      R"({"dataset": "%s", "model": {"hinge_svm": {"l2": 0.0005}},
          "privacy": {"epsilon": 1, "delta": 1e-6},
          "algorithm": {"dp_dda": {"nodes": 20, "iterations": 2000 %s}},
          "evaluate_on": "adult-test"})",
      dataset, extra));
}

class DistributedDdaTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    server_ = new TestServer();
    const std::string train = ReadFile(DataPath("data/adult/a9a"));
    ASSERT_TRUE(
        server_->Import(A9aHeader("adult", false, v1::ADD_REMOVE), train).ok());
    ASSERT_TRUE(
        server_->Import(A9aHeader("adult-ro", false, v1::REPLACE_ONE), train)
            .ok());
    ASSERT_TRUE(
        server_->Import(A9aHeader("adult-public", true, v1::ADD_REMOVE), train)
            .ok());
    ASSERT_TRUE(server_
                    ->Import(A9aHeader("adult-test", true, v1::ADD_REMOVE),
                             ReadFile(DataPath("data/adult/a9a.t")))
                    .ok());
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }

  static grpc::Status Estimate(const v1::JobSpec& spec, v1::JobEstimate* est) {
    grpc::ClientContext ctx;
    v1::EstimateJobRequest req;
    *req.mutable_spec() = spec;
    return server_->jobs().EstimateJob(&ctx, req, est);
  }
  static grpc::Status Submit(const v1::JobSpec& spec, v1::Job* job) {
    grpc::ClientContext ctx;
    v1::SubmitJobRequest req;
    *req.mutable_spec() = spec;
    return server_->jobs().SubmitJob(&ctx, req, job);
  }
  static double Spent(const std::string& dataset) {
    grpc::ClientContext ctx;
    v1::GetBudgetRequest req;
    req.set_dataset(dataset);
    v1::BudgetStatus b;
    EXPECT_TRUE(server_->budget().GetBudget(&ctx, req, &b).ok());
    return b.epsilon_spent();
  }
  static v1::JobResult RunToResult(const v1::JobSpec& spec) {
    v1::Job job;
    const grpc::Status st = Submit(spec, &job);
    EXPECT_TRUE(st.ok()) << st.error_message();
    const v1::Job done = server_->WaitForJob(job.id());
    EXPECT_EQ(done.state(), v1::JOB_STATE_SUCCEEDED) << done.message();
    grpc::ClientContext ctx;
    v1::GetJobResultRequest req;
    req.set_id(job.id());
    v1::JobResult result;
    EXPECT_TRUE(server_->jobs().GetJobResult(&ctx, req, &result).ok());
    return result;
  }

  static TestServer* server_;
};

TestServer* DistributedDdaTest::server_ = nullptr;

TEST_F(DistributedDdaTest, ExampleSpecIsPricedByTheEstimate) {
  const v1::JobSpec spec = Parse(ReadFile(DataPath("examples/dp_dda.json")));
  v1::JobEstimate est;
  const grpc::Status st = Estimate(spec, &est);
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_TRUE(est.admissible());
  EXPECT_TRUE(est.cost().charged());
  EXPECT_LE(est.cost().epsilon(), 1.0 + 1e-9);
  EXPECT_GT(est.cost().epsilon(), 0.5);
  EXPECT_EQ(est.calibration().steps(), 5000);
  const std::string notes = absl::StrJoin(est.calibration().notes(), "\n");
  EXPECT_THAT(notes, HasSubstr("poisson_add_remove"));
  EXPECT_THAT(notes, HasSubstr("visible activation"));
  EXPECT_THAT(est.cost().event_json(), HasSubstr("poisson_sampled"));
  EXPECT_EQ(Spent("adult"), 0);
  // The default public seed is a function of the spec: the same estimate.
  v1::JobEstimate again;
  ASSERT_TRUE(Estimate(spec, &again).ok());
  EXPECT_EQ(again.cost().event_json(), est.cost().event_json());
  // And it runs: a classifier better than the majority class (76.4%).
  const v1::JobResult r = RunToResult(spec);
  std::printf("example: test accuracy %.4f\n", r.evaluation().accuracy());
  EXPECT_GT(r.evaluation().accuracy(), 0.78);
}

TEST_F(DistributedDdaTest, JobsChargeTheirRelationsModeAndReleaseTheAverage) {
  for (const std::string dataset : {"adult", "adult-ro"}) {
    const double before = Spent(dataset);
    // 16 rows per node and step: 2 epochs of a9a in 2000 steps.
    const v1::JobResult r =
        RunToResult(SmallSpec(dataset, R"(, "batch_size": 16)"));
    EXPECT_GT(Spent(dataset), before);
    EXPECT_THAT(r.cost().event_json(),
                HasSubstr(dataset == "adult" ? "poisson_sampled"
                                             : "sampled_without_replacement"));
    ASSERT_EQ(r.model().weights_size(), 123);
    for (double w : r.model().weights()) ASSERT_TRUE(std::isfinite(w));
    // Trace: t = 1, 20, 40, ..., 2000; the last point is the model.
    ASSERT_EQ(r.trace_size(), 101);
    EXPECT_EQ(r.trace(0).step(), 1);
    EXPECT_EQ(r.trace(100).step(), 2000);
    EXPECT_TRUE(r.trace(100).has_public_eval());
    // Better than the majority class on the public test set (76.4%).
    std::printf("%s: test accuracy %.4f\n", dataset.c_str(),
                r.evaluation().accuracy());
    EXPECT_GT(r.evaluation().accuracy(), 0.78) << dataset;
    std::vector<std::string> names;
    for (const auto& o : r.released()) names.push_back(o.name());
    EXPECT_THAT(names,
                ::testing::ElementsAre("public_seed", "max_activations"));
  }
}

TEST_F(DistributedDdaTest, PaperModeOnlyOnPublicDataAndShowsItsHonestCost) {
  const double before = Spent("adult");
  v1::JobEstimate est;
  grpc::Status st = Estimate(
      SmallSpec("adult", R"(, "accounting": "DDA_ACCOUNTING_PAPER")"), &est);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(st.error_message(), HasSubstr("public"));
  v1::Job job;
  EXPECT_EQ(
      Submit(SmallSpec("adult", R"(, "accounting": "DDA_ACCOUNTING_PAPER")"),
             &job)
          .error_code(),
      grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(Spent("adult"), before);
  st = Estimate(
      SmallSpec("adult-public", R"(, "accounting": "DDA_ACCOUNTING_PAPER")"),
      &est);
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_FALSE(est.cost().charged());
  EXPECT_GT(est.cost().epsilon(), 10);  // the paper's noise, priced honestly
  EXPECT_THAT(absl::StrJoin(est.calibration().notes(), "\n"),
              HasSubstr("PAPER MODE"));
}

TEST_F(DistributedDdaTest, BadSpecsAreRefusedBeforeAnyCharge) {
  const double before = Spent("adult");
  struct Case {
    std::string extra;
    grpc::StatusCode code;
    std::string message;
  };
  for (const Case& c : {
           Case{R"(, "execution": "DDA_EXECUTION_MPI")",
                grpc::StatusCode::FAILED_PRECONDITION, "MPI"},
           Case{R"(, "nodes": 1000)", grpc::StatusCode::INVALID_ARGUMENT,
                "nodes"},
           Case{R"(, "accounting": "DDA_ACCOUNTING_WBK_REPLACE_ONE")",
                grpc::StatusCode::INVALID_ARGUMENT, "replace-one"},
           Case{R"(, "activation": {"edges_per_step": 500})",
                grpc::StatusCode::INVALID_ARGUMENT, "edges_per_step"},
           Case{R"(, "clip_norm": -1)", grpc::StatusCode::INVALID_ARGUMENT,
                "clip_norm"},
           Case{R"(, "schedule": {"weights": "DDA_WEIGHTS_UNIFORM"})",
                grpc::StatusCode::INVALID_ARGUMENT, "gamma"},
       }) {
    v1::JobSpec spec = SmallSpec("adult", c.extra);
    if (c.extra.find("UNIFORM") != std::string::npos) {
      spec.mutable_model()->mutable_hinge_svm()->set_l2(0);
      spec.mutable_model()->mutable_hinge_svm()->set_l1(1e-3);
    }
    v1::Job job;
    const grpc::Status st = Submit(spec, &job);
    EXPECT_EQ(st.error_code(), c.code) << c.extra << ": " << st.error_message();
    EXPECT_THAT(st.error_message(), HasSubstr(c.message)) << c.extra;
  }
  v1::JobSpec no_iterations = Parse(
      R"({"dataset": "adult", "model": {"hinge_svm": {"l2": 0.0005}},
          "privacy": {"epsilon": 1, "delta": 1e-6},
          "algorithm": {"dp_dda": {}}})");
  v1::Job job;
  EXPECT_EQ(Submit(no_iterations, &job).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(Spent("adult"), before);
}

}  // namespace
}  // namespace dpopt::testing
