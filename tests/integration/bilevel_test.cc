// Bilevel (DP bilevel optimization) through the in-process server: estimate
// prices the job, submit charges exactly the calibrated event once, the
// result is finite and carries the released outputs; the naive mode runs
// only on public data; bad specs are refused with nothing charged.
#include <cmath>
#include <random>
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

// Family Q rows (u_i, v_i) with dy = 2 (4 features) in the unit ball, real
// label 0 last.
std::string QuadraticCsv(int rows, uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::uniform_real_distribution<double> unif(-0.7, 0.7);
  std::string out;
  for (int i = 0; i < rows; ++i) {
    absl::StrAppendFormat(&out, "%.6f,%.6f,%.6f,%.6f,0\n", unif(gen),
                          unif(gen), unif(gen), unif(gen));
  }
  return out;
}

v1::ImportHeader Header(const std::string& name, bool is_public,
                        v1::NeighbouringRelation relation = v1::ADD_REMOVE) {
  v1::ImportHeader h;
  h.set_name(name);
  h.set_format(v1::DATASET_FORMAT_CSV);
  h.set_dimension(4);
  h.set_public_(is_public);
  if (!is_public) {
    h.set_epsilon_budget(5);
    h.set_delta_budget(1e-5);
  }
  h.set_relation(relation);
  h.set_label_type(v1::LABEL_TYPE_REAL);
  h.set_label_last(true);
  return h;
}

v1::JobSpec Spec(const std::string& dataset, const std::string& algorithm,
                 bool with_privacy = true) {
  const std::string json = absl::StrCat(
      R"({"dataset": ")", dataset, R"(", )",
      with_privacy ? R"("privacy": {"epsilon": 1.0, "delta": 1e-6}, )" : "",
      R"("algorithm": )", algorithm, "}");
  v1::JobSpec spec;
  auto st = google::protobuf::util::JsonStringToMessage(json, &spec);
  EXPECT_TRUE(st.ok()) << st.message() << " in " << json;
  return spec;
}

class BilevelIntegrationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(s_.Import(Header("q", false), QuadraticCsv(3000, 1)).ok());
    ASSERT_TRUE(s_.Import(Header("q-public", true), QuadraticCsv(500, 2)).ok());
    ASSERT_TRUE(s_.Import(Header("q-replace", false, v1::REPLACE_ONE),
                          QuadraticCsv(2000, 3))
                    .ok());
  }

  std::vector<v1::LedgerEntry> Ledger(const std::string& dataset) {
    grpc::ClientContext ctx;
    v1::ListLedgerRequest req;
    req.set_dataset(dataset);
    v1::ListLedgerResponse resp;
    EXPECT_TRUE(s_.budget().ListLedger(&ctx, req, &resp).ok());
    return {resp.entries().begin(), resp.entries().end()};
  }

  grpc::Status Estimate(const v1::JobSpec& spec, v1::JobEstimate* est) {
    grpc::ClientContext ctx;
    v1::EstimateJobRequest req;
    *req.mutable_spec() = spec;
    return s_.jobs().EstimateJob(&ctx, req, est);
  }

  grpc::Status Submit(const v1::JobSpec& spec, v1::Job* job) {
    grpc::ClientContext ctx;
    v1::SubmitJobRequest req;
    *req.mutable_spec() = spec;
    return s_.jobs().SubmitJob(&ctx, req, job);
  }

  v1::JobResult Result(const std::string& id) {
    grpc::ClientContext ctx;
    v1::GetJobResultRequest req;
    req.set_id(id);
    v1::JobResult result;
    EXPECT_TRUE(s_.jobs().GetJobResult(&ctx, req, &result).ok());
    return result;
  }

  TestServer s_;
};

constexpr char kBilevel[] =
    R"({"dp_bilevel": {"penalty": 10, "outer_step": 0.5, "outer_iterations": 8,
        "outer_set": {"kind": "OUTER_SET_BALL", "radius": 5}}})";

