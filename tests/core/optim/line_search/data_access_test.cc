// Clipping, gradient noise, the public normaliser and Poisson sampling
// through line-search family's own data accesses: the loss clip of the
// line-search query (Chen & Lee 2022, Alg. 1 line 7, with objective
// clipping), the gradient release of DP-BLSGD / DP-BLGD (paper Alg. 2 lines
// 5-6: the Gaussian mechanism, divided by the public m rather than |B|) and
// the fresh Poisson batch of every line search. The shared oracle's clipping
// and sampling are also tested in tests/core/optim/dp_sgd_test.cc and
// poisson_sampler_test.cc; these tests check what line-search family builds
// on top.
#include <cmath>
#include <random>
#include <vector>

#include "core/noise/testing/seeded_random.h"
#include "core/noise/vector_mechanisms.h"
#include "core/optim/line_search/dp_line_search.h"
#include "core/optim/line_search/svt_line_search.h"
#include "core/optim/line_search/testing/no_svt_noise.h"
#include "core/optim/objective.h"
#include "core/optim/private_oracle.h"
#include "core/optim/testing/noise_off.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/common/status_matchers.h"

namespace dpopt::optim::line_search {
namespace {

using ::dpopt::noise::testing::SeededRandomForTesting;
using ::dpopt::optim::line_search::testing::ZeroSvtNoiseForTesting;
using ::dpopt::optim::testing::SolveContextTestPeer;

// Admits every charge (the tests below are about data access, not budget).
class AcceptAll final : public ReleaseBudget {
 public:
  absl::Status Charge(const privacy::DpEvent&) override {
    ++charges;
    return absl::OkStatus();
  }
  privacy::DpEvent Spent() const override { return privacy::DpEvent::NoOp(); }
  int64_t charges = 0;
};

// Always answers "above" at the first candidate. NOT DP.
class AlwaysAbove final : public SvtNoise {
 public:
  absl::StatusOr<int64_t> Threshold(const SvtPlan&,
                                    noise::RandomSource&) const override {
    return -(int64_t{1} << 60);
  }
  absl::StatusOr<int64_t> Query(const SvtPlan&,
                                noise::RandomSource&) const override {
    return 0;
  }
};

class FirstIterate final : public IterationCallback {
 public:
  bool OnIteration(const IterationSummary& s) override {
    if (s.step == 1) w1 = s.iterate;
    return true;
  }
  Eigen::VectorXd w1;
};

PublicDatasetInfo Info(int64_t rows, int64_t dimension) {
  PublicDatasetInfo info;
  info.rows = rows;
  info.dimension = dimension;
  return info;
}

PrivacyTarget EpsilonTarget(double epsilon) {
  PrivacyTarget t;
  t.epsilon = epsilon;
  t.delta = 1e-8;
  return t;
}

// Clipped loss in [0, C_obj]: each term of the
// line-search objective lies in [0, C_obj] and equals the loss wherever the
// loss is at most C_obj (the clip is the identity there).
TEST(ClippedLossTest, EachTermInZeroClipAndIdentityBelow) {
  std::mt19937_64 gen(6);
  std::normal_distribution<double> normal;
  const int n = 30, d = 5;
  Eigen::MatrixXd x(n, d);
  Eigen::VectorXd y(n);
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < d; ++j) x(i, j) = normal(gen);
    y[i] = i % 2 == 0 ? 1 : -1;
  }
  const Dataset data = Dataset::Dense(x, y, LabelKind::kBinary, 2);
  for (LossKind loss :
       {LossKind::kLogistic, LossKind::kHinge, LossKind::kHuberizedHinge}) {
    ModelConfig config;
    config.loss = loss;  // l2 = 0: F is the clipped sum alone
    ASSERT_OK_AND_ASSIGN(auto objective, Objective::Create(config, d));
    int below = 0, above = 0;
    for (double clip : {0.05, 1.0, 3.0}) {
      for (int trial = 0; trial < 20; ++trial) {
        Eigen::VectorXd w(d);
        for (int j = 0; j < d; ++j)
          w[j] = std::exp2(trial % 6 - 3) * normal(gen);
        for (int64_t i = 0; i < n; ++i) {
          const double term =
              ClippedBatchObjective(*objective, data, {i}, clip, 0, w);
          const double raw = objective->ExampleLoss(data, i, w);
          EXPECT_GE(term, 0);
          EXPECT_LE(term, clip);
          if (raw <= clip) {
            EXPECT_EQ(term, raw);
            ++below;
          } else {
            EXPECT_EQ(term, clip);
            ++above;
          }
        }
      }
    }
    EXPECT_GT(below, 100) << LossName(loss);  // both regimes exercised
    EXPECT_GT(above, 100) << LossName(loss);
  }
}

