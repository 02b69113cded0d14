// Distributed-DDA accounting (accounting.h): the chargeable modes
// (visible activation, WBK under replace-one, per-node Poisson sampling
// under add/remove), paper mode's formula and flags, calibration tightness
// and monotonicity, and determinism of whole runs.
#include "core/optim/distributed_dda/accounting.h"

#include <cmath>
#include <vector>

#include "absl/strings/str_join.h"
#include "core/noise/testing/seeded_random.h"
#include "core/optim/distributed_dda/dp_dda.h"
#include "core/optim/distributed_dda/testing/dp_dda_test_peer.h"
#include "core/optim/testing/noise_off.h"
#include "core/privacy/accountant.h"
#include "core/privacy/rdp.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/common/status_matchers.h"
#include "tests/core/optim/distributed_dda/dda_fixture.h"

namespace dpopt::optim::distributed_dda {
namespace {

using ::dpopt::testing::StatusIs;
using privacy::DpEvent;
using privacy::Relation;
using ::testing::HasSubstr;

DpDdaOptions Options(int64_t T = 2000) {
  DpDdaOptions o;
  o.model.loss = LossKind::kHinge;
  o.model.l2 = 5e-4;
  o.nodes = 20;
  o.iterations = T;
  o.public_seed = 12345;
  return o;
}

PublicDatasetInfo Info(int64_t rows, Relation relation, int64_t dim = 10) {
  PublicDatasetInfo i;
  i.rows = rows;
  i.dimension = dim;
  i.relation = relation;
  return i;
}

PrivacyTarget Target(double eps, double delta = 1e-5) {
  PrivacyTarget t;
  t.epsilon = eps;
  t.delta = delta;
  return t;
}

TEST(DdaAccountingTest, AutoPicksTheDatasetsRelationAndChargesKActivations) {
  ASSERT_OK_AND_ASSIGN(auto a, DpDda::Create(Options()));
  const std::vector<int64_t> counts = a->gossip().ActivationCounts(1999);
  const int64_t K = *std::max_element(counts.begin(), counts.end());
  // 1 edge on K_20: each node active ~ 0.1 of 1999 passes.
  EXPECT_GT(K, 200);
  EXPECT_LT(K, 300);

  ASSERT_OK_AND_ASSIGN(
      Calibration ro,
      a->Calibrate(Info(2000, Relation::kReplaceOne), Target(1)));
  EXPECT_EQ(ro.relation, Relation::kReplaceOne);
  EXPECT_EQ(ro.event,
            DpEvent::SelfComposed(
                K, DpEvent::SampledWithoutReplacement(
                       100, 1, DpEvent::Gaussian(ro.noise_multiplier))));
  EXPECT_DOUBLE_EQ(ro.sampling_rate, 0.01);

  ASSERT_OK_AND_ASSIGN(
      Calibration ar,
      a->Calibrate(Info(2000, Relation::kAddRemove), Target(1)));
  EXPECT_EQ(ar.relation, Relation::kAddRemove);
  EXPECT_EQ(ar.event,
            DpEvent::SelfComposed(
                K, DpEvent::PoissonSampled(
                       0.01, DpEvent::Gaussian(ar.noise_multiplier))));
  // Both meet the target under the accountant.
  for (const Calibration* c : {&ro, &ar}) {
    ASSERT_OK_AND_ASSIGN(
        auto eps,
        privacy::ComputeEpsilon(c->event, 1e-5, privacy::AccountantKind::kRdp));
    EXPECT_LE(eps.epsilon, 1.0);
    EXPECT_THAT(absl::StrJoin(c->notes, "\n"), HasSubstr("visible activation"));
  }
  // Explicit modes must match the dataset's relation.
  DpDdaOptions wbk = Options();
  wbk.accounting = AccountingMode::kWbkReplaceOne;
  ASSERT_OK_AND_ASSIGN(auto aw, DpDda::Create(wbk));
  EXPECT_THAT(
      aw->Calibrate(Info(2000, Relation::kAddRemove), Target(1)).status(),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("replace-one")));
  DpDdaOptions poi = Options();
  poi.accounting = AccountingMode::kPoissonAddRemove;
  ASSERT_OK_AND_ASSIGN(auto ap, DpDda::Create(poi));
  EXPECT_THAT(
      ap->Calibrate(Info(2000, Relation::kReplaceOne), Target(1)).status(),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("add/remove")));
}

