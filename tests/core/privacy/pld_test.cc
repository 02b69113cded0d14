#include "core/privacy/pld.h"

#include <chrono>
#include <cmath>
#include <iostream>
#include <limits>
#include <tuple>
#include <vector>

#include "core/privacy/accountant.h"
#include "core/privacy/dp_sgd_accounting.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/common/status_matchers.h"

namespace dpopt::privacy {
namespace {

using ::dpopt::testing::StatusIs;

void ExpectRel(double actual, double expected, double rel) {
  EXPECT_NEAR(actual, expected, rel * std::abs(expected))
      << "actual " << actual << " expected " << expected;
}

double Pld(const DpEvent& e, double delta) {
  auto r = ComputeEpsilon(e, delta, AccountantKind::kPld);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? r->epsilon : -1;
}

double Rdp(const DpEvent& e, double delta) {
  auto r = ComputeEpsilon(e, delta, AccountantKind::kRdp);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? r->epsilon : -1;
}

// Golden values from dp_accounting's PLD tests).
TEST(PldGoldenTest, FullBatchTwoSteps) {
  ExpectRel(Pld(DpSgdEvent(0.7, 1.0, 2), 1e-5), 10.1224945839, 1e-4);
  // Same through the generic convolution path (no Gaussian shortcut).
  ExpectRel(
      Pld(DpEvent::Composed({DpEvent::Gaussian(0.7), DpEvent::Gaussian(0.7)}),
          1e-5),
      10.1224945839, 1e-4);
}

TEST(PldGoldenTest, SampledGaussian120Steps) {
  const double pld = Pld(DpSgdEvent(0.7, 0.01, 120), 1e-5);
  ExpectRel(pld, 2.4612381, 1e-3);
  EXPECT_LT(pld, Rdp(DpSgdEvent(0.7, 0.01, 120), 1e-5));
}

TEST(PldGoldenTest, FullBatchHundredSteps) {
  ExpectRel(Pld(DpSgdEvent(10, 1.0, 100), 1e-5), 4.3771781, 1e-3);
  // Discretized self-composition path (FFT power) agrees.
  ExpectRel(Pld(DpEvent::SelfComposed(
                    100, DpEvent::PoissonSampled(1.0, DpEvent::Gaussian(10))),
                1e-5),
            4.3771781, 1e-3);
  EXPECT_GT(Rdp(DpSgdEvent(10, 1.0, 100), 1e-5), 4.3771781);
}

TEST(PldTest, PldIsBelowRdpForDpSgd) {
  for (auto [z, q, t] : std::vector<std::tuple<double, double, int64_t>>{
           {1.1, 0.01, 1000}, {0.8, 0.004, 3000}, {2.0, 0.05, 500}}) {
    const double pld = Pld(DpSgdEvent(z, q, t), 1e-6);
    const double rdp = Rdp(DpSgdEvent(z, q, t), 1e-6);
    EXPECT_LT(pld, rdp) << z << " " << q << " " << t;
    EXPECT_GT(pld, 0.5 * rdp) << z << " " << q << " " << t;
  }
}

TEST(PldTest, PureDpEvents) {
  const double h = PldOptions().value_discretization_interval;
  // Laplace with b = 1 is 1-DP: at delta = 0 PLD gives 1 (up to the grid).
  const double lap = Pld(DpEvent::Laplace(1), 0);
  EXPECT_GE(lap, 1.0);
  EXPECT_LE(lap, 1.0 + 2 * h);
  const double ex = Pld(DpEvent::Exponential(0.3), 0);
  EXPECT_GE(ex, 0.3);
  EXPECT_LE(ex, 0.3 + h);
  // Composition of (eps, delta) events: at delta = 2 * delta_i PLD is at
  // most basic composition.
  const double comp =
      Pld(DpEvent::SelfComposed(2, DpEvent::EpsilonDelta(0.5, 1e-6)), 2e-6);
  EXPECT_LE(comp, 1.0 + 2 * h);
  EXPECT_GT(comp, 0.5);
  // NoOp is free.
  EXPECT_EQ(Pld(DpEvent::NoOp(), 0), 0);
}

TEST(PldTest, SampledLaplaceBelowPureAmplification) {
  const double q = 0.05, b = 0.5;
  const double pure = std::log1p(q * std::expm1(1 / b));
  const double pld = Pld(DpEvent::PoissonSampled(q, DpEvent::Laplace(b)), 0);
  EXPECT_LE(pld, pure + 2e-4);
  EXPECT_GT(pld, 0);
}

TEST(PldTest, DeltaIsInverseOfEpsilon) {
  const DpEvent e = DpSgdEvent(1.0, 0.02, 300);
  const double eps = Pld(e, 1e-6);
  ASSERT_OK_AND_ASSIGN(double d, ComputeDelta(e, eps, AccountantKind::kPld));
  EXPECT_LE(d, 1e-6 * (1 + 1e-9));
  EXPECT_GT(d, 0.9e-6);
  ASSERT_OK_AND_ASSIGN(double d2,
                       ComputeDelta(e, eps * 0.95, AccountantKind::kPld));
  EXPECT_GT(d2, 1e-6);
}

TEST(PldTest, DiscretizationIsPessimistic) {
  // Exact Gaussian (sigma = 1, sensitivity 1) delta at eps:
  // Phi(-eps + 1/2) - e^eps Phi(-eps - 1/2) (Balle & Wang 2018, Thm. 8).
  // Between grid points the connect-the-dots PLD is strictly above it, and
  // close; at grid points it matches up to round-off.
  auto exact = [](double eps) {
    return 0.5 * std::erfc((eps - 0.5) / std::sqrt(2.0)) -
           std::exp(eps) * 0.5 * std::erfc((eps + 0.5) / std::sqrt(2.0));
  };
  ASSERT_OK_AND_ASSIGN(PldPair pld, ComputePld(DpEvent::Gaussian(1)));
  for (double eps : {0.00005, 1.00005, 2.50005}) {
    const double d = pld.remove.Delta(eps);
    EXPECT_GT(d, exact(eps)) << eps;
    EXPECT_LE(d, exact(eps) * (1 + 1e-6)) << eps;
  }
  EXPECT_NEAR(pld.remove.Delta(1.0), exact(1.0), 1e-14);
  // The exact Gaussian path of ComputeDelta gives the closed form.
  ASSERT_OK_AND_ASSIGN(
      double d, ComputeDelta(DpEvent::Gaussian(1), 1.0, AccountantKind::kPld));
  EXPECT_NEAR(d, exact(1.0), 1e-15);
  // And the exact epsilon: 100 steps at sigma = 10 are one Gaussian at 1.
  ExpectRel(Pld(DpSgdEvent(10, 1.0, 100), 1e-5), 4.3771781, 1e-7);
}

TEST(PldTest, UnsupportedAndInvalid) {
  EXPECT_THAT(ComputeEpsilon(DpEvent::DiscreteGaussian(1, 1e6, 10), 1e-5,
                             AccountantKind::kPld)
                  .status(),
              StatusIs(absl::StatusCode::kUnimplemented));
  EXPECT_THAT(
      ComputeEpsilon(DpEvent::Gaussian(1), 2, AccountantKind::kPld).status(),
      StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_EQ(Pld(DpEvent::Gaussian(0), 1e-5),
            std::numeric_limits<double>::infinity());
}

TEST(PldTest, CalibrationOfLongDpSgdIsTighterThanRdp) {
  // Its time is printed, not asserted (timing belongs in benchmarks).
  const auto start = std::chrono::steady_clock::now();
  ASSERT_OK_AND_ASSIGN(double z_pld, CalibrateDpSgd(1.0, 1e-6, 0.01, 2000,
                                                    AccountantKind::kPld));
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  ASSERT_OK_AND_ASSIGN(double z_rdp, CalibrateDpSgd(1.0, 1e-6, 0.01, 2000,
                                                    AccountantKind::kRdp));
  EXPECT_LT(z_pld, z_rdp);
  EXPECT_LE(Pld(DpSgdEvent(z_pld, 0.01, 2000), 1e-6), 1.0);
  EXPECT_GT(Pld(DpSgdEvent(z_pld * (1 - 3e-6), 0.01, 2000), 1e-6), 1.0);
  std::cout << "PLD calibration: " << seconds << " s, z_pld " << z_pld
            << ", z_rdp " << z_rdp << "\n";
}

TEST(PldTest, CalibrationTreatsOutOfRangeAsNotFitting) {
  // Below z = 0.5 this event's PLD exceeds the grid limit (OUT_OF_RANGE);
  // calibration must still return a verified z, here exactly 0.5.
  // (PoissonSampled with q = 1 forces the discretized path.)
  auto make = [](double z) {
    return DpEvent::PoissonSampled(
        1.0, z < 0.5 ? DpEvent::Gaussian(1e-9) : DpEvent::Gaussian(z));
  };
  EXPECT_THAT(ComputeEpsilon(make(0.4), 1e-5, AccountantKind::kPld).status(),
              StatusIs(absl::StatusCode::kOutOfRange));
  ASSERT_OK_AND_ASSIGN(
      double z, CalibrateNoiseMultiplier(make, 20, 1e-5, AccountantKind::kPld));
  EXPECT_EQ(z, 0.5);
}

}  // namespace
}  // namespace dpopt::privacy