// Gradient noise (the paper's setting: noise std on the sum
// C_grad / eps_iter with rho_grad = eps_iter^2 / 2): the per-coordinate std
// of the noise on the released sum is C_grad / sqrt(2 rho_grad). Every row
// has x = 0, so every per-example logistic gradient is 0 and the release at
// w0 = 0 is noise / m; an always-accepting search moves to w1 = -eta0 g~.
// 40 runs x 250 coordinates = 10^4 samples: the sample std has a relative
// standard error of 1/sqrt(2 * 10^4) = 0.71%, and the tolerance of 3% is
// 4.2 standard errors (false alarm ~3e-5 for a fresh seed).
TEST(GradientReleaseTest, NoiseStdOnTheSumIsClipOverSqrtTwoRho) {
  const int64_t n = 40, d = 250;
  const Dataset data =
      Dataset::Dense(Eigen::MatrixXd::Zero(n, d),
                     Eigen::VectorXd::LinSpaced(n, -1, 1).array().sign(),
                     LabelKind::kBinary, 2);
  DpLineSearchOptions o;
  o.variant = Variant::kBlgd;
  o.sampling_rate = 1;
  o.max_iterations = 1;
  ASSERT_OK_AND_ASSIGN(auto alg, NewDpLineSearch(o));
  ASSERT_OK_AND_ASSIGN(Calibration c,
                       alg->Calibrate(Info(n, d), EpsilonTarget(1)));
  const double m = static_cast<double>(n);  // q n, q = 1
  double sum_sq = 0;
  int64_t count = 0;
  double rho = 0;
  AlwaysAbove above;
  for (int run = 0; run < 40; ++run) {
    SeededRandomForTesting rng(700 + run);
    FirstIterate rec;
    SolveContext ctx(&rng, &rec);
    LineSearchRunStats stats;
    ASSERT_OK_AND_ASSIGN(SolveResult r,
                         RunDpLineSearch(o, data, c, ctx, above, &stats));
    ASSERT_EQ(stats.accepted_steps, 1);
    ASSERT_EQ(rec.w1.size(), d);
    rho = stats.final_rho_grad;  // unchanged: the only search succeeded
    const Eigen::VectorXd noise_on_sum =
        -rec.w1 * m / o.line_search.initial_step;
    sum_sq += noise_on_sum.squaredNorm();
    count += d;
  }
  // The job's rho_grad is the one implied by its noise multiplier.
  EXPECT_NEAR(rho, 1 / (2 * c.noise_multiplier * c.noise_multiplier),
              1e-12 * rho);
  const double expected = o.clip_grad / std::sqrt(2 * rho);
  // The rounded Gaussian's sigma includes the grid's share of the
  // sensitivity (C_grad + grid sqrt(d), grid ~ 2^-20 sigma; see
  // vector_mechanisms.h): here within 2e-3 of C_grad z, and never below.
  ASSERT_OK_AND_ASSIGN(noise::GaussianPlan plan,
                       noise::PlanGaussian(o.clip_grad, c.noise_multiplier, d));
  EXPECT_GE(plan.sigma, expected);
  EXPECT_NEAR(plan.sigma, expected, 2e-3 * expected);
  EXPECT_NEAR(std::sqrt(sum_sq / count), plan.sigma, 0.03 * plan.sigma);
}

