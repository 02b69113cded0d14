// Property test for design.md §5 ("every computation on private rows is total
// on finite input"): whether a charged job succeeds must not depend on the
// rows. Private datasets full of extreme finite values (+-1e308, the largest
// double, subnormals, -0, entries at the last index of a large dimension)
// go through the real server, and EVERY job type must succeed with a finite
// model. Issue 15's reproducer (`-1 1:1e308 2:1e308`, dp_gd) is the first
// case. Job types are listed in kJobs below, and every runnable example spec
// in examples/*.json is run too (with its dataset replaced by the extreme
// dataset of its label kind), so a new job type with an example is covered.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "tests/integration/test_server.h"

namespace dpopt::testing {
namespace {

// A large dimension, so that indices near it exercise the sparse paths, and
// a small one for the example specs (some job types cap the dimension).
constexpr int kDim = 100000;
constexpr int kSmallDim = 1000;

// Extreme rows (LIBSVM, 1-based indices) followed by ordinary ones. `label`
// maps a row number to its label text.
template <typename Label>
std::string ExtremeLibsvm(Label label, int dim) {
  const std::vector<std::string> features = {
      "1:1e308 2:1e308",  // issue 15's reproducer
      absl::StrCat("1:-1.7976931348623157e308 3:1.7976931348623157e308 ", dim,
                   ":1e308"),
      "2:4.9406564584124654e-324 5:-4.9406564584124654e-324",
      "1:-0 4:-0",
      absl::StrCat(dim - 1, ":1e308 ", dim, ":-1e308"),
      "3:2.2250738585072014e-308 4:1e-310 6:-1e-320",
      "1:1e308 2:-1e308 3:1e308 4:-1e308 5:1e308 6:-1e308",
      "7:1e-300 8:1e300",
  };
  std::string out;
  int row = 0;
  for (const std::string& f : features) {
    absl::StrAppend(&out, label(row++), " ", f, "\n");
  }
  for (int i = 0; i < 40; ++i) {
    absl::StrAppendFormat(&out, "%s 1:%.2f 2:%.2f %d:1\n", label(row++),
                          (i % 7) / 7.0, (i % 5) / 5.0, 3 + i % 50);
  }
  return out;
}

v1::ImportHeader Header(const std::string& name, v1::LabelType labels,
                        bool is_public, int dim) {
  v1::ImportHeader h;
  h.set_name(name);
  h.set_format(v1::DATASET_FORMAT_LIBSVM);
  h.set_dimension(dim);
  h.set_label_type(labels);
  if (labels == v1::LABEL_TYPE_MULTICLASS) h.set_num_classes(3);
  h.set_public_(is_public);
  if (!is_public) {
    h.set_epsilon_budget(1e6);
    h.set_delta_budget(1e-3);
  }
  return h;
}

// Piecewise-affine: slopes a_i (5 columns, public, |a| <= 1 with subnormals and
// -0) and extreme offsets b_i (last column, private).
std::string ExtremeMaxAffineCsv() {
  const std::vector<std::string> offsets = {"1e308",
                                            "-1.7976931348623157e308",
                                            "4.9406564584124654e-324",
                                            "-0",
                                            "1.7976931348623157e308",
                                            "-1e308",
                                            "1e-310",
                                            "0.5"};
  std::string out;
  for (int i = 0; i < 24; ++i) {
    for (int j = 0; j < 5; ++j) {
      const int k = (i * 5 + j) % 7;
      absl::StrAppend(&out,
                      k == 0   ? "-0"
                      : k == 1 ? "4.9406564584124654e-324"
                               : absl::StrFormat("%.3f", (k - 4) / 3.0),
                      ",");
    }
    absl::StrAppend(&out, offsets[i % offsets.size()], "\n");
  }
  return out;
}

v1::ImportHeader MaxAffineHeader(const std::string& name, bool is_public) {
  v1::ImportHeader h;
  h.set_name(name);
  h.set_format(v1::DATASET_FORMAT_CSV);
  h.set_dimension(5);
  h.set_label_last(true);
  h.set_public_(is_public);
  if (!is_public) {
    h.set_epsilon_budget(1e6);
    h.set_delta_budget(1e-3);
  }
  h.mutable_max_affine()->set_b_max(1.0);
  for (int j = 0; j < 5; ++j) {
    h.mutable_max_affine()->mutable_polytope()->add_lower(-1);
    h.mutable_max_affine()->mutable_polytope()->add_upper(1);
  }
  return h;
}

struct JobCase {
  std::string dataset;  // "bin", "multi" or "real"
  std::string model;
  std::string algorithm;
};

const std::vector<JobCase>& Jobs() {
  static const auto* const jobs = new std::vector<JobCase>{
      // DP-GD with every loss (issue 15's reproducer first).
      {"bin", R"({"logistic_regression": {"l2": 0.01}})",
       R"({"dp_gd": {"steps": 4, "clip_norm": 1, "learning_rate": 0.5}})"},
      {"bin", R"({"hinge_svm": {"l2": 0.01}})",
       R"({"dp_gd": {"steps": 4, "clip_norm": 1, "learning_rate": 0.5}})"},
      {"bin", R"({"huberized_hinge_svm": {"l2": 0.01}})",
       R"({"dp_gd": {"steps": 4, "clip_norm": 1, "learning_rate": 0.5}})"},
      {"multi", R"({"softmax_regression": {"l2": 0.01, "num_classes": 3}})",
       R"({"dp_gd": {"steps": 4, "clip_norm": 1, "learning_rate": 0.5}})"},
      {"real", R"({"least_squares": {"l2": 0.01, "label_bound": 2}})",
       R"({"dp_gd": {"steps": 4, "clip_norm": 1, "learning_rate": 0.5}})"},
      {"bin", R"({"logistic_regression": {"l2": 0.01}})",
       R"({"dp_sgd": {"sampling_rate": 0.5, "steps": 4, "clip_norm": 1,
                      "learning_rate": 0.5, "momentum": 0.5}})"},
      {"real", R"({"least_squares": {"l2": 0.01, "label_bound": 2}})",
       R"({"dp_sgd": {"sampling_rate": 0.5, "steps": 4, "clip_norm": 1,
                      "learning_rate": 0.5}})"},
      // Accelerated (L1 clipping, Laplace; Gaussian extension).
      {"bin", R"({"logistic_regression": {"l2": 0.1}})",
       R"({"accel_dp_gd": {"common": {"steps": 4, "clip_norm": 5,
                                       "smoothness": 2}}})"},
      {"bin", R"({"logistic_regression": {"l2": 0.1}})",
       R"({"accel_dp_hb": {"common": {"steps": 4, "batch_size": 20,
                                       "clip_norm": 5, "smoothness": 2}}})"},
      {"bin", R"({"logistic_regression": {"l2": 0.1}})",
       R"({"accel_dp_nag": {"common": {"steps": 4, "clip_norm": 5,
                                        "smoothness": 2,
                                        "noise": "ACCEL_NOISE_GAUSSIAN"}}})"},
      {"bin", R"({"logistic_regression": {"l2": 0.1}})",
       R"({"accel_dp_nag_opt": {"common": {"steps": 4, "clip_norm": 5,
                                            "smoothness": 2}}})"},
      {"bin", R"({"logistic_regression": {"l2": 0.1}})",
       R"({"accel_dp_masg": {"common": {"steps": 8, "clip_norm": 5,
                                         "smoothness": 2}}})"},
      {"bin", R"({"logistic_regression": {"l2": 0.1}})",
       R"({"accel_dp_masg_opt": {"common": {"steps": 8, "clip_norm": 5,
                                             "smoothness": 2}}})"},
      // Line-search (clipped objective in the line search).
      {"bin", R"({"logistic_regression": {"l2": 0.001}})",
       R"({"dp_blsgd": {"sampling_rate": 0.5, "planned_iterations": 3,
                        "max_iterations": 6}})"},
      {"bin", R"({"hinge_svm": {"l2": 0.001}})",
       R"({"dp_blsgd_ac": {"sampling_rate": 0.5, "planned_iterations": 3,
                           "max_iterations": 6}})"},
      {"bin", R"({"logistic_regression": {"l2": 0.001}})",
       R"({"dp_blgd": {"planned_iterations": 3, "max_iterations": 6,
                       "gaussian_line_search": true}})"},
  };
  return *jobs;
}

class TotalityTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    server_ = new TestServer();
    auto pm = [](int r) { return r % 2 == 0 ? std::string("-1") : "1"; };
    auto cls = [](int r) { return std::to_string(r % 3); };
    auto real = [](int r) {
      return r % 3 == 0 ? std::string("1e308")
                        : (r % 3 == 1 ? "-1.7976931348623157e308" : "0.5");
    };
    for (const auto& [suffix, dim] :
         {std::pair<std::string, int>{"", kDim}, {"-small", kSmallDim}}) {
      ASSERT_TRUE(server_
                      ->Import(Header("bin" + suffix, v1::LABEL_TYPE_BINARY,
                                      false, dim),
                               ExtremeLibsvm(pm, dim))
                      .ok());
      ASSERT_TRUE(server_
                      ->Import(Header("multi" + suffix,
                                      v1::LABEL_TYPE_MULTICLASS, false, dim),
                               ExtremeLibsvm(cls, dim))
                      .ok());
      ASSERT_TRUE(
          server_
              ->Import(Header("real" + suffix, v1::LABEL_TYPE_REAL, false, dim),
                       ExtremeLibsvm(real, dim))
              .ok());
    }
    // Piecewise-affine max-affine problems: extreme PRIVATE offsets (the slopes are
    // public and limited at import), private and public copies.
    for (bool is_public : {false, true}) {
      ASSERT_TRUE(server_
                      ->Import(MaxAffineHeader(is_public ? "maxaffine-public"
                                                         : "maxaffine-small",
                                               is_public),
                               ExtremeMaxAffineCsv())
                      .ok());
    }
    // Public evaluation set with the same extreme rows.
    ASSERT_TRUE(
        server_
            ->Import(Header("bin-public", v1::LABEL_TYPE_BINARY, true, kDim),
                     ExtremeLibsvm(pm, kDim))
            .ok());
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }

  // Submits `spec`, waits, and checks SUCCEEDED with a finite model.
  void ExpectSucceedsFinite(const v1::JobSpec& spec, const std::string& what) {
    grpc::ClientContext ctx;
    v1::SubmitJobRequest req;
    *req.mutable_spec() = spec;
    v1::Job job;
    const grpc::Status st = server_->jobs().SubmitJob(&ctx, req, &job);
    ASSERT_TRUE(st.ok()) << what << ": " << st.error_message();
    const v1::Job done = server_->WaitForJob(job.id());
    ASSERT_EQ(done.state(), v1::JOB_STATE_SUCCEEDED)
        << what << ": " << done.message();
    grpc::ClientContext rctx;
    v1::GetJobResultRequest rreq;
    rreq.set_id(job.id());
    v1::JobResult result;
    ASSERT_TRUE(server_->jobs().GetJobResult(&rctx, rreq, &result).ok())
        << what;
    ASSERT_GT(result.model().weights_size(), 0) << what;
    for (double w : result.model().weights()) {
      ASSERT_TRUE(std::isfinite(w)) << what << ": non-finite weight";
    }
  }

  static TestServer* server_;
};

