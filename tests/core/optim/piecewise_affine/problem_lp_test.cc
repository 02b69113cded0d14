// Piecewise-affine's public problem description and LP: the GLPK solution
// against vertex enumeration, the dual certificate, the paper's Examples 5 and
// 6, Lemma 18, the description's validation and JSON round trip, projection
// onto P, and totality of the LP on extreme offsets.
#include <cmath>
#include <limits>
#include <random>
#include <thread>
#include <vector>

#include "core/optim/piecewise_affine/lp.h"
#include "core/optim/piecewise_affine/mechanisms.h"
#include "core/optim/piecewise_affine/problem.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/common/status_matchers.h"
#include "tests/core/optim/piecewise_affine/test_problems.h"

namespace dpopt::optim::piecewise_affine {
namespace {

using ::dpopt::testing::StatusIs;
using testing::Cube;
using testing::GaussianInstance;
using testing::Instance;
using testing::MakeInstance;

double F(const Eigen::MatrixXd& a, const Eigen::VectorXd& b,
         const Eigen::Vector2d& x) {
  return (a * x + b).maxCoeff();
}

// min over the box [-c, c]^2 of max_i (a_i^T x + b_i) by vertex enumeration:
// the LP's optimum is a vertex of the epigraph, where three of the
// constraints {t = a_i^T x + b_i} and {x_k = +-c} are active.
double BruteForce2d(const Eigen::MatrixXd& a, const Eigen::VectorXd& b,
                    double c) {
  const int m = static_cast<int>(a.rows());
  std::vector<Eigen::Vector2d> cand;
  for (double s0 : {-c, c}) {
    for (double s1 : {-c, c}) cand.emplace_back(s0, s1);
  }
  for (int i = 0; i < m; ++i) {
    for (int j = i + 1; j < m; ++j) {
      const Eigen::Vector2d w = a.row(i) - a.row(j);
      const double r = b[j] - b[i];
      for (int k = 0; k < 2; ++k) {
        for (double s : {-c, c}) {
          if (std::abs(w[1 - k]) < 1e-14) continue;
          Eigen::Vector2d x;
          x[k] = s;
          x[1 - k] = (r - w[k] * s) / w[1 - k];
          cand.push_back(x);
        }
      }
      for (int l = j + 1; l < m; ++l) {
        Eigen::Matrix2d mat;
        mat.row(0) = a.row(i) - a.row(j);
        mat.row(1) = a.row(i) - a.row(l);
        if (std::abs(mat.determinant()) < 1e-14) continue;
        cand.push_back(mat.inverse() *
                       Eigen::Vector2d(b[j] - b[i], b[l] - b[i]));
      }
    }
  }
  double best = std::numeric_limits<double>::infinity();
  for (const auto& x : cand) {
    if (std::abs(x[0]) <= c + 1e-12 && std::abs(x[1]) <= c + 1e-12) {
      best = std::min(best, F(a, b, x));
    }
  }
  return best;
}

// The LP matches vertex enumeration to 1e-6, and the
// normalised duals certify the optimum: b^T lambda - c ||A^T lambda||_1
// equals f_opt to 1e-7; x* is in P and f(x*) = t*.
TEST(MaxAffineLp, MatchesVertexEnumerationAndDualCertificate) {
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    const double c = seed % 2 == 0 ? 1.0 : 3.0;
    Instance in = GaussianInstance(8, 2, c, seed);
    ASSERT_OK_AND_ASSIGN(LpSolution lp,
                         SolveMaxAffine(in.a, in.b, in.info.polytope));
    const double brute = BruteForce2d(in.a, in.b, c);
    EXPECT_NEAR(lp.value, brute, 1e-6) << "seed " << seed;
    EXPECT_NEAR(lp.t, lp.value, 1e-7 * (1 + std::abs(lp.t)));
    EXPECT_TRUE(in.info.polytope.Contains(lp.x, 0));
    Eigen::Map<const Eigen::VectorXd> lambda(lp.duals.data(), 8);
    EXPECT_NEAR(lambda.sum(), 1, 1e-12);
    EXPECT_GE(lambda.minCoeff(), 0);
    const double dual =
        in.b.dot(lambda) - c * (in.a.transpose() * lambda).lpNorm<1>();
    EXPECT_NEAR(dual, lp.value, 1e-7) << "seed " << seed;
  }
}

// LPs solved on four threads at once (without the process-wide lock when
// GLPK keeps its environment per thread, as Debian's does) give bitwise the
// solutions of the same LPs solved one after the other.
TEST(MaxAffineLp, ConcurrentSolvesMatchSequentialOnes) {
  ::testing::Test::RecordProperty("glpk_reentrant",
                                  GlpkIsReentrant() ? "yes" : "no");
  constexpr int kThreads = 4;
  constexpr int kPerThread = 25;
  std::vector<Instance> instances;
  std::vector<LpSolution> expected;
  for (int k = 0; k < kThreads * kPerThread; ++k) {
    instances.push_back(GaussianInstance(30, 4, 2.0, 100 + k));
    ASSERT_OK_AND_ASSIGN(LpSolution lp,
                         SolveMaxAffine(instances.back().a, instances.back().b,
                                        instances.back().info.polytope));
    expected.push_back(std::move(lp));
  }
  std::vector<absl::StatusOr<LpSolution>> got(kThreads * kPerThread,
                                              absl::UnknownError("not run"));
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int k = t * kPerThread; k < (t + 1) * kPerThread; ++k) {
        got[k] = SolveMaxAffine(instances[k].a, instances[k].b,
                                instances[k].info.polytope);
      }
    });
  }
  for (std::thread& th : threads) th.join();
  for (int k = 0; k < kThreads * kPerThread; ++k) {
    ASSERT_OK(got[k].status());
    EXPECT_EQ(got[k]->x, expected[k].x) << k;
    EXPECT_EQ(got[k]->t, expected[k].t) << k;
    EXPECT_EQ(got[k]->duals, expected[k].duals) << k;
  }
}