// The released g~ divides by the public m = q n, never by |B| (which would
// reveal the batch size). With noise off and identical rows, the
// first step is w1 = -eta0 |B| c / m for the common gradient c, so
// |B| = -w1 m / (eta0 c) must come out as an integer that varies between
// batches. With n = 995 and q = 0.1, m = 99.5: a |B| normaliser would give
// w1 = -eta0 c, i.e. the non-integer 99.5.
TEST(GradientReleaseTest, NormalisesByPublicExpectedBatchSize) {
  const int64_t n = 995;
  Eigen::MatrixXd x(n, 2);
  x.col(0).setOnes();
  x.col(1).setConstant(0.5);
  const Dataset data =
      Dataset::Dense(x, Eigen::VectorXd::Ones(n), LabelKind::kBinary, 2);
  DpLineSearchOptions o;
  o.sampling_rate = 0.1;
  o.max_iterations = 1;
  ASSERT_OK_AND_ASSIGN(auto alg, NewDpLineSearch(o));
  ASSERT_OK_AND_ASSIGN(Calibration c,
                       alg->Calibrate(Info(n, 2), EpsilonTarget(1)));
  ASSERT_OK_AND_ASSIGN(auto objective, Objective::Create(o.model, 2));
  const Eigen::VectorXd grad =
      objective->ExampleGradient(data, 0, Eigen::VectorXd::Zero(2));
  ASSERT_LT(grad.norm(), o.clip_grad);  // no clipping here
  const double m = 0.1 * n;
  AlwaysAbove above;
  std::vector<double> sizes;
  for (int run = 0; run < 5; ++run) {
    SeededRandomForTesting rng(40 + run);
    FirstIterate rec;
    SolveContext ctx(&rng, &rec);
    SolveContextTestPeer::DisableNoise(ctx);
    ASSERT_OK(RunDpLineSearch(o, data, c, ctx, above, nullptr).status());
    const double batch =
        -rec.w1[0] * m / (o.line_search.initial_step * grad[0]);
    EXPECT_NEAR(batch, std::round(batch), 1e-9);
    // Both coordinates agree on the same |B|.
    EXPECT_NEAR(-rec.w1[1] * m / (o.line_search.initial_step * grad[1]), batch,
                1e-9);
    EXPECT_GT(batch, 0.5 * m);
    EXPECT_LT(batch, 1.5 * m);
    sizes.push_back(std::round(batch));
  }
  EXPECT_NE(*std::min_element(sizes.begin(), sizes.end()),
            *std::max_element(sizes.begin(), sizes.end()));
}

// Clipping and normaliser for DP-BLGD (q = 1): noise off, the first step is
// -eta0 (sum_i clip(grad_i, C_grad)) / n_public, with the curator-declared
// row count (here larger than the stored rows), never the stored count.
TEST(GradientReleaseTest, FullBatchClipsEachExampleAndUsesPublicRows) {
  Eigen::MatrixXd x(4, 2);
  x << 1, 0, 1, 4, 1, 9, 1, 0.2;
  Eigen::VectorXd y(4);
  y << 1, -1, 1, -1;
  const Dataset data = Dataset::Dense(x, y, LabelKind::kBinary, 2);
  const int64_t public_rows = 10;
  DpLineSearchOptions o;
  o.variant = Variant::kBlgd;
  o.sampling_rate = 1;
  o.clip_grad = 1.0;
  o.max_iterations = 1;
  ASSERT_OK_AND_ASSIGN(auto alg, NewDpLineSearch(o));
  ASSERT_OK_AND_ASSIGN(Calibration c,
                       alg->Calibrate(Info(public_rows, 2), EpsilonTarget(1)));
  ASSERT_OK_AND_ASSIGN(auto objective, Objective::Create(o.model, 2));
  Eigen::VectorXd clipped_sum = Eigen::VectorXd::Zero(2);
  int clipped = 0;
  for (int64_t i = 0; i < 4; ++i) {
    Eigen::VectorXd gi =
        objective->ExampleGradient(data, i, Eigen::VectorXd::Zero(2));
    if (gi.norm() > o.clip_grad) {
      gi *= o.clip_grad / gi.norm();
      ++clipped;
    }
    clipped_sum += gi;
  }
  ASSERT_GE(clipped, 2);  // the clip binds for rows 2 and 3
  SeededRandomForTesting rng(9);
  FirstIterate rec;
  SolveContext ctx(&rng, &rec);
  SolveContextTestPeer::DisableNoise(ctx);
  AlwaysAbove above;
  ASSERT_OK(RunDpLineSearch(o, data, c, ctx, above, nullptr).status());
  const Eigen::VectorXd expected =
      -o.line_search.initial_step * clipped_sum / public_rows;
  EXPECT_TRUE(rec.w1.isApprox(expected, 1e-12))
      << rec.w1.transpose() << " vs " << expected.transpose();
}

