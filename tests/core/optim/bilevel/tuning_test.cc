// Private regularization tuning (Kornowski 2024, Sec. 7, sign corrected) and
// the DP grid search baseline: the sign and closed form of the weight update,
// zero outer sensitivity, the server-side split, charges, release hygiene,
// totality on extreme rows.
#include "core/optim/bilevel/tuning.h"

#include <cmath>
#include <limits>
#include <random>
#include <set>
#include <string>

#include "core/common/status_macros.h"
#include "core/noise/testing/seeded_random.h"
#include "core/optim/bilevel/dp_tune.h"
#include "core/optim/bilevel/grid_search.h"
#include "core/optim/objective.h"
#include "core/optim/testing/noise_off.h"
#include "core/privacy/accountant.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/common/status_matchers.h"

namespace dpopt::optim::bilevel {
namespace {

using ::dpopt::noise::testing::SeededRandomForTesting;
using ::dpopt::optim::testing::SolveContextTestPeer;
using ::dpopt::testing::StatusIs;

PrivacyTarget Private(double epsilon = 1, double delta = 1e-6) {
  PrivacyTarget t;
  t.epsilon = epsilon;
  t.delta = delta;
  return t;
}

PublicDatasetInfo Info(const Dataset& data) {
  PublicDatasetInfo info;
  info.rows = data.rows();
  info.dimension = data.dimension();
  info.label_kind = data.label_kind();
  return info;
}

// Ridge data b = <w, a> + noise with few rows per feature: the validation
// loss prefers more regularization than omega_0 = 0.01.
Dataset RidgeData(int64_t n, int64_t d, double noise, uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::normal_distribution<double> normal(0, 1);
  Eigen::MatrixXd a(n, d);
  Eigen::VectorXd w(d), b(n);
  for (int64_t k = 0; k < d; ++k) w[k] = 0.3 * normal(gen);
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t k = 0; k < d; ++k) a(i, k) = normal(gen);
    b[i] = a.row(i).dot(w) + noise * normal(gen);
  }
  return Dataset::Dense(std::move(a), std::move(b), LabelKind::kReal);
}

// Logistic data, labels +-1.
Dataset LogisticData(int64_t n, int64_t d, uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::normal_distribution<double> normal(0, 1);
  std::uniform_real_distribution<double> unif(0, 1);
  Eigen::MatrixXd a(n, d);
  Eigen::VectorXd y(n);
  for (int64_t i = 0; i < n; ++i) {
    double m = 0;
    for (int64_t k = 0; k < d; ++k) {
      a(i, k) = normal(gen) / std::sqrt(static_cast<double>(d));
      m += a(i, k) * (k % 2 == 0 ? 2.0 : -1.0);
    }
    y[i] = unif(gen) < 1 / (1 + std::exp(-m)) ? 1 : -1;
  }
  return Dataset::Dense(std::move(a), std::move(y), LabelKind::kBinary);
}

// theta*(omega) for ridge on the training rows, and F(omega) = validation
// loss (closed forms; test oracle only).
struct RidgeOracle {
  Eigen::MatrixXd gram;  // A^T A / n_tr
  Eigen::VectorXd rhs;   // A^T b / n_tr
  Eigen::MatrixXd val_a;
  Eigen::VectorXd val_b;
  double n_val = 0;
  Eigen::VectorXd Theta(double omega) const {
    const int64_t d = gram.rows();
    return (gram + omega * Eigen::MatrixXd::Identity(d, d)).ldlt().solve(rhs);
  }
  double F(double omega) const {
    const Eigen::VectorXd r = val_a * Theta(omega) - val_b;
    return 0.5 * r.squaredNorm() / n_val;
  }
};

RidgeOracle MakeOracle(const Dataset& data, const std::vector<uint8_t>& split,
                       const SplitSizes& sizes) {
  const int64_t d = data.dimension();
  RidgeOracle o;
  o.gram = Eigen::MatrixXd::Zero(d, d);
  o.rhs = Eigen::VectorXd::Zero(d);
  std::vector<int64_t> val;
  for (int64_t i = 0; i < data.rows(); ++i) {
    const Eigen::VectorXd a = data.dense().row(i).transpose();
    if (split[i]) {
      val.push_back(i);
    } else {
      o.gram += a * a.transpose();
      o.rhs += data.label(i) * a;
    }
  }
  o.gram /= static_cast<double>(sizes.train);
  o.rhs /= static_cast<double>(sizes.train);
  o.val_a.resize(val.size(), d);
  o.val_b.resize(val.size());
  for (size_t k = 0; k < val.size(); ++k) {
    o.val_a.row(k) = data.dense().row(val[k]);
    o.val_b[k] = data.label(val[k]);
  }
  o.n_val = static_cast<double>(sizes.validation);
  return o;
}