// The paper's Example 5 (||x||_inf: pieces +-e_j, b = 0) and Example 6
// (||x||_1: 2^d sign patterns, d = 4) have f_opt = 0 at x = 0.
// M_S pads its private LP to kLpBudgetFactor times the time of the same LP
// with public probe offsets (mechanisms.h). The solve's time grows with its
// simplex iterations; on random problems and on offsets chosen to stress the
// simplex path (all equal, one dominant piece, alternating, their
// neighbours with one offset moved by b_max), the private solve takes at
// most twice the probe's iterations plus a few (measured: at most 2x at
// 8 iterations or more), well inside the factor 4.
TEST(MaxAffineLp, ProbeOffsetsBoundThePrivateSolvesIterations) {
  const Eigen::VectorXd probe = ProbeOffsets(1000, 2.5);
  EXPECT_LE(probe.maxCoeff(), 2.5);
  EXPECT_GE(probe.minCoeff(), -2.5);
  EXPECT_EQ(probe, ProbeOffsets(1000, 2.5));  // public: m and b_max only
  std::mt19937_64 gen(5);
  std::uniform_real_distribution<double> u(-1, 1);
  std::normal_distribution<double> n01(0, 1);
  int solves = 0;
  for (int64_t m : {10, 200, 1000}) {
    for (int64_t d : {2, 5, 20}) {
      Eigen::MatrixXd a(m, d);
      for (int64_t i = 0; i < m; ++i) {
        for (int64_t j = 0; j < d; ++j) a(i, j) = n01(gen);
      }
      const Polytope cube = Cube(d, 1.0);
      ASSERT_OK_AND_ASSIGN(LpSolution probe_lp,
                           SolveMaxAffine(a, ProbeOffsets(m, 1.0), cube));
      for (int kind = 0; kind < 5; ++kind) {
        Eigen::VectorXd b(m);
        for (int64_t i = 0; i < m; ++i) {
          b[i] = kind == 0   ? u(gen)
                 : kind == 1 ? 0.0
                 : kind == 2 ? (i == 0 ? 1.0 : -1.0)
                 : kind == 3 ? (i % 2 ? 1.0 : -1.0)
                             : -std::abs(u(gen));
        }
        Eigen::VectorXd neighbour = b;
        neighbour[m / 2] = std::min(1.0, neighbour[m / 2] + 1.0);
        for (const Eigen::VectorXd* offsets : {&b, &neighbour}) {
          ASSERT_OK_AND_ASSIGN(LpSolution lp,
                               SolveMaxAffine(a, *offsets, cube));
          EXPECT_LE(lp.simplex_iterations, 2 * probe_lp.simplex_iterations + 8)
              << "m " << m << " d " << d << " offsets kind " << kind;
          ++solves;
        }
      }
    }
  }
  EXPECT_EQ(solves, 90);
}

