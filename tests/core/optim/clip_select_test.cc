// The branch-free per-row arithmetic of the clipped kernels
// (core/optim/clip_select.h): the SSE2 selections agree bit for bit with
// the portable expressions (which non-SSE2 builds use), on ordinary values
// and on the edges (signed zeros, subnormals, norms at and beyond the range
// limits, clipping exactly at the threshold, non-finite coefficients).
#include "core/optim/clip_select.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace dpopt::optim::internal {
namespace {

uint64_t Bits(double x) {
  uint64_t b;
  std::memcpy(&b, &x, sizeof b);
  return b;
}

// Equal bits, or both NaN (a NaN's payload is not part of the contract).
bool SameValue(double a, double b) {
  return (std::isnan(a) && std::isnan(b)) || Bits(a) == Bits(b);
}

std::vector<double> Coefficients() {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  std::vector<double> c = {
      0.0,   -0.0,   1.0,     -1.0,  0.25,
      -0.25, 1e-300, -4e-310, 0.5,   -0.5,
      1e300, -1e300, kInf,    -kInf, std::numeric_limits<double>::quiet_NaN()};
  std::mt19937 gen(5);
  std::normal_distribution<double> normal;
  for (int i = 0; i < 2000; ++i) c.push_back(normal(gen));
  return c;
}

std::vector<double> Norms() {
  std::vector<double> r = {0.0,
                           kLowNorm,
                           std::nextafter(kLowNorm, 0.0),
                           kHighNorm,
                           std::nextafter(kHighNorm, 1e308),
                           1e-320,
                           1.0,
                           2.0,
                           3.7416573867739413,
                           std::numeric_limits<double>::infinity()};
  std::mt19937 gen(6);
  std::lognormal_distribution<double> lognormal(0.0, 2.0);
  for (int i = 0; i < 200; ++i) r.push_back(lognormal(gen));
  return r;
}

TEST(ClipSelectTest, ClippedCoefficientMatchesPortable) {
  int checked = 0;
  for (double param : {1e-3, 0.5, 1.0, 1e6}) {
    for (double r : Norms()) {
      for (double c : Coefficients()) {
        bool in_simd = false, in_portable = false;
        const double simd = ClippedCoefficient(c, r, param, &in_simd);
        const double portable =
            ClippedCoefficientPortable(c, r, param, &in_portable);
        ASSERT_EQ(in_simd, in_portable) << "c " << c << " r " << r;
        if (!std::isfinite(c)) continue;  // the caller's case
        ASSERT_TRUE(SameValue(simd, portable))
            << "c " << c << " r " << r << " param " << param << ": " << simd
            << " vs " << portable;
        ++checked;
      }
    }
  }
  EXPECT_GT(checked, 1'000'000);
}

// For finite c and r in range: the per-example rule, c clipped to norm
// param (Objective::AddClippedExampleGradient's formula), including |c| r
// exactly at param (kept, not rescaled).
TEST(ClipSelectTest, PortableIsThePerExampleRule) {
  for (double param : {1e-3, 0.5, 1.0, 1e6}) {
    for (double r : Norms()) {
      if (!(r >= kLowNorm && r <= kHighNorm)) continue;
      for (double c : Coefficients()) {
        if (!std::isfinite(c)) continue;
        bool in_range = false;
        const double got = ClippedCoefficientPortable(c, r, param, &in_range);
        ASSERT_TRUE(in_range);
        const double c_norm = std::abs(c);
        const double want = c_norm == 0           ? 0.0
                            : c_norm * r <= param ? c
                                                  : param * (c / c_norm) / r;
        ASSERT_EQ(Bits(got), Bits(want)) << "c " << c << " r " << r;
      }
    }
  }
  bool in_range = false;
  EXPECT_EQ(ClippedCoefficientPortable(0.25, 4.0, 1.0, &in_range), 0.25);
  EXPECT_EQ(ClippedCoefficientPortable(-0.5, 4.0, 1.0, &in_range), -0.25);
  EXPECT_EQ(Bits(ClippedCoefficientPortable(-0.0, 4.0, 1.0, &in_range)),
            Bits(0.0));
  EXPECT_EQ(ClippedCoefficientPortable(0.5, 0.0, 1.0, &in_range), 0.0);
  EXPECT_FALSE(in_range);
}

// Arrays of every length up to 9 (the two-row loop and its tail), with
// out-of-range norms and non-finite coefficients mixed in: the SIMD and
// portable loops agree, slow flags mark exactly the out-of-range norms, and
// a non-finite coefficient with its norm in range gets param * (c/|c|) / r.
TEST(ClipSelectTest, ClipCoefficientsLoopsAgree) {
  const std::vector<double> cs = Coefficients();
  const std::vector<double> rs = Norms();
  std::mt19937 gen(7);
  for (int trial = 0; trial < 3000; ++trial) {
    const int n = trial % 10;
    std::vector<double> c(n), r(n), a1(n), a2(n);
    bool slow1[16], slow2[16];
    bool want_slow = false;
    for (int k = 0; k < n; ++k) {
      c[k] = cs[gen() % cs.size()];
      r[k] = rs[gen() % rs.size()];
      want_slow = want_slow || !(r[k] >= kLowNorm && r[k] <= kHighNorm);
    }
    const double param = trial % 3 == 0 ? 0.5 : 1.0;
    const bool any1 = ClipCoefficientsImpl<true>(c.data(), r.data(), n, param,
                                                 a1.data(), slow1);
    const bool any2 = ClipCoefficientsImpl<false>(c.data(), r.data(), n, param,
                                                  a2.data(), slow2);
    ASSERT_EQ(any1, want_slow);
    ASSERT_EQ(any2, want_slow);
    for (int k = 0; k < n; ++k) {
      const bool out = !(r[k] >= kLowNorm && r[k] <= kHighNorm);
      ASSERT_EQ(slow1[k], out) << k;
      ASSERT_EQ(slow2[k], out) << k;
      if (out) continue;  // the caller's slow path
      ASSERT_TRUE(SameValue(a1[k], a2[k]))
          << "c " << c[k] << " r " << r[k] << ": " << a1[k] << " vs " << a2[k];
      if (!std::isfinite(c[k])) {
        ASSERT_TRUE(std::isnan(a1[k]));  // param * (c / |c|) / r
      }
    }
  }
}

TEST(ClipSelectTest, LogisticDerivativeMatchesBothBranches) {
  std::vector<double> ms = {0.0,   -0.0,   1e-300, -1e-300, 1.0,
                            -1.0,  30.0,   -30.0,  700.0,   -700.0,
                            745.0, -745.0, 1e308,  -1e308};
  std::mt19937 gen(8);
  std::normal_distribution<double> normal(0.0, 5.0);
  for (int i = 0; i < 100000; ++i) ms.push_back(normal(gen));
  for (double m : ms) {
    // The two-branch form it replaced.
    const double want = m > 0 ? -std::exp(-m) / (1.0 + std::exp(-m))
                              : -1.0 / (1.0 + std::exp(m));
    ASSERT_EQ(Bits(LogisticDerivative(m)), Bits(want)) << m;
    ASSERT_EQ(Bits(LogisticDerivativePortable(m)), Bits(want)) << m;
  }
  EXPECT_TRUE(std::isnan(LogisticDerivative(std::nan(""))));
}

}  // namespace
}  // namespace dpopt::optim::internal