TestServer* TotalityTest::server_ = nullptr;

TEST_F(TotalityTest, EveryJobTypeSucceedsWithAFiniteModelOnExtremeRows) {
  for (const JobCase& c : Jobs()) {
    const std::string json = absl::StrCat(
        R"({"dataset": ")", c.dataset, R"(", "model": )", c.model,
        R"(, "privacy": {"epsilon": 1, "delta": 1e-6}, "algorithm": )",
        c.algorithm,
        c.dataset == "bin" ? R"(, "evaluate_on": "bin-public")" : "", "}");
    v1::JobSpec spec;
    ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(json, &spec).ok())
        << json;
    ExpectSucceedsFinite(spec, json);
  }
}

// Every runnable example spec (examples/*.json) on the extreme dataset of its
// label kind: new job types are covered as soon as they ship an example.
TEST_F(TotalityTest, EveryExampleSpecSucceedsWithAFiniteModelOnExtremeRows) {
  const std::filesystem::path dir = DataPath("examples");
  if (!std::filesystem::exists(dir)) GTEST_SKIP() << "no examples/ folder";
  int ran = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".json") continue;
    std::ifstream in(entry.path());
    std::stringstream buf;
    buf << in.rdbuf();
    v1::JobSpec spec;
    if (!google::protobuf::util::JsonStringToMessage(buf.str(), &spec).ok()) {
      continue;  // not a JobSpec (e.g. a dataset description)
    }
    const bool piecewise_affine =
        spec.algorithm().algorithm_case() >=
            v1::AlgorithmSpec::kPaPerturbProblem &&
        spec.algorithm().algorithm_case() <= v1::AlgorithmSpec::kPaSolve;
    switch (spec.model().loss_case()) {
      case v1::ModelSpec::kSoftmaxRegression:
        spec.set_dataset("multi-small");
        spec.mutable_model()->mutable_softmax_regression()->set_num_classes(3);
        break;
      case v1::ModelSpec::kLeastSquares:
        spec.set_dataset("real-small");
        break;
      default:
        spec.set_dataset("bin-small");
    }
    if (piecewise_affine) {
      spec.set_dataset(spec.has_privacy() ? "maxaffine-small"
                                          : "maxaffine-public");
    }
    spec.clear_evaluate_on();
    if (spec.has_privacy()) {
      // A private dataset: the example's target, within the huge budget.
      spec.mutable_privacy()->set_epsilon(
          std::min(spec.privacy().epsilon(), 10.0));
    }
    if (spec.algorithm().has_gd()) continue;  // public datasets only
    ExpectSucceedsFinite(spec, entry.path().filename().string());
    ++ran;
  }
  std::printf("ran %d example specs on extreme rows\n", ran);
}

}  // namespace
}  // namespace dpopt::testing