DpTuneOptions RidgeTune() {
  DpTuneOptions o;
  o.common.model.loss = LossKind::kLeastSquares;
  o.common.model.label_bound = 100;
  o.common.clip_norm = 1e4;  // never binds on these rows
  o.common.validation_fraction = 0.5;
  o.common.smoothness = 3;
  o.initial_weights = {0.01};
  o.penalty = 200;
  o.outer_step = 0.05;
  o.outer_iterations = 1;
  o.inner.steps = 400;
  o.warm_start = false;
  return o;
}

TEST(DpTuneTest, NoiseFreeUpdateDescendsTheValidationLoss) {
  const Dataset data = RidgeData(80, 6, 2.0, 3);
  const DpTuneOptions o = RidgeTune();
  ASSERT_OK_AND_ASSIGN(auto algorithm, NewDpTune(o));
  ASSERT_OK_AND_ASSIGN(Calibration c,
                       algorithm->Calibrate(Info(data), Private()));
  // The outer step has sensitivity 0: only the two inner solves are
  // charged.
  EXPECT_EQ(c.event.events().size(), 2u);
  SeededRandomForTesting rng(11);
  SolveContext context(&rng);
  SolveContextTestPeer::DisableNoise(context);
  TuneTrace trace;
  ASSERT_OK_AND_ASSIGN(SolveResult r, RunDpTune(o, data, c, context, &trace));
  // The same split (drawn first from the run's generator).
  SeededRandomForTesting split_rng(11);
  ASSERT_OK_AND_ASSIGN(std::vector<uint8_t> split,
                       DrawSplit(data.rows(), 0.5, split_rng));
  ASSERT_OK_AND_ASSIGN(SplitSizes sizes, PublicSplit(data.rows(), 0.5));
  const RidgeOracle oracle = MakeOracle(data, split, sizes);
  const double w0 = 0.01;
  EXPECT_NEAR((trace.theta[0] - oracle.Theta(w0)).norm(), 0, 1e-6);
  const double h = 1e-6;
  const double dfdw = (oracle.F(w0 + h) - oracle.F(w0 - h)) / (2 * h);
  ASSERT_LT(dfdw, 0) << "the data should prefer more regularization";
  const double direction = trace.directions[0][0];
  // lambda (R(theta^lam) - R(theta)) -> dF/domega with the same sign and
  // O(1/lambda) error.
  EXPECT_LT(direction, 0);
  EXPECT_NEAR(direction, dfdw, 0.05 * std::abs(dfdw));
  // The noise-free update increases omega: omega_1 = Proj(omega_0 - eta d).
  EXPECT_NEAR(trace.weights[1][0], w0 - 0.05 * direction, 1e-15);
  EXPECT_GT(trace.weights[1][0], w0);
}

// The sign correction matters.
TEST(DpTuneTest, PaperSignWouldAscend) {
  // Along the released direction, F decreases for the corrected update and
  // increases for the paper's printed sign.
  const Dataset data = RidgeData(80, 6, 2.0, 3);
  SeededRandomForTesting split_rng(11);
  ASSERT_OK_AND_ASSIGN(std::vector<uint8_t> split,
                       DrawSplit(data.rows(), 0.5, split_rng));
  ASSERT_OK_AND_ASSIGN(SplitSizes sizes, PublicSplit(data.rows(), 0.5));
  const RidgeOracle oracle = MakeOracle(data, split, sizes);
  const double lam = 200, w0 = 0.01, eta = 0.05;
  const Eigen::VectorXd theta = oracle.Theta(w0);
  // theta^lam: argmin f + lam g (closed form).
  const int64_t d = data.dimension();
  const Eigen::MatrixXd val_gram =
      oracle.val_a.transpose() * oracle.val_a / oracle.n_val;
  const Eigen::VectorXd val_rhs =
      oracle.val_a.transpose() * oracle.val_b / oracle.n_val;
  const Eigen::VectorXd theta_lam =
      (val_gram + lam * (oracle.gram + w0 * Eigen::MatrixXd::Identity(d, d)))
          .ldlt()
          .solve(val_rhs + lam * oracle.rhs);
  const double dir =
      lam * 0.5 * (theta_lam.squaredNorm() - theta.squaredNorm());
  EXPECT_LT(oracle.F(w0 - eta * dir), oracle.F(w0));
  EXPECT_GT(oracle.F(std::max(1e-6, w0 + eta * dir)), oracle.F(w0));
}