// The line search's own use of m (Armijo term c_A eta m ||g||^2 and m R): with
// q = 1 on 8 stored rows and a public count of 40, noise off, NOISYBTLS returns
// exactly the first Armijo step under m = q n_public; the |B| = 8 answer is
// different.
TEST(LineSearchNormaliserTest, ArmijoTermUsesPublicM) {
  std::mt19937_64 gen(12);
  std::normal_distribution<double> normal;
  const int64_t stored = 8, public_rows = 40;
  Eigen::MatrixXd x(stored, 3);
  Eigen::VectorXd y(stored);
  for (int64_t i = 0; i < stored; ++i) {
    x(i, 0) = 1;
    x(i, 1) = normal(gen);
    x(i, 2) = normal(gen);
    y[i] = x(i, 1) > 0 ? 1 : -1;
  }
  const Dataset data = Dataset::Dense(x, y, LabelKind::kBinary, 2);
  ModelConfig config;
  config.l2 = 0.05;
  ASSERT_OK_AND_ASSIGN(auto objective, Objective::Create(config, 3));
  const Eigen::VectorXd w = Eigen::VectorXd::Zero(3);
  // The noise-free release at w = 0: g = sum_i grad_i(0) / n_public.
  Eigen::VectorXd g = Eigen::VectorXd::Zero(3);
  for (int64_t i = 0; i < stored; ++i) {
    g += objective->ExampleGradient(data, i, w) / public_rows;
  }
  LineSearchOptions ls;
  ls.initial_step = 1000;  // candidates 1000 * 0.8^k down to ~0.17
  ls.max_candidates = 40;
  const double clip = 1.0;
  std::vector<int64_t> all(stored);
  for (int64_t i = 0; i < stored; ++i) all[i] = i;
  // First Armijo step for normaliser mm, computed directly.
  auto first_step = [&](double mm) {
    const double f0 = ClippedBatchObjective(*objective, data, all, clip, mm, w);
    double eta = ls.initial_step;
    for (int i = 0; i < ls.max_candidates; ++i, eta *= ls.shrink) {
      const double f1 =
          ClippedBatchObjective(*objective, data, all, clip, mm, w - eta * g);
      if (f0 - f1 - ls.armijo * eta * mm * g.squaredNorm() >= 0) return eta;
    }
    return 0.0;
  };
  const double expected = first_step(public_rows);
  ASSERT_GT(expected, 0);
  ASSERT_NE(expected, first_step(stored));  // the test can tell them apart
  SeededRandomForTesting rng(1);
  ZeroSvtNoiseForTesting zero;
  AcceptAll budget;
  ASSERT_OK_AND_ASSIGN(
      auto oracle, LineSearchOracle::Create(data, *objective, public_rows, rng,
                                            zero, budget));
  ASSERT_OK_AND_ASSIGN(LineSearchResult r,
                       oracle->Search({0.1, clip, 1.0}, w, g, ls));
  EXPECT_TRUE(r.accepted);
  EXPECT_DOUBLE_EQ(r.step, expected);
}