TEST_F(BilevelIntegrationTest, EstimatePricesAndSubmitChargesTheCalibratedEvent) {
  for (const char* algorithm :
       {kBilevel,
        R"({"dp_bilevel_minibatch": {"penalty": 10, "outer_step": 0.5,
            "outer_iterations": 5, "inner_sampling_rate": 0.2,
            "outer_sampling_rate": 0.3}})"}) {
    SCOPED_TRACE(algorithm);
    const size_t before = Ledger("q").size();
    v1::JobEstimate est;
    grpc::Status st = Estimate(Spec("q", algorithm), &est);
    ASSERT_TRUE(st.ok()) << st.error_message();
    EXPECT_TRUE(est.admissible());
    EXPECT_TRUE(est.cost().charged());
    EXPECT_GT(est.calibration().notes_size(), 3);
    EXPECT_EQ(Ledger("q").size(), before);  // estimates charge nothing

    v1::Job job;
    st = Submit(Spec("q", algorithm), &job);
    ASSERT_TRUE(st.ok()) << st.error_message();
    const auto ledger = Ledger("q");
    ASSERT_EQ(ledger.size(), before + 1);
    EXPECT_EQ(ledger.back().event_json(), est.cost().event_json());
    EXPECT_EQ(ledger.back().job_id(), job.id());
    v1::Job done = s_.WaitForJob(job.id());
    ASSERT_EQ(done.state(), v1::JOB_STATE_SUCCEEDED) << done.message();
    const v1::JobResult result = Result(job.id());
    EXPECT_EQ(result.model().weights_size(), 2);
    EXPECT_EQ(result.model().loss(), "bilevel_outer_variable");
    for (double w : result.model().weights()) EXPECT_TRUE(std::isfinite(w));
    bool has_x_out = false;
    for (const auto& r : result.released()) {
      for (double v : r.values()) EXPECT_TRUE(std::isfinite(v)) << r.name();
      if (r.name() == "x_out") {
        has_x_out = true;
        ASSERT_EQ(r.values_size(), 2);
        EXPECT_EQ(r.values(0), result.model().weights(0));
      }
    }
    EXPECT_TRUE(has_x_out);
    EXPECT_GT(result.trace_size(), 0);
    EXPECT_EQ(Ledger("q").size(), before + 1);  // the run charged nothing more
  }
}

TEST_F(BilevelIntegrationTest, NaiveModeRunsOnlyOnPublicData) {
  const char* naive =
      R"({"dp_bilevel": {"problem": "BILEVEL_PROBLEM_LEAK_EXAMPLE",
          "penalty": 9, "outer_step": 0.5, "outer_iterations": 1,
          "naive": true}})";
  v1::Job job;
  grpc::Status st = Submit(Spec("q", naive, false), &job);
  EXPECT_EQ(st.error_code(), grpc::PERMISSION_DENIED) << st.error_message();
  EXPECT_TRUE(Ledger("q").empty());
  st = Submit(Spec("q-public", naive, false), &job);
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_FALSE(job.cost().charged());
  v1::Job done = s_.WaitForJob(job.id());
  ASSERT_EQ(done.state(), v1::JOB_STATE_SUCCEEDED) << done.message();
  EXPECT_EQ(Result(job.id()).model().weights_size(), 4);
}

TEST_F(BilevelIntegrationTest, BadSpecsAreRefusedAndChargeNothing) {
  struct Case {
    std::string dataset;
    std::string spec_json;
    grpc::StatusCode code;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"q", R"({"dp_bilevel": {"penalty": 1}})", grpc::INVALID_ARGUMENT,
       "lambda_min"},
      {"q", R"({"dp_bilevel": {"outer_iterations": -2}})",
       grpc::INVALID_ARGUMENT, "outer_iterations"},
      {"q", R"({"dp_bilevel": {"split": {"outer": 0.5, "inner1": 0.5,
          "inner2": 0.5}}})",
       grpc::INVALID_ARGUMENT, "sum to 1"},
      {"q", R"({"dp_bilevel": {"inner_sampling_rate": 0.1}})",
       grpc::INVALID_ARGUMENT, "dp_bilevel_minibatch"},
      {"q", R"({"dp_bilevel": {"b_matrix": [3, 0, 0, 3]}})",
       grpc::INVALID_ARGUMENT, "spectral norm"},
      {"q", R"({"dp_bilevel": {"initial_outer": [1, 2, 3]}})",
       grpc::INVALID_ARGUMENT, "initial_outer"},
      {"q-replace", R"({"dp_bilevel_minibatch": {}})",
       grpc::FAILED_PRECONDITION, "replace-one"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.spec_json);
    v1::Job job;
    grpc::Status st = Submit(Spec(c.dataset, c.spec_json), &job);
    EXPECT_EQ(st.error_code(), c.code) << st.error_message();
    EXPECT_THAT(st.error_message(), HasSubstr(c.message));
  }
  // A model or evaluate_on makes no sense for a catalogue problem.
  v1::JobSpec with_model = Spec("q", kBilevel);
  with_model.mutable_model()->mutable_logistic_regression();
  v1::Job job;
  EXPECT_EQ(Submit(with_model, &job).error_code(), grpc::INVALID_ARGUMENT);
  v1::JobSpec with_eval = Spec("q", kBilevel);
  with_eval.set_evaluate_on("q-public");
  grpc::Status st = Submit(with_eval, &job);
  EXPECT_EQ(st.error_code(), grpc::INVALID_ARGUMENT);
  EXPECT_THAT(st.error_message(), HasSubstr("evaluate_on"));
  EXPECT_TRUE(Ledger("q").empty());
  EXPECT_TRUE(Ledger("q-replace").empty());
}

TEST_F(BilevelIntegrationTest, ReplaceOneDatasetIsPricedNatively) {
  v1::JobEstimate est;
  grpc::Status st = Estimate(Spec("q-replace", kBilevel), &est);
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_TRUE(est.admissible());
  v1::Job job;
  ASSERT_TRUE(Submit(Spec("q-replace", kBilevel), &job).ok());
  EXPECT_EQ(s_.WaitForJob(job.id()).state(), v1::JOB_STATE_SUCCEEDED);
  ASSERT_EQ(Ledger("q-replace").size(), 1u);
}