TEST(DpTuneTest, ChargesReleasesAndFeatureGroups) {
  const Dataset data = LogisticData(2000, 6, 5);
  for (bool paper_noise : {false, true}) {
    DpTuneOptions o;
    o.common.model.loss = LossKind::kLogistic;
    o.feature_groups = {0, 0, 0, 1, 1, 1};
    o.outer_iterations = 4;
    o.inner.steps = 10;
    o.paper_outer_noise = paper_noise;
    ASSERT_OK_AND_ASSIGN(auto algorithm, NewDpTune(o));
    ASSERT_OK_AND_ASSIGN(Calibration c,
                         algorithm->Calibrate(Info(data), Private(1, 1e-6)));
    EXPECT_EQ(c.event.events().size(), paper_noise ? 3u : 2u);
    SeededRandomForTesting rng(3);
    SolveContext context(&rng);
    TuneTrace trace;
    ASSERT_OK_AND_ASSIGN(SolveResult r, RunDpTune(o, data, c, context, &trace));
    ASSERT_OK_AND_ASSIGN(
        auto spent,
        privacy::ComputeEpsilon(r.spent, 1e-6, privacy::AccountantKind::kRdp));
    ASSERT_OK_AND_ASSIGN(
        auto planned,
        privacy::ComputeEpsilon(c.event, 1e-6, privacy::AccountantKind::kRdp));
    EXPECT_NEAR(spent.epsilon, planned.epsilon, 1e-9);
    EXPECT_LE(planned.epsilon, 1.0);
    ASSERT_EQ(trace.weights.size(), 5u);
    for (const auto& w : trace.weights) {
      ASSERT_EQ(w.size(), 2);
      EXPECT_TRUE((w.array() >= 1e-3).all() && (w.array() <= 10).all());
    }
    EXPECT_EQ(r.model.weights, trace.theta[trace.t_out]);
    const std::set<std::string> allowed = {"weights_out", "t_out",
                                           "weight_iterates",
                                           "outer_directions", "penalty"};
    for (const auto& out : r.released) {
      EXPECT_TRUE(allowed.count(out.name)) << out.name;
      for (double v : out.values) EXPECT_TRUE(std::isfinite(v));
    }
  }
}

TEST(DpTuneTest, OutputIndexTakesTheLatestOfTiedMoves) {
  auto v = [](double x) { return Eigen::VectorXd::Constant(2, x); };
  // Moves 1, 0, 2, 0: the smallest move (0) at t = 1 and t = 3.
  EXPECT_EQ(TuneOutputIndex({v(1), v(0), v(0), v(2), v(2)}), 3);
  // Moves 5, 0.5, 3.5: a unique minimiser.
  EXPECT_EQ(TuneOutputIndex({v(0), v(5), v(5.5), v(9)}), 1);
}

TEST(DpTuneTest, WeightsHeldAtTheBoxReturnTheLastModel) {
  // A one-point box holds omega fixed: every move is 0, so t_out = T - 1 and
  // the model is the last (longest warm-started) theta.
  const Dataset data = LogisticData(2000, 6, 5);
  DpTuneOptions o;
  o.common.model.loss = LossKind::kLogistic;
  o.common.weight_min = 0.1;
  o.common.weight_max = 0.1;
  o.outer_iterations = 5;
  o.inner.steps = 10;
  ASSERT_OK_AND_ASSIGN(auto algorithm, NewDpTune(o));
  ASSERT_OK_AND_ASSIGN(Calibration c,
                       algorithm->Calibrate(Info(data), Private(1, 1e-6)));
  SeededRandomForTesting rng(5);
  SolveContext context(&rng);
  TuneTrace trace;
  ASSERT_OK_AND_ASSIGN(SolveResult r, RunDpTune(o, data, c, context, &trace));
  EXPECT_EQ(trace.t_out, 4);
  ASSERT_EQ(trace.theta.size(), 5u);
  EXPECT_EQ(r.model.weights, trace.theta.back());
  EXPECT_NE(trace.theta.back(), trace.theta.front());
}