// Calibration of the chargeable modes: the calibrated z meets the target
// and 0.99 z does not; z is non-increasing in epsilon and q, non-decreasing
// in T and iota (through K).
TEST(DdaAccountingTest, CalibrationIsTightAndMonotone) {
  auto z_of = [](const DpDdaOptions& o, int64_t rows, Relation rel,
                 double eps) {
    auto a = DpDda::Create(o);
    EXPECT_TRUE(a.ok());
    auto c = (*a)->Calibrate(Info(rows, rel), Target(eps));
    EXPECT_TRUE(c.ok()) << c.status();
    return *c;
  };
  for (Relation rel : {Relation::kReplaceOne, Relation::kAddRemove}) {
    const Calibration c = z_of(Options(), 2000, rel, 0.8);
    const double z = c.noise_multiplier;
    ASSERT_OK_AND_ASSIGN(auto a, DpDda::Create(Options()));
    ASSERT_OK_AND_ASSIGN(AccountingPlan plan,
                         a->Plan(Info(2000, rel), Target(0.8)));
    const int64_t K = c.event.count();
    auto eps_at = [&](double zz) {
      const DpEvent e =
          DdaEvent(plan.mode, plan.shard_rows, 1, plan.sampling_rate, K, zz);
      return privacy::ComputeEpsilon(e, 1e-5, privacy::AccountantKind::kRdp)
          ->epsilon;
    };
    EXPECT_LE(eps_at(z), 0.8);
    EXPECT_GT(eps_at(0.99 * z), 0.8);
    double prev = 1e9;
    for (double eps : {0.2, 0.4, 0.6, 0.8, 1.0}) {
      const double zz = z_of(Options(), 2000, rel, eps).noise_multiplier;
      EXPECT_LE(zz, prev);
      prev = zz;
    }
    EXPECT_LE(z_of(Options(), 4000, rel, 0.8).noise_multiplier, z);
    EXPECT_GE(z_of(Options(4000), 2000, rel, 0.8).noise_multiplier, z);
    DpDdaOptions two = Options();
    two.gossip.edges_per_step = 2;  // iota 0.2
    EXPECT_GE(z_of(two, 2000, rel, 0.8).noise_multiplier, z);
    DpDdaOptions base = Options();
    base.gossip.all_nodes_compute = true;  // every node every step: K = T-1
    const Calibration cb = z_of(base, 2000, rel, 0.8);
    EXPECT_EQ(cb.event.count(), 1999);
    EXPECT_GE(cb.noise_multiplier, z);
  }
}

// The paper's sigma formula (Theorem 1) and the paper mode's flags.
TEST(DdaAccountingTest, PaperModeFormulaAndFlags) {
  // The paper's epsilon dataset (q = 20000), iota = 0.1, T = 600000 (3
  // epochs of q / iota steps), eps = 0.8 -> 0.0630.
  EXPECT_NEAR(PaperSigma(0.8, 0.01, 600000, 0.1, 1, 20000), 0.0630, 5e-5);
  const double s = PaperSigma(0.4, 0.01, 1000, 0.2, 2, 50);
  EXPECT_NEAR(s, 0.2 * 2 / (50 * 0.4) * std::sqrt(32 * 1000 * std::log(200)),
              1e-12 * s);
  DpDdaOptions o = Options();
  o.accounting = AccountingMode::kPaper;
  ASSERT_OK_AND_ASSIGN(auto a, DpDda::Create(o));
  ASSERT_OK_AND_ASSIGN(
      Calibration c,
      a->Calibrate(Info(2000, Relation::kAddRemove), Target(0.8)));
  // sigma = z * (2L + grid) >= sigma_paper, within the grid's rounding.
  const double sp = PaperSigma(0.8, 0.01, 2000, 0.1, 1, 100);
  EXPECT_NEAR(c.noise_multiplier * 2, sp, 1e-12 * sp);
  EXPECT_EQ(c.relation, Relation::kReplaceOne);
  const std::string notes = absl::StrJoin(c.notes, "\n");
  // T = 2000 < 5 q^2 eps^2 / (4 iota^2) = 80000: flagged.
  EXPECT_THAT(notes, HasSubstr("UNCERTIFIED"));
  EXPECT_THAT(notes, HasSubstr("Theorem 1's own delta"));
  // The honest cost of that noise is far above the paper's epsilon.
  ASSERT_OK_AND_ASSIGN(
      auto eps,
      privacy::ComputeEpsilon(c.event, 1e-5, privacy::AccountantKind::kRdp));
  EXPECT_GT(eps.epsilon, 10);
  EXPECT_EQ(PaperSpentEpsilon(0, 100, 0.8), 0);
  double prev = 0;
  for (int t = 1; t <= 100; ++t) {
    const double e = PaperSpentEpsilon(t, 100, 0.8);
    EXPECT_GT(e, prev);
    prev = e;
  }
  EXPECT_LE(prev, 0.8);
}