TEST(MaxAffineLp, PapersExamplesFiveAndSix) {
  const int d = 4;
  Eigen::MatrixXd inf_norm(2 * d, d);
  inf_norm.setZero();
  for (int j = 0; j < d; ++j) {
    inf_norm(2 * j, j) = 1;
    inf_norm(2 * j + 1, j) = -1;
  }
  Eigen::MatrixXd one_norm(1 << d, d);
  for (int s = 0; s < (1 << d); ++s) {
    for (int j = 0; j < d; ++j) one_norm(s, j) = (s >> j) & 1 ? 1 : -1;
  }
  for (const Eigen::MatrixXd& a : {inf_norm, one_norm}) {
    const Eigen::VectorXd b = Eigen::VectorXd::Zero(a.rows());
    ASSERT_OK_AND_ASSIGN(LpSolution lp, SolveMaxAffine(a, b, Cube(d, 2.0)));
    EXPECT_NEAR(lp.value, 0, 1e-9);
    EXPECT_LT(lp.x.lpNorm<Eigen::Infinity>(), 1e-9);
  }
}

// Offsets anywhere in the double range: the normalised LP stays finite and
// its minimiser is the one of the shifted problem (shift invariance:
// f(x; b + c 1) = f(x; b) + c).
TEST(MaxAffineLp, ExtremeOffsetsAreTotal) {
  Instance in = GaussianInstance(6, 3, 1.0, 7);
  for (double big : {1e308, -1e308, 1.7976931348623157e308}) {
    Eigen::VectorXd b = in.b;
    b[2] = big;
    b[4] = -big;
    ASSERT_OK_AND_ASSIGN(LpSolution lp,
                         SolveMaxAffine(in.a, b, in.info.polytope));
    EXPECT_TRUE(lp.x.allFinite());
    EXPECT_TRUE(in.info.polytope.Contains(lp.x, 0));
  }
  // Shifting every offset by a constant moves f_opt by it, not the minimiser
  // set: the same f at the returned points.
  ASSERT_OK_AND_ASSIGN(LpSolution a,
                       SolveMaxAffine(in.a, in.b, in.info.polytope));
  Eigen::VectorXd shifted = in.b.array() + 1e6;
  ASSERT_OK_AND_ASSIGN(LpSolution b,
                       SolveMaxAffine(in.a, shifted, in.info.polytope));
  EXPECT_NEAR(b.value - 1e6, a.value, 1e-6);
}

// Lemma 18 of Han, Topcu & Pappas 2014: |f(x; b) - f(x; b')| <= b_max
// when ||b - b'||_inf <= b_max, with equality for b' = b + b_max 1.
TEST(MaxAffineProblem, LemmaEighteen) {
  std::mt19937_64 gen(5);
  std::uniform_real_distribution<double> u(-1, 1);
  Instance in = GaussianInstance(20, 5, 1.0, 3);
  const double b_max = 0.7;
  for (int trial = 0; trial < 2000; ++trial) {
    Eigen::VectorXd x(5);
    for (int j = 0; j < 5; ++j) x[j] = u(gen);
    Eigen::VectorXd v(20);
    for (int i = 0; i < 20; ++i) v[i] = b_max * u(gen);
    const double f = Evaluate(in.data, in.b, x);
    EXPECT_LE(std::abs(Evaluate(in.data, in.b + v, x) - f), b_max + 1e-12);
    const Eigen::VectorXd up = in.b.array() + b_max;
    EXPECT_NEAR(Evaluate(in.data, up, x) - f, b_max, 1e-12);
  }
}

