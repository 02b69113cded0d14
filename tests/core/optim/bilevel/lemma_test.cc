// Pathwise checks of the lemmas of Kornowski 2024 (Lemmas 2.4, 4.4, 8.5,
// 8.7, Prop. 4.6, Eqs. (3) and (8); the tests are named U1-U7) on family Q
// (closed forms below) with random B, random data and private runs of the
// production code (dp_bilevel), for the box, ball and simplex outer sets.
#include <cmath>
#include <random>
#include <vector>

#include "core/noise/testing/seeded_random.h"
#include "core/optim/bilevel/bilevel_problem.h"
#include "core/optim/bilevel/dp_bilevel.h"
#include "core/optim/bilevel/primitives.h"
#include "gtest/gtest.h"
#include "tests/common/status_matchers.h"
#include "tests/core/optim/bilevel/test_problems.h"

namespace dpopt::optim::bilevel {
namespace {

using ::dpopt::noise::testing::SeededRandomForTesting;
using Vec = Eigen::VectorXd;

constexpr double kTol = 1e-9;

Eigen::MatrixXd RandomB(int64_t dy, int64_t dx, std::mt19937_64& gen) {
  std::normal_distribution<double> normal(0, 1);
  Eigen::MatrixXd b(dy, dx);
  for (int64_t j = 0; j < dy; ++j) {
    for (int64_t k = 0; k < dx; ++k) b(j, k) = normal(gen);
  }
  return b * (0.9 / Eigen::JacobiSVD<Eigen::MatrixXd>(b).singularValues()(0));
}

Vec RandomVec(int64_t d, double scale, std::mt19937_64& gen) {
  std::normal_distribution<double> normal(0, scale);
  Vec v(d);
  for (int64_t j = 0; j < d; ++j) v[j] = normal(gen);
  return v;
}

// One family-Q instance: the production problem object (per-example and
// public gradients as dp_bilevel uses them) and family Q's closed forms as
// the
// test oracle.
struct Instance {
  int64_t dx, dy, n;
  double rho_x, lambda;
  Eigen::MatrixXd b;
  Dataset data;
  std::unique_ptr<BilevelProblem> problem;
  Vec u_bar, v_bar;

  Instance(int64_t dx_in, int64_t dy_in, int64_t n_in, uint64_t seed)
      : dx(dx_in),
        dy(dy_in),
        n(n_in),
        rho_x(0.2),
        lambda(20),
        data(testing::QuadraticData(n_in, dy_in, seed)) {
    std::mt19937_64 gen(seed + 1000);
    b = RandomB(dy, dx, gen);
    problem = MakeProblem(Options(), 2 * dy).value();
    problem->AttachData(data);
    u_bar = testing::ColumnMean(data, 0, dy);
    v_bar = testing::ColumnMean(data, dy, dy);
  }

  ProblemOptions Options() const {
    ProblemOptions o;
    o.outer_dimension = dx;
    o.rho_x = rho_x;
    for (int64_t j = 0; j < dy; ++j) {
      for (int64_t k = 0; k < dx; ++k) o.b_matrix.push_back(b(j, k));
    }
    return o;
  }

  // Averaged gradients through the production problem object.
  Vec GradYG(const Vec& x, const Vec& y) const {
    Vec sum = Vec::Zero(dy), out;
    for (int64_t i = 0; i < n; ++i) {
      problem->ExampleGradYG(data, i, x, y, out);
      sum += out;
    }
    sum /= static_cast<double>(n);
    problem->AddPublicGradYG(x, y, sum);
    return sum;
  }
  Vec GradYF(const Vec& x, const Vec& y) const {
    Vec sum = Vec::Zero(dy), out;
    if (problem->has_example_f()) {
      for (int64_t i = 0; i < n; ++i) {
        problem->ExampleGradYF(data, i, x, y, out);
        sum += out;
      }
      sum /= static_cast<double>(n);
    }
    problem->AddPublicGradYF(x, y, sum);
    return sum;
  }
  // Eq. (3) direction at (x, y_lambda, y), unclipped and noise-free.
  Vec Outer(const Vec& x, const Vec& y_lambda, const Vec& y) const {
    Vec sum = Vec::Zero(dx), out;
    if (problem->has_example_outer()) {
      for (int64_t i = 0; i < n; ++i) {
        problem->ExampleOuter(data, i, x, y_lambda, y, lambda, out);
        sum += out;
      }
      sum /= static_cast<double>(n);
    }
    problem->AddPublicOuter(x, y_lambda, y, lambda, sum);
    return sum;
  }

  // Inner minimisers by one Newton step from 0 (the inner objectives are
  // quadratics with Hessians I and (1 + lambda) I).
  Vec YStar(const Vec& x) const { return -GradYG(x, Vec::Zero(dy)); }
  Vec YLambda(const Vec& x) const {
    const Vec zero = Vec::Zero(dy);
    return -(GradYF(x, zero) + lambda * GradYG(x, zero)) / (1 + lambda);
  }

