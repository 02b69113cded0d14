#include "server/spec_translation.h"

#include <string>

#include "gmock/gmock.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "tests/common/status_matchers.h"

namespace dpopt::server {
namespace {

using ::dpopt::testing::StatusIs;
using ::testing::HasSubstr;

v1::JobSpec Parse(const std::string& json) {
  v1::JobSpec spec;
  EXPECT_TRUE(google::protobuf::util::JsonStringToMessage(json, &spec).ok());
  return spec;
}

TEST(SpecTranslationTest, TheReadmeExampleTranslates) {
  const v1::JobSpec spec = Parse(R"({
    "dataset": "adult", "model": {"logistic_regression": {"l2": 0.0001}},
    "privacy": {"epsilon": 1.0, "delta": 1e-6},
    "algorithm": {"dp_sgd": {"sampling_rate": 0.01, "steps": 2000,
                             "clip_norm": 1.0, "learning_rate": 0.5}},
    "evaluate_on": "adult-test"})");
  ASSERT_OK_AND_ASSIGN(TranslatedJob job, TranslateJobSpec(spec, false, 2));
  EXPECT_EQ(job.algorithm_name, "dp_sgd");
  EXPECT_EQ(job.model.loss, optim::LossKind::kLogistic);
  EXPECT_DOUBLE_EQ(job.model.l2, 1e-4);
  EXPECT_DOUBLE_EQ(job.target.epsilon, 1.0);
  EXPECT_DOUBLE_EQ(job.target.delta, 1e-6);
  EXPECT_EQ(job.target.accountant, privacy::AccountantKind::kRdp);
  EXPECT_FALSE(job.target.non_private);
  // Unset: decided once the steps are calibrated (DefaultTraceEvery).
  EXPECT_EQ(job.trace_every, 0);
  EXPECT_EQ(DefaultTraceEvery(2000), 20);  // about 100 trace points
  EXPECT_EQ(DefaultTraceEvery(50), 1);
  ASSERT_NE(job.algorithm, nullptr);
}

TEST(SpecTranslationTest, AccountantAndTraceEvery) {
  const v1::JobSpec spec = Parse(R"({
    "dataset": "d", "model": {"hinge_svm": {}}, "trace_every": 7,
    "privacy": {"epsilon": 2, "delta": 1e-7, "accountant": "ACCOUNTANT_PLD"},
    "algorithm": {"dp_gd": {"steps": 5, "clip_norm": 1, "learning_rate": 1}}})");
  ASSERT_OK_AND_ASSIGN(TranslatedJob job, TranslateJobSpec(spec, false, 2));
  EXPECT_EQ(job.target.accountant, privacy::AccountantKind::kPld);
  EXPECT_EQ(job.trace_every, 7);
  EXPECT_EQ(job.algorithm_name, "dp_gd");
}

struct BadCase {
  std::string name;
  std::string json;
  bool is_public;
  absl::StatusCode code;
  std::string message;
};

class SpecTranslationErrorTest : public ::testing::TestWithParam<BadCase> {};

TEST_P(SpecTranslationErrorTest, RefusedWithAClearMessage) {
  const BadCase& c = GetParam();
  EXPECT_THAT(TranslateJobSpec(Parse(c.json), c.is_public, 2),
              StatusIs(c.code, HasSubstr(c.message)));
}

constexpr char kModel[] = R"("model": {"logistic_regression": {}})";
std::string With(const std::string& body) {
  return std::string(R"({"dataset": "d", )") + kModel + ", " + body + "}";
}

