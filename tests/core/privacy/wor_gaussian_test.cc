// Wang-Balle-Kasiviswanathan Theorem 27 (core/privacy/wor_gaussian.h)
// against values computed independently in 80-digit arithmetic by
// tests/core/privacy/wbk_reference.py (exact alternating sums for the
// forward differences), and against independently computed
// visible-activation noise levels of the distributed-DDA accounting.
#include "core/privacy/wor_gaussian.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <vector>

#include "core/privacy/accountant.h"
#include "core/privacy/dp_event.h"
#include "core/privacy/rdp.h"
#include "gtest/gtest.h"
#include "tests/common/status_matchers.h"

namespace dpopt::privacy {
namespace {

void ExpectRel(double actual, double expected, double rel) {
  EXPECT_NEAR(actual, expected, rel * std::abs(expected))
      << "actual " << actual << " expected " << expected;
}

TEST(WorGaussianTest, ForwardDifferencesMatchExactAlternatingSums) {
  struct Case {
    double z;
    int k;
    double log_value;  // wbk_reference.py
  };
  for (const Case& c :
       {Case{1, 2, 0.54132485461291811}, Case{1, 8, 27.992741117359074},
        Case{5, 4, -5.0951497469229865}, Case{5, 20, -1.9456772511257208},
        Case{10, 40, -24.334855853377069}, Case{0.5, 64, 8064.0}}) {
    const std::vector<double> d = LogEvenForwardDifferences(c.z, c.k / 2);
    // Upper bound, tight to ~1e-9 relative in the value (absolute in log).
    EXPECT_GE(d[c.k / 2 - 1], c.log_value - 1e-12) << c.z << " " << c.k;
    EXPECT_NEAR(d[c.k / 2 - 1], c.log_value, 1e-8) << c.z << " " << c.k;
  }
  // Closed form at k = 2: Delta^2 g(0) = e^{1/z^2} - 1.
  for (double z : {0.3, 1.0, 3.0, 30.0}) {
    EXPECT_NEAR(LogEvenForwardDifferences(z, 1)[0],
                std::log(std::expm1(1 / (z * z))), 1e-8)
        << z;
  }
}

TEST(WorGaussianTest, CurveMatchesTheorem27) {
  struct Case {
    double gamma, z;
    double alpha;
    double eps;  // wbk_reference.py
  };
  for (const Case& c : {Case{0.01, 2.0, 2, 0.00011360371352886801},
                        Case{0.01, 2.0, 3, 0.00017128897979488496},
                        Case{0.01, 2.0, 8, 0.00046841626107201988},
                        Case{0.05, 1.0, 16, 4.8507685799905891},
                        Case{1 / 1600.0, 5.0, 32, 1.0227281300676722e-6},
                        Case{0.01, 10.0, 64, 0.00013295605953577103},
                        Case{0.1, 0.8, 5, 1.2319261888518807}}) {
    const double got =
        RdpSampledWithoutReplacementGaussian(c.gamma, c.z, {c.alpha})[0];
    EXPECT_GE(got, c.eps * (1 - 1e-12)) << c.gamma << " " << c.z;
    ExpectRel(got, c.eps, 1e-8);
  }
  // Through the event API (n = 1600, m = 1 is gamma = 1/1600).
  ASSERT_OK_AND_ASSIGN(std::vector<double> r,
                       ComputeRdp(DpEvent::SampledWithoutReplacement(
                                      1600, 1, DpEvent::Gaussian(5.0)),
                                  {32}));
  ExpectRel(r[0], 1.0227281300676722e-6, 1e-8);
}

// Theorem 27 written out by hand for alpha = 2 and 3, with
// g(x) = exp(x (x - 1) / (2 z^2)), g(0) = g(1) = 1:
//   alpha = 2: log(1 + gamma^2 min{4 (e^{1/z^2} - 1), 2 e^{1/z^2}}),
//   alpha = 3: (1/2) log(1 + 3 gamma^2 min{4 (e^{1/z^2} - 1), 2 e^{1/z^2}}
//                  + gamma^3 min{4 sqrt(D2 D4), 2 e^{3/z^2}}),
//   D2 = g(2) - 2 g(1) + g(0) = e^{1/z^2} - 1,
//   D4 = g(4) - 4 g(3) + 6 g(2) - 4 g(1) + g(0)
//      = e^{6/z^2} - 4 e^{3/z^2} + 6 e^{1/z^2} - 3.
// Both branches of each min are exercised (z = 0.5 takes 2 e^{1/z^2}, z = 2
// takes 4 (e^{1/z^2} - 1)). E.g. gamma = 0.01, z = 2: alpha = 2 gives
// log(1 + 1e-4 * 4 * 0.2840254) = 1.13604e-4 (the 80-digit reference above).
TEST(WorGaussianTest, LowOrdersMatchTheHandWrittenFormula) {
  for (double z : {0.5, 1.0, 2.0, 7.0}) {
    for (double gamma : {0.001, 0.01, 0.2}) {
      const double e1 = std::exp(1 / (z * z));
      const double pair = std::min(4 * (e1 - 1), 2 * e1);
      const double d2 = e1 - 1;
      const double d4 =
          std::exp(6 / (z * z)) - 4 * std::exp(3 / (z * z)) + 6 * e1 - 3;
      const double triple =
          std::min(4 * std::sqrt(d2 * d4), 2 * std::exp(3 / (z * z)));
      const double eps2 = std::log1p(gamma * gamma * pair);
      const double eps3 = std::log1p(3 * gamma * gamma * pair +
                                     gamma * gamma * gamma * triple) /
                          2;
      const std::vector<double> v =
          RdpSampledWithoutReplacementGaussian(gamma, z, {2, 3});
      ExpectRel(v[0], eps2, 1e-9);
      ExpectRel(v[1], eps3, 1e-9);
    }
  }
  EXPECT_NEAR(RdpSampledWithoutReplacementGaussian(0.01, 2, {2})[0], 1.13604e-4,
              1e-9);
}

TEST(WorGaussianTest, VanishesAsNoiseGrowsUnlikeTheorem9) {
  // Thm. 9's j >= 3 terms keep a floor of about gamma^3 C(a,3) 2 / (a - 1)
  // however large z is (until the unsampled a / (2 z^2) caps it); Thm. 27's
  // go to 0 like z^-3.
  const double gamma = 0.01, alpha = 32;
  const DpEvent thm9_like = DpEvent::SampledWithoutReplacement(
      100, 1, DpEvent::DiscreteGaussian(100, 1e6, 1));  // curve a/(2z^2)
  ASSERT_OK_AND_ASSIGN(std::vector<double> floor9,
                       ComputeRdp(thm9_like, {alpha}));
  const double thm27 =
      RdpSampledWithoutReplacementGaussian(gamma, 100, {alpha})[0];
  EXPECT_GT(floor9[0], 1e-4);
  EXPECT_LT(thm27, floor9[0] / 100);
  // What is left is the j = 2 term, gamma^2 C(a,2) 4 (e^{1/z^2} - 1).
  ExpectRel(thm27, std::log1p(gamma * gamma * 496 * 4 * std::expm1(1e-4)) / 31,
            1e-2);
  // Never above the unsampled Gaussian; 0 without sampling; infinite orders.
  for (double z : {0.3, 1.0, 4.0}) {
    for (double a : {1.5, 2.0, 7.3, 40.0, 1024.0}) {
      const double v = RdpSampledWithoutReplacementGaussian(0.2, z, {a})[0];
      EXPECT_LE(v, a / (2 * z * z)) << z << " " << a;
      EXPECT_GE(v, 0);
    }
  }
  EXPECT_EQ(RdpSampledWithoutReplacementGaussian(0, 1, {2})[0], 0);
  EXPECT_TRUE(std::isinf(RdpSampledWithoutReplacementGaussian(
      0.1, 1, {std::numeric_limits<double>::infinity()})[0]));
}

TEST(WorGaussianTest, FractionalOrdersInterpolateTheCgf) {
  const double gamma = 0.02, z = 1.5;
  const std::vector<double> v =
      RdpSampledWithoutReplacementGaussian(gamma, z, {3, 4, 3.25});
  const double expected = (0.75 * 2 * v[0] + 0.25 * 3 * v[1]) / 2.25;
  EXPECT_NEAR(v[2], expected, 1e-15);
}

// Reference noise levels of distributed-DDA's visible-activation accounting
// (core/optim/distributed_dda/accounting.h; delta = 1e-5, L = 1,
// replace-one sensitivity 2, so z = sigma / 2): per step the node holding
// the differing sample is active with probability iota = 0.1 (a revealed
// Bernoulli mixture) and then runs the sampled Gaussian with gamma = 1/q.
// The reference sigma, given to 3 digits, must land at epsilon ~ the target.
double VisibleMixtureEpsilon(double q, double steps, double iota, double sigma,
                             double delta) {
  const std::vector<double>& orders = DefaultRdpOrders();
  const std::vector<double> wor =
      RdpSampledWithoutReplacementGaussian(1 / q, sigma / 2, orders);
  std::vector<double> total(orders.size());
  for (size_t i = 0; i < orders.size(); ++i) {
    const double a = orders[i];
    total[i] =
        steps * std::log1p(iota * std::expm1((a - 1) * wor[i])) / (a - 1);
  }
  // The standard conversion eps = rdp + log(1/delta) / (alpha - 1), which
  // the reference numbers use (the accountant's improved conversion of Balle et
  // al. 2020 gives a smaller epsilon for the same curve).
  double best = std::numeric_limits<double>::infinity();
  for (size_t i = 0; i < orders.size(); ++i) {
    best = std::min(best, total[i] + std::log(1 / delta) / (orders[i] - 1));
  }
  return best;
}

TEST(WorGaussianTest, ReproducesTheSpecsVisibleActivationNoise) {
  struct Case {
    double q, steps, iota, target, sigma;
  };
  for (const Case& c :
       {Case{100, 1e5, 0.1, 1.0, 19.8}, Case{100, 2e4, 0.1, 1.0, 9.02},
        Case{20000, 6e5, 0.1, 0.8, 1.82}, Case{20000, 6e5, 0.1, 0.2, 3.52}}) {
    const double eps =
        VisibleMixtureEpsilon(c.q, c.steps, c.iota, c.sigma, 1e-5);
    // sigma to 3 digits moves epsilon by about 1% (RDP epsilon ~ 1/sigma).
    std::printf("reference sigma %.3g: epsilon %.4f (target %.2f)\n", c.sigma,
                eps, c.target);
    EXPECT_NEAR(eps, c.target, 0.02 * c.target)
        << "q " << c.q << " T " << c.steps << " sigma " << c.sigma;
  }
}

}  // namespace
}  // namespace dpopt::privacy
