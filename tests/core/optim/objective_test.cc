#include "core/optim/objective.h"

#include <cmath>
#include <limits>
#include <random>
#include <tuple>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/common/status_matchers.h"

namespace dpopt::optim {
namespace {

using ::dpopt::testing::StatusIs;
using ::testing::HasSubstr;

ModelConfig Config(LossKind loss, int k = 2) {
  ModelConfig c;
  c.loss = loss;
  c.num_classes = k;
  if (loss == LossKind::kLeastSquares) c.label_bound = 1.5;
  return c;
}

// Random dense dataset fitting `config` (fixed seed).
Dataset RandomData(const ModelConfig& config, int64_t n, int64_t d,
                   uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<double> normal;
  Eigen::MatrixXd x(n, d);
  Eigen::VectorXd y(n);
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < d; ++j) x(i, j) = normal(gen);
    switch (RequiredLabelKind(config.loss)) {
      case LabelKind::kBinary:
        y[i] = normal(gen) > 0 ? 1 : -1;
        break;
      case LabelKind::kMulticlass:
        y[i] = static_cast<double>(gen() % config.num_classes);
        break;
      case LabelKind::kReal:
        y[i] = 2 * normal(gen);  // some beyond label_bound 1.5
        break;
    }
  }
  return Dataset::Dense(std::move(x), std::move(y),
                        RequiredLabelKind(config.loss), config.num_classes);
}

class GradientTest : public ::testing::TestWithParam<ModelConfig> {};