TEST(TuningSplitTest, PublicSizesAndCoinFrequency) {
  ASSERT_OK_AND_ASSIGN(SplitSizes s, PublicSplit(1001, 0.3));
  EXPECT_EQ(s.validation, 300);
  EXPECT_EQ(s.train, 701);
  EXPECT_THAT(PublicSplit(1, 0.5),
              StatusIs(absl::StatusCode::kInvalidArgument));
  SeededRandomForTesting rng(8);
  ASSERT_OK_AND_ASSIGN(std::vector<uint8_t> split, DrawSplit(100000, 0.3, rng));
  int64_t count = 0;
  for (uint8_t v : split) count += v;
  // Binomial(1e5, 0.3): sd 145; 5 sd.
  EXPECT_NEAR(static_cast<double>(count), 30000, 5 * 145);
}

TEST(DpTuneTest, BadOptionsAreRefused) {
  DpTuneOptions o;
  o.common.model.l2 = 0.1;
  EXPECT_THAT(NewDpTune(o), StatusIs(absl::StatusCode::kInvalidArgument));
  o = DpTuneOptions();
  o.common.model.loss = LossKind::kSoftmax;
  o.common.model.num_classes = 3;
  EXPECT_THAT(NewDpTune(o), StatusIs(absl::StatusCode::kInvalidArgument));
  o = DpTuneOptions();
  o.split = BudgetSplit{1.0 / 3, 1.0 / 3, 1.0 / 3};
  EXPECT_THAT(NewDpTune(o),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       ::testing::HasSubstr("paper_outer_noise")));
  o = DpTuneOptions();
  o.common.weight_min = 0;
  EXPECT_THAT(NewDpTune(o), StatusIs(absl::StatusCode::kInvalidArgument));
  o = DpTuneOptions();
  o.feature_groups = {0, 2};
  ASSERT_OK_AND_ASSIGN(auto algorithm, NewDpTune(o));
  PublicDatasetInfo info;
  info.rows = 100;
  info.dimension = 2;
  EXPECT_THAT(algorithm->Calibrate(info, Private()),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       ::testing::HasSubstr("group")));
}

TEST(DpGridSearchTest, SelectsTheBestValidationModelAtLargeEpsilon) {
  const Dataset data = RidgeData(120, 20, 3.0, 9);
  DpGridSearchOptions o;
  o.common.model.loss = LossKind::kLeastSquares;
  o.common.model.label_bound = 100;
  o.common.clip_norm = 1e4;
  o.common.validation_fraction = 0.5;
  o.common.smoothness = 3;
  o.grid = {10, 3, 1, 0.3, 0.1, 0.03, 0.01};
  o.train.steps = 400;
  o.warm_start = false;
  o.loss_clip = 50;
  ASSERT_OK_AND_ASSIGN(auto algorithm, NewDpGridSearch(o));
  const PrivacyTarget target = Private(1e5, 1e-6);
  ASSERT_OK_AND_ASSIGN(Calibration c, algorithm->Calibrate(Info(data), target));
  ASSERT_EQ(c.event.events().size(), 2u);
  EXPECT_EQ(c.event.events()[1].kind(), privacy::DpEvent::Kind::kExponential);
  SeededRandomForTesting split_rng(4);
  ASSERT_OK_AND_ASSIGN(std::vector<uint8_t> split,
                       DrawSplit(data.rows(), 0.5, split_rng));
  ASSERT_OK_AND_ASSIGN(SplitSizes sizes, PublicSplit(data.rows(), 0.5));
  const RidgeOracle oracle = MakeOracle(data, split, sizes);
  int best = 0;
  for (int j = 1; j < 7; ++j) {
    if (oracle.F(o.grid[j]) < oracle.F(o.grid[best])) best = j;
  }
  int hits = 0;
  for (int trial = 0; trial < 20; ++trial) {
    SeededRandomForTesting rng(4);  // same split, noise off for training
    SolveContext context(&rng);
    SolveContextTestPeer::DisableNoise(context);
    ASSERT_OK_AND_ASSIGN(SolveResult r, algorithm->Run(data, c, context));
    for (const auto& out : r.released) {
      if (out.name == "selected_index") hits += out.values[0] == best;
    }
    EXPECT_NEAR(
        (r.model.weights - oracle.Theta(r.released[0].values[0])).norm(), 0,
        1e-6);
  }
  // Every run uses seed 4, so all 20 selections agree; the exponential
  // mechanism at this epsilon picks the best model.
  EXPECT_EQ(hits, 20);
}