TEST(DdaAccountingTest, RejectsImpossibleSetups) {
  ASSERT_OK_AND_ASSIGN(auto a, DpDda::Create(Options()));
  EXPECT_THAT(a->Calibrate(Info(10, Relation::kReplaceOne), Target(1)).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("nodes")));
  DpDdaOptions big = Options();
  big.batch_size = 200;
  ASSERT_OK_AND_ASSIGN(auto b, DpDda::Create(big));
  EXPECT_THAT(
      b->Calibrate(Info(2000, Relation::kReplaceOne), Target(1)).status(),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("batch_size")));
  DpDdaOptions bad = Options();
  bad.iterations = 1;
  EXPECT_THAT(DpDda::Create(bad).status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
  DpDdaOptions l1 = Options();
  l1.model.l2 = 0;
  l1.model.l1 = 1e-3;
  l1.schedule = ScheduleOptions{WeightSchedule::kUniform, 0, 0};
  EXPECT_THAT(DpDda::Create(l1).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("gamma")));
}

// MPI execution: shards the ranks would refuse (more than 1e8 values or
// 2^34 bytes) are refused before charging, from public shapes only.
TEST(DpDdaCalibrationTest, MpiShardsBeyondTheRanksLimitsAreRefused) {
  DpDdaOptions o = Options();
  o.execution = Execution::kMpi;
  MpiSettings m;
  m.mpirun = "mpirun";
  m.worker = "/nonexistent/dpopt-dda-worker";  // never started here
  o.mpi = m;
  o.nodes = 2;
  auto two = DpDda::Create(o);
  ASSERT_TRUE(two.ok()) << two.status();
  // 2e6 rows of 100 coordinates on 2 nodes: about 1e8 values per shard.
  EXPECT_THAT(
      (*two)->Calibrate(Info(2000000, Relation::kAddRemove, 100), Target(1))
          .status(),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("MPI execution")));
  o.nodes = 20;
  auto twenty = DpDda::Create(o);
  ASSERT_TRUE(twenty.ok()) << twenty.status();
  EXPECT_TRUE(
      (*twenty)->Calibrate(Info(2000000, Relation::kAddRemove, 100), Target(1))
          .ok());
}

// Between two trace points far apart the run still stops within one pass
// of a stop request (optim::StepReporter::StopRequested, asked before every
// pass), without a further trace point.
TEST(DpDdaRunTest, StopsBetweenTracePointsWhenAsked) {
  const Dataset data = test::MakeBinary(400, 6, 5);
  DpDdaOptions o = Options(300);
  o.nodes = 8;
  o.model.loss = LossKind::kLogistic;
  o.model.l2 = 0.01;
  o.trace_every = 300;  // trace points at t = 1 and t = 300 only
  class StopAfter : public IterationCallback {
   public:
    int traces = 0;
    int asked = 0;

   private:
    bool OnIteration(const IterationSummary&) override {
      ++traces;
      return true;
    }
    bool StopRequested() override { return ++asked > 40; }
  } stop;
  auto a = DpDda::Create(o);
  ASSERT_TRUE(a.ok());
  testing::DpDdaTestPeer::UseSeededNodes(**a, 1);
  auto c = (*a)->Calibrate(Info(400, Relation::kReplaceOne, 6), Target(2));
  ASSERT_TRUE(c.ok()) << c.status();
  noise::testing::SeededRandomForTesting split(1);
  SolveContext ctx(&split, &stop);
  auto r = (*a)->Run(data, *c, ctx);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->cancelled);
  EXPECT_EQ(stop.traces, 1);  // only t = 1
  EXPECT_EQ(stop.asked, 41);  // passes 1..40 ran, the 41st question stopped
  EXPECT_EQ(r->steps_done, 1);
}