TEST(MaxAffineProblem, DescriptionRoundTripsAndValidates) {
  Instance in = GaussianInstance(12, 3, 2.0, 9, 0.5);
  const ProblemInfo& p = in.info;
  EXPECT_EQ(p.pieces, 12);
  EXPECT_EQ(p.dimension, 3);
  EXPECT_DOUBLE_EQ(p.diameter, 2 * std::sqrt(3.0) * 2.0);  // R = 2 sqrt(d) c
  double g = 0;
  for (int i = 0; i < 12; ++i) g = std::max(g, in.a.row(i).norm());
  EXPECT_NEAR(p.slope_norm_bound, g, 1e-12);
  EXPECT_EQ(p.Center(), Eigen::VectorXd::Zero(3));
  ASSERT_OK_AND_ASSIGN(ProblemInfo back, ProblemInfo::FromJson(p.ToJson()));
  EXPECT_EQ(back.ToJson(), p.ToJson());
  EXPECT_EQ(back.slope_norm_bound, p.slope_norm_bound);  // bit for bit

  std::vector<double> slopes(12 * 3, 0.5);
  ProblemDeclaration decl;
  decl.b_max = 1;
  decl.polytope = Cube(3, 1);
  EXPECT_OK(DescribeProblem(decl, slopes.data(), 12, 3).status());
  decl.b_max = 0;
  EXPECT_THAT(DescribeProblem(decl, slopes.data(), 12, 3).status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
  decl.b_max = 1;
  decl.polytope.upper[1] = -1;  // empty interior
  EXPECT_THAT(DescribeProblem(decl, slopes.data(), 12, 3).status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
  decl.polytope = Cube(3, 1);
  slopes[4] = std::nan("");
  EXPECT_THAT(DescribeProblem(decl, slopes.data(), 12, 3).status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
  slopes[4] = 1e300;  // public slopes beyond the documented limit
  EXPECT_THAT(DescribeProblem(decl, slopes.data(), 12, 3).status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(ProblemInfo::FromJson("{\"b_max\": 1}").status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(ProblemInfo::FromJson("not json").status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

// A polytope with half-spaces: the triangle x >= 0, y >= 0, x + y <= 1 (in
// the box [-1, 2]^2). Chebyshev centre and bounding box by LP, an empty
// interior refused, and projections that land in P.
Polytope Triangle() {
  Polytope p = Cube(2, 1);
  p.lower = {-1, -1};
  p.upper = {2, 2};
  p.rows = 3;
  p.h_matrix = {-1, 0, 0, -1, 1, 1};
  p.h_vector = {0, 0, 1};
  return p;
}

TEST(MaxAffineProblem, PolytopeWithHalfSpaces) {
  Eigen::MatrixXd a(3, 2);
  a << 1, 0, 0, 1, -1, -1;
  Instance in = MakeInstance(a, Eigen::VectorXd::Zero(3), Triangle());
  const ProblemInfo& p = in.info;
  // Inscribed circle of the right triangle with legs 1: r = (2 - sqrt 2)/2.
  const double r = (2 - std::sqrt(2.0)) / 2;
  EXPECT_NEAR(p.chebyshev_radius, r, 1e-9);
  EXPECT_NEAR(p.center[0], r, 1e-9);
  EXPECT_NEAR(p.center[1], r, 1e-9);
  for (int j = 0; j < 2; ++j) {
    EXPECT_NEAR(p.bbox_lower[j], 0, 1e-6);
    EXPECT_LE(p.bbox_lower[j], 0);
    EXPECT_NEAR(p.bbox_upper[j], 1, 1e-6);
    EXPECT_GE(p.bbox_upper[j], 1);
  }
  EXPECT_NEAR(p.diameter, std::sqrt(2.0), 1e-5);
  // The LP over the triangle: f = max(x, y, -x - y) has its minimum 0 at
  // the origin.
  ASSERT_OK_AND_ASSIGN(LpSolution lp, SolveMaxAffine(a, in.b, p.polytope));
  EXPECT_NEAR(lp.value, 0, 1e-9);
  // Projections land in P.
  std::mt19937_64 gen(1);
  std::uniform_real_distribution<double> u(-5, 5);
  for (int t = 0; t < 500; ++t) {
    Eigen::Vector2d x(u(gen), u(gen));
    const Eigen::VectorXd y = ProjectOntoPolytope(p, x);
    EXPECT_TRUE(p.polytope.Contains(y, 1e-12)) << x.transpose();
    if (p.polytope.Contains(x, 0)) EXPECT_EQ(y, Eigen::VectorXd(x));
  }
  // The projection is the Euclidean one: (2, 2) -> (1/2, 1/2).
  const Eigen::VectorXd y = ProjectOntoPolytope(p, Eigen::Vector2d(2, 2));
  EXPECT_NEAR(y[0], 0.5, 1e-9);
  EXPECT_NEAR(y[1], 0.5, 1e-9);

  Polytope empty = Triangle();
  empty.h_vector[2] = -1;  // x + y <= -1 with x, y >= 0
  ProblemDeclaration decl;
  decl.b_max = 1;
  decl.polytope = empty;
  const std::vector<double> slopes = {1, 0, 0, 1, -1, -1};
  EXPECT_THAT(DescribeProblem(decl, slopes.data(), 3, 2).status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace dpopt::optim::piecewise_affine
