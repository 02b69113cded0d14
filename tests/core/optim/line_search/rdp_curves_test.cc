// RDP formula test vectors (Chen & Lee 2022, eq. (4) and Thm 3; the sampled
// Gaussian; Zhu & Wang 2019; tight pure-to-RDP), to the relative tolerance
// of the printed digits.
#include "core/optim/line_search/rdp_curves.h"

#include <algorithm>
#include <cmath>

#include "gtest/gtest.h"

namespace dpopt::optim::line_search {
namespace {

void ExpectRel(double actual, double expected, double rel) {
  EXPECT_NEAR(actual, expected, rel * std::fabs(expected))
      << "actual " << actual;
}

TEST(RdpCurvesTest, Eq4TestVectorsSmallEpsilon) {
  const double e = 0.002;  // eps1 = e/2, eps2 = e/4 (paper Thm 2)
  ExpectRel(Eq4LaplaceSvt(2, e / 2, e / 4), 1.99933e-6, 1e-5);
  ExpectRel(Eq4LaplaceSvt(100, e / 2, e / 4), 9.98022e-5, 1e-5);
  ExpectRel(Eq4LaplaceSvt(500, e / 2, e / 4), 4.80343e-4, 1e-5);
  for (double a : {2.0, 5.0, 50.0, 500.0, 1e4, 1e6}) {
    EXPECT_LE(Eq4LaplaceSvt(a, e / 2, e / 4), e) << a;
  }
  ExpectRel(Eq4LaplaceSvt(1e7, e / 2, e / 4), e, 1e-3);  // -> eps_BT
}

TEST(RdpCurvesTest, Eq4TestVectorsEpsilonOne) {
  ExpectRel(Eq4LaplaceSvt(2, 0.5, 0.25), 0.400608, 1e-5);
  ExpectRel(Eq4LaplaceSvt(10, 0.5, 0.25), 0.857381, 1e-5);
  ExpectRel(Eq4LaplaceSvt(100, 0.5, 0.25), 0.986098, 1e-5);
}

TEST(RdpCurvesTest, SampledGaussianTestVectors) {
  const double q = 0.01, rho = 0.5;  // sigma = 1
  ExpectRel(SampledGaussianRdp(q, rho, 2), 1.71813e-4, 1e-5);
  ExpectRel(SampledGaussianRdp(q, rho, 8), 8.93644e-4, 1e-5);
  ExpectRel(SampledGaussianRdp(q, rho, 2), std::log1p(q * q * (M_E - 1)),
            1e-12);
  EXPECT_DOUBLE_EQ(SampledGaussianRdp(1.0, rho, 7), 7 * rho);
}

TEST(RdpCurvesTest, ZhuWangAtZeroIsNotTight) {
  auto zero = [](int64_t) { return 0.0; };
  EXPECT_NEAR(ZhuWangAmplified(0.1, zero, 2), 0, 1e-15);
  ExpectRel(ZhuWangAmplified(0.1, zero, 3), 9.99001e-4, 1e-5);
  ExpectRel(ZhuWangAmplified(0.1, zero, 10), 1.459589e-2, 1e-6);
  ExpectRel(ZhuWangAmplified(0.1, zero, 100), 1.108399e-2, 1e-6);
}

TEST(RdpCurvesTest, CappedAmplificationNeverExceedsRaw) {
  for (double e : {1e-4, 2e-3, 0.1, 1.0}) {
    auto raw = [e](int64_t a) { return PureToRdp(e, static_cast<double>(a)); };
    for (int64_t a : {2, 3, 10, 64, 200}) {
      EXPECT_LE(CappedAmplified(0.1, raw, a), raw(a));
      EXPECT_DOUBLE_EQ(CappedAmplified(1.0, raw, a), raw(a));  // q = 1
    }
  }
}

TEST(RdpCurvesTest, PureToRdpTestVectors) {
  ExpectRel(PureToRdp(0.1, 2), 9.95858e-3, 1e-5);
  ExpectRel(PureToRdp(0.1, 10), 4.38878e-2, 1e-5);
  ExpectRel(PureToRdp(0.1, 100), 9.34909e-2, 1e-5);
  for (double a : {1.5, 2.0, 10.0, 100.0, 1000.0}) {
    EXPECT_LE(PureToRdp(0.1, a), std::min(0.1, a * 0.01 / 2) * (1 + 1e-12));
  }
}

TEST(RdpCurvesTest, PaperGaussianSvtCalibrationGivesAlphaRho) {
  // s1^2 = 3/(2 rho), s2^2 = 3/rho => alpha rho (1e-12).
  for (double rho : {1e-4, 0.01, 0.7}) {
    for (double a : {2.0, 7.5, 300.0}) {
      const double s1 = std::sqrt(3 / (2 * rho)), s2 = std::sqrt(3 / rho);
      ExpectRel(PaperGaussianSvt(a, s1, s2), a * rho, 1e-12);
      // The sound (Zhu-Wang 2020 Thm 8) curve: (4/3) alpha rho + log k/(a-1).
      ExpectRel(SoundGaussianSvt(a, s1, s2, 16),
                4.0 / 3 * a * rho + std::log(16.0) / (a - 1), 1e-12);
    }
  }
}

TEST(RdpCurvesTest, SoundLaplaceRawIsMinOfValidBounds) {
  for (double a : {2.0, 10.0, 100.0, 3000.0}) {
    const double v = SoundLaplaceSvtRaw(a, 0.002, 15);
    EXPECT_LE(v, 0.002);
    EXPECT_LE(v, PureToRdp(0.002, a));
    EXPECT_LE(v, Eq4LaplaceSvt(a, 0.001, 0.0005) + std::log(16.0) / (a - 1));
  }
}

}  // namespace
}  // namespace dpopt::optim::line_search