TEST(DpGridSearchTest, ChargesTrainingAndOneSelection) {
  const Dataset data = LogisticData(1500, 4, 7);
  DpGridSearchOptions o;
  o.common.model.loss = LossKind::kLogistic;
  o.grid_size = 5;
  o.train.steps = 10;
  ASSERT_OK_AND_ASSIGN(auto algorithm, NewDpGridSearch(o));
  ASSERT_OK_AND_ASSIGN(Calibration c,
                       algorithm->Calibrate(Info(data), Private(1, 1e-6)));
  SeededRandomForTesting rng(2);
  SolveContext context(&rng);
  ASSERT_OK_AND_ASSIGN(SolveResult r, algorithm->Run(data, c, context));
  ASSERT_OK_AND_ASSIGN(
      auto spent,
      privacy::ComputeEpsilon(r.spent, 1e-6, privacy::AccountantKind::kRdp));
  ASSERT_OK_AND_ASSIGN(
      auto planned,
      privacy::ComputeEpsilon(c.event, 1e-6, privacy::AccountantKind::kRdp));
  EXPECT_NEAR(spent.epsilon, planned.epsilon, 1e-9);
  EXPECT_LE(planned.epsilon, 1.0);
  EXPECT_GT(planned.epsilon, 0.99);
  ASSERT_EQ(r.released.size(), 3u);
  EXPECT_EQ(r.released[2].values.size(), 5u);
  EXPECT_TRUE(r.model.weights.allFinite());
}

TEST(TuningTotalityTest, ExtremeRowsGiveFiniteModels) {
  const double big = std::numeric_limits<double>::max();
  Eigen::MatrixXd a(8, 3);
  a << big, -big, big,      //
      1e308, 1e308, 1e308,  //
      5e-324, -0.0, 0.0,    //
      -1e300, 1e300, 1,     //
      0.1, 0.2, 0.3,        //
      -0.4, 0.5, -0.6,      //
      1, 1, 1,              //
      -1, -1, -1;
  Eigen::VectorXd y(8);
  y << 1, -1, 1, -1, 1, -1, 1, -1;
  const Dataset binary = Dataset::Dense(a, y, LabelKind::kBinary);
  Eigen::VectorXd yr(8);
  yr << big, -big, 0, 1e308, 1, -1, 0.5, -0.5;
  const Dataset real = Dataset::Dense(a, yr, LabelKind::kReal);
  for (LossKind loss : {LossKind::kLogistic, LossKind::kLeastSquares,
                        LossKind::kHinge, LossKind::kHuberizedHinge}) {
    const Dataset& data = loss == LossKind::kLeastSquares ? real : binary;
    DpTuneOptions t;
    t.common.model.loss = loss;
    if (loss == LossKind::kLeastSquares) t.common.model.label_bound = 10;
    t.outer_iterations = 3;
    t.inner.steps = 5;
    t.paper_outer_noise = true;
    ASSERT_OK_AND_ASSIGN(auto tune, NewDpTune(t));
    ASSERT_OK_AND_ASSIGN(Calibration c, tune->Calibrate(Info(data), Private()));
    SeededRandomForTesting rng(1);
    SolveContext context(&rng);
    ASSERT_OK_AND_ASSIGN(SolveResult r, tune->Run(data, c, context));
    EXPECT_TRUE(r.model.weights.allFinite()) << LossName(loss);
    for (const auto& out : r.released) {
      for (double v : out.values) EXPECT_TRUE(std::isfinite(v));
    }
    DpGridSearchOptions g;
    g.common = t.common;
    g.grid_size = 3;
    g.train.steps = 5;
    ASSERT_OK_AND_ASSIGN(auto grid, NewDpGridSearch(g));
    ASSERT_OK_AND_ASSIGN(Calibration gc,
                         grid->Calibrate(Info(data), Private()));
    ASSERT_OK_AND_ASSIGN(SolveResult gr, grid->Run(data, gc, context));
    EXPECT_TRUE(gr.model.weights.allFinite()) << LossName(loss);
  }
}

}  // namespace
}  // namespace dpopt::optim::bilevel
