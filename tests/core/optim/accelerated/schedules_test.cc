// Known answers for the accelerated schedules (Kuru et al. 2022): the
// uniform split (Prop. 3.1), the noise-dividing allocations and T_final
// (Prop. 4.2, Remark 4.1, Thm 4.3), the MASG stages (4.7) and the paper's
// Fig. 2. Reference values were computed from the formulas with the
// constants of the authors' MATLAB code (github.com/sibirbil/DPAccGradMethods),
// which reproduce the published figures (T_final = 136 and 396 in Figs. 3-4).
#include "core/optim/accelerated/schedules.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/common/status_matchers.h"

namespace dpopt::optim::accelerated {
namespace {

// Reference setting of the paper's Sec. 5: L = 5.10434, mu = 0.02, S1 = 40,
// n = 1e5, d = 20, eps = 1, E0 = 10.
constexpr double kL = 5.10434;
constexpr double kMu = 0.02;
constexpr double kS1 = 40;
constexpr double kN = 1e5;
constexpr double kD = 20;
constexpr double kEps = 1;

NoiseDividingOptions LaplaceNd(TSelectConvention conv) {
  NoiseDividingOptions o;
  o.smoothness = kL;
  o.strong_convexity = kMu;
  o.convention = conv;
  o.exponent = 1.0 / 3.0;
  o.noise_unit = kD * std::pow(kS1 / (kN * kEps), 2);
  o.initial_error = 10;
  return o;
}

StepSchedule NagSchedule(double c, int64_t t_max) {
  const double alpha = c / kL;
  return ConstantSchedule(t_max, alpha, MomentumForStep(alpha, kMu));
}

StepSchedule Masg(double c, int64_t t_max,
                  FirstStageRule rule = FirstStageRule::kCeil, double L = kL,
                  double mu = kMu) {
  MasgOptions o;
  o.smoothness = L;
  o.strong_convexity = mu;
  o.step_scale = c;
  o.first_stage = rule;
  absl::StatusOr<StepSchedule> s = MasgSchedule(t_max, o);
  EXPECT_OK(s);
  return *s;
}

// ---- The uniform split ((3.4)-(3.5), S1 = 40, n = 1e5, eps = 1). ----
struct P3Row {
  double m, T, eps0, b;
};

class UniformSplitTable : public ::testing::TestWithParam<P3Row> {};

TEST_P(UniformSplitTable, MatchesSpecTable) {
  const P3Row r = GetParam();
  // Values are printed to 6 decimals: half a unit of the last digit.
  EXPECT_NEAR(BaseEpsilon(kEps / r.T, r.m / kN), r.eps0, 5e-7);
  EXPECT_NEAR(LaplaceScaleFor(kS1, kEps / r.T, kN, r.m), r.b, 5e-7);
}

INSTANTIATE_TEST_SUITE_P(SpecP3, UniformSplitTable,
                         ::testing::Values(P3Row{1e5, 100, 0.010000, 0.040000},
                                           P3Row{1e5, 200, 0.005000, 0.080000},
                                           P3Row{1e5, 500, 0.002000, 0.200000},
                                           P3Row{1e5, 1000, 0.001000, 0.400000},
                                           P3Row{1e3, 100, 0.695652, 0.057500},
                                           P3Row{1e3, 200, 0.406299, 0.098450},
                                           P3Row{1e3, 500, 0.182488, 0.219192},
                                           P3Row{1e3, 1000, 0.095356,
                                                 0.419482}));

TEST(UniformSplit, SevenDigitsAndLinearInT) {
  // (m = 1000, T = 100) gives eps0 = 0.6956524, b = 0.05749998.
  EXPECT_NEAR(BaseEpsilon(0.01, 0.01), 0.6956524, 5e-8);
  EXPECT_NEAR(LaplaceScaleFor(40, 0.01, 1e5, 1e3), 0.05749998, 5e-9);
  // m = n: b(2T) = 2 b(T).
  for (double T : {10.0, 100.0, 733.0}) {
    EXPECT_NEAR(LaplaceScaleFor(40, 1 / (2 * T), 1e5, 1e5),
                2 * LaplaceScaleFor(40, 1 / T, 1e5, 1e5), 1e-12);
  }
}

// ---- Privacy-loss round trip ((3.3) and its inverse). ----
TEST(PrivacyLoss, RoundTrip) {
  std::mt19937_64 gen(7);
  std::uniform_real_distribution<double> u(0, 1);
  for (int i = 0; i < 2000; ++i) {
    const double s = 0.01 + 100 * u(gen);
    const double n = std::floor(1 + 1e6 * u(gen));
    const double m = std::max(1.0, std::floor(n * u(gen)));
    const double eps_t =
        std::exp(std::log(1e-6) + (std::log(5.0) - std::log(1e-6)) * u(gen));
    const double b = LaplaceScaleFor(s, eps_t, n, m);
    EXPECT_NEAR(EpsLoss(s, b, n, m), eps_t, 1e-12 * eps_t)
        << "s=" << s << " n=" << n << " m=" << m;
  }
  // m = n: epsloss = S / (b n), b = S / (n eps).
  EXPECT_NEAR(EpsLoss(40, 0.5, 1e5, 1e5), 40 / (0.5 * 1e5), 1e-15);
  EXPECT_NEAR(LaplaceScaleFor(40, 0.003, 1e5, 1e5), 40 / (1e5 * 0.003), 1e-15);
}

// ---- Allocation shape. ----
TEST(NoiseDividing, SingleStageGeometricGrowth) {
  const StepSchedule s = NagSchedule(1, 100);
  ASSERT_OK_AND_ASSIGN(
      std::vector<double> w,
      BudgetShares(s, 100, LaplaceNd(TSelectConvention::kReference)));
  ASSERT_EQ(w.size(), 100u);
  EXPECT_NEAR(w[99] / w[0], 8.44136, 5e-6);
  const double ratio = std::pow(1 - std::sqrt(kMu / kL), -1.0 / 3.0);
  double sum = 0;
  for (int t = 0; t < 100; ++t) {
    sum += w[t];
    if (t > 0) {
      EXPECT_NEAR(w[t] / w[t - 1], ratio, 1e-12);
    }
  }
  EXPECT_NEAR(sum, 1, 1e-12);
}

// ---- Optimality of Prop. 4.2 for m = n. ----
TEST(NoiseDividing, PerturbationsNeverLowerTheNoiseTerm) {
  const StepSchedule s = NagSchedule(1, 60);
  NoiseDividingOptions nd = LaplaceNd(TSelectConvention::kPaper);
  const std::vector<double> log_a = LogBoundWeights(s, 60, nd);
  ASSERT_OK_AND_ASSIGN(std::vector<double> w, BudgetShares(s, 60, nd));
  // Objective sum_t a_t b_t^2 with b_t = S/(n eps_t) = 1/w_t (S/(n eps) = 1).
  auto objective = [&](const std::vector<double>& shares) {
    double v = 0;
    for (size_t t = 0; t < shares.size(); ++t) {
      v += std::exp(log_a[t]) / (shares[t] * shares[t]);
    }
    return v;
  };
  double sum_cuberoot = 0;
  for (double la : log_a) sum_cuberoot += std::exp(la / 3);
  const double optimum = objective(w);
  EXPECT_NEAR(optimum, std::pow(sum_cuberoot, 3), 1e-10 * optimum);
  std::mt19937_64 gen(3);
  std::normal_distribution<double> g(0, 1);
  for (int trial = 0; trial < 500; ++trial) {
    const double scale = trial < 250 ? 0.2 : 1e-3;
    std::vector<double> v(w.size());
    double total = 0;
    for (size_t t = 0; t < w.size(); ++t) {
      v[t] = w[t] * std::exp(scale * g(gen));
      total += v[t];
    }
    for (double& x : v) x /= total;  // feasible: sum eps_t = eps
    EXPECT_GE(objective(v), optimum * (1 - 1e-12));
  }
}

// ---- T_final test vectors. ----
struct TFinalRow {
  double c;
  int64_t t_max;
  bool masg;
  TSelectConvention conv;
  int64_t expected;
};

class TFinalSelection : public ::testing::TestWithParam<TFinalRow> {};

TEST_P(TFinalSelection, MatchesSpec) {
  const TFinalRow r = GetParam();
  const StepSchedule s =
      r.masg ? Masg(r.c, r.t_max) : NagSchedule(r.c, r.t_max);
  ASSERT_OK_AND_ASSIGN(int64_t t_final, SelectFinalSteps(s, LaplaceNd(r.conv)));
  EXPECT_EQ(t_final, r.expected);
}

constexpr auto kRef = TSelectConvention::kReference;
constexpr auto kPap = TSelectConvention::kPaper;

INSTANTIATE_TEST_SUITE_P(
    Spec, TFinalSelection,
    ::testing::Values(
        // DP-NAG-opt, reference constants.
        TFinalRow{1, 100, false, kRef, 100},
        TFinalRow{1, 200, false, kRef, 136},
        TFinalRow{1, 500, false, kRef, 136},
        TFinalRow{1, 1000, false, kRef, 136},
        TFinalRow{0.1, 100, false, kRef, 100},
        TFinalRow{0.1, 200, false, kRef, 200},
        TFinalRow{0.1, 500, false, kRef, 396},
        TFinalRow{0.1, 1000, false, kRef, 396},
        // Paper constants.
        TFinalRow{1, 1000, false, kPap, 106},
        TFinalRow{0.1, 1000, false, kPap, 303},
        // DP-MASG-opt: 89 (end of stage 1) in all eight cases.
        TFinalRow{1, 100, true, kRef, 89}, TFinalRow{1, 200, true, kRef, 89},
        TFinalRow{1, 500, true, kRef, 89}, TFinalRow{1, 1000, true, kRef, 89},
        TFinalRow{0.1, 100, true, kRef, 89},
        TFinalRow{0.1, 200, true, kRef, 89},
        TFinalRow{0.1, 500, true, kRef, 89},
        TFinalRow{0.1, 1000, true, kRef, 89}));

// The noise-dividing allocations (first and last eps_t and b_t), to 4
// significant digits.
struct AllocationRow {
  double c;
  double m;
  int64_t t_max;
  bool masg;
  TSelectConvention conv;
  int64_t t_final;
  double eps_1, eps_last, b_1, b_last;
};

class AllocationTable : public ::testing::TestWithParam<AllocationRow> {};

TEST_P(AllocationTable, MatchesSpec) {
  const AllocationRow r = GetParam();
  const StepSchedule s =
      r.masg ? Masg(r.c, r.t_max) : NagSchedule(r.c, r.t_max);
  const NoiseDividingOptions nd = LaplaceNd(r.conv);
  ASSERT_OK_AND_ASSIGN(int64_t t_final, SelectFinalSteps(s, nd));
  ASSERT_EQ(t_final, r.t_final);
  ASSERT_OK_AND_ASSIGN(std::vector<double> w, BudgetShares(s, t_final, nd));
  const double eps_1 = kEps * w.front(), eps_last = kEps * w.back();
  auto near4 = [](double got, double want) {
    EXPECT_NEAR(got, want, 5e-4 * want) << "want " << want;
  };
  near4(eps_1, r.eps_1);
  near4(eps_last, r.eps_last);
  near4(LaplaceScaleFor(kS1, eps_1, kN, r.m), r.b_1);
  near4(LaplaceScaleFor(kS1, eps_last, kN, r.m), r.b_last);
}

INSTANTIATE_TEST_SUITE_P(
    Spec, AllocationTable,
    ::testing::Values(AllocationRow{1, 1e5, 1000, false, kRef, 136, 0.0012281,
                                    0.022518, 0.3257, 0.017763},
                      AllocationRow{1, 1e5, 1000, false, kPap, 106, 0.0024707,
                                    0.023734, 0.1619, 0.016853},
                      AllocationRow{1, 1e3, 1000, false, kRef, 136, 0.0012281,
                                    0.022518, 0.34511, 0.033697},
                      AllocationRow{0.1, 1e5, 1000, false, kRef, 396,
                                    0.00051434, 0.0071531, 0.7777, 0.05592},
                      AllocationRow{0.1, 1e5, 1000, false, kPap, 303, 0.0010235,
                                    0.0076589, 0.39081, 0.052227},
                      AllocationRow{1, 1e5, 100, false, kRef, 100, 0.0028564,
                                    0.024112, 0.14004, 0.016589},
                      AllocationRow{1, 1e5, 100, false, kPap, 100, 0.0028564,
                                    0.024112, 0.14004, 0.016589},
                      // MASG-opt, c = 1, m = n.
                      AllocationRow{1, 1e5, 1000, true, kRef, 89, 0.003752,
                                    0.024988, 0.10661, 0.016007}));

// ---- MASG schedule ((4.7) with the authors' n_1). ----
TEST(Masg, ReferenceStages) {
  MasgOptions o;
  o.smoothness = kL;
  o.strong_convexity = kMu;
  ASSERT_OK_AND_ASSIGN(MasgStageLengths len, ComputeMasgStageLengths(o));
  EXPECT_EQ(len.first, 89);
  EXPECT_EQ(len.unit, 34);
  EXPECT_EQ(len.Length(2), 136);
  EXPECT_EQ(len.Length(3), 272);
  EXPECT_EQ(len.Length(4), 544);

  const double c = 0.5;
  const StepSchedule s = Masg(c, 1000);
  ASSERT_EQ(s.size(), 1000);
  for (int64_t t = 1; t <= 1000; ++t) {
    const int k = t <= 89 ? 1 : t <= 225 ? 2 : t <= 497 ? 3 : 4;
    EXPECT_EQ(s.stage[t - 1], k) << t;
    const double alpha = k == 1 ? c / kL : c / (std::pow(2.0, 2 * k) * kL);
    EXPECT_DOUBLE_EQ(s.alpha[t - 1], alpha) << t;
    EXPECT_DOUBLE_EQ(s.beta[t - 1], (1 - std::sqrt(kMu * alpha)) /
                                        (1 + std::sqrt(kMu * alpha)));
    EXPECT_EQ(s.restart[t - 1], t == 90 || t == 226 || t == 498) << t;
  }
  // Truncated exactly at T: T = 100 has 11 steps of stage 2.
  const StepSchedule s100 = Masg(1, 100);
  EXPECT_EQ(s100.size(), 100);
  EXPECT_EQ(std::count(s100.stage.begin(), s100.stage.end(), 2), 11);
  const StepSchedule s500 = Masg(1, 500);
  EXPECT_EQ(std::count(s500.stage.begin(), s500.stage.end(), 4), 3);
}

TEST(Masg, RejectsStepScaleAboveOne) {
  MasgOptions o;
  o.smoothness = kL;
  o.strong_convexity = kMu;
  o.step_scale = 1.5;
  EXPECT_THAT(MasgSchedule(10, o),
              dpopt::testing::StatusIs(absl::StatusCode::kInvalidArgument));
}

// Fig. 2 of the paper (values checked against the released figure):
// b_t n eps / S1 = 1 / w_t with mu = 1, L = 20, floor rule, K complete
// stages.
struct Fig2Row {
  int K;
  int64_t T;
  double first, end_stage1, last, min, max;
};

class Fig2 : public ::testing::TestWithParam<Fig2Row> {};

TEST_P(Fig2, NoiseProfileMatches) {
  const Fig2Row r = GetParam();
  MasgOptions o;
  o.smoothness = 20;
  o.strong_convexity = 1;
  o.first_stage = FirstStageRule::kFloor;
  ASSERT_OK_AND_ASSIGN(MasgStageLengths len, ComputeMasgStageLengths(o));
  ASSERT_EQ(len.first, 13);
  ASSERT_EQ(len.unit, 10);
  ASSERT_EQ(len.unit * ((int64_t{1} << (r.K + 1)) - 4) + len.first, r.T);
  const StepSchedule s = Masg(1, r.T, FirstStageRule::kFloor, 20, 1);
  NoiseDividingOptions nd;
  nd.smoothness = 20;
  nd.strong_convexity = 1;
  nd.noise_unit = 1;
  ASSERT_OK_AND_ASSIGN(std::vector<double> w, BudgetShares(s, r.T, nd));
  std::vector<double> v(w.size());
  for (size_t i = 0; i < w.size(); ++i) v[i] = 1 / w[i];
  // Printed to 2 decimals.
  EXPECT_NEAR(v[0], r.first, 0.005);
  EXPECT_NEAR(v[12], r.end_stage1, 0.005);
  EXPECT_NEAR(v.back(), r.last, 0.005);
  EXPECT_NEAR(*std::min_element(v.begin(), v.end()), r.min, 0.005);
  EXPECT_NEAR(*std::max_element(v.begin(), v.end()), r.max, 0.005);
  // The maximum is at the first step of stage 2.
  EXPECT_EQ(std::max_element(v.begin(), v.end()) - v.begin(), 13);
}

INSTANTIATE_TEST_SUITE_P(
    Spec, Fig2,
    ::testing::Values(Fig2Row{2, 53, 65.29, 23.72, 43.19, 23.72, 91.23},
                      Fig2Row{3, 133, 154.73, 56.22, 97.57, 56.22, 216.20},
                      Fig2Row{4, 293, 343.45, 124.79, 205.28, 124.79, 479.89},
                      Fig2Row{5, 613, 741.76, 269.52, 420.10, 269.52,
                              1036.45}));

TEST(NoiseDividing, RejectsBadOptions) {
  NoiseDividingOptions nd = LaplaceNd(kRef);
  nd.noise_unit = 0;
  EXPECT_THAT(SelectFinalSteps(NagSchedule(1, 10), nd),
              dpopt::testing::StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(BudgetShares(NagSchedule(1, 10), 11, LaplaceNd(kRef)),
              dpopt::testing::StatusIs(absl::StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace dpopt::optim::accelerated