// Per-example gradient vs central finite differences of ExampleLoss, at
// random points (the hinge kink m = 1 has probability zero).
TEST_P(GradientTest, MatchesFiniteDifferences) {
  const ModelConfig config = GetParam();
  const int64_t d = 5;
  ASSERT_OK_AND_ASSIGN(auto obj, Objective::Create(config, d));
  const Dataset data = RandomData(config, 20, d, 7);
  ASSERT_OK(obj->CheckDataset(data));
  std::mt19937 gen(11);
  std::normal_distribution<double> normal;
  const int64_t p = obj->parameter_size();
  for (int trial = 0; trial < 5; ++trial) {
    Eigen::VectorXd w(p);
    for (int64_t j = 0; j < p; ++j) w[j] = 0.7 * normal(gen);
    for (int64_t i = 0; i < data.rows(); ++i) {
      const Eigen::VectorXd g = obj->ExampleGradient(data, i, w);
      for (int64_t j = 0; j < p; ++j) {
        const double h = 1e-6;
        Eigen::VectorXd wp = w, wm = w;
        wp[j] += h;
        wm[j] -= h;
        const double fd =
            (obj->ExampleLoss(data, i, wp) - obj->ExampleLoss(data, i, wm)) /
            (2 * h);
        EXPECT_NEAR(g[j], fd, 1e-6 * (1 + std::abs(fd)))
            << LossName(config.loss) << " row " << i << " coord " << j;
      }
    }
    // Whole-dataset smooth gradient vs finite differences of Loss (with L2
    // regularization added; no L1 so Loss is smooth apart from hinge kinks).
    ModelConfig reg = config;
    reg.l2 = 0.3;
    ASSERT_OK_AND_ASSIGN(auto obj_reg, Objective::Create(reg, d));
    const Eigen::VectorXd full = obj_reg->SmoothGradient(data, w);
    for (int64_t j = 0; j < p; ++j) {
      const double h = 1e-6;
      Eigen::VectorXd wp = w, wm = w;
      wp[j] += h;
      wm[j] -= h;
      const double fd =
          (obj_reg->Loss(data, wp) - obj_reg->Loss(data, wm)) / (2 * h);
      EXPECT_NEAR(full[j], fd, 1e-6 * (1 + std::abs(fd)));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllLosses, GradientTest,
                         ::testing::Values(Config(LossKind::kLogistic),
                                           Config(LossKind::kHinge),
                                           Config(LossKind::kHuberizedHinge),
                                           Config(LossKind::kLeastSquares),
                                           Config(LossKind::kSoftmax, 3)),
                         [](const ::testing::TestParamInfo<ModelConfig>& info) {
                           return LossName(info.param.loss);
                         });

// One row x = (1, 2), label y; w chosen so the margin is known.
Dataset OneRow(double y, LabelKind kind = LabelKind::kBinary, int k = 2) {
  Eigen::MatrixXd x(1, 2);
  x << 1, 2;
  Eigen::VectorXd labels(1);
  labels << y;
  return Dataset::Dense(x, labels, kind, k);
}

TEST(ObjectiveTest, LossesAtHandComputedPoints) {
  const Eigen::VectorXd zero = Eigen::VectorXd::Zero(2);
  Eigen::VectorXd w(2);
  w << 0.5, 0.25;  // <w, x> = 1
  {
    ASSERT_OK_AND_ASSIGN(auto obj,
                         Objective::Create(Config(LossKind::kLogistic), 2));
    EXPECT_DOUBLE_EQ(obj->ExampleLoss(OneRow(1), 0, zero), std::log(2.0));
    EXPECT_DOUBLE_EQ(obj->ExampleLoss(OneRow(1), 0, w),
                     std::log1p(std::exp(-1.0)));
    EXPECT_DOUBLE_EQ(obj->ExampleLoss(OneRow(-1), 0, w),
                     std::log1p(std::exp(1.0)));
    // grad at 0 = -y x / 2.
    const Eigen::VectorXd g = obj->ExampleGradient(OneRow(1), 0, zero);
    EXPECT_DOUBLE_EQ(g[0], -0.5);
    EXPECT_DOUBLE_EQ(g[1], -1.0);
    // Stable for huge margins.
    Eigen::VectorXd big(2);
    big << 1000, 0;
    EXPECT_DOUBLE_EQ(obj->ExampleLoss(OneRow(-1), 0, big), 1000.0);
    EXPECT_EQ(obj->ExampleLoss(OneRow(1), 0, big), 0.0);
  }
  {
    ASSERT_OK_AND_ASSIGN(auto obj,
                         Objective::Create(Config(LossKind::kHinge), 2));
    EXPECT_EQ(obj->ExampleLoss(OneRow(1), 0, zero), 1.0);
    EXPECT_EQ(obj->ExampleLoss(OneRow(-1), 0, w), 2.0);
    EXPECT_EQ(obj->ExampleLoss(OneRow(1), 0, 2 * w), 0.0);
  }
  {
    ModelConfig c = Config(LossKind::kHuberizedHinge);
    c.huber_width = 0.5;
    ASSERT_OK_AND_ASSIGN(auto obj, Objective::Create(c, 2));
    EXPECT_EQ(obj->ExampleLoss(OneRow(1), 0, zero), 1.0);   // m=0 < 0.5
    EXPECT_EQ(obj->ExampleLoss(OneRow(1), 0, w), 0.125);    // (1.5-1)^2/2
    EXPECT_EQ(obj->ExampleLoss(OneRow(1), 0, 2 * w), 0.0);  // m=2 > 1.5
    EXPECT_DOUBLE_EQ(obj->ExampleLoss(OneRow(1), 0, 0.6 * w),
                     0.405);  // 0.9^2/2
  }
  {
    ASSERT_OK_AND_ASSIGN(auto obj,
                         Objective::Create(Config(LossKind::kLeastSquares), 2));
    // Label 3 is clipped to 1.5: (1 - 1.5)^2 / 2.
    EXPECT_EQ(obj->ExampleLoss(OneRow(3, LabelKind::kReal), 0, w), 0.125);
    EXPECT_EQ(obj->ExampleLoss(OneRow(-0.5, LabelKind::kReal), 0, w), 1.125);
  }
  {
    ASSERT_OK_AND_ASSIGN(auto obj,
                         Objective::Create(Config(LossKind::kSoftmax, 3), 2));
    EXPECT_EQ(obj->parameter_size(), 6);
    const Eigen::VectorXd w0 = Eigen::VectorXd::Zero(6);
    const Dataset row = OneRow(2, LabelKind::kMulticlass, 3);
    EXPECT_DOUBLE_EQ(obj->ExampleLoss(row, 0, w0), std::log(3.0));
    // Class 2's block scores 1, others 0: loss = log(2 + e) - 1.
    Eigen::VectorXd w3 = Eigen::VectorXd::Zero(6);
    w3.segment(4, 2) = w;
    EXPECT_DOUBLE_EQ(obj->ExampleLoss(row, 0, w3),
                     std::log(2 + std::exp(1.0)) - 1);
  }
}

TEST(ObjectiveTest, RegularizerAndLoss) {
  ModelConfig c = Config(LossKind::kHinge);
  c.l2 = 2;
  c.l1 = 0.5;
  ASSERT_OK_AND_ASSIGN(auto obj, Objective::Create(c, 2));
  Eigen::VectorXd w(2);
  w << 1, -2;
  EXPECT_EQ(obj->Regularizer(w), 0.5 * 2 * 5 + 0.5 * 3);
  // Loss = mean hinge + regularizer; <w,x> = -3, y = 1: hinge 4.
  EXPECT_EQ(obj->Loss(OneRow(1), w), 4 + 6.5);
}

TEST(ObjectiveTest, Accuracy) {
  Eigen::MatrixXd x(4, 1);
  x << 1, -1, 2, -3;
  Eigen::VectorXd y(4);
  y << 1, -1, -1, -1;
  const Dataset data = Dataset::Dense(x, y, LabelKind::kBinary);
  ASSERT_OK_AND_ASSIGN(auto obj,
                       Objective::Create(Config(LossKind::kLogistic), 1));
  EXPECT_EQ(obj->Accuracy(data, Eigen::VectorXd::Constant(1, 1.0)), 0.75);
  EXPECT_EQ(obj->Accuracy(data, Eigen::VectorXd::Constant(1, -1.0)), 0.25);

  Eigen::VectorXd yc(4);
  yc << 0, 1, 1, 0;
  const Dataset multi = Dataset::Dense(x, yc, LabelKind::kMulticlass, 2);
  ASSERT_OK_AND_ASSIGN(auto soft,
                       Objective::Create(Config(LossKind::kSoftmax, 2), 1));
  Eigen::VectorXd w(2);
  w << 1, -1;  // class 0 if x > 0
  EXPECT_EQ(soft->Accuracy(multi, w), 0.5);

  ASSERT_OK_AND_ASSIGN(auto ls,
                       Objective::Create(Config(LossKind::kLeastSquares), 1));
  EXPECT_TRUE(std::isnan(ls->Accuracy(data, Eigen::VectorXd::Zero(1))));
}

TEST(ObjectiveTest, RejectsBadConfigAndData) {
  ModelConfig c = Config(LossKind::kLogistic);
  c.l2 = -1;
  EXPECT_THAT(Objective::Create(c, 2),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("l2")));
  c = Config(LossKind::kHinge, 3);
  EXPECT_THAT(Objective::Create(c, 2),
              StatusIs(absl::StatusCode::kInvalidArgument));
  c = Config(LossKind::kHuberizedHinge);
  c.huber_width = 0;
  EXPECT_THAT(Objective::Create(c, 2),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(Objective::Create(Config(LossKind::kLogistic), 0),
              StatusIs(absl::StatusCode::kInvalidArgument));

  ASSERT_OK_AND_ASSIGN(auto obj,
                       Objective::Create(Config(LossKind::kLogistic), 3));
  EXPECT_THAT(
      obj->CheckDataset(OneRow(1)),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("dimension")));
  ASSERT_OK_AND_ASSIGN(auto obj2,
                       Objective::Create(Config(LossKind::kLogistic), 2));
  EXPECT_THAT(obj2->CheckDataset(OneRow(0.5, LabelKind::kReal)),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_OK(obj2->CheckDataset(OneRow(-1)));
}

TEST(ObjectiveTest, ParseLossRoundTrips) {
  for (LossKind k :
       {LossKind::kLogistic, LossKind::kSoftmax, LossKind::kLeastSquares,
        LossKind::kHinge, LossKind::kHuberizedHinge}) {
    ASSERT_OK_AND_ASSIGN(LossKind parsed, ParseLoss(LossName(k)));
    EXPECT_EQ(parsed, k);
  }
  EXPECT_THAT(ParseLoss("nope"), StatusIs(absl::StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace dpopt::optim

namespace dpopt::optim {
namespace {

// ---- Totality of per-example clipping (docs/architecture.md, invariant
// "outcomes depend only on what was charged"). ----

// Classic clipping, computed the textbook way on the full gradient.
Eigen::VectorXd ClassicClip(const Eigen::VectorXd& g, double clip, bool l1) {
  const double n = l1 ? g.lpNorm<1>() : g.norm();
  return n > clip ? Eigen::VectorXd(g * (clip / n)) : g;
}

class ClippedGradientTest
    : public ::testing::TestWithParam<std::tuple<LossKind, bool>> {};

TEST_P(ClippedGradientTest, EqualsClassicClippingOnOrdinaryRows) {
  const auto [loss, l1] = GetParam();
  const ModelConfig config = Config(loss, loss == LossKind::kSoftmax ? 3 : 2);
  const Dataset data = RandomData(config, 50, 6, 7);
  auto obj = Objective::Create(config, 6).value();
  std::mt19937 gen(3);
  std::normal_distribution<double> normal;
  Eigen::VectorXd w(obj->parameter_size());
  for (auto& v : w) v = 2 * normal(gen);
  Eigen::VectorXd c(obj->outputs());
  for (double clip : {0.05, 1.0, 100.0}) {
    for (int64_t i = 0; i < data.rows(); ++i) {
      Eigen::VectorXd got = Eigen::VectorXd::Zero(obj->parameter_size());
      const double row_norm =
          l1 ? data.dense().row(i).lpNorm<1>() : data.RowNorm(i);
      obj->AddClippedExampleGradient(
          data, i, w, l1 ? Objective::ClipNorm::kL1 : Objective::ClipNorm::kL2,
          clip, row_norm, c, got);
      const Eigen::VectorXd want =
          ClassicClip(obj->ExampleGradient(data, i, w), clip, l1);
      ASSERT_LE((got - want).lpNorm<Eigen::Infinity>(),
                1e-12 * (1 + want.lpNorm<Eigen::Infinity>()))
          << "row " << i << " clip " << clip;
    }
  }
}

TEST_P(ClippedGradientTest, FiniteAndBoundedOnExtremeRows) {
  const auto [loss, l1] = GetParam();
  const ModelConfig config = Config(loss, loss == LossKind::kSoftmax ? 3 : 2);
  constexpr double kMax = std::numeric_limits<double>::max();
  constexpr double kSub = std::numeric_limits<double>::denorm_min();
  const std::vector<std::vector<double>> rows = {
      {1e308, 1e308, 0, 0},      {-kMax, kMax, kMax, -kMax},
      {kSub, -kSub, 0, 0},       {-0.0, -0.0, 0, 0},
      {1e308, -1e308, 1e308, 1}, {2.2250738585072014e-308, 1e-310, 1e-320, 0},
      {1e300, 1e-300, 1, 0},
  };
  Eigen::MatrixXd x(rows.size(), 4);
  Eigen::VectorXd y(rows.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    for (int j = 0; j < 4; ++j) x(i, j) = rows[i][j];
    y[i] = RequiredLabelKind(loss) == LabelKind::kMulticlass ? i % 3
           : RequiredLabelKind(loss) == LabelKind::kReal
               ? (i % 2 ? kMax : -1e308)
               : (i % 2 ? 1.0 : -1.0);
  }
  const Dataset data =
      Dataset::Dense(x, y, RequiredLabelKind(loss),
                     RequiredLabelKind(loss) == LabelKind::kMulticlass ? 3 : 2);
  ASSERT_OK(data.Validate());
  auto obj = Objective::Create(config, 4).value();
  Eigen::VectorXd c(obj->outputs());
  for (double wscale : {0.0, 1e-3, 1.0, 1e300}) {
    Eigen::VectorXd w(obj->parameter_size());
    for (int64_t k = 0; k < w.size(); ++k) {
      w[k] = wscale * ((k % 3) - 1.0 + 0.25 * k);
    }
    for (int64_t i = 0; i < data.rows(); ++i) {
      const double loss_value = obj->ExampleCoefficients(data, i, w, c);
      ASSERT_FALSE(std::isnan(loss_value)) << "row " << i;
      ASSERT_TRUE(c.allFinite()) << "row " << i;
      for (double clip : {1e-6, 1.0, 1e6}) {
        Eigen::VectorXd got = Eigen::VectorXd::Zero(obj->parameter_size());
        const double row_norm = l1 ? data.dense().row(i).lpNorm<1>()
                                   : data.RowNorm(i);  // may be Inf or 0
        obj->AddClippedExampleGradient(
            data, i, w,
            l1 ? Objective::ClipNorm::kL1 : Objective::ClipNorm::kL2, clip,
            row_norm, c, got);
        ASSERT_TRUE(got.allFinite()) << "row " << i << " w " << wscale;
        const double n = l1 ? got.lpNorm<1>() : got.norm();
        ASSERT_LE(n, clip * (1 + 1e-12)) << "row " << i << " w " << wscale;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    AllLosses, ClippedGradientTest,
    ::testing::Combine(::testing::Values(LossKind::kLogistic,
                                         LossKind::kSoftmax,
                                         LossKind::kLeastSquares,
                                         LossKind::kHinge,
                                         LossKind::kHuberizedHinge),
                       ::testing::Bool()));

TEST(RowDotTest, NeverNanOnOverflow) {
  Eigen::MatrixXd x(2, 3);
  x << 1e308, 1e308, -1e308, 1e308, -1e308, 1e-300;
  const Dataset data =
      Dataset::Dense(x, Eigen::Vector2d(1, -1), LabelKind::kBinary);
  // Known answers: (1e308 + 1e308 - 1e308) * 1 = 1e308 (the direct sum
  // overflows on the way); 1e308 - 1e308 + tiny = tiny.
  EXPECT_DOUBLE_EQ(data.RowDot(0, Eigen::Vector3d(1, 1, 1)), 1e308);
  EXPECT_EQ(data.RowDot(1, Eigen::Vector3d(1, 1, 0)), 0.0);
  EXPECT_EQ(data.RowDot(0, Eigen::Vector3d(10, 10, 0)),
            std::numeric_limits<double>::infinity());
  EXPECT_EQ(data.RowDot(0, Eigen::Vector3d(-10, -10, 0)),
            -std::numeric_limits<double>::infinity());
}

}  // namespace
}  // namespace dpopt::optim
