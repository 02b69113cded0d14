// DP-BLSGD / DP-BLSGD-AC / DP-BLGD end to end: the job filter never exceeds
// the reservation, one charge per access, clip decay, termination,
// determinism, and the noise-off limit (Armijo gradient descent).
#include "core/optim/line_search/dp_line_search.h"

#include <cmath>
#include <random>
#include <utility>
#include <vector>

#include "core/noise/testing/seeded_random.h"
#include "core/optim/line_search/job_filter.h"
#include "core/optim/line_search/testing/no_svt_noise.h"
#include "core/optim/objective.h"
#include "core/optim/testing/noise_off.h"
#include "core/privacy/accountant.h"
#include "core/privacy/rdp.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/common/status_matchers.h"

namespace dpopt::optim::line_search {
namespace {

using ::dpopt::noise::testing::SeededRandomForTesting;
using ::dpopt::optim::line_search::testing::ZeroSvtNoiseForTesting;
using ::dpopt::optim::testing::SolveContextTestPeer;
using ::dpopt::testing::StatusIs;

// Two Gaussian blobs, labels +-1, features in [0, 1] plus a bias column.
Dataset Blobs(int n, uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::normal_distribution<double> normal(0, 0.15);
  Eigen::MatrixXd x(n, 3);
  Eigen::VectorXd y(n);
  for (int i = 0; i < n; ++i) {
    const double label = i % 2 == 0 ? 1 : -1;
    y[i] = label;
    x(i, 0) = 1;
    x(i, 1) = std::clamp(0.5 + 0.2 * label + normal(gen), 0.0, 1.0);
    x(i, 2) = std::clamp(0.5 - 0.1 * label + normal(gen), 0.0, 1.0);
  }
  return Dataset::Dense(x, y, LabelKind::kBinary, 2);
}

PublicDatasetInfo InfoFor(const Dataset& d) {
  PublicDatasetInfo info;
  info.rows = d.rows();
  info.dimension = d.dimension();
  return info;
}

PrivacyTarget Target(double epsilon, double delta = 1e-8) {
  PrivacyTarget t;
  t.epsilon = epsilon;
  t.delta = delta;
  return t;
}

DpLineSearchOptions Options(Variant v, double q) {
  DpLineSearchOptions o;
  o.variant = v;
  o.sampling_rate = q;
  o.model.loss = LossKind::kLogistic;
  o.model.l2 = 0.001;
  return o;
}

class Recorder final : public IterationCallback {
 public:
  bool OnIteration(const IterationSummary& s) override {
    iterates.push_back(s.iterate);
    return true;
  }
  std::vector<Eigen::VectorXd> iterates;
};

// Always answers "below": every search fails (adversary for CHEB). NOT DP.
class AlwaysBelow final : public SvtNoise {
 public:
  absl::StatusOr<int64_t> Threshold(const SvtPlan&,
                                    noise::RandomSource&) const override {
    return int64_t{1} << 60;
  }
  absl::StatusOr<int64_t> Query(const SvtPlan&,
                                noise::RandomSource&) const override {
    return 0;
  }
};

// Spend never above the reservation, at every ledger order, and one charge
// per data access (gradients + searches), read back from the spent
// composition.
void ExpectSpendWithinReservation(const privacy::DpEvent& spent_event,
                                  const privacy::DpEvent& reservation,
                                  int64_t data_accesses) {
  const auto orders = JobPrivacyFilter::LedgerOrders();
  ASSERT_OK_AND_ASSIGN(auto spent, privacy::ComputeRdp(spent_event, orders));
  ASSERT_OK_AND_ASSIGN(auto reserved, privacy::ComputeRdp(reservation, orders));
  for (size_t i = 0; i < orders.size(); ++i) {
    EXPECT_LE(spent[i], reserved[i]) << "order " << orders[i];
  }
  int64_t count = 0;
  for (const auto& part : spent_event.events()) {
    count +=
        part.kind() == privacy::DpEvent::Kind::kSelfComposed ? part.count() : 1;
  }
  EXPECT_EQ(count, data_accesses);
}

TEST(DpLineSearchTest, CalibrationReservesTheTargetExactly) {
  Dataset d = Blobs(1000, 1);
  for (Variant v : {Variant::kBlsgd, Variant::kBlsgdAc}) {
    ASSERT_OK_AND_ASSIGN(auto alg, NewDpLineSearch(Options(v, 0.1)));
    ASSERT_OK_AND_ASSIGN(Calibration c,
                         alg->Calibrate(InfoFor(d), Target(0.4)));
    ASSERT_OK_AND_ASSIGN(
        privacy::DpEvent r,
        ReservationEvent(Options(v, 0.1), c.noise_multiplier, 3));
    EXPECT_EQ(c.event, r);
    ASSERT_OK_AND_ASSIGN(
        auto eps,
        privacy::ComputeEpsilon(c.event, 1e-8, privacy::AccountantKind::kRdp));
    EXPECT_LE(eps.epsilon, 0.4);
    EXPECT_GE(eps.epsilon, 0.4 * (1 - 1e-4));  // not wastefully loose
    EXPECT_EQ(c.steps, 20 * 50);
  }
  EXPECT_EQ((*NewDpLineSearch(Options(Variant::kBlsgdAc, 0.1)))->name(),
            "dp_blsgd_ac");
}

// reserve_amplified keeps the gradient's PoissonSampled wrapper in the
// reservation: the same target then calibrates less noise, the reservation
// still meets the target, and a run spends within it.
TEST(DpLineSearchTest, AmplifiedReservationCalibratesLessNoise) {
  Dataset d = Blobs(1000, 1);
  DpLineSearchOptions raw_options = Options(Variant::kBlsgd, 0.1);
  DpLineSearchOptions amp_options = raw_options;
  amp_options.reserve_amplified = true;
  ASSERT_OK_AND_ASSIGN(auto raw_alg, NewDpLineSearch(raw_options));
  ASSERT_OK_AND_ASSIGN(auto amp_alg, NewDpLineSearch(amp_options));
  ASSERT_OK_AND_ASSIGN(Calibration raw,
                       raw_alg->Calibrate(InfoFor(d), Target(0.4)));
  ASSERT_OK_AND_ASSIGN(Calibration amp,
                       amp_alg->Calibrate(InfoFor(d), Target(0.4)));
  // Reservation = SelfComposed(T, Composed{gradient, line search}).
  const privacy::DpEvent& raw_grad = raw.event.inner().events().at(0);
  const privacy::DpEvent& amp_grad = amp.event.inner().events().at(0);
  EXPECT_EQ(raw_grad.kind(), privacy::DpEvent::Kind::kGaussian);
  ASSERT_EQ(amp_grad.kind(), privacy::DpEvent::Kind::kPoissonSampled);
  EXPECT_EQ(amp_grad.sampling_probability(), 0.1);
  EXPECT_EQ(amp_grad.inner(), privacy::DpEvent::Gaussian(amp.noise_multiplier));
  EXPECT_LT(amp.noise_multiplier, 0.5 * raw.noise_multiplier);
  ASSERT_OK_AND_ASSIGN(
      auto eps,
      privacy::ComputeEpsilon(amp.event, 1e-8, privacy::AccountantKind::kRdp));
  EXPECT_LE(eps.epsilon, 0.4);
  EXPECT_GE(eps.epsilon, 0.4 * (1 - 1e-4));
  ASSERT_OK_AND_ASSIGN(privacy::DpEvent r,
                       ReservationEvent(amp_options, amp.noise_multiplier, 3));
  EXPECT_EQ(amp.event, r);
  // An adversarial run (every search fails, CHEB every time) stops by
  // exhausting the smaller reservation, never above it.
  SeededRandomForTesting rng(8);
  SolveContext ctx(&rng, nullptr);
  AlwaysBelow below;
  LineSearchRunStats stats;
  ASSERT_OK_AND_ASSIGN(SolveResult run, RunDpLineSearch(amp_options, d, amp,
                                                        ctx, below, &stats));
  EXPECT_TRUE(run.budget_exhausted);
  ExpectSpendWithinReservation(run.spent, amp.event,
                               stats.gradient_releases + stats.line_searches);
  // At q = 1 there is nothing to amplify: the option changes nothing.
  DpLineSearchOptions full = Options(Variant::kBlgd, 1.0);
  DpLineSearchOptions full_amp = full;
  full_amp.reserve_amplified = true;
  ASSERT_OK_AND_ASSIGN(privacy::DpEvent a, ReservationEvent(full, 2.0, 3));
  ASSERT_OK_AND_ASSIGN(privacy::DpEvent b, ReservationEvent(full_amp, 2.0, 3));
  EXPECT_EQ(a, b);
}

TEST(DpLineSearchTest, RejectsBadSetups) {
  EXPECT_THAT(NewDpLineSearch(Options(Variant::kBlgd, 0.1)).status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
  Dataset d = Blobs(100, 1);
  PublicDatasetInfo info = InfoFor(d);
  info.relation = privacy::Relation::kReplaceOne;
  ASSERT_OK_AND_ASSIGN(auto alg,
                       NewDpLineSearch(Options(Variant::kBlsgd, 0.1)));
  EXPECT_THAT(alg->Calibrate(info, Target(1)).status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

// q = 1, noise off: DP-BLGD is Armijo gradient descent and
// the objective never increases; w changes only on accepted steps.
TEST(DpLineSearchTest, NoiseOffFullBatchIsMonotoneArmijoDescent) {
  Dataset d = Blobs(400, 2);
  DpLineSearchOptions o = Options(Variant::kBlgd, 1.0);
  o.clip_grad = 1e6;  // no clipping
  o.clip_obj = 1e6;   // no loss clipping
  o.max_iterations = 40;
  ASSERT_OK_AND_ASSIGN(auto alg, NewDpLineSearch(o));
  ASSERT_OK_AND_ASSIGN(Calibration c, alg->Calibrate(InfoFor(d), Target(10)));
  SeededRandomForTesting rng(3);
  Recorder rec;
  SolveContext ctx(&rng, &rec);
  SolveContextTestPeer::DisableNoise(ctx);
  ZeroSvtNoiseForTesting zero;
  LineSearchRunStats stats;
  ASSERT_OK_AND_ASSIGN(SolveResult r,
                       RunDpLineSearch(o, d, c, ctx, zero, &stats));
  ASSERT_OK_AND_ASSIGN(auto obj, Objective::Create(o.model, 3));
  ASSERT_GE(rec.iterates.size(), 10u);
  double prev = obj->Loss(d, Eigen::VectorXd::Zero(3));
  for (const auto& w : rec.iterates) {
    const double now = obj->Loss(d, w);
    EXPECT_LE(now, prev + 1e-12);
    prev = now;
  }
  EXPECT_LT(prev, 0.9 * std::log(2.0));
  EXPECT_EQ(stats.accepted_steps, static_cast<int64_t>(rec.iterates.size()));
  EXPECT_GT(obj->Accuracy(d, r.model.weights), 0.9);
}

// Budget, charges and termination with an adversarial line search: every search
// fails, CHEB runs every time on real (seeded) gradient noise, the run ends
// by exhausting the job filter, never above the reservation, and w stays 0.
TEST(DpLineSearchTest, AdversarialSearchesExhaustTheReservationCleanly) {
  Dataset d = Blobs(500, 4);
  for (Variant v : {Variant::kBlsgd, Variant::kBlsgdAc, Variant::kBlgd}) {
    DpLineSearchOptions o = Options(v, 1.0);
    o.planned_iterations = 10;
    ASSERT_OK_AND_ASSIGN(auto alg, NewDpLineSearch(o));
    ASSERT_OK_AND_ASSIGN(Calibration c,
                         alg->Calibrate(InfoFor(d), Target(0.5)));
    SeededRandomForTesting rng(5);
    SolveContext ctx(&rng, nullptr);
    AlwaysBelow below;
    LineSearchRunStats stats;
    ASSERT_OK_AND_ASSIGN(SolveResult r,
                         RunDpLineSearch(o, d, c, ctx, below, &stats));
    EXPECT_TRUE(r.budget_exhausted);
    EXPECT_EQ(r.model.weights, Eigen::VectorXd::Zero(3));
    EXPECT_EQ(stats.accepted_steps, 0);
    EXPECT_GT(stats.cheb_raise_gradient, 0);
    EXPECT_GE(stats.final_rho_grad,
              1 / (2 * c.noise_multiplier * c.noise_multiplier));
    if (v == Variant::kBlsgdAc) {
      EXPECT_GT(stats.clip_decays, 0);
      EXPECT_LE(stats.clip_decays, stats.iterations);  // <= 1 per iteration
    } else {
      EXPECT_EQ(stats.clip_decays, 0);
    }
    ExpectSpendWithinReservation(r.spent, c.event,
                                 stats.gradient_releases + stats.line_searches);
    ASSERT_OK_AND_ASSIGN(
        auto eps,
        privacy::ComputeEpsilon(r.spent, 1e-8, privacy::AccountantKind::kRdp));
    EXPECT_LE(eps.epsilon, 0.5);
  }
}

// A fixed seed gives a bit-identical model and spend; and
// the subsampled variants learn on an easy problem.
TEST(DpLineSearchTest, SubsampledRunIsDeterministicAndLearns) {
  Dataset d = Blobs(4000, 6);
  for (Variant v : {Variant::kBlsgd, Variant::kBlsgdAc}) {
    DpLineSearchOptions o = Options(v, 0.2);
    o.planned_iterations = 20;
    ASSERT_OK_AND_ASSIGN(auto alg, NewDpLineSearch(o));
    ASSERT_OK_AND_ASSIGN(Calibration c, alg->Calibrate(InfoFor(d), Target(2)));
    SolveResult runs[2];
    Recorder traces[2];
    for (int k = 0; k < 2; ++k) {
      SeededRandomForTesting rng(11);
      SolveContext ctx(&rng, &traces[k]);
      ASSERT_OK_AND_ASSIGN(
          runs[k], RunDpLineSearch(o, d, c, ctx, SecureSvtNoise(), nullptr));
    }
    EXPECT_EQ(runs[0].model.weights, runs[1].model.weights);
    // The whole trace is bit-identical, not only the final model.
    ASSERT_GT(traces[0].iterates.size(), 1u);
    EXPECT_EQ(traces[0].iterates, traces[1].iterates);
    EXPECT_EQ(runs[0].spent.ToJson(), runs[1].spent.ToJson());
    EXPECT_TRUE(runs[0].budget_exhausted);
    ASSERT_OK_AND_ASSIGN(auto obj, Objective::Create(o.model, 3));
    EXPECT_GT(obj->Accuracy(d, runs[0].model.weights), 0.8);
  }
}

// ---- Gaussian line search (the paper's Gaussian NOISYBTLS, charged by
// Zhu & Wang 2020, Thm 8). ----

DpLineSearchOptions GaussianOptions(Variant v, double q) {
  DpLineSearchOptions o = Options(v, q);
  o.line_search_noise = SvtNoiseKind::kGaussian;
  return o;
}

// True if the event tree contains a node of `kind`.
bool Contains(const privacy::DpEvent& e, privacy::DpEvent::Kind kind) {
  if (e.kind() == kind) return true;
  for (const auto& c : e.events()) {
    if (Contains(c, kind)) return true;
  }
  return false;
}

TEST(DpLineSearchGaussianTest, CalibrationMeetsTheTarget) {
  Dataset d = Blobs(1000, 1);
  for (const auto& [v, q] :
       {std::pair{Variant::kBlsgd, 0.1}, std::pair{Variant::kBlsgdAc, 0.1},
        std::pair{Variant::kBlgd, 1.0}}) {
    DpLineSearchOptions o = GaussianOptions(v, q);
    ASSERT_OK_AND_ASSIGN(auto alg, NewDpLineSearch(o));
    ASSERT_OK_AND_ASSIGN(Calibration c, alg->Calibrate(InfoFor(d), Target(2)));
    ASSERT_OK_AND_ASSIGN(privacy::DpEvent r,
                         ReservationEvent(o, c.noise_multiplier, 3));
    EXPECT_EQ(c.event, r);
    EXPECT_TRUE(
        Contains(c.event, privacy::DpEvent::Kind::kGaussianSparseVector));
    EXPECT_FALSE(Contains(c.event, privacy::DpEvent::Kind::kSparseVector));
    // One line search in the reservation is the Gaussian event at rho_BT0 =
    // (share / z)^2 / 2 = rho_g0 (share 1).
    const double eps0 = 1 / c.noise_multiplier;
    const double rho0 = eps0 * eps0 / 2;
    ASSERT_OK_AND_ASSIGN(privacy::DpEvent search,
                         GaussianSvtEvent(rho0, 15, q));
    ASSERT_EQ(c.event.kind(), privacy::DpEvent::Kind::kSelfComposed);
    EXPECT_EQ(c.event.count(), 50);
    EXPECT_EQ(c.event.inner().events().at(1), search);
    ASSERT_OK_AND_ASSIGN(
        auto eps,
        privacy::ComputeEpsilon(c.event, 1e-8, privacy::AccountantKind::kRdp));
    EXPECT_LE(eps.epsilon, 2);
    EXPECT_GE(eps.epsilon, 2 * (1 - 1e-4));
    // Gaussian and Laplace reservations differ (the option is honoured).
    ASSERT_OK_AND_ASSIGN(auto lap, NewDpLineSearch(Options(v, q)));
    ASSERT_OK_AND_ASSIGN(Calibration cl, lap->Calibrate(InfoFor(d), Target(2)));
    EXPECT_FALSE(cl.event == c.event);
  }
}

// With the Gaussian search: q = 1, noise off, DP-BLGD is
// exact Armijo gradient descent.
TEST(DpLineSearchGaussianTest, NoiseOffFullBatchIsMonotoneArmijoDescent) {
  Dataset d = Blobs(400, 2);
  DpLineSearchOptions o = GaussianOptions(Variant::kBlgd, 1.0);
  o.clip_grad = 1e6;
  o.clip_obj = 1e6;
  o.max_iterations = 40;
  ASSERT_OK_AND_ASSIGN(auto alg, NewDpLineSearch(o));
  ASSERT_OK_AND_ASSIGN(Calibration c, alg->Calibrate(InfoFor(d), Target(10)));
  SeededRandomForTesting rng(3);
  Recorder rec;
  SolveContext ctx(&rng, &rec);
  SolveContextTestPeer::DisableNoise(ctx);
  ZeroSvtNoiseForTesting zero;
  LineSearchRunStats stats;
  ASSERT_OK_AND_ASSIGN(SolveResult r,
                       RunDpLineSearch(o, d, c, ctx, zero, &stats));
  ASSERT_OK_AND_ASSIGN(auto obj, Objective::Create(o.model, 3));
  ASSERT_GE(rec.iterates.size(), 10u);
  // (Exact Armijo steps of one Gaussian search: svt_line_search_test.)
  double prev = obj->Loss(d, Eigen::VectorXd::Zero(3));
  for (const auto& w : rec.iterates) {
    const double now = obj->Loss(d, w);
    EXPECT_LE(now, prev + 1e-12);
    prev = now;
  }
  EXPECT_LT(prev, 0.9 * std::log(2.0));
  EXPECT_EQ(stats.accepted_steps, static_cast<int64_t>(rec.iterates.size()));
  EXPECT_GT(stats.final_rho_bt, 0);
  EXPECT_EQ(stats.final_eps_bt, 0);
  EXPECT_GT(obj->Accuracy(d, r.model.weights), 0.9);
}

// The Gaussian search, adversarially failing:
// CHEB raises rho_g or rho_BT, the job filter stops the run, and the spend
// stays within the reservation at every ledger order.
TEST(DpLineSearchGaussianTest, AdversarialSearchesStayWithinReservation) {
  Dataset d = Blobs(500, 4);
  for (const auto& [v, q] :
       {std::pair{Variant::kBlsgd, 0.5}, std::pair{Variant::kBlgd, 1.0}}) {
    DpLineSearchOptions o = GaussianOptions(v, q);
    o.planned_iterations = 10;
    ASSERT_OK_AND_ASSIGN(auto alg, NewDpLineSearch(o));
    ASSERT_OK_AND_ASSIGN(Calibration c, alg->Calibrate(InfoFor(d), Target(3)));
    SeededRandomForTesting rng(5);
    SolveContext ctx(&rng, nullptr);
    AlwaysBelow below;
    LineSearchRunStats stats;
    ASSERT_OK_AND_ASSIGN(SolveResult r,
                         RunDpLineSearch(o, d, c, ctx, below, &stats));
    EXPECT_TRUE(r.budget_exhausted);
    EXPECT_EQ(r.model.weights, Eigen::VectorXd::Zero(3));
    EXPECT_GT(stats.line_searches, 1);
    EXPECT_TRUE(
        Contains(r.spent, privacy::DpEvent::Kind::kGaussianSparseVector));
    EXPECT_FALSE(Contains(r.spent, privacy::DpEvent::Kind::kSparseVector));
    ExpectSpendWithinReservation(r.spent, c.event,
                                 stats.gradient_releases + stats.line_searches);
    ASSERT_OK_AND_ASSIGN(
        auto eps,
        privacy::ComputeEpsilon(r.spent, 1e-8, privacy::AccountantKind::kRdp));
    EXPECT_LE(eps.epsilon, 3);
  }
}

// A subsampled Gaussian-search run is deterministic under a seed and learns.
TEST(DpLineSearchGaussianTest, SubsampledRunLearns) {
  Dataset d = Blobs(4000, 6);
  DpLineSearchOptions o = GaussianOptions(Variant::kBlsgd, 0.2);
  o.planned_iterations = 20;
  ASSERT_OK_AND_ASSIGN(auto alg, NewDpLineSearch(o));
  ASSERT_OK_AND_ASSIGN(Calibration c, alg->Calibrate(InfoFor(d), Target(4)));
  SolveResult runs[2];
  for (int k = 0; k < 2; ++k) {
    SeededRandomForTesting rng(11);
    SolveContext ctx(&rng, nullptr);
    ASSERT_OK_AND_ASSIGN(
        runs[k], RunDpLineSearch(o, d, c, ctx, SecureSvtNoise(), nullptr));
  }
  EXPECT_EQ(runs[0].model.weights, runs[1].model.weights);
  EXPECT_EQ(runs[0].spent.ToJson(), runs[1].spent.ToJson());
  ASSERT_OK_AND_ASSIGN(auto obj, Objective::Create(o.model, 3));
  EXPECT_GT(obj->Accuracy(d, runs[0].model.weights), 0.8);
}

}  // namespace
}  // namespace dpopt::optim::line_search
