// Tests of the grid/sensitivity plans (hand-computed values) and of the
// vector mechanisms. Statistical checks use fixed seeds of the NOT
// DIFFERENTIALLY PRIVATE test generator with |z| < 5 (false-alarm rate
// ~6e-7 per check for a correct implementation).
#include "core/noise/vector_mechanisms.h"

#include <cmath>
#include <cstdint>

#include "core/noise/testing/seeded_random.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/common/status_matchers.h"

namespace dpopt::noise {
namespace {

using ::dpopt::noise::testing::FailingRandomForTesting;
using ::dpopt::noise::testing::SeededRandomForTesting;
using ::dpopt::testing::StatusIs;

TEST(PlanGaussianTest, HandComputedPlan) {
  // z*s = 1 = 2^0, so g = 2^(0-20); s_eff = 1 + 2^-20 sqrt(123);
  // sigma/g = 2^20 + sqrt(123) = 1048587.0905..., rounded up to a dyadic
  // with 24 significant bits (2^-3 resolution at this magnitude).
  ASSERT_OK_AND_ASSIGN(GaussianPlan plan, PlanGaussian(1.0, 1.0, 123));
  EXPECT_EQ(plan.grid, 0x1.0p-20);
  const double s_eff = 1 + 0x1.0p-20 * std::sqrt(123.0);
  EXPECT_GE(plan.effective_sensitivity, s_eff);
  EXPECT_LE(plan.effective_sensitivity, s_eff * (1 + 1e-13));
  EXPECT_EQ(plan.sigma_in_grid_units, 1048587.125);
  EXPECT_EQ(plan.sigma, 1048587.125 * 0x1.0p-20);
  EXPECT_EQ(plan.noise_multiplier, 1.0);
  EXPECT_EQ(plan.dimension, 123);
  EXPECT_EQ(plan.l2_sensitivity, 1.0);
}

TEST(PlanGaussianTest, GridTracksSigma) {
  // z*s = 0.3 in [2^-2, 2^-1): g = 2^-22.
  ASSERT_OK_AND_ASSIGN(GaussianPlan plan, PlanGaussian(0.1, 3.0, 1));
  EXPECT_EQ(plan.grid, 0x1.0p-22);
  EXPECT_GE(plan.effective_sensitivity, 0.1 + 0x1.0p-22);
  EXPECT_GE(plan.sigma, 3.0 * plan.effective_sensitivity);
  EXPECT_LE(plan.sigma, 3.0 * plan.effective_sensitivity * (1 + 0x1.0p-22));
  // z*s = 1.4*... = 2*0.7 = 1.4 in [1, 2): g = 2^-20.
  ASSERT_OK_AND_ASSIGN(plan, PlanGaussian(2.0, 0.7, 10));
  EXPECT_EQ(plan.grid, 0x1.0p-20);
  EXPECT_GE(plan.effective_sensitivity, 2.0 + 0x1.0p-20 * std::sqrt(10.0));
  EXPECT_GE(plan.sigma_in_grid_units, 0x1.0p20);
  EXPECT_LT(plan.sigma_in_grid_units, 0x1.0p21);
}

TEST(PlanGaussianTest, RejectsBadInputs) {
  for (double bad : {0.0, -1.0, std::nan(""), HUGE_VAL}) {
    EXPECT_THAT(PlanGaussian(bad, 1.0, 3),
                StatusIs(absl::StatusCode::kInvalidArgument));
    EXPECT_THAT(PlanGaussian(1.0, bad, 3),
                StatusIs(absl::StatusCode::kInvalidArgument));
    EXPECT_THAT(PlanLaplace(bad, 1.0, 3),
                StatusIs(absl::StatusCode::kInvalidArgument));
    EXPECT_THAT(PlanLaplace(1.0, bad, 3),
                StatusIs(absl::StatusCode::kInvalidArgument));
  }
  EXPECT_THAT(PlanGaussian(1.0, 1.0, 0),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(PlanLaplace(1.0, 1.0, -2),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(PlanLaplaceTest, HandComputedPlan) {
  // b/s_eff = 2 (epsilon 0.5), s = 1: m*s = 2 = 2^1, so g = 2^(1-20);
  // s_eff = 1 + 5 * 2^-19; b/g = 2 * s_eff * 2^19 = 2^20 + 10.
  ASSERT_OK_AND_ASSIGN(LaplacePlan plan, PlanLaplace(1.0, 2.0, 5));
  EXPECT_EQ(plan.grid, 0x1.0p-19);
  EXPECT_GE(plan.effective_sensitivity, 1 + 5 * 0x1.0p-19);
  EXPECT_LE(plan.effective_sensitivity, (1 + 5 * 0x1.0p-19) * (1 + 1e-13));
  // 2^20 + 10 rounded up to 2^-3 resolution: 1048586 + 1/8 (the 2^-48
  // safety margins push it just above 1048586).
  EXPECT_EQ(plan.scale_in_grid_units, 1048586.125);
  EXPECT_EQ(plan.scale, plan.scale_in_grid_units * plan.grid);
}

TEST(AddGaussianNoiseTest, RejectsBadVectorsBeforeDrawing) {
  ASSERT_OK_AND_ASSIGN(GaussianPlan plan, PlanGaussian(1.0, 1.0, 3));
  SeededRandomForTesting rng(1);
  Eigen::VectorXd wrong_size(4);
  EXPECT_THAT(AddGaussianNoise(plan, rng, wrong_size),
              StatusIs(absl::StatusCode::kInvalidArgument));
  Eigen::VectorXd nan(3);
  nan << 1, std::nan(""), 2;
  EXPECT_THAT(AddGaussianNoise(plan, rng, nan),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_EQ(nan[0], 1);  // Untouched.
  Eigen::VectorXd huge = Eigen::VectorXd::Constant(3, 1e300);
  EXPECT_THAT(AddGaussianNoise(plan, rng, huge),
              StatusIs(absl::StatusCode::kInvalidArgument));
  GaussianPlan tampered = plan;
  tampered.grid = 0.3;
  Eigen::VectorXd ok = Eigen::VectorXd::Zero(3);
  EXPECT_THAT(AddGaussianNoise(tampered, rng, ok),
              StatusIs(absl::StatusCode::kInvalidArgument));
  tampered = plan;
  tampered.sigma_in_grid_units = 1048576.01;  // Not a sampler scale.
  EXPECT_THAT(AddGaussianNoise(tampered, rng, ok),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(AddGaussianNoiseTest, FailingSourcePoisonsOutput) {
  ASSERT_OK_AND_ASSIGN(GaussianPlan plan, PlanGaussian(1.0, 1.0, 50));
  FailingRandomForTesting rng(2, /*good_draws=*/10);
  Eigen::VectorXd v = Eigen::VectorXd::Zero(50);
  EXPECT_THAT(AddGaussianNoise(plan, rng, v),
              StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_TRUE(v.array().isNaN().all());
}

TEST(AddGaussianNoiseTest, OutputIsOnGridWithRightSpread) {
  constexpr int64_t kD = 100000;
  ASSERT_OK_AND_ASSIGN(GaussianPlan plan, PlanGaussian(0.5, 1.3, kD));
  SeededRandomForTesting rng(3);
  Eigen::VectorXd v = Eigen::VectorXd::LinSpaced(kD, -1.0, 1.0);
  const Eigen::VectorXd rounded =
      (v / plan.grid).array().round().matrix() * plan.grid;
  ASSERT_OK(AddGaussianNoise(plan, rng, v));
  const Eigen::VectorXd noise = v - rounded;
  for (Eigen::Index i = 0; i < kD; i += 997) {
    const double units = v[i] / plan.grid;
    EXPECT_EQ(units, std::round(units));
  }
  const double mean = noise.mean();
  const double var = noise.squaredNorm() / kD;
  const double sigma2 = plan.sigma * plan.sigma;
  EXPECT_LT(std::abs(mean) / std::sqrt(sigma2 / kD), 5);
  EXPECT_LT(std::abs(var / sigma2 - 1) / std::sqrt(2.0 / kD), 5);
}

TEST(AddLaplaceNoiseTest, OutputHasLaplaceSpread) {
  constexpr int64_t kD = 100000;
  ASSERT_OK_AND_ASSIGN(LaplacePlan plan, PlanLaplace(2.0, 1.0, kD));
  SeededRandomForTesting rng(4);
  Eigen::VectorXd v = Eigen::VectorXd::Zero(kD);
  ASSERT_OK(AddLaplaceNoise(plan, rng, v));
  // Mean absolute value of a Laplace(b) is b; its variance is 2 b^2.
  const double b = plan.scale;
  const double mean_abs = v.cwiseAbs().mean();
  EXPECT_LT(std::abs(mean_abs - b) / (b / std::sqrt(kD)), 5);
  EXPECT_GT(plan.scale, 1.0 * plan.effective_sensitivity * (1 - 1e-12));
}

TEST(AddLaplaceNoiseTest, RejectsWrongDimensionAndFailsClosed) {
  ASSERT_OK_AND_ASSIGN(LaplacePlan plan, PlanLaplace(1.0, 1.0, 4));
  SeededRandomForTesting rng(5);
  Eigen::VectorXd wrong(2);
  EXPECT_THAT(AddLaplaceNoise(plan, rng, wrong),
              StatusIs(absl::StatusCode::kInvalidArgument));
  FailingRandomForTesting failing(6, 0);
  Eigen::VectorXd v = Eigen::VectorXd::Zero(4);
  EXPECT_THAT(AddLaplaceNoise(plan, failing, v),
              StatusIs(absl::StatusCode::kUnavailable));
}

}  // namespace
}  // namespace dpopt::noise
