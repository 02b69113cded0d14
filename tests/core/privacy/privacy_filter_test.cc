#include "core/privacy/privacy_filter.h"

#include <cmath>
#include <string>
#include <vector>

#include "core/privacy/accountant.h"
#include "core/privacy/dp_sgd_accounting.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/common/status_matchers.h"

namespace dpopt::privacy {
namespace {

using ::dpopt::testing::StatusIs;
using ::testing::HasSubstr;

std::unique_ptr<PrivacyFilter> MakeFilter(double eps, double delta,
                                          FilterKind kind,
                                          Relation rel = Relation::kAddRemove) {
  BudgetConfig c;
  c.epsilon = eps;
  c.delta = delta;
  c.filter = kind;
  c.relation = rel;
  auto f = PrivacyFilter::Create(c);
  EXPECT_TRUE(f.ok()) << f.status();
  return *std::move(f);
}

std::string Blob(const PrivacyFilter& f, const DpEvent& e,
                 Relation rel = Relation::kAddRemove) {
  auto p = f.Price(e, AccountantKind::kRdp, rel);
  EXPECT_TRUE(p.ok()) << p.status();
  return p.ok() ? p->cost_blob : "";
}

TEST(BudgetConfigTest, Validate) {
  BudgetConfig c;
  c.epsilon = 1;
  c.delta = 1e-6;
  EXPECT_OK(c.Validate());
  c.epsilon = -1;
  EXPECT_THAT(c.Validate(), StatusIs(absl::StatusCode::kInvalidArgument));
  c.epsilon = std::nan("");
  EXPECT_THAT(c.Validate(), StatusIs(absl::StatusCode::kInvalidArgument));
  c.epsilon = 1;
  c.delta = 1;
  EXPECT_THAT(c.Validate(), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(PrivacyFilter::Create(c).status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(BasicFilterTest, HalfPlusHalfIsExactlyOne) {
  auto f = MakeFilter(1.0, 0, FilterKind::kBasic);
  const std::string half = Blob(*f, DpEvent::EpsilonDelta(0.5, 0));
  std::vector<std::string> ledger;
  ASSERT_OK(f->Admit(ledger, half));
  ledger.push_back(half);
  ASSERT_OK(f->Admit(ledger, half));
  ledger.push_back(half);
  ASSERT_OK_AND_ASSIGN(BudgetView v, f->View(ledger));
  EXPECT_EQ(v.epsilon_spent, 1.0);
  EXPECT_EQ(v.epsilon_remaining, 0.0);
  // Not even the smallest further charge fits.
  EXPECT_THAT(f->Admit(ledger, Blob(*f, DpEvent::Exponential(1e-12))),
              StatusIs(absl::StatusCode::kResourceExhausted));
  // A zero-cost charge still fits.
  EXPECT_OK(f->Admit(ledger, Blob(*f, DpEvent::NoOp())));
}

TEST(BasicFilterTest, TenTimesPointOneIsExactlyOne) {
  auto f = MakeFilter(1.0, 0, FilterKind::kBasic);
  const std::string tenth = Blob(*f, DpEvent::Exponential(0.1));
  std::vector<std::string> ledger;
  for (int i = 0; i < 10; ++i) {
    ASSERT_OK(f->Admit(ledger, tenth)) << i;
    ledger.push_back(tenth);
  }
  EXPECT_THAT(f->Admit(ledger, tenth),
              StatusIs(absl::StatusCode::kResourceExhausted));
}

TEST(BasicFilterTest, ExhaustedMessageSaysWhatIsLeft) {
  auto f = MakeFilter(1.0, 1e-6, FilterKind::kBasic);
  std::vector<std::string> ledger = {Blob(*f, DpEvent::EpsilonDelta(0.75, 0))};
  absl::Status s = f->Admit(ledger, Blob(*f, DpEvent::EpsilonDelta(0.5, 0)));
  EXPECT_THAT(s, StatusIs(absl::StatusCode::kResourceExhausted,
                          HasSubstr("remaining epsilon 0.25")));
  // Delta is a budget too.
  auto d = f->Admit(ledger, Blob(*f, DpEvent::EpsilonDelta(0.1, 2e-6)));
  EXPECT_THAT(d, StatusIs(absl::StatusCode::kResourceExhausted,
                          HasSubstr("remaining delta 1e-06")));
}

TEST(BasicFilterTest, GaussianChargedAtDefaultDeltaShare) {
  auto f = MakeFilter(5.0, 1e-5, FilterKind::kBasic);
  ASSERT_OK_AND_ASSIGN(PricedCharge p,
                       f->Price(DpEvent::Gaussian(2), AccountantKind::kRdp,
                                Relation::kAddRemove));
  EXPECT_GE(p.delta, 1e-5 / 10);
  EXPECT_LE(p.delta, 1e-5 / 10 + 1e-18);
  ASSERT_OK_AND_ASSIGN(
      EpsilonResult e,
      ComputeEpsilon(DpEvent::Gaussian(2), 1e-6, AccountantKind::kRdp));
  EXPECT_GE(p.epsilon, e.epsilon);
  EXPECT_LE(p.epsilon, e.epsilon + 3e-12);
}

TEST(RdpFilterTest, AdmitsNearTheBoundaryAndNotBeyond) {
  const double delta = 1e-6;
  auto f = MakeFilter(1.0, delta, FilterKind::kRdp);
  // Largest z-grid point that still fits a single DP-SGD job, found from the
  // filter's own budget: calibrate to (1, delta / K) with K orders.
  const double k = 157;  // 156 default orders + inf
  ASSERT_OK_AND_ASSIGN(double z, CalibrateDpSgd(1.0, delta / k, 0.01, 1000,
                                                AccountantKind::kRdp));
  // The calibrated job fits on an empty ledger ...
  EXPECT_OK(f->Admit({}, Blob(*f, DpSgdEvent(z, 0.01, 1000))));
  // ... and 1% less noise does not.
  EXPECT_THAT(f->Admit({}, Blob(*f, DpSgdEvent(z * 0.99, 0.01, 1000))),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       HasSubstr("remaining epsilon 1")));
}

TEST(RdpFilterTest, AdaptiveSequenceComposesInRdp) {
  // Two jobs of 500 steps cost exactly what one job of 1000 steps costs:
  // the RDP filter composes them without the slack of basic composition.
  auto f = MakeFilter(1.0, 1e-6, FilterKind::kRdp);
  ASSERT_OK_AND_ASSIGN(double z, CalibrateDpSgd(1.0, 1e-6 / 157, 0.01, 1000,
                                                AccountantKind::kRdp));
  const std::string half = Blob(*f, DpSgdEvent(z, 0.01, 500));
  std::vector<std::string> ledger;
  ASSERT_OK(f->Admit(ledger, half));
  ledger.push_back(half);
  ASSERT_OK_AND_ASSIGN(BudgetView v1, f->View(ledger));
  EXPECT_GT(v1.epsilon_spent, 0.5);  // RDP: less than linear in steps
  EXPECT_LT(v1.epsilon_spent, 1.0);
  ASSERT_OK(f->Admit(ledger, half));
  ledger.push_back(half);
  ASSERT_OK_AND_ASSIGN(BudgetView v2, f->View(ledger));
  EXPECT_LE(v2.epsilon_spent, 1.0);
  EXPECT_GT(v2.epsilon_spent, 0.99);
  EXPECT_GE(v2.epsilon_remaining, 0.0);
  // Now nothing non-trivial fits.
  EXPECT_THAT(f->Admit(ledger, Blob(*f, DpSgdEvent(z, 0.01, 100))),
              StatusIs(absl::StatusCode::kResourceExhausted));
}

TEST(RdpFilterTest, SomeOrderWithRoomSuffices) {
  // A pure-DP charge lives at order inf; a Gaussian charge at finite orders.
  // After exhausting finite orders with Gaussians, pure-DP charges that fit
  // at order inf are still admitted only if order inf has room too.
  auto f = MakeFilter(1.0, 1e-6, FilterKind::kRdp);
  const std::string pure = Blob(*f, DpEvent::Exponential(0.5));
  std::vector<std::string> ledger = {pure};
  ASSERT_OK(f->Admit(ledger, pure));  // 0.5 + 0.5 at order inf
  ledger.push_back(pure);
  ASSERT_OK_AND_ASSIGN(BudgetView v, f->View(ledger));
  EXPECT_LE(v.epsilon_spent, 1.0);
  EXPECT_THAT(f->Admit(ledger, Blob(*f, DpEvent::Exponential(0.01))),
              StatusIs(absl::StatusCode::kResourceExhausted));
}

TEST(RdpFilterTest, DeltaZeroOnlyAdmitsPureDp) {
  auto f = MakeFilter(1.0, 0, FilterKind::kRdp);
  EXPECT_OK(f->Admit({}, Blob(*f, DpEvent::Laplace(2))));
  EXPECT_THAT(f->Admit({}, Blob(*f, DpEvent::Gaussian(100))),
              StatusIs(absl::StatusCode::kResourceExhausted));
}

TEST(RdpFilterTest, InfiniteCostNeverFits) {
  auto f = MakeFilter(10.0, 1e-5, FilterKind::kRdp);
  const std::string inf = Blob(*f, DpEvent::Gaussian(0));
  EXPECT_THAT(inf, HasSubstr("inf"));
  EXPECT_THAT(f->Admit({}, inf),
              StatusIs(absl::StatusCode::kResourceExhausted));
  // An infinite entry already on the ledger saturates, never wraps around.
  EXPECT_THAT(f->Admit({inf, inf}, Blob(*f, DpEvent::NoOp())),
              StatusIs(absl::StatusCode::kResourceExhausted));
}

TEST(RdpFilterTest, CorruptBlobIsDataLoss) {
  auto f = MakeFilter(1.0, 1e-6, FilterKind::kRdp);
  const std::string good = Blob(*f, DpEvent::Gaussian(3));
  std::string truncated = good.substr(0, good.size() - 5);
  std::string negative = good;
  negative.replace(negative.rfind(',') + 1, 1, "-");
  for (const std::string& bad : {std::string(""), std::string("garbage"),
                                 truncated, negative, good + ",1",
                                 Blob(*MakeFilter(1, 1e-6, FilterKind::kBasic),
                                      DpEvent::Exponential(0.1))}) {
    EXPECT_THAT(f->Admit({bad}, good), StatusIs(absl::StatusCode::kDataLoss))
        << bad;
    EXPECT_THAT(f->View({bad}).status(), StatusIs(absl::StatusCode::kDataLoss));
  }
  EXPECT_THAT(MakeFilter(1, 0, FilterKind::kBasic)
                  ->View({"dpopt.cost.v1|basic|1|x"})
                  .status(),
              StatusIs(absl::StatusCode::kDataLoss));
}

TEST(RdpFilterTest, PldPricedChargeStillChargesRdpCurve) {
  auto f = MakeFilter(3.0, 1e-5, FilterKind::kRdp);
  const DpEvent e = DpSgdEvent(1.0, 0.01, 100);
  ASSERT_OK_AND_ASSIGN(PricedCharge rdp,
                       f->Price(e, AccountantKind::kRdp, Relation::kAddRemove));
  ASSERT_OK_AND_ASSIGN(PricedCharge pld,
                       f->Price(e, AccountantKind::kPld, Relation::kAddRemove));
  EXPECT_EQ(pld.cost_blob, rdp.cost_blob);
  EXPECT_EQ(pld.accountant, "pld");
  EXPECT_EQ(rdp.accountant, "rdp");
  EXPECT_LT(pld.epsilon, rdp.epsilon);
  // PLD cannot price the discrete Gaussian: displayed and recorded as RDP.
  ASSERT_OK_AND_ASSIGN(PricedCharge dg,
                       f->Price(DpEvent::DiscreteGaussian(2, 1048576, 10),
                                AccountantKind::kPld, Relation::kAddRemove));
  EXPECT_EQ(dg.accountant, "rdp");
}

// Fold (used by the ledger's running totals) gives the filter exactly the
// answers it gives on the blobs themselves: admission at every prefix of an
// adaptive sequence, the budget view, and the refusal message.
void ExpectFoldEquivalent(const PrivacyFilter& f,
                          const std::vector<std::string>& sequence,
                          const std::string& next) {
  std::vector<std::string> prefix;
  std::string running;  // fold of the prefix, extended one charge at a time
  ASSERT_OK_AND_ASSIGN(running, f.Fold({}));
  for (const std::string& blob : sequence) {
    ASSERT_OK_AND_ASSIGN(std::string folded, f.Fold(prefix));
    EXPECT_EQ(folded, running);
    const absl::Status plain = f.Admit(prefix, next);
    const absl::Status fold = f.Admit({folded}, next);
    EXPECT_EQ(plain.code(), fold.code());
    EXPECT_EQ(plain.message(), fold.message());
    ASSERT_OK_AND_ASSIGN(BudgetView a, f.View(prefix));
    ASSERT_OK_AND_ASSIGN(BudgetView b, f.View({folded}));
    EXPECT_EQ(a.epsilon_spent, b.epsilon_spent);
    EXPECT_EQ(a.epsilon_remaining, b.epsilon_remaining);
    EXPECT_EQ(a.accounting, b.accounting);
    prefix.push_back(blob);
    ASSERT_OK_AND_ASSIGN(running, f.Fold({running, blob}));
  }
}

TEST(FoldTest, RdpFoldAnswersAsTheCharges) {
  auto f = MakeFilter(2.0, 1e-6, FilterKind::kRdp);
  std::vector<std::string> seq;
  for (int i = 0; i < 12; ++i) {
    seq.push_back(Blob(*f, i % 3 == 0   ? DpEvent::Gaussian(3 + i)
                           : i % 3 == 1 ? DpEvent::Laplace(20)
                                        : DpSgdEvent(1.1, 0.01, 100 * i)));
  }
  ExpectFoldEquivalent(*f, seq, Blob(*f, DpEvent::Gaussian(4)));
  // An infinite charge saturates the fold as it saturates the sum.
  seq.push_back(Blob(*f, DpEvent::Gaussian(0)));
  ExpectFoldEquivalent(*f, seq, Blob(*f, DpEvent::NoOp()));
  ASSERT_OK_AND_ASSIGN(std::string all, f->Fold(seq));
  EXPECT_THAT(all, HasSubstr("inf"));
  EXPECT_THAT(f->Admit({all}, Blob(*f, DpEvent::NoOp())),
              StatusIs(absl::StatusCode::kResourceExhausted));
}

TEST(FoldTest, BasicFoldIsTheExactSum) {
  auto f = MakeFilter(1.0, 1e-6, FilterKind::kBasic);
  std::vector<std::string> seq;
  for (int i = 0; i < 10; ++i) {
    seq.push_back(Blob(*f, DpEvent::EpsilonDelta(0.1, 1e-7)));
  }
  ExpectFoldEquivalent(*f, seq, Blob(*f, DpEvent::EpsilonDelta(0.1, 0)));
  // Ten times 0.1 is exactly the budget: the fold is 1e12 units and 1e11
  // delta units, and nothing more fits.
  ASSERT_OK_AND_ASSIGN(std::string all, f->Fold(seq));
  EXPECT_EQ(all, "dpopt.cost.v1|basic|1000000000000|1000000000000");
  EXPECT_THAT(f->Admit({all}, Blob(*f, DpEvent::EpsilonDelta(1e-12, 0))),
              StatusIs(absl::StatusCode::kResourceExhausted));
  ASSERT_OK_AND_ASSIGN(std::string zero, f->Fold({}));
  EXPECT_EQ(zero, "dpopt.cost.v1|basic|0|0");
}

TEST(FoldTest, CorruptOrForeignBlobIsDataLoss) {
  auto rdp = MakeFilter(1.0, 1e-6, FilterKind::kRdp);
  auto basic = MakeFilter(1.0, 1e-6, FilterKind::kBasic);
  const std::string rdp_blob = Blob(*rdp, DpEvent::Gaussian(3));
  const std::string basic_blob = Blob(*basic, DpEvent::Exponential(0.1));
  EXPECT_THAT(rdp->Fold({rdp_blob, basic_blob}).status(),
              StatusIs(absl::StatusCode::kDataLoss));
  EXPECT_THAT(basic->Fold({basic_blob, rdp_blob}).status(),
              StatusIs(absl::StatusCode::kDataLoss));
  EXPECT_THAT(rdp->Fold({"garbage"}).status(),
              StatusIs(absl::StatusCode::kDataLoss));
}

TEST(RelationTest, MismatchRules) {
  auto ar = MakeFilter(2.0, 1e-6, FilterKind::kRdp, Relation::kAddRemove);
  auto ro = MakeFilter(2.0, 1e-6, FilterKind::kRdp, Relation::kReplaceOne);
  // replace-one event on an add/remove dataset: refused.
  EXPECT_THAT(ar->Price(DpEvent::Gaussian(4), AccountantKind::kRdp,
                        Relation::kReplaceOne)
                  .status(),
              StatusIs(absl::StatusCode::kFailedPrecondition));
  // add/remove Gaussian on a replace-one dataset: sensitivity doubles.
  ASSERT_OK_AND_ASSIGN(PricedCharge converted,
                       ro->Price(DpEvent::Gaussian(4), AccountantKind::kRdp,
                                 Relation::kAddRemove));
  ASSERT_OK_AND_ASSIGN(PricedCharge native,
                       ro->Price(DpEvent::Gaussian(2), AccountantKind::kRdp,
                                 Relation::kReplaceOne));
  EXPECT_EQ(converted.cost_blob, native.cost_blob);
  // Sampled add/remove events have no proven conversion.
  EXPECT_THAT(ro->Price(DpSgdEvent(1, 0.01, 10), AccountantKind::kRdp,
                        Relation::kAddRemove)
                  .status(),
              StatusIs(absl::StatusCode::kFailedPrecondition));
  // Poisson sampling cannot be declared replace-one at all.
  EXPECT_THAT(ro->Price(DpSgdEvent(1, 0.01, 10), AccountantKind::kRdp,
                        Relation::kReplaceOne)
                  .status(),
              StatusIs(absl::StatusCode::kFailedPrecondition));
  // Group privacy for (eps, delta).
  ASSERT_OK_AND_ASSIGN(
      DpEvent g,
      ConvertToRelation(DpEvent::EpsilonDelta(0.5, 1e-7), Relation::kAddRemove,
                        Relation::kReplaceOne));
  EXPECT_DOUBLE_EQ(g.epsilon(), 1.0);
  EXPECT_DOUBLE_EQ(g.delta(), (1 + std::exp(0.5)) * 1e-7);
}

// Piecewise-affine's l-infinity offset relation is never mixed with the others
// (docs/architecture.md, invariant "one neighbouring relation per dataset"):
// its pure events are charged as is to its datasets, and
// nothing converts to or from it.
TEST(RelationTest, LinfOffsetsStandsAlone) {
  for (FilterKind kind : {FilterKind::kRdp, FilterKind::kBasic}) {
    auto linf = MakeFilter(2.0, 0, kind, Relation::kLinfOffsets);
    ASSERT_OK_AND_ASSIGN(
        PricedCharge c,
        linf->Price(DpEvent::EpsilonDelta(0.5, 0), AccountantKind::kRdp,
                    Relation::kLinfOffsets));
    EXPECT_EQ(c.epsilon, 0.5);
    EXPECT_EQ(c.delta, 0);
    // Four charges of 0.5 fill a budget of 2 exactly; a fifth does not fit.
    std::vector<std::string> blobs;
    for (int i = 0; i < 4; ++i) {
      EXPECT_OK(linf->Admit(blobs, c.cost_blob));
      blobs.push_back(c.cost_blob);
    }
    EXPECT_THAT(linf->Admit(blobs, c.cost_blob),
                StatusIs(absl::StatusCode::kResourceExhausted));
    for (Relation other : {Relation::kAddRemove, Relation::kReplaceOne}) {
      EXPECT_THAT(linf->Price(DpEvent::EpsilonDelta(0.5, 0),
                              AccountantKind::kRdp, other)
                      .status(),
                  StatusIs(absl::StatusCode::kFailedPrecondition));
      auto plain = MakeFilter(2.0, 0, kind, other);
      EXPECT_THAT(plain
                      ->Price(DpEvent::Exponential(0.5), AccountantKind::kRdp,
                              Relation::kLinfOffsets)
                      .status(),
                  StatusIs(absl::StatusCode::kFailedPrecondition));
    }
  }
}

// pa_subgradient's charge, ExponentialMechanisms(1, 100), on a max-affine
// dataset: basic composition charges exactly epsilon 1 (pure), the RDP filter
// its zCDP curve alpha / 800, shown at the dataset's delta by the conversion
// the accountant uses (minimum at alpha = 63, written out here).
TEST(RelationTest, ExponentialMechanismsUnderEachFilter) {
  const DpEvent e = DpEvent::ExponentialMechanisms(1, 100);
  auto basic = MakeFilter(3.0, 0, FilterKind::kBasic, Relation::kLinfOffsets);
  ASSERT_OK_AND_ASSIGN(PricedCharge b, basic->Price(e, AccountantKind::kRdp,
                                                    Relation::kLinfOffsets));
  EXPECT_EQ(b.epsilon, 1);
  EXPECT_EQ(b.delta, 0);
  std::vector<std::string> blobs;
  for (int i = 0; i < 3; ++i) {
    EXPECT_OK(basic->Admit(blobs, b.cost_blob));
    blobs.push_back(b.cost_blob);
  }
  EXPECT_THAT(basic->Admit(blobs, b.cost_blob),
              StatusIs(absl::StatusCode::kResourceExhausted));

  auto rdp = MakeFilter(1.0, 1e-6, FilterKind::kRdp, Relation::kLinfOffsets);
  ASSERT_OK_AND_ASSIGN(PricedCharge r, rdp->Price(e, AccountantKind::kRdp,
                                                  Relation::kLinfOffsets));
  const double a = 63;
  const double hand =
      a / 800 + std::log1p(-1 / a) - std::log(1e-6 * a) / (a - 1);  // 0.21876
  EXPECT_GE(r.epsilon, hand);  // rounded up to 1e-12
  EXPECT_NEAR(r.epsilon, hand, 2e-12);
  EXPECT_LT(r.epsilon, 1);
  EXPECT_EQ(r.delta, 1e-6);
  // Budget (1, 1e-6): a pure epsilon-1 charge fills it, while 13 of these
  // fit: at alpha = 28 the order's budget is
  // 1 - log(1 - 1/28) + log(1e-6 / 157 * 28) / 27 = 0.46083 (157 orders with
  // inf), 13.17 charges of 28 / 800.
  ASSERT_OK_AND_ASSIGN(
      PricedCharge pure,
      rdp->Price(DpEvent::EpsilonDelta(1, 0), AccountantKind::kRdp,
                 Relation::kLinfOffsets));
  EXPECT_OK(rdp->Admit({}, pure.cost_blob));
  EXPECT_THAT(rdp->Admit({pure.cost_blob}, pure.cost_blob),
              StatusIs(absl::StatusCode::kResourceExhausted));
  blobs.clear();
  for (int i = 0; i < 13; ++i) {
    EXPECT_OK(rdp->Admit(blobs, r.cost_blob)) << i;
    blobs.push_back(r.cost_blob);
  }
  EXPECT_THAT(rdp->Admit(blobs, r.cost_blob),
              StatusIs(absl::StatusCode::kResourceExhausted));
  // The PLD accountant's display (the shares' randomized-response pairs
  // composed) is sound and never above the pure epsilon.
  ASSERT_OK_AND_ASSIGN(PricedCharge p, rdp->Price(e, AccountantKind::kPld,
                                                  Relation::kLinfOffsets));
  EXPECT_LE(p.epsilon, 1);
  EXPECT_EQ(p.accountant, "pld");
}

TEST(RelationTest, Names) {
  EXPECT_EQ(RelationName(Relation::kReplaceOne), "replace_one");
  EXPECT_EQ(RelationName(Relation::kLinfOffsets), "linf_offsets");
  ASSERT_OK_AND_ASSIGN(Relation linf, ParseRelation("linf_offsets"));
  EXPECT_EQ(linf, Relation::kLinfOffsets);
  ASSERT_OK_AND_ASSIGN(Relation r, ParseRelation("add_remove"));
  EXPECT_EQ(r, Relation::kAddRemove);
  EXPECT_THAT(ParseRelation("x").status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace dpopt::privacy
