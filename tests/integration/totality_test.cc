// Totality: whether a charged job succeeds must not depend on the rows
// (docs/architecture.md, invariants). Private datasets full of extreme
// finite values (+-1e308, the largest double, subnormals, -0, entries at the
// last index of a large dimension) go through the real server, and every job
// type must succeed with a finite model. The job types come from the
// descriptor of AlgorithmSpec: each must have a translation (a registered
// family), an example in examples/<job type>.json that parses, and an entry
// in docs/job_types.md; every example then runs on the extreme dataset of
// its kind. Jobs() adds cases for the losses the examples do not use.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "gmock/gmock.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "server/translation/registry.h"
#include "tests/common/sanitizers.h"
#include "tests/integration/test_server.h"

namespace dpopt::testing {
namespace {

// A large dimension, so that indices near it exercise the sparse paths, and
// a small one for the example specs (some job types cap the dimension).
constexpr int kDim = 100000;
constexpr int kSmallDim = 1000;
// Under AddressSanitizer the bilevel family's quadratic examples (dp_bilevel,
// dp_bilevel_minibatch) run on the same extreme rows at this dimension: their
// problems do dense linear algebra in the dataset's dimension, and at
// kSmallDim dp_bilevel alone took 116 s of this test's 170 s under ASan. The
// code paths and the extreme values (at the first and the last indices) are
// the same; the ordinary build runs them at kSmallDim.
constexpr int kBilevelSanitizerDim = 64;

// Extreme rows (LIBSVM, 1-based indices) followed by `ordinary` ordinary
// ones. `label` maps a row number to its label text.
template <typename Label>
std::string ExtremeLibsvm(Label label, int dim, int ordinary = 40) {
  const std::vector<std::string> features = {
      "1:1e308 2:1e308",  // once overflowed DP-GD's clipping
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
  for (int i = 0; i < ordinary; ++i) {
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
// Offsets at the edges of what a max-affine import admits (|b_i| <= 2^27
// b_max, b_max = 1: the range the mechanisms represent exactly; larger ones
// are refused at import, see piecewise_affine_test.cc), subnormals and -0.
std::string ExtremeMaxAffineCsv() {
  const std::vector<std::string> offsets = {
      "134217728", "-134217728",  "4.9406564584124654e-324",
      "-0",        "134217727.5", "-1e8",
      "1e-310",    "0.5"};
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
      // DP-GD with every loss.
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
    // The small datasets hold enough ordinary rows for the examples'
    // minibatches (up to 1000 expected rows).
    for (const auto& [suffix, dim, ordinary] :
         {std::tuple<std::string, int, int>{"", kDim, 40},
          {"-small", kSmallDim, 1000}}) {
      ASSERT_TRUE(server_
                      ->Import(Header("bin" + suffix, v1::LABEL_TYPE_BINARY,
                                      false, dim),
                               ExtremeLibsvm(pm, dim, ordinary))
                      .ok());
      ASSERT_TRUE(server_
                      ->Import(Header("multi" + suffix,
                                      v1::LABEL_TYPE_MULTICLASS, false, dim),
                               ExtremeLibsvm(cls, dim, ordinary))
                      .ok());
      ASSERT_TRUE(
          server_
              ->Import(Header("real" + suffix, v1::LABEL_TYPE_REAL, false, dim),
                       ExtremeLibsvm(real, dim, ordinary))
              .ok());
    }
    // Piecewise-affine max-affine problems: extreme PRIVATE offsets within
    // the import range (the slopes are public and limited at import),
    // private and public copies.
    for (bool is_public : {false, true}) {
      ASSERT_TRUE(server_
                      ->Import(MaxAffineHeader(is_public ? "maxaffine-public"
                                                         : "maxaffine-small",
                                               is_public),
                               ExtremeMaxAffineCsv())
                      .ok());
    }
    if (kUnderAddressSanitizer) {
      ASSERT_TRUE(server_
                      ->Import(Header("bin-bilevel", v1::LABEL_TYPE_BINARY,
                                      false, kBilevelSanitizerDim),
                               ExtremeLibsvm(pm, kBilevelSanitizerDim, 1000))
                      .ok());
    }
    // Public copies with the same extreme rows: non-private job types and
    // evaluation.
    ASSERT_TRUE(server_
                    ->Import(Header("bin-small-public", v1::LABEL_TYPE_BINARY,
                                    true, kSmallDim),
                             ExtremeLibsvm(pm, kSmallDim, 1000))
                    .ok());
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

  // Submits `spec`, waits, and checks SUCCEEDED with a finite model (with
  // `finite` false only SUCCEEDED: non-private job types on public extreme
  // rows do the unclipped arithmetic they are asked for, which may overflow).
  void ExpectSucceedsFinite(const v1::JobSpec& spec, const std::string& what,
                            bool finite = true) {
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
    if (!finite) return;
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

// The job types, from the descriptor (not a hand-written list).
std::vector<const google::protobuf::FieldDescriptor*> JobTypeFields() {
  const google::protobuf::OneofDescriptor* oneof =
      v1::AlgorithmSpec::descriptor()->FindOneofByName("algorithm");
  std::vector<const google::protobuf::FieldDescriptor*> out;
  for (int i = 0; i < oneof->field_count(); ++i) out.push_back(oneof->field(i));
  return out;
}

// Every job type of the proto is a unit: a registered translation, an
// example that parses as that job type, a docs/job_types.md entry naming
// its family, and the family's docs/algorithms page.
TEST(JobTypeUnitTest, EveryJobTypeHasTranslationExampleAndDocs) {
  const std::string reference = ReadFileOrDie(DataPath("docs/job_types.md"));
  ASSERT_FALSE(reference.empty()) << "docs/job_types.md is missing";
  const std::vector<const google::protobuf::FieldDescriptor*> fields =
      JobTypeFields();
  ASSERT_GE(fields.size(), 22u);
  for (const google::protobuf::FieldDescriptor* f : fields) {
    const auto c = static_cast<server::AlgorithmCase>(f->number());
    SCOPED_TRACE(f->name());
    const server::JobFamily* family = server::FindJobFamily(c);
    ASSERT_NE(family, nullptr) << "no registered family translates it";
    EXPECT_EQ(server::JobTypeName(c), f->name());
    const std::filesystem::path example =
        DataPath("examples/" + f->name() + ".json");
    ASSERT_TRUE(std::filesystem::exists(example)) << example;
    v1::JobSpec spec;
    const auto parsed = google::protobuf::util::JsonStringToMessage(
        ReadFileOrDie(example.string()), &spec);
    ASSERT_TRUE(parsed.ok()) << example << ": " << parsed.message();
    EXPECT_EQ(spec.algorithm().algorithm_case(), c)
        << example << " is not an example of " << f->name();
    EXPECT_NE(reference.find("\n## " + f->name() + "\n"), std::string::npos)
        << "docs/job_types.md has no section for it";
    EXPECT_NE(
        reference.find(absl::StrCat("Family: [", family->name, "](algorithms/",
                                    family->name, ".md)")),
        std::string::npos)
        << "docs/job_types.md does not name its family " << family->name;
    EXPECT_TRUE(std::filesystem::exists(
        DataPath("docs/algorithms/" + family->name + ".md")))
        << "docs/algorithms/" << family->name << ".md is missing";
  }
  // No family claims a case the proto does not have.
  for (const server::JobFamily* family : server::JobFamilies()) {
    for (server::AlgorithmCase c : family->cases) {
      EXPECT_FALSE(server::JobTypeName(c).empty())
          << family->name << " registers unknown case " << c;
    }
  }
}

// Every job type's example (examples/<job type>.json) on the extreme dataset
// of its kind: a new job type is covered as soon as it exists.
TEST_F(TotalityTest, EveryExampleSpecSucceedsWithAFiniteModelOnExtremeRows) {
  int ran = 0;
  for (const google::protobuf::FieldDescriptor* f : JobTypeFields()) {
    SCOPED_TRACE(f->name());
    const std::filesystem::path path =
        DataPath("examples/" + f->name() + ".json");
    v1::JobSpec spec;
    const auto parsed = google::protobuf::util::JsonStringToMessage(
        ReadFileOrDie(path.string()), &spec);
    ASSERT_TRUE(parsed.ok()) << path << ": " << parsed.message();
    const server::JobFamily* family =
        server::FindJobFamily(spec.algorithm().algorithm_case());
    ASSERT_NE(family, nullptr);
    const server::JobTypeTraits traits = family->traits(spec.algorithm());
    switch (spec.model().loss_case()) {
      case v1::ModelSpec::kSoftmaxRegression:
        spec.set_dataset("multi-small");
        spec.mutable_model()->mutable_softmax_regression()->set_num_classes(3);
        break;
      case v1::ModelSpec::kLeastSquares:
        spec.set_dataset("real-small");
        break;
      default:
        spec.set_dataset(traits.non_private ? "bin-small-public" : "bin-small");
    }
    if (kUnderAddressSanitizer &&
        (spec.algorithm().has_dp_bilevel() ||
         spec.algorithm().has_dp_bilevel_minibatch())) {
      spec.set_dataset("bin-bilevel");
    }
    if (traits.dataset_kind == server::DatasetKind::kMaxAffine) {
      spec.set_dataset(traits.non_private ? "maxaffine-public"
                                          : "maxaffine-small");
    }
    spec.clear_evaluate_on();
    if (spec.has_privacy()) {
      // A private dataset: the example's target, within the huge budget.
      spec.mutable_privacy()->set_epsilon(
          std::min(spec.privacy().epsilon(), 10.0));
    }
    ExpectSucceedsFinite(spec, path.filename().string(), !traits.non_private);
    ++ran;
  }
  EXPECT_EQ(ran, static_cast<int>(JobTypeFields().size()));
}

}  // namespace
}  // namespace dpopt::testing

namespace dpopt::testing {
namespace {

// Import enforces the curator's declared bounds: a value outside
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