// Determinism (single process): the same public seed and secret seeds give
// bitwise identical traces and models; the split and the model change with
// the secret seed.
TEST(DpDdaRunTest, DeterministicUnderSeedsAndReleasesOnlyPostProcessing) {
  const Dataset data = test::MakeBinary(400, 6, 5);
  DpDdaOptions o = Options(300);
  o.nodes = 8;
  o.model.loss = LossKind::kLogistic;
  o.model.l2 = 0.01;
  o.release_node_models = true;
  o.trace_every = 10;
  struct Recorder : IterationCallback {
    std::vector<Eigen::VectorXd> iterates;
    std::vector<double> norms;
    bool OnIteration(const IterationSummary& s) override {
      iterates.push_back(s.iterate);
      norms.push_back(s.noisy_gradient_norm);
      return true;
    }
  };
  auto run = [&](uint64_t secret, Recorder* rec) {
    auto a = DpDda::Create(o);
    EXPECT_TRUE(a.ok());
    testing::DpDdaTestPeer::UseSeededNodes(**a, secret);
    auto c = (*a)->Calibrate(Info(400, Relation::kReplaceOne, 6), Target(2));
    EXPECT_TRUE(c.ok()) << c.status();
    noise::testing::SeededRandomForTesting split(secret);
    SolveContext ctx(&split, rec);
    auto r = (*a)->Run(data, *c, ctx);
    EXPECT_TRUE(r.ok()) << r.status();
    return *std::move(r);
  };
  Recorder r1, r2, r3;
  const SolveResult a = run(1, &r1), b = run(1, &r2), c = run(2, &r3);
  EXPECT_EQ(a.model.weights, b.model.weights);
  EXPECT_EQ(r1.iterates, r2.iterates);
  EXPECT_EQ(r1.norms, r2.norms);
  EXPECT_NE(a.model.weights, c.model.weights);
  ASSERT_EQ(r1.iterates.size(), 31u);  // t = 1, 10, 20, ..., 300
  EXPECT_EQ(r1.iterates.front(), Eigen::VectorXd::Zero(6));
  EXPECT_EQ(r1.iterates.back(), a.model.weights);
  EXPECT_EQ(a.steps_done, 300);
  std::vector<std::string> names;
  for (const auto& r : a.released) names.push_back(r.name);
  EXPECT_THAT(names, ::testing::ElementsAre("public_seed", "max_activations",
                                            "node_models"));
  EXPECT_EQ(a.released[0].values[0], 12345);
  EXPECT_EQ(a.released[2].values.size(), 8u * 6);
  // The model is the mean of the node models.
  Eigen::VectorXd mean = Eigen::VectorXd::Zero(6);
  for (int i = 0; i < 8; ++i) {
    mean += Eigen::Map<const Eigen::VectorXd>(&a.released[2].values[i * 6], 6);
  }
  EXPECT_LE((mean / 8 - a.model.weights).norm(), 1e-12);
}

TEST(DpDdaRunTest, SplitsAreExactOrIndependent) {
  noise::testing::SeededRandomForTesting rng(4);
  std::vector<std::vector<int64_t>> shards;
  ASSERT_OK(
      SplitRows(103, 10, NodeSampling::kWithoutReplacement, 10, rng, &shards));
  std::vector<int64_t> all;
  for (const auto& s : shards) {
    EXPECT_EQ(s.size(), 10u);
    all.insert(all.end(), s.begin(), s.end());
  }
  std::sort(all.begin(), all.end());
  EXPECT_EQ(std::unique(all.begin(), all.end()), all.end());
  ASSERT_OK(SplitRows(103, 10, NodeSampling::kPoisson, 10, rng, &shards));
  size_t total = 0;
  for (const auto& s : shards) total += s.size();
  EXPECT_EQ(total, 103u);
}

}  // namespace
}  // namespace dpopt::optim::distributed_dda