  // Values of the averaged f and g (closed forms).
  double F(const Vec& x, const Vec& y) const {
    double s = 0;
    for (int64_t i = 0; i < n; ++i) {
      s += 0.5 * (y - data.dense().row(i).tail(dy).transpose()).squaredNorm();
    }
    return s / n + 0.5 * rho_x * x.squaredNorm();
  }
  double G(const Vec& x, const Vec& y) const {
    double s = 0;
    for (int64_t i = 0; i < n; ++i) {
      s += 0.5 *
           (y - b * x - data.dense().row(i).head(dy).transpose()).squaredNorm();
    }
    return s / n;
  }
  // L*_lambda(x) and its gradient (closed form).
  double PenaltyValue(const Vec& x) const {
    const Vec yl = (v_bar + lambda * (b * x + u_bar)) / (1 + lambda);
    const Vec ys = b * x + u_bar;
    return F(x, yl) + lambda * (G(x, yl) - G(x, ys));
  }
  Vec PenaltyGrad(const Vec& x) const {
    return rho_x * x +
           (lambda / (1 + lambda)) * b.transpose() * (b * x + u_bar - v_bar);
  }
  double PenaltySmoothness() const {
    const Eigen::MatrixXd h = rho_x * Eigen::MatrixXd::Identity(dx, dx) +
                              (lambda / (1 + lambda)) * b.transpose() * b;
    return Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd>(h)
        .eigenvalues()
        .maxCoeff();
  }
};

std::vector<ConstraintSet> OuterSets(int64_t dx) {
  ConstraintSet box;
  box.kind = SetKind::kBox;
  box.lower = -0.3;
  box.upper = 0.4;
  ConstraintSet ball;
  ball.kind = SetKind::kBall;
  ball.center = Vec::Constant(dx, 0.1);
  ball.radius = 0.5;
  ConstraintSet simplex;
  simplex.kind = SetKind::kSimplex;
  simplex.total = 1;
  return {box, ball, simplex};
}

// G_{v,eta}(x) = (x - Proj_X(x - eta v)) / eta (the gradient mapping).
Vec GradientMapping(const ConstraintSet& set, const Vec& x, const Vec& v,
                    double eta) {
  Vec p = x - eta * v;
  set.Project(p);
  return (x - p) / eta;
}

TEST(LemmaTest, U1PenaltyMinimiserIsCloseToTheLowerMinimiser) {
  // Lemma 8.5: ||y^lam(x) - y*(x)|| <= L0^f / (lambda mu_g) with L0^f the
  // bound on ||grad_y f|| at y*(x) (mu_g = 1 for family Q).
  for (uint64_t seed : {1, 2, 3}) {
    Instance q(2 + seed, 3, 200, seed);
    std::mt19937_64 gen(seed);
    for (int trial = 0; trial < 20; ++trial) {
      const Vec x = RandomVec(q.dx, 2.0, gen);
      const Vec ys = q.YStar(x);
      const Vec yl = q.YLambda(x);
      // The production gradients give the closed forms.
      EXPECT_LT((ys - (q.b * x + q.u_bar)).norm(), kTol);
      EXPECT_LT(
          (yl - (q.v_bar + q.lambda * (q.b * x + q.u_bar)) / (1 + q.lambda))
              .norm(),
          kTol);
      const double l0f = q.GradYF(x, ys).norm();
      EXPECT_LE((yl - ys).norm(), l0f / q.lambda + kTol);
    }
  }
}

TEST(LemmaTest, U2Eq3IsTheGradientOfThePenaltyFunction) {
  // A central finite difference of L*_lambda equals the Eq. (3) direction
  // the production code computes at the exact inner minimisers.
  for (uint64_t seed : {4, 5}) {
    Instance q(3, 4, 150, seed);
    std::mt19937_64 gen(seed);
    for (int trial = 0; trial < 5; ++trial) {
      const Vec x = RandomVec(q.dx, 1.0, gen);
      const Vec eq3 = q.Outer(x, q.YLambda(x), q.YStar(x));
      Vec fd(q.dx);
      const double h = 1e-5;
      for (int64_t k = 0; k < q.dx; ++k) {
        Vec xp = x, xm = x;
        xp[k] += h;
        xm[k] -= h;
        fd[k] = (q.PenaltyValue(xp) - q.PenaltyValue(xm)) / (2 * h);
      }
      EXPECT_LT((fd - eq3).norm(), 1e-6 * (1 + eq3.norm())) << trial;
      EXPECT_LT((eq3 - q.PenaltyGrad(x)).norm(), kTol);
    }
  }
}

// A private full-batch run (noise on) with the trace of every release.
BilevelTrace PrivateRun(const Instance& q, const ConstraintSet& set, double eta,
                        int64_t iterations, uint64_t seed) {
  DpBilevelOptions o;
  o.problem = q.Options();
  o.outer_set = set;
  o.penalty = q.lambda;
  o.outer_step = eta;
  o.outer_iterations = iterations;
  o.inner.steps = 20;
  PublicDatasetInfo info;
  info.rows = q.n;
  info.dimension = 2 * q.dy;
  info.label_kind = LabelKind::kReal;
  info.relation = privacy::Relation::kAddRemove;
  PrivacyTarget target;
  target.epsilon = 2;
  target.delta = 1e-6;
  auto algorithm = NewDpBilevel(o).value();
  const Calibration calibration = algorithm->Calibrate(info, target).value();
  SeededRandomForTesting rng(seed);
  SolveContext context(&rng);
  BilevelTrace trace;
  EXPECT_OK(RunDpBilevel(o, q.data, calibration, context, &trace).status());
  return trace;
}

TEST(LemmaTest, U3ToU6HoldOnEveryIterationOfPrivateRuns) {
  for (uint64_t seed : {6, 7}) {
    const Instance q(3, 3, 300, seed);
    const double l = q.PenaltySmoothness();
    const double eta = 1 / (2 * l);  // Prop. 4.6
    // L1^f = max(1, rho_x), L1^g = 1 + ||B||^2 (family Q's constants).
    const double l1f = std::max(1.0, q.rho_x);
    const double b_norm =
        Eigen::JacobiSVD<Eigen::MatrixXd>(q.b).singularValues()(0);
    const double l1g = 1 + b_norm * b_norm;
    for (const ConstraintSet& set : OuterSets(q.dx)) {
      const BilevelTrace tr = PrivateRun(q, set, eta, 12, seed);
      ASSERT_EQ(tr.x.size(), 13u);
      for (size_t t = 0; t + 1 < tr.x.size(); ++t) {
        const Vec& x = tr.x[t];
        const Vec& x_next = tr.x[t + 1];
        const Vec& g_noisy = tr.gradient[t];
        // Lemma 4.4 (proof form), g_t the noise-free direction at the
        // released inner estimates.
        const Vec g_t = q.Outer(x, tr.y_lambda[t], tr.y[t]);
        const Vec grad = q.PenaltyGrad(x);
        EXPECT_LE(
            (g_t - grad).norm(),
            (l1f + q.lambda * l1g) * (tr.y_lambda[t] - q.YLambda(x)).norm() +
                q.lambda * l1g * (tr.y[t] - q.YStar(x)).norm() + kTol)
            << "Lemma 4.4 t=" << t;
        // Lemma 8.7: <g~_t, rho_t> >= ||rho_t||^2.
        const Vec rho = (x - x_next) / eta;
        EXPECT_GE(g_noisy.dot(rho),
                  rho.squaredNorm() - kTol * (1 + rho.squaredNorm()))
            << "Lemma 8.7 t=" << t;
        // Prop. 4.6's descent step with delta_t = g~_t - grad h(x_t).
        const Vec delta = g_noisy - grad;
        EXPECT_LE(rho.squaredNorm() - 2 * delta.norm() * rho.norm(),
                  4 * l * (q.PenaltyValue(x) - q.PenaltyValue(x_next)) + 1e-8)
            << "Prop. 4.6 t=" << t;
        // Eq. (8): ||G_{h,eta}(x_t)|| <= ||rho_t|| + ||delta_t||.
        EXPECT_LE(GradientMapping(set, x, grad, eta).norm(),
                  rho.norm() + delta.norm() + kTol)
            << "Eq. (8) t=" << t;
        // The iterates stay in X.
        EXPECT_TRUE(set.Contains(x_next, 1e-9));
      }
    }
  }
}

TEST(LemmaTest, U7GradientMappingIsNonExpansiveInTheDirection) {
  // Lemma 2.4: ||G_{v,eta}(x) - G_{w,eta}(x)|| <= ||v - w|| for box, ball
  // and simplex projections on random (x, v, w).
  std::mt19937_64 gen(11);
  std::uniform_real_distribution<double> eta_dist(0.01, 3);
  for (int64_t d : {1, 2, 5}) {
    for (const ConstraintSet& set : OuterSets(d)) {
      for (int trial = 0; trial < 200; ++trial) {
        Vec x = RandomVec(d, 1.0, gen);
        set.Project(x);
        const Vec v = RandomVec(d, 3.0, gen);
        const Vec w = RandomVec(d, 3.0, gen);
        const double eta = eta_dist(gen);
        EXPECT_LE(
            (GradientMapping(set, x, v, eta) - GradientMapping(set, x, w, eta))
                .norm(),
            (v - w).norm() * (1 + 1e-12) + 1e-12);
      }
    }
  }
}

}  // namespace
}  // namespace dpopt::optim::bilevel