// Labels +-1 from a noisy linear rule; a bias column and 4 features.
std::string LogisticLibsvm(int rows, uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::normal_distribution<double> normal(0, 1);
  std::string out;
  for (int i = 0; i < rows; ++i) {
    double x[4];
    double m = 0.2;
    for (int k = 0; k < 4; ++k) {
      x[k] = 0.5 * normal(gen);
      m += (k % 2 == 0 ? 2.0 : -1.5) * x[k];
    }
    const bool positive = m + 0.5 * normal(gen) > 0;
    absl::StrAppendFormat(&out, "%s 1:1 2:%.4f 3:%.4f 4:%.4f 5:%.4f\n",
                          positive ? "+1" : "-1", x[0], x[1], x[2], x[3]);
  }
  return out;
}

class BilevelTuningIntegrationTest : public BilevelIntegrationTest {
 protected:
  void SetUp() override {
    v1::ImportHeader h;
    h.set_name("logit");
    h.set_format(v1::DATASET_FORMAT_LIBSVM);
    h.set_dimension(5);
    h.set_epsilon_budget(5);
    h.set_delta_budget(1e-5);
    ASSERT_TRUE(s_.Import(h, LogisticLibsvm(6000, 4)).ok());
    h.set_name("logit-test");
    h.set_public_(true);
    h.set_epsilon_budget(0);
    h.set_delta_budget(0);
    ASSERT_TRUE(s_.Import(h, LogisticLibsvm(1000, 5)).ok());
  }

  v1::JobSpec TuningSpec(const std::string& algorithm) {
    v1::JobSpec spec = Spec("logit", algorithm);
    spec.mutable_model()->mutable_logistic_regression();
    spec.set_evaluate_on("logit-test");
    return spec;
  }
};

TEST_F(BilevelTuningIntegrationTest, TuneAndGridSearchAreChargedOnceAndRun) {
  for (const char* algorithm :
       {R"({"dp_tune_regularization": {"outer_iterations": 5,
            "inner": {"steps": 20}}})",
        R"({"dp_tune_regularization": {"outer_iterations": 3,
            "feature_groups": [0, 1, 1, 2, 2], "paper_outer_noise": true,
            "inner": {"steps": 10}}})",
        R"({"dp_grid_search": {"grid_points": 5, "train": {"steps": 20}}})"}) {
    SCOPED_TRACE(algorithm);
    const size_t before = Ledger("logit").size();
    v1::JobEstimate est;
    grpc::Status st = Estimate(TuningSpec(algorithm), &est);
    ASSERT_TRUE(st.ok()) << st.error_message();
    EXPECT_TRUE(est.admissible());
    v1::Job job;
    st = Submit(TuningSpec(algorithm), &job);
    ASSERT_TRUE(st.ok()) << st.error_message();
    const auto ledger = Ledger("logit");
    ASSERT_EQ(ledger.size(), before + 1);
    EXPECT_EQ(ledger.back().event_json(), est.cost().event_json());
    v1::Job done = s_.WaitForJob(job.id());
    ASSERT_EQ(done.state(), v1::JOB_STATE_SUCCEEDED) << done.message();
    const v1::JobResult result = Result(job.id());
    EXPECT_EQ(result.model().weights_size(), 5);
    EXPECT_EQ(result.model().loss(), "logistic_regression");
    EXPECT_GT(result.evaluation().accuracy(), 0.6);
    bool has_weights = false;
    for (const auto& r : result.released()) {
      if (r.name() != "weights_out") continue;
      has_weights = true;
      for (double w : r.values()) {
        EXPECT_GE(w, 1e-3);
        EXPECT_LE(w, 10);
      }
    }
    EXPECT_TRUE(has_weights);
    EXPECT_EQ(Ledger("logit").size(), before + 1);
  }
}

TEST_F(BilevelTuningIntegrationTest, BadTuningSpecsAreRefused) {
  v1::JobSpec l2 = TuningSpec(R"({"dp_tune_regularization": {}})");
  l2.mutable_model()->mutable_logistic_regression()->set_l2(0.1);
  v1::Job job;
  grpc::Status st = Submit(l2, &job);
  EXPECT_EQ(st.error_code(), grpc::INVALID_ARGUMENT);
  EXPECT_THAT(st.error_message(), HasSubstr("l2"));
  st = Submit(TuningSpec(R"({"dp_tune_regularization": {
      "feature_groups": [0, 1]}})"),
              &job);
  EXPECT_EQ(st.error_code(), grpc::INVALID_ARGUMENT);
  st = Submit(TuningSpec(R"({"dp_grid_search": {"grid": [100]}})"), &job);
  EXPECT_EQ(st.error_code(), grpc::INVALID_ARGUMENT);
  st = Submit(TuningSpec(R"({"dp_tune_regularization": {
      "validation_fraction": 1.5}})"),
              &job);
  EXPECT_EQ(st.error_code(), grpc::INVALID_ARGUMENT);
  EXPECT_TRUE(Ledger("logit").empty());
}

}  // namespace
}  // namespace dpopt::testing