namespace dpopt::testing {
namespace {

// Import enforces the curator's declared bounds (issue 15): a value outside
// them is refused with INVALID_ARGUMENT naming the line and the feature and
// the declared interval (never the value), and nothing is imported.
TEST(DeclaredBoundsTest, ImportRefusesValuesOutsideDeclaredBounds) {
  TestServer server;
  v1::ImportHeader h;
  h.set_name("bounded");
  h.set_format(v1::DATASET_FORMAT_LIBSVM);
  h.set_dimension(3);
  h.set_epsilon_budget(1);
  h.set_delta_budget(1e-6);
  for (int j = 0; j < 3; ++j) {
    h.mutable_bounds()->add_lower(0);
    h.mutable_bounds()->add_upper(1);
  }
  grpc::Status st = server.Import(h, "1 1:0.5\n-1 2:1e308\n1 3:1\n");
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(st.error_message(),
              ::testing::HasSubstr(
                  "line 2: feature 2 is outside its declared bounds [0, 1]"));
  EXPECT_THAT(st.error_message(), ::testing::Not(::testing::HasSubstr("308")));

  h.mutable_bounds()->clear_lower();
  h.mutable_bounds()->clear_upper();
  h.mutable_bounds()->set_row_norm_bound(1);
  st = server.Import(h, "1 1:0.6 2:0.8\n-1 1:1e308\n");
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(st.error_message(),
              ::testing::HasSubstr("line 2: row L2 norm exceeds the declared "
                                   "row_norm_bound 1"));

  // Nothing was imported.
  grpc::ClientContext ctx;
  v1::ListDatasetsResponse list;
  ASSERT_TRUE(server.datasets()
                  .ListDatasets(&ctx, v1::ListDatasetsRequest(), &list)
                  .ok());
  EXPECT_EQ(list.datasets_size(), 0);
}

}  // namespace
}  // namespace dpopt::testing
