// Bilevel primitives: clipping (bounded norms, short vectors unchanged),
// projections (the variational inequality) and Lemma 2.4 of Kornowski 2024.
#include "core/optim/bilevel/primitives.h"

#include <cmath>
#include <limits>
#include <random>

#include "core/common/status_macros.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/common/status_matchers.h"

namespace dpopt::optim::bilevel {
namespace {

using ::dpopt::testing::StatusIs;

Eigen::VectorXd Gaussian(std::mt19937_64& gen, int d, double scale) {
  std::normal_distribution<double> n(0, scale);
  Eigen::VectorXd v(d);
  for (int j = 0; j < d; ++j) v[j] = n(gen);
  return v;
}

TEST(SafeClipTest, ClippedNormsAreBoundedAndShortVectorsUnchanged) {
  std::mt19937_64 gen(1);
  for (int trial = 0; trial < 1000; ++trial) {
    const double c = 0.1 + trial % 7;
    Eigen::VectorXd v = Gaussian(gen, 1 + trial % 9, trial % 3 == 0 ? 100 : 1);
    const Eigen::VectorXd before = v;
    SafeClip(c, v);
    EXPECT_LE(v.norm(), c + 1e-12);
    if (before.norm() <= c) {
      // Bit-for-bit unchanged when the bound does not bind.
      EXPECT_TRUE((v.array() == before.array()).all());
    } else {
      EXPECT_NEAR((v / v.norm() - before / before.norm()).norm(), 0, 1e-12);
    }
  }
}

TEST(SafeClipTest, TotalOnExtremeFiniteAndNonFiniteInput) {
  const double big = std::numeric_limits<double>::max();
  const double tiny = std::numeric_limits<double>::denorm_min();
  for (Eigen::VectorXd v :
       {Eigen::VectorXd(Eigen::Vector3d(big, big, -big)),
        Eigen::VectorXd(Eigen::Vector3d(tiny, -0.0, tiny)),
        Eigen::VectorXd(Eigen::Vector3d(1e308, 1e-308, -0.0)),
        Eigen::VectorXd(
            Eigen::Vector3d(std::numeric_limits<double>::infinity(), 1, 1)),
        Eigen::VectorXd(
            Eigen::Vector3d(std::numeric_limits<double>::quiet_NaN(), 1, 1))}) {
    SafeClip(2.0, v);
    EXPECT_TRUE(v.allFinite());
    EXPECT_LE(v.norm(), 2.0 + 1e-12);
  }
  Eigen::VectorXd huge = Eigen::Vector2d(big, big);
  SafeClip(1.0, huge);
  EXPECT_NEAR(huge[0], std::sqrt(0.5), 1e-15);
  EXPECT_NEAR(SafeNorm(Eigen::Vector2d(3e300, 4e300)), 5e300, 1e286);
}

// Variational inequality <z - P(z), u - P(z)> <= 0 for u in X.
void ExpectProjection(const ConstraintSet& set, int d, std::mt19937_64& gen,
                      const std::function<Eigen::VectorXd()>& member) {
  ASSERT_OK(set.Validate(d));
  for (int trial = 0; trial < 300; ++trial) {
    const Eigen::VectorXd z = Gaussian(gen, d, 5);
    Eigen::VectorXd p = z;
    set.Project(p);
    EXPECT_TRUE(set.Contains(p, 1e-9));
    for (int k = 0; k < 5; ++k) {
      const Eigen::VectorXd u = member();
      ASSERT_TRUE(set.Contains(u, 1e-9));
      EXPECT_LE((z - p).dot(u - p), 1e-9);
    }
    // Idempotent.
    Eigen::VectorXd q = p;
    set.Project(q);
    EXPECT_NEAR((q - p).norm(), 0, 1e-12);
  }
}

TEST(ProjectionTest, VariationalInequalityForEverySet) {
  std::mt19937_64 gen(7);
  std::uniform_real_distribution<double> unif(0, 1);
  const int d = 6;
  ConstraintSet box;
  box.kind = SetKind::kBox;
  box.lower = -1;
  box.upper = 2;
  ExpectProjection(box, d, gen, [&] {
    Eigen::VectorXd u(d);
    for (int j = 0; j < d; ++j) u[j] = -1 + 3 * unif(gen);
    return u;
  });
  ConstraintSet half;
  half.kind = SetKind::kHalfLine;
  half.lower = 0.5;
  ExpectProjection(half, d, gen, [&] {
    Eigen::VectorXd u(d);
    for (int j = 0; j < d; ++j) u[j] = 0.5 + 10 * unif(gen);
    return u;
  });
  ConstraintSet ball;
  ball.kind = SetKind::kBall;
  ball.radius = 1.5;
  ball.center = Eigen::VectorXd::Constant(d, 0.3);
  ExpectProjection(ball, d, gen, [&] {
    Eigen::VectorXd u = Gaussian(gen, d, 1);
    u *= 1.5 * std::pow(unif(gen), 1.0 / d) / u.norm();
    return Eigen::VectorXd(u + ball.center);
  });
  ConstraintSet simplex;
  simplex.kind = SetKind::kSimplex;
  simplex.total = 2;
  ExpectProjection(simplex, d, gen, [&] {
    Eigen::VectorXd u(d);
    for (int j = 0; j < d; ++j) u[j] = -std::log(1 - unif(gen));
    return Eigen::VectorXd(2 * u / u.sum());
  });
}

TEST(ProjectionTest, SimplexKnownAnswer) {
  Eigen::VectorXd z = Eigen::Vector3d(0.5, 0.5, 2.0);
  ProjectOntoSimplex(1.0, z);
  EXPECT_NEAR(z[0], 0, 1e-15);
  EXPECT_NEAR(z[1], 0, 1e-15);
  EXPECT_NEAR(z[2], 1, 1e-15);
  z = Eigen::Vector3d(0.2, 0.3, 0.1);  // already inside up to a shift
  ProjectOntoSimplex(1.0, z);
  EXPECT_NEAR(z[0], 0.2 + 0.4 / 3, 1e-15);
  EXPECT_NEAR(z.sum(), 1, 1e-15);
}

// Lemma 2.4: ||G_{v,eta}(x) - G_{w,eta}(x)|| <= ||v - w||.
TEST(ProjectionTest, GradientMappingIsNonExpansive) {
  std::mt19937_64 gen(11);
  std::vector<ConstraintSet> sets(3);
  sets[0].kind = SetKind::kBox;
  sets[0].lower = -0.5;
  sets[0].upper = 0.5;
  sets[1].kind = SetKind::kBall;
  sets[1].radius = 1;
  sets[2].kind = SetKind::kSimplex;
  for (const ConstraintSet& set : sets) {
    for (int trial = 0; trial < 500; ++trial) {
      const double eta = 0.01 + trial % 10 * 0.3;
      Eigen::VectorXd x = Gaussian(gen, 4, 2);
      set.Project(x);
      const Eigen::VectorXd v = Gaussian(gen, 4, 3);
      const Eigen::VectorXd w = Gaussian(gen, 4, 3);
      Eigen::VectorXd pv = x - eta * v;
      Eigen::VectorXd pw = x - eta * w;
      set.Project(pv);
      set.Project(pw);
      const Eigen::VectorXd gv = (x - pv) / eta;
      const Eigen::VectorXd gw = (x - pw) / eta;
      EXPECT_LE((gv - gw).norm(), (v - w).norm() + 1e-9);
    }
  }
}

TEST(ProjectionTest, InvalidSetsAreRejected) {
  ConstraintSet s;
  s.kind = SetKind::kBox;
  s.lower = 2;
  s.upper = 1;
  EXPECT_THAT(s.Validate(3), StatusIs(absl::StatusCode::kInvalidArgument));
  s.kind = SetKind::kBall;
  s.radius = 0;
  EXPECT_THAT(s.Validate(3), StatusIs(absl::StatusCode::kInvalidArgument));
  s.radius = 1;
  s.center = Eigen::VectorXd::Zero(2);
  EXPECT_THAT(s.Validate(3), StatusIs(absl::StatusCode::kInvalidArgument));
  s.kind = SetKind::kSimplex;
  s.total = -1;
  EXPECT_THAT(s.Validate(3), StatusIs(absl::StatusCode::kInvalidArgument));
  s.kind = SetKind::kHalfLine;
  s.lower = std::numeric_limits<double>::infinity();
  EXPECT_THAT(s.Validate(3), StatusIs(absl::StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace dpopt::optim::bilevel
