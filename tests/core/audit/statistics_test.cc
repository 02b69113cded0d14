// Known-answer tests for the special functions and Clopper-Pearson bounds.
#include "core/audit/statistics.h"

#include <cmath>
#include <cstdint>

#include "gtest/gtest.h"

namespace dpopt::audit {
namespace {

// P[Bin(n, p) >= k] by direct summation (log space).
double BinomialUpperTail(int64_t n, int64_t k, double p) {
  double sum = 0;
  for (int64_t j = k; j <= n; ++j) {
    sum += std::exp(std::lgamma(n + 1.0) - std::lgamma(j + 1.0) -
                    std::lgamma(n - j + 1.0) + j * std::log(p) +
                    (n - j) * std::log1p(-p));
  }
  return sum;
}

TEST(RegularizedIncompleteBetaTest, ClosedForms) {
  for (double x : {0.0, 1e-9, 0.1, 0.37, 0.5, 0.9, 1.0}) {
    EXPECT_NEAR(RegularizedIncompleteBeta(1, 1, x), x, 1e-14);
    EXPECT_NEAR(RegularizedIncompleteBeta(3.5, 1, x), std::pow(x, 3.5), 1e-13);
    EXPECT_NEAR(RegularizedIncompleteBeta(1, 4, x), 1 - std::pow(1 - x, 4),
                1e-13);
  }
  // Documented accuracy for a + b = 1e4: ~1e-11.
  EXPECT_NEAR(RegularizedIncompleteBeta(5000, 5000, 0.5), 0.5, 1e-11);
  EXPECT_NEAR(RegularizedIncompleteBeta(0.5, 0.5, 0.25), 1.0 / 3, 1e-13);
  EXPECT_TRUE(std::isnan(RegularizedIncompleteBeta(-1, 1, 0.5)));
  EXPECT_TRUE(std::isnan(RegularizedIncompleteBeta(1, 1, 1.5)));
}

// I_x(k, n - k + 1) = P[Bin(n, x) >= k].
TEST(RegularizedIncompleteBetaTest, MatchesBinomialTails) {
  for (int64_t n : {10, 57, 400}) {
    for (int64_t k : {int64_t{1}, n / 3, n / 2, n - 1}) {
      for (double x : {0.01, 0.2, 0.5, 0.77}) {
        const double expected = BinomialUpperTail(n, k, x);
        EXPECT_NEAR(RegularizedIncompleteBeta(k, n - k + 1, x), expected,
                    1e-12 + 1e-10 * expected)
            << n << " " << k << " " << x;
      }
    }
  }
}

TEST(InverseRegularizedIncompleteBetaTest, InvertsAndRoundsOutwards) {
  for (double p : {1e-9, 0.025, 0.5, 0.975}) {
    const double lo = InverseRegularizedIncompleteBeta(7, 30, p, false);
    const double hi = InverseRegularizedIncompleteBeta(7, 30, p, true);
    EXPECT_LE(lo, hi);
    EXPECT_LE(RegularizedIncompleteBeta(7, 30, lo), p);
    EXPECT_GE(RegularizedIncompleteBeta(7, 30, hi), p);
    EXPECT_NEAR(lo, hi, 1e-15);
  }
}

TEST(ChiSquareSurvivalTest, KnownQuantiles) {
  // Upper 5% and 0.1% points of chi-square tables.
  EXPECT_NEAR(ChiSquareSurvival(3.841458820694124, 1), 0.05, 1e-12);
  EXPECT_NEAR(ChiSquareSurvival(18.307038053275146, 10), 0.05, 1e-12);
  EXPECT_NEAR(ChiSquareSurvival(10.827566170662733, 1), 0.001, 1e-13);
  EXPECT_NEAR(ChiSquareSurvival(124.34211340400407, 100), 0.05, 1e-11);
  // Two degrees of freedom: exp(-x/2).
  for (double x : {0.1, 1.0, 5.0, 40.0}) {
    EXPECT_NEAR(ChiSquareSurvival(x, 2), std::exp(-x / 2),
                1e-14 + 1e-12 * std::exp(-x / 2));
  }
  EXPECT_EQ(ChiSquareSurvival(0, 3), 1);
}

TEST(ClopperPearsonTest, ClosedFormsAtTheEdges) {
  // k = 0: upper solves (1-p)^n = alpha. k = n: lower solves p^n = alpha.
  for (int64_t n : {1, 10, 1000, 100000}) {
    for (double alpha : {0.05, 0.005}) {
      EXPECT_EQ(ClopperPearsonLower(0, n, alpha), 0);
      EXPECT_NEAR(ClopperPearsonUpper(0, n, alpha),
                  1 - std::pow(alpha, 1.0 / n), 1e-12);
      EXPECT_EQ(ClopperPearsonUpper(n, n, alpha), 1);
      EXPECT_NEAR(ClopperPearsonLower(n, n, alpha), std::pow(alpha, 1.0 / n),
                  1e-12);
    }
  }
}

TEST(ClopperPearsonTest, DefiningTailEquations) {
  // Lower: P[Bin(n, lo) >= k] = alpha. Upper: P[Bin(n, hi) <= k] = alpha.
  const int64_t n = 200, k = 37;
  const double alpha = 0.01;
  const double lo = ClopperPearsonLower(k, n, alpha);
  const double hi = ClopperPearsonUpper(k, n, alpha);
  EXPECT_LT(lo, 37.0 / 200);
  EXPECT_GT(hi, 37.0 / 200);
  EXPECT_NEAR(BinomialUpperTail(n, k, lo), alpha, 1e-10);
  EXPECT_NEAR(1 - BinomialUpperTail(n, k + 1, hi), alpha, 1e-10);
  // Textbook value: 95% two-sided interval for 5/20 is [0.0866, 0.4910].
  EXPECT_NEAR(ClopperPearsonLower(5, 20, 0.025), 0.08657, 1e-4);
  EXPECT_NEAR(ClopperPearsonUpper(5, 20, 0.025), 0.49105, 1e-4);
}

}  // namespace
}  // namespace dpopt::audit
