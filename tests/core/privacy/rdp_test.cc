#include "core/privacy/rdp.h"

#include <cmath>
#include <limits>
#include <vector>

#include "core/privacy/accountant.h"
#include "core/privacy/dp_sgd_accounting.h"
#include "core/privacy/privacy_filter.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/common/status_matchers.h"

namespace dpopt::privacy {
namespace {

using ::dpopt::testing::StatusIs;
constexpr double kInf = std::numeric_limits<double>::infinity();

void ExpectRel(double actual, double expected, double rel) {
  EXPECT_NEAR(actual, expected, rel * std::abs(expected))
      << "actual " << actual << " expected " << expected;
}

std::vector<double> Range(double lo, double hi, double step) {
  std::vector<double> v;
  for (double a = lo; a <= hi + 1e-9; a += step) v.push_back(a);
  return v;
}

TEST(RdpOrdersTest, DefaultGridMatchesDpAccounting) {
  const auto& o = DefaultRdpOrders();
  ASSERT_EQ(o.size(), 99u + 53u + 4u);
  EXPECT_EQ(o.front(), 1.1);
  EXPECT_EQ(o[98], 1 + 99 / 10.0);
  EXPECT_EQ(o[99], 11);
  EXPECT_EQ(o[151], 63);
  EXPECT_EQ(o.back(), 1024);
}

// Golden values from the reference accountants' test suites.
TEST(RdpGoldenTest, MnistSettingWithCustomOrders) {
  std::vector<double> orders = {1.25, 1.5, 1.75, 2, 2.25, 2.5, 3, 3.5, 4, 4.5};
  for (int a = 5; a <= 63; ++a) orders.push_back(a);
  for (double a : {128.0, 256.0, 512.0}) orders.push_back(a);
  DpEvent e = DpSgdEvent(1.3, 150.0 / 60000, 6000);
  ASSERT_OK_AND_ASSIGN(EpsilonResult r, ComputeEpsilonRdp(e, 1e-5, orders));
  ExpectRel(r.epsilon, 0.7242234026, 1e-6);
}

TEST(RdpGoldenTest, FullBatchTwoSteps) {
  ASSERT_OK_AND_ASSIGN(
      EpsilonResult r,
      ComputeEpsilon(DpSgdEvent(0.7, 1.0, 2), 1e-5, AccountantKind::kRdp));
  ExpectRel(r.epsilon, 10.8602036, 1e-6);
}

TEST(RdpGoldenTest, SampledGaussian120Steps) {
  ASSERT_OK_AND_ASSIGN(
      EpsilonResult r,
      ComputeEpsilon(DpSgdEvent(0.7, 0.01, 120), 1e-5, AccountantKind::kRdp));
  ExpectRel(r.epsilon, 3.2392676, 1e-6);
}

TEST(RdpGoldenTest, FractionalOrdersAbsoluteSeries) {
  std::vector<double> orders = Range(1.1, 10.9, 0.1);
  for (int i = 0; i < static_cast<int>(orders.size()); ++i) {
    orders[i] = 1 + (i + 1) / 10.0;  // exactly dp_accounting's values
  }
  for (int a = 12; a <= 63; ++a) orders.push_back(a);
  DpEvent e = DpSgdEvent(1.5, 0.04, 2250);
  ASSERT_OK_AND_ASSIGN(EpsilonResult r, ComputeEpsilonRdp(e, 1e-5, orders));
  ExpectRel(r.epsilon, 7.3293347, 1e-6);
  // The signed series of dp_accounting gives the (smaller) reference value.
  std::vector<double> rdp;
  for (double a : orders) {
    rdp.push_back(2250 * RdpPoissonSampledGaussian(0.04, 1.5, a, true));
  }
  ASSERT_OK_AND_ASSIGN(EpsilonResult s, RdpToEpsilon(orders, rdp, 1e-5));
  ExpectRel(s.epsilon, 7.3291112, 1e-6);
}

TEST(RdpGoldenTest, CurveAtSelectedOrders) {
  const std::vector<double> orders = {1.5, 2.5, 5, 50, 100, kInf};
  const std::vector<double> expected = {6.70579741e-04, 1.08548710e-03,
                                        2.18075656e-03, 2.38460375e-02,
                                        1.67416308e+02, kInf};
  ASSERT_OK_AND_ASSIGN(std::vector<double> rdp,
                       ComputeRdp(DpSgdEvent(2.5, 0.01, 50), orders));
  for (size_t i = 0; i < orders.size(); ++i) {
    if (std::isinf(expected[i])) {
      EXPECT_EQ(rdp[i], kInf);
    } else {
      ExpectRel(rdp[i], expected[i], 1e-6);
    }
  }
}

TEST(RdpGoldenTest, FullBatchIsAboveExactGaussian) {
  // 100 steps at sigma = 10 compose to one Gaussian at sigma = 1, whose exact
  // epsilon at delta = 1e-5 is 4.3771781 (Balle & Wang 2018).
  ASSERT_OK_AND_ASSIGN(
      EpsilonResult r,
      ComputeEpsilon(DpSgdEvent(10, 1.0, 100), 1e-5, AccountantKind::kRdp));
  EXPECT_GT(r.epsilon, 4.3771781);
  EXPECT_LT(r.epsilon, 4.3771781 * 1.2);
}

TEST(RdpTest, GaussianIsAlphaOverTwoSigmaSquared) {
  ASSERT_OK_AND_ASSIGN(std::vector<double> rdp,
                       ComputeRdp(DpEvent::Gaussian(2), {1.5, 10, kInf}));
  EXPECT_DOUBLE_EQ(rdp[0], 1.5 / 8);
  EXPECT_DOUBLE_EQ(rdp[1], 10.0 / 8);
  EXPECT_EQ(rdp[2], kInf);
}

TEST(RdpTest, SampledGaussianIntegerOrderTwoClosedForm) {
  // A_2 = (1-q)^2 + 2q(1-q) + q^2 e^{1/z^2} = 1 + q^2 (e^{1/z^2} - 1).
  const double q = 0.1, z = 1.2;
  EXPECT_NEAR(RdpPoissonSampledGaussian(q, z, 2),
              std::log1p(q * q * std::expm1(1 / (z * z))), 1e-14);
}

TEST(RdpTest, SampledGaussianEdgeCases) {
  EXPECT_EQ(RdpPoissonSampledGaussian(0, 1, 5), 0);
  EXPECT_EQ(RdpPoissonSampledGaussian(0.1, 0, 5), kInf);
  EXPECT_DOUBLE_EQ(RdpPoissonSampledGaussian(1, 2, 5), 5.0 / 8);
  EXPECT_EQ(RdpPoissonSampledGaussian(0.1, 1, kInf), kInf);
  // Fractional and integer branches agree in the limit.
  EXPECT_NEAR(RdpPoissonSampledGaussian(0.05, 1.1, 3.0),
              RdpPoissonSampledGaussian(0.05, 1.1, 3.0 + 1e-9), 1e-7);
}

TEST(RdpTest, LaplaceMatchesMironovTable) {
  // Mironov 2017 Table II with b = 1: alpha = 2 gives
  // log(2/3 e + 1/3 e^{-2}).
  EXPECT_NEAR(RdpLaplace(1, 2),
              std::log(2.0 / 3 * std::exp(1.0) + 1.0 / 3 * std::exp(-2.0)),
              1e-14);
  EXPECT_DOUBLE_EQ(RdpLaplace(0.5, kInf), 2);
  EXPECT_EQ(RdpLaplace(0, 2), kInf);
  // Approaches eps = 1/b for large alpha, never above it.
  EXPECT_LE(RdpLaplace(1, 1e6), 1.0);
  EXPECT_GT(RdpLaplace(1, 1e6), 0.999);
}

TEST(RdpTest, PureDpIsRandomizedResponseCurve) {
  const double eps = 0.7, a = 3;
  const double rr = std::log((std::exp(a * eps) + std::exp((1 - a) * eps)) /
                             (1 + std::exp(eps))) /
                    (a - 1);
  EXPECT_NEAR(RdpPureDp(eps, a), rr, 1e-14);
  EXPECT_LE(RdpPureDp(eps, a), a * eps * eps / 2);
  EXPECT_DOUBLE_EQ(RdpPureDp(eps, kInf), eps);
  EXPECT_EQ(RdpPureDp(0, 5), 0);
  // Pure eps-DP at delta = 0 gives back eps (order inf).
  ASSERT_OK_AND_ASSIGN(
      EpsilonResult r,
      ComputeEpsilon(DpEvent::Exponential(0.3), 0, AccountantKind::kRdp));
  EXPECT_DOUBLE_EQ(r.epsilon, 0.3);
  EXPECT_EQ(r.optimal_order, kInf);
}

// k exponential mechanisms at eps / k each: (eps^2 / (8 k))-zCDP (Cesar &
// Rogers 2021), so eps(alpha) = alpha eps^2 / (8 k), capped per order by the
// pure-DP curves of the whole (RdpPureDp(eps)) and of the shares
// (k RdpPureDp(eps / k)); eps at alpha = inf.
TEST(RdpTest, ExponentialMechanismsAreZcdpCappedByPureDp) {
  const DpEvent e = DpEvent::ExponentialMechanisms(1, 100);
  const std::vector<double> orders = {2, 10, 64, 1024, kInf};
  ASSERT_OK_AND_ASSIGN(std::vector<double> rdp, ComputeRdp(e, orders));
  // Hand values: alpha / 800 where it is the smallest.
  EXPECT_DOUBLE_EQ(rdp[0], 0.0025);
  EXPECT_DOUBLE_EQ(rdp[1], 0.0125);
  EXPECT_DOUBLE_EQ(rdp[2], 0.08);
  // At alpha = 1024, 1024 / 800 = 1.28 is above both pure-DP curves
  // (0.99969 for the whole, 0.93273 for the 100 shares): the min is taken.
  EXPECT_GT(1024.0 / 800, RdpPureDp(1, 1024));
  EXPECT_NEAR(RdpPureDp(1, 1024), 0.9996937813416245, 1e-12);
  EXPECT_NEAR(rdp[3], 100 * RdpPureDp(0.01, 1024), 1e-15);
  EXPECT_NEAR(rdp[3], 0.9327312141525284, 1e-12);
  EXPECT_EQ(rdp[4], 1);
  // Never above the pure eps-DP event's curve (what the job was charged
  // before), at every default order.
  std::vector<double> all = DefaultRdpOrders();
  all.push_back(kInf);
  ASSERT_OK_AND_ASSIGN(std::vector<double> em, ComputeRdp(e, all));
  ASSERT_OK_AND_ASSIGN(std::vector<double> pure,
                       ComputeRdp(DpEvent::EpsilonDelta(1, 0), all));
  for (size_t i = 0; i < all.size(); ++i) {
    EXPECT_LE(em[i], pure[i]) << all[i];
    EXPECT_LE(em[i], all[i] / 800 + 1e-18) << all[i];
  }
  // One mechanism: eps^2 / 8 at small orders (4x below the pure eps^2 / 2).
  ASSERT_OK_AND_ASSIGN(std::vector<double> one,
                       ComputeRdp(DpEvent::ExponentialMechanisms(0.1, 1),
                                  std::vector<double>{2}));
  EXPECT_DOUBLE_EQ(one[0], 2 * 0.01 / 8);
  // Zero epsilon costs nothing.
  ASSERT_OK_AND_ASSIGN(std::vector<double> zero,
                       ComputeRdp(DpEvent::ExponentialMechanisms(0, 7), all));
  for (double v : zero) EXPECT_EQ(v, 0);
}

// The (epsilon, delta) conversion of eps = 1, k = 100 at delta = 1e-6, by
// hand with the conversion RdpToEpsilon uses (Balle et al. 2020, Prop. 12):
// eps(delta) = min over the default orders and inf of
//   r(alpha) + log(1 - 1/alpha) - log(delta alpha) / (alpha - 1),
// r(alpha) = alpha / 800 here; the minimum is at alpha = 63.
TEST(RdpTest, ExponentialMechanismsConvertBelowTheirPureEpsilon) {
  const DpEvent e = DpEvent::ExponentialMechanisms(1, 100);
  ASSERT_OK_AND_ASSIGN(EpsilonResult r,
                       ComputeEpsilon(e, 1e-6, AccountantKind::kRdp));
  const double a = 63;
  const double hand =
      a / 800 + std::log1p(-1 / a) - std::log(1e-6 * a) / (a - 1);
  EXPECT_EQ(r.optimal_order, 63);
  EXPECT_NEAR(r.epsilon, hand, 1e-12);
  EXPECT_NEAR(r.epsilon, 0.21875572045311925, 1e-12);
  // Whereas the pure event converts to its epsilon (order inf).
  ASSERT_OK_AND_ASSIGN(
      EpsilonResult p,
      ComputeEpsilon(DpEvent::EpsilonDelta(1, 0), 1e-6, AccountantKind::kRdp));
  EXPECT_EQ(p.epsilon, 1);
  // Pure DP (delta 0): only order inf certifies, and it gives epsilon.
  ASSERT_OK_AND_ASSIGN(EpsilonResult z,
                       ComputeEpsilon(e, 0, AccountantKind::kRdp));
  EXPECT_EQ(z.epsilon, 1);
  // The PLD accountant composes the 100 pure shares: sound, at most 1.
  ASSERT_OK_AND_ASSIGN(EpsilonResult pld,
                       ComputeEpsilon(e, 1e-6, AccountantKind::kPld));
  EXPECT_LE(pld.epsilon, 1 + 1e-9);
  EXPECT_GT(pld.epsilon, 0);
}

TEST(RdpTest, DiscreteGaussianIsZcdp) {
  // sigma ~ 2^20 grid units: tau underflows to exactly 0.
  EXPECT_EQ(DiscreteGaussianTau(1048576), 0);
  EXPECT_DOUBLE_EQ(RdpDiscreteGaussian(2, 1048576, 100, 3), 3.0 / 8);
  // Small sigma: the tau term is positive and scales with d.
  const double tau = DiscreteGaussianTau(0.5);
  EXPECT_GT(tau, 0);
  EXPECT_DOUBLE_EQ(RdpDiscreteGaussian(2, 0.5, 10, 3), 3.0 / 8 + 10 * tau);
}

TEST(RdpConversionTest, KnownValues) {
  // One order: eps = r + log1p(-1/a) - log(delta a)/(a-1).
  const double a = 10, r = 1, delta = 1e-6;
  ASSERT_OK_AND_ASSIGN(EpsilonResult e, RdpToEpsilon({a}, {r}, delta));
  EXPECT_NEAR(e.epsilon, r + std::log1p(-1 / a) - std::log(delta * a) / (a - 1),
              1e-14);
  EXPECT_EQ(e.optimal_order, 10);
  // The inverse at that epsilon gives back delta.
  ASSERT_OK_AND_ASSIGN(DeltaResult d, RdpToDelta({a}, {r}, e.epsilon));
  EXPECT_NEAR(d.delta, delta, 1e-12 * delta);
  // Tiny RDP: the KL shortcut gives exactly 0.
  ASSERT_OK_AND_ASSIGN(EpsilonResult z, RdpToEpsilon({2}, {1e-14}, 1e-5));
  EXPECT_EQ(z.epsilon, 0);
  // Never negative.
  ASSERT_OK_AND_ASSIGN(EpsilonResult n, RdpToEpsilon({1.5}, {1e-4}, 0.9));
  EXPECT_GE(n.epsilon, 0);
  EXPECT_THAT(RdpToEpsilon({2}, {-1}, 1e-5).status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(RdpToEpsilon({0.5}, {1}, 1e-5).status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(RdpConversionTest, ComputeEpsilonReportsOptimalOrder) {
  ASSERT_OK_AND_ASSIGN(
      EpsilonResult r,
      ComputeEpsilon(DpSgdEvent(1.1, 0.01, 1000), 1e-5, AccountantKind::kRdp));
  // Recomputing at that single order gives the same epsilon.
  ASSERT_OK_AND_ASSIGN(
      EpsilonResult single,
      ComputeEpsilonRdp(DpSgdEvent(1.1, 0.01, 1000), 1e-5, {r.optimal_order}));
  EXPECT_DOUBLE_EQ(single.epsilon, r.epsilon);
  EXPECT_GT(r.optimal_order, 1);
}

// Forces the generic amplification path for a Gaussian inner event.
DpEvent Opaque(DpEvent e) { return DpEvent::Composed({std::move(e)}); }

TEST(RdpSamplingTest, ZhuWangGenericBoundIsAboveExactAndClose) {
  const double q = 0.01, z = 1.1;
  std::vector<double> orders;
  for (int a = 2; a <= 64; ++a) orders.push_back(a);
  ASSERT_OK_AND_ASSIGN(
      std::vector<double> generic,
      ComputeRdp(DpEvent::PoissonSampled(q, Opaque(DpEvent::Gaussian(z))),
                 orders));
  for (size_t i = 0; i < orders.size(); ++i) {
    const double exact = RdpPoissonSampledGaussian(q, z, orders[i]);
    EXPECT_GE(generic[i], exact * (1 - 1e-12)) << orders[i];
    // The factor 3 on the l >= 3 terms: within 10% at alpha = 3.
    if (orders[i] == 3) {
      EXPECT_LE(generic[i], exact * 1.1);
    }
  }
  // Order 2 has no l >= 3 terms: identical to the exact value.
  EXPECT_NEAR(generic[0], RdpPoissonSampledGaussian(q, z, 2), 1e-15);
}

TEST(RdpSamplingTest, FractionalOrdersInterpolateConvexly) {
  const DpEvent e = DpEvent::PoissonSampled(0.05, Opaque(DpEvent::Gaussian(2)));
  ASSERT_OK_AND_ASSIGN(std::vector<double> r,
                       ComputeRdp(e, {3, 3.5, 4, 1.5, 2}));
  // K(3.5) = (K(3) + K(4)) / 2 with K(a) = (a - 1) eps(a).
  EXPECT_NEAR(2.5 * r[1], 0.5 * (2 * r[0] + 3 * r[2]), 1e-15);
  EXPECT_NEAR(0.5 * r[3], 0.5 * r[4], 1e-15);  // K(1.5) = K(2) / 2
}

TEST(RdpSamplingTest, PoissonSampledPureDp) {
  const double q = 0.1, b = 2;
  ASSERT_OK_AND_ASSIGN(
      std::vector<double> r,
      ComputeRdp(DpEvent::PoissonSampled(q, DpEvent::Laplace(b)), {kInf, 2}));
  EXPECT_NEAR(r[0], std::log1p(q * std::expm1(1 / b)), 1e-15);
  EXPECT_LE(r[1], RdpPureDp(r[0], 2) + 1e-15);
  EXPECT_GT(r[1], 0);
}

TEST(RdpSamplingTest, WithoutReplacementMatchesWbkTheorem9) {
  // Inner event with the Gaussian's curve alpha / (2 z^2) and eps(inf) = inf
  // (a discrete Gaussian whose tau term is 0), so both mins pick
  // 2 / 4(e^{eps(2)} - 1) as written out here for alpha = 2, 3. (A Gaussian
  // inner event also gets the tighter Thm. 27: wor_gaussian_test.cc.)
  const int64_t n = 1000, m = 20;
  const double g = 0.02, z = 1.5;
  auto eps = [&](double a) { return a / (2 * z * z); };
  ASSERT_EQ(DiscreteGaussianTau(1e6), 0.0);
  const DpEvent e = DpEvent::SampledWithoutReplacement(
      n, m, DpEvent::DiscreteGaussian(z, 1e6, 10));
  ASSERT_OK_AND_ASSIGN(std::vector<double> r, ComputeRdp(e, {2, 3}));
  const double k2 = std::log(
      1 + g * g * 1 * std::min(4 * std::expm1(eps(2)), 2 * std::exp(eps(2))));
  EXPECT_NEAR(r[0], k2, 1e-14);
  const double k3 = std::log(
      1 + g * g * 3 * std::min(4 * std::expm1(eps(2)), 2 * std::exp(eps(2))) +
      g * g * g * 1 * std::exp(2 * eps(3)) * 2);
  EXPECT_NEAR(r[1], k3 / 2, 1e-14);
  // The Gaussian itself is priced at most this (Thm. 27 <= Thm. 9).
  ASSERT_OK_AND_ASSIGN(
      std::vector<double> gauss,
      ComputeRdp(DpEvent::SampledWithoutReplacement(n, m, DpEvent::Gaussian(z)),
                 {2, 3}));
  EXPECT_NEAR(gauss[0], r[0], 1e-14);
  EXPECT_LE(gauss[1], r[1]);
  // Pure-DP inner: order inf is log(1 + g (e^eps - 1)).
  ASSERT_OK_AND_ASSIGN(std::vector<double> p,
                       ComputeRdp(DpEvent::SampledWithoutReplacement(
                                      n, m, DpEvent::Exponential(1)),
                                  {kInf}));
  EXPECT_NEAR(p[0], std::log1p(g * std::expm1(1.0)), 1e-15);
  // Sampling everything or nothing.
  ASSERT_OK_AND_ASSIGN(auto all, ComputeRdp(DpEvent::SampledWithoutReplacement(
                                                n, n, DpEvent::Gaussian(z)),
                                            {2}));
  EXPECT_DOUBLE_EQ(all[0], eps(2));
  ASSERT_OK_AND_ASSIGN(auto none, ComputeRdp(DpEvent::SampledWithoutReplacement(
                                                 n, 0, DpEvent::Gaussian(z)),
                                             {2}));
  EXPECT_EQ(none[0], 0);
}

TEST(RdpSamplingTest, DiscreteGaussianDpSgdIsCloseToContinuous) {
  // DP-SGD as the solve loop charges it: Poisson-sampled discrete Gaussian
  // with sigma ~ 2^20 grid units (tau = 0), priced by the generic bound.
  const DpEvent discrete = DpEvent::SelfComposed(
      2000, DpEvent::PoissonSampled(
                0.01, DpEvent::DiscreteGaussian(1.0, 1048576, 124)));
  ASSERT_OK_AND_ASSIGN(EpsilonResult d,
                       ComputeEpsilon(discrete, 1e-6, AccountantKind::kRdp));
  ASSERT_OK_AND_ASSIGN(
      EpsilonResult c,
      ComputeEpsilon(DpSgdEvent(1.0, 0.01, 2000), 1e-6, AccountantKind::kRdp));
  // Sound (the generic Zhu-Wang bound is above the exact sampled Gaussian)
  // and about 16% above it here (3.76 vs 3.25): the price of not assuming
  // the continuous analysis for discrete noise.
  EXPECT_GE(d.epsilon, c.epsilon);
  EXPECT_LE(d.epsilon, c.epsilon * 1.2);
}

TEST(RdpSamplingTest, GenericBoundIsCappedByTheUnsampledCurve) {
  // Joint quasi-convexity of the Renyi divergence: a Poisson-sampled event
  // never costs more than the event itself, at every order. Without the cap
  // the generic bound has a floor (its factor 3) that makes long jobs at
  // small epsilon impossible to calibrate.
  const DpEvent inner = DpEvent::DiscreteGaussian(50.0, 1048576, 124);
  const DpEvent sampled = DpEvent::PoissonSampled(0.01, inner);
  const std::vector<double> orders = {1.5, 2, 3, 10, 32.5, 64, 256, 1024};
  ASSERT_OK_AND_ASSIGN(std::vector<double> s, ComputeRdp(sampled, orders));
  ASSERT_OK_AND_ASSIGN(std::vector<double> u, ComputeRdp(inner, orders));
  for (size_t i = 0; i < orders.size(); ++i) {
    EXPECT_LE(s[i], u[i]) << "order " << orders[i];
  }
  // With q = 0.5 and z = 1000 the uncapped bound at order 64 is dominated by
  // its floor (about log(3) / 63 = 0.017), far above the inner curve
  // 64 / (2 z^2) = 3.2e-5, so the capped value is exactly the inner curve.
  ASSERT_OK_AND_ASSIGN(
      std::vector<double> big,
      ComputeRdp(DpEvent::PoissonSampled(
                     0.5, DpEvent::DiscreteGaussian(1000.0, 1048576, 124)),
                 {64.0}));
  EXPECT_NEAR(big[0], 64.0 / (2 * 1000.0 * 1000.0), 1e-9);
  // A long subsampled job at a small target is now feasible.
  ASSERT_OK_AND_ASSIGN(
      double z,
      CalibrateNoiseMultiplier(
          [](double z) {
            return DpEvent::SelfComposed(
                1000000, DpEvent::PoissonSampled(
                             0.01, DpEvent::DiscreteGaussian(z, 1048576, 124)));
          },
          0.3, 1e-6, AccountantKind::kRdp));
  EXPECT_GT(z, 1.0);
}

// Gaussian sparse vector (Zhu & Wang 2020, Thm 8):
// eps(alpha) = alpha / zt^2 + 2 alpha / zq^2 + log(max_queries + 1)/(alpha-1).
TEST(RdpTest, GaussianSparseVectorMatchesZhuWangTheorem8) {
  const DpEvent e = DpEvent::GaussianSparseVector(1, 2, 15);
  const std::vector<double> orders = {2, 10, 1.5, 1024, kInf};
  ASSERT_OK_AND_ASSIGN(std::vector<double> r, ComputeRdp(e, orders));
  // Hand-computed: log 16 = 2.772588722239781.
  ExpectRel(r[0], 2.0 + 1.0 + 2.772588722239781, 1e-14);
  ExpectRel(r[1], 10.0 + 5.0 + 2.772588722239781 / 9, 1e-14);
  ExpectRel(r[2], 1.5 + 0.75 + 2.772588722239781 / 0.5, 1e-14);
  ExpectRel(r[3], 1024.0 + 512.0 + 2.772588722239781 / 1023, 1e-14);
  EXPECT_EQ(r[4], kInf);  // no pure-DP bound
  // Chen & Lee 2022's calibration s1^2 = 3/(2 rho), s2^2 = 3/rho: the
  // Gaussian terms are (4/3) alpha rho (Thm 8), i.e. 4/3 of the paper's
  // Thm 3.
  const double rho = 0.02;
  const DpEvent cal = DpEvent::GaussianSparseVector(std::sqrt(3 / (2 * rho)),
                                                    std::sqrt(3 / rho), 15);
  for (double a : {2.0, 7.0, 100.0, 4000.0}) {
    ASSERT_OK_AND_ASSIGN(std::vector<double> v, ComputeRdp(cal, {a}));
    ExpectRel(v[0], 4.0 / 3 * a * rho + std::log(16.0) / (a - 1), 1e-12);
    EXPECT_EQ(v[0], RdpGaussianSparseVector(std::sqrt(3 / (2 * rho)),
                                            std::sqrt(3 / rho), 15, a));
  }
  // One query: the log term is log 2.
  ASSERT_OK_AND_ASSIGN(
      r, ComputeRdp(DpEvent::GaussianSparseVector(1, 1, 1), {3.0}));
  ExpectRel(r[0], 3 + 6 + std::log(2.0) / 2, 1e-14);
}

TEST(RdpTest, GaussianSparseVectorComposesAndSamples) {
  const DpEvent e = DpEvent::GaussianSparseVector(30, 40, 15);
  std::vector<double> orders = DefaultRdpOrders();
  orders.push_back(kInf);
  ASSERT_OK_AND_ASSIGN(std::vector<double> one, ComputeRdp(e, orders));
  // k-fold self-composition costs k times one, and Composed adds.
  ASSERT_OK_AND_ASSIGN(std::vector<double> seven,
                       ComputeRdp(DpEvent::SelfComposed(7, e), orders));
  ASSERT_OK_AND_ASSIGN(
      std::vector<double> two,
      ComputeRdp(DpEvent::Composed({e, DpEvent::Gaussian(2)}), orders));
  for (size_t i = 0; i < orders.size(); ++i) {
    if (std::isinf(orders[i])) {
      EXPECT_EQ(seven[i], kInf);
      continue;
    }
    ExpectRel(seven[i], 7 * one[i], 1e-14);
    ExpectRel(two[i], one[i] + orders[i] / 8, 1e-14);
  }
  // Poisson sampling goes through the generic Zhu-Wang 2019 path: finite at
  // every finite order, never above the unsampled curve, inf at inf.
  ASSERT_OK_AND_ASSIGN(std::vector<double> sampled,
                       ComputeRdp(DpEvent::PoissonSampled(0.1, e), orders));
  bool some_gain = false;
  for (size_t i = 0; i < orders.size(); ++i) {
    if (std::isinf(orders[i])) {
      EXPECT_EQ(sampled[i], kInf);
      continue;
    }
    EXPECT_TRUE(std::isfinite(sampled[i])) << orders[i];
    EXPECT_LE(sampled[i], one[i]) << orders[i];
    some_gain = some_gain || sampled[i] < 0.5 * one[i];
  }
  EXPECT_TRUE(some_gain);
  // q = 1 is the unsampled event.
  ASSERT_OK_AND_ASSIGN(std::vector<double> full,
                       ComputeRdp(DpEvent::PoissonSampled(1, e), orders));
  EXPECT_EQ(full, one);
  // Invalid parameters are rejected before pricing.
  EXPECT_THAT(
      ComputeRdp(DpEvent::GaussianSparseVector(0, 1, 15), orders).status(),
      StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(RdpTest, GaussianSparseVectorIsRdpOnlyAndConvertsByGroupPrivacy) {
  const DpEvent e = DpEvent::GaussianSparseVector(3, 4, 15);
  EXPECT_THAT(ComputeEpsilon(e, 1e-6, AccountantKind::kPld).status(),
              StatusIs(absl::StatusCode::kUnimplemented));
  EXPECT_THAT(ComputeEpsilon(DpEvent::PoissonSampled(0.1, e), 1e-6,
                             AccountantKind::kPld)
                  .status(),
              StatusIs(absl::StatusCode::kUnimplemented));
  ASSERT_OK_AND_ASSIGN(auto eps, ComputeEpsilon(e, 1e-6, AccountantKind::kRdp));
  EXPECT_TRUE(std::isfinite(eps.epsilon));
  // add/remove -> replace-one: sensitivity doubles, multipliers halve.
  ASSERT_OK_AND_ASSIGN(DpEvent r1, ConvertToRelation(e, Relation::kAddRemove,
                                                     Relation::kReplaceOne));
  EXPECT_EQ(r1, DpEvent::GaussianSparseVector(1.5, 2, 15));
  EXPECT_THAT(ConvertToRelation(DpEvent::PoissonSampled(0.1, e),
                                Relation::kAddRemove, Relation::kReplaceOne)
                  .status(),
              StatusIs(absl::StatusCode::kFailedPrecondition));
}

TEST(RdpTest, UnsupportedEventsAreUnimplemented) {
  EXPECT_THAT(
      ComputeEpsilon(DpEvent::EpsilonDelta(1, 1e-6), 1e-5, AccountantKind::kRdp)
          .status(),
      StatusIs(absl::StatusCode::kUnimplemented));
  EXPECT_THAT(ComputeEpsilon(
                  DpEvent::PoissonSampled(0.1, DpEvent::EpsilonDelta(1, 1e-7)),
                  1e-5, AccountantKind::kRdp)
                  .status(),
              StatusIs(absl::StatusCode::kUnimplemented));
}

TEST(CalibrationTest, NeverOvershootsAndIsTight) {
  for (auto [q, steps, eps] : std::vector<std::tuple<double, int64_t, double>>{
           {0.01, 2000, 1.0}, {1.0, 100, 2.0}, {0.004, 5000, 0.5}}) {
    ASSERT_OK_AND_ASSIGN(
        double z, CalibrateDpSgd(eps, 1e-6, q, steps, AccountantKind::kRdp));
    ASSERT_OK_AND_ASSIGN(
        EpsilonResult at,
        ComputeEpsilon(DpSgdEvent(z, q, steps), 1e-6, AccountantKind::kRdp));
    EXPECT_LE(at.epsilon, eps);
    ASSERT_OK_AND_ASSIGN(EpsilonResult below,
                         ComputeEpsilon(DpSgdEvent(z * (1 - 3e-6), q, steps),
                                        1e-6, AccountantKind::kRdp));
    EXPECT_GT(below.epsilon, eps);
  }
}

TEST(CalibrationTest, Errors) {
  EXPECT_THAT(CalibrateDpSgd(-1, 1e-6, 0.01, 10, AccountantKind::kRdp).status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(CalibrateDpSgd(1, 1e-6, 0, 10, AccountantKind::kRdp).status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(CalibrateNoiseMultiplier(
                  [](double z) { return DpEvent::Gaussian(z); }, 1e-3, 1e-9,
                  AccountantKind::kRdp, /*max_noise_multiplier=*/10)
                  .status(),
              StatusIs(absl::StatusCode::kOutOfRange));
}

// Below the RDP accountant's floor (orders stop at 1024), the error says why
// and points to PLD; within reach but beyond max_noise_multiplier it does not.
TEST(CalibrationTest, TargetsBelowTheRdpFloorNameTheAccountant) {
  const auto gaussian = [](double z) { return DpEvent::Gaussian(z); };
  const absl::Status below =
      CalibrateNoiseMultiplier(gaussian, 0.01, 1e-9, AccountantKind::kRdp,
                               /*max_noise_multiplier=*/1e6)
          .status();
  EXPECT_THAT(below, StatusIs(absl::StatusCode::kOutOfRange));
  EXPECT_THAT(below.message(), ::testing::HasSubstr("orders stop at 1024"));
  EXPECT_THAT(below.message(), ::testing::HasSubstr("ACCOUNTANT_PLD"));
  // Why (the conversion's own cost), the smallest reachable epsilon, and how
  // to pick PLD from the CLI too.
  EXPECT_THAT(
      below.message(),
      ::testing::HasSubstr("cannot certify epsilon 0.01 at delta 1e-09"));
  EXPECT_THAT(below.message(),
              ::testing::HasSubstr("the smallest epsilon it can certify at "
                                   "delta 1e-09 is 0.0125"));
  EXPECT_THAT(below.message(), ::testing::HasSubstr("--accountant=pld"));
  // The conversion's floor at delta 1e-9: (ln(1e9) - ln(1024)) / 1023 +
  // ln(1 - 1/1024) = 0.01253; the epsilon at z = 1e6 is just above it.
  ASSERT_OK_AND_ASSIGN(
      EpsilonResult at_max,
      ComputeEpsilon(DpEvent::Gaussian(1e6), 1e-9, AccountantKind::kRdp));
  EXPECT_NEAR(at_max.epsilon, 0.01253, 1e-4);
  // Reachable with more noise: the old message.
  const absl::Status capped =
      CalibrateNoiseMultiplier(gaussian, 1e-3 * 100, 1e-5, AccountantKind::kRdp,
                               /*max_noise_multiplier=*/2)
          .status();
  EXPECT_THAT(capped.message(),
              ::testing::HasSubstr("no noise multiplier up to 2"));
  // PLD reaches the RDP-unreachable target.
  EXPECT_TRUE(
      CalibrateNoiseMultiplier(gaussian, 0.01, 1e-9, AccountantKind::kPld, 1e6)
          .ok());
}

}  // namespace
}  // namespace dpopt::privacy