// Poisson sampling for the line search's own fresh batch. One row, noise off,
// one candidate: the query is about +1 when the row is in the batch and
// -c_A eta m ||g||^2 < 0 when the batch is empty, so each search answers
// "above" iff the row was sampled. Over N = 40000 searches the acceptance
// rate must be q +- 3 sqrt(q (1-q) / N) (false alarm 0.27% for a fresh
// seed), and the empty batches (about (1-q) N of them) are handled: a released
// "fail", no error. The gradient release on the same one-row data is exactly 0
// on an empty batch with noise off (the release is noise only), c / m
// otherwise.
TEST(PoissonBatchTest, LineSearchInclusionRateAndEmptyBatches) {
  Eigen::MatrixXd x(1, 1);
  x << 1;
  const Dataset data =
      Dataset::Dense(x, Eigen::VectorXd::Ones(1), LabelKind::kBinary, 2);
  ModelConfig config;  // logistic, l2 = 0
  ASSERT_OK_AND_ASSIGN(auto objective, Objective::Create(config, 1));
  const Eigen::VectorXd w = Eigen::VectorXd::Constant(1, -5);
  const Eigen::VectorXd g = Eigen::VectorXd::Constant(1, -10);
  LineSearchOptions ls;
  ls.initial_step = 1;  // w - g = 5: clipped loss 1 -> 0.0067
  ls.max_candidates = 1;
  ls.armijo = 1e-4;  // Armijo term 1e-4 * 1 * q * 100 = 0.01 q
  const int n = 40000;
  for (double q : {0.1, 0.5}) {
    SeededRandomForTesting rng(static_cast<uint64_t>(1000 * q));
    ZeroSvtNoiseForTesting zero;
    AcceptAll budget;
    ASSERT_OK_AND_ASSIGN(
        auto oracle,
        LineSearchOracle::Create(data, *objective, 1, rng, zero, budget));
    int accepted = 0;
    for (int i = 0; i < n; ++i) {
      ASSERT_OK_AND_ASSIGN(LineSearchResult r,
                           oracle->Search({0.1, 1.0, q}, w, g, ls));
      if (r.accepted) {
        EXPECT_EQ(r.step, 1.0);
        ++accepted;
      } else {
        EXPECT_EQ(r.step, 0.0);
      }
    }
    EXPECT_EQ(budget.charges, n);  // one charge per search
    EXPECT_NEAR(static_cast<double>(accepted) / n, q,
                3 * std::sqrt(q * (1 - q) / n))
        << "q = " << q;

    // Gradient release of line-search family (PrivateGradientOracle) at rate q.
    SeededRandomForTesting grng(static_cast<uint64_t>(2000 * q));
    optim::testing::NoNoiseForTesting no_noise;
    AcceptAll gbudget;
    ASSERT_OK_AND_ASSIGN(
        auto goracle, PrivateGradientOracle::Create(data, *objective, 1, grng,
                                                    no_noise, gbudget));
    const Eigen::VectorXd c =
        objective->ExampleGradient(data, 0, Eigen::VectorXd::Zero(1));
    int included = 0;
    const int k = 10000;
    for (int i = 0; i < k; ++i) {
      Eigen::VectorXd rel;
      ASSERT_OK(goracle->GaussianGradient({q, 3.0, 1.0},
                                          Eigen::VectorXd::Zero(1), &rel));
      if (rel[0] == 0) continue;  // empty batch: noise only (here none)
      EXPECT_DOUBLE_EQ(rel[0], c[0] / q);
      ++included;
    }
    EXPECT_NEAR(static_cast<double>(included) / k, q,
                3 * std::sqrt(q * (1 - q) / k))
        << "q = " << q;
  }
}

}  // namespace
}  // namespace dpopt::optim::line_search