INSTANTIATE_TEST_SUITE_P(
    All, SpecTranslationErrorTest,
    ::testing::Values(
        BadCase{
            "NoDataset",
            R"({"model": {"logistic_regression": {}}, "privacy": {"epsilon": 1},
                    "algorithm": {"dp_gd": {"steps": 1, "clip_norm": 1, "learning_rate": 1}}})",
            false, absl::StatusCode::kInvalidArgument, "dataset"},
        BadCase{
            "NoPrivacy",
            With(
                R"("algorithm": {"dp_gd": {"steps": 1, "clip_norm": 1, "learning_rate": 1}})"),
            false, absl::StatusCode::kInvalidArgument, "privacy"},
        BadCase{"NegativeEpsilon",
                With(R"("privacy": {"epsilon": -1, "delta": 1e-6},
                        "algorithm": {"dp_gd": {"steps": 1, "clip_norm": 1, "learning_rate": 1}})"),
                false, absl::StatusCode::kInvalidArgument, "privacy.epsilon"},
        BadCase{"DeltaOne", With(R"("privacy": {"epsilon": 1, "delta": 1},
                        "algorithm": {"dp_gd": {"steps": 1, "clip_norm": 1, "learning_rate": 1}})"),
                false, absl::StatusCode::kInvalidArgument, "privacy.delta"},
        BadCase{"AbsurdSteps", With(R"("privacy": {"epsilon": 1, "delta": 1e-6},
                        "algorithm": {"dp_sgd": {"sampling_rate": 0.1, "steps": 5000000,
                                                 "clip_norm": 1, "learning_rate": 1}})"),
                false, absl::StatusCode::kInvalidArgument, "steps"},
        BadCase{"ZeroSamplingRate",
                With(R"("privacy": {"epsilon": 1, "delta": 1e-6},
                        "algorithm": {"dp_sgd": {"sampling_rate": 0, "steps": 5,
                                                 "clip_norm": 1, "learning_rate": 1}})"),
                false, absl::StatusCode::kInvalidArgument, "sampling_rate"},
        BadCase{"MomentumOne", With(R"("privacy": {"epsilon": 1, "delta": 1e-6},
                        "algorithm": {"dp_sgd": {"sampling_rate": 0.1, "steps": 5,
                                                 "clip_norm": 1, "learning_rate": 1,
                                                 "momentum": 1}})"),
                false, absl::StatusCode::kInvalidArgument, "momentum"},
        BadCase{
            "NonPrivateOnPrivateData",
            With(R"("algorithm": {"gd": {"steps": 5, "learning_rate": 1}})"),
            false, absl::StatusCode::kPermissionDenied, "public"},
        BadCase{"NonPrivateWithPrivacy",
                With(R"("privacy": {"epsilon": 1, "delta": 1e-6},
                        "algorithm": {"gd": {"steps": 5, "learning_rate": 1}})"),
                true, absl::StatusCode::kInvalidArgument, "no privacy target"},
        BadCase{"LeastSquaresWithoutLabelBound",
                R"({"dataset": "d", "model": {"least_squares": {}},
                    "privacy": {"epsilon": 1, "delta": 1e-6},
                    "algorithm": {"dp_gd": {"steps": 1, "clip_norm": 1, "learning_rate": 1}}})",
                false, absl::StatusCode::kInvalidArgument, "label_bound"},
        BadCase{
            "SoftmaxClassMismatch",
            R"({"dataset": "d", "model": {"softmax_regression": {"num_classes": 5}},
                    "privacy": {"epsilon": 1, "delta": 1e-6},
                    "algorithm": {"dp_gd": {"steps": 1, "clip_norm": 1, "learning_rate": 1}}})",
            false, absl::StatusCode::kInvalidArgument, "num_classes"},
        BadCase{
            "NegativeL2",
            R"({"dataset": "d", "model": {"logistic_regression": {"l2": -1}},
                    "privacy": {"epsilon": 1, "delta": 1e-6},
                    "algorithm": {"dp_gd": {"steps": 1, "clip_norm": 1, "learning_rate": 1}}})",
            false, absl::StatusCode::kInvalidArgument, "l2"},
        BadCase{"NoAlgorithm",
                With(R"("privacy": {"epsilon": 1, "delta": 1e-6})"), false,
                absl::StatusCode::kInvalidArgument, "algorithm"}),
    [](const ::testing::TestParamInfo<BadCase>& info) {
      return info.param.name;
    });

}  // namespace
}  // namespace dpopt::server
