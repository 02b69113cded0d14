// Property tests of the accountants: monotonicity of epsilon, k-fold
// self-composition costs k times one fold (RDP) for every event type, and
// PLD <= RDP.
#include <cmath>
#include <string>
#include <tuple>
#include <vector>

#include "core/privacy/accountant.h"
#include "core/privacy/dp_sgd_accounting.h"
#include "core/privacy/rdp.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/common/status_matchers.h"

namespace dpopt::privacy {
namespace {

double Eps(const DpEvent& e, double delta, AccountantKind kind) {
  auto r = ComputeEpsilon(e, delta, kind);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? r->epsilon : -1;
}

class MonotonicityTest : public ::testing::TestWithParam<AccountantKind> {};

TEST_P(MonotonicityTest, EpsilonDecreasesInSigmaIncreasesInQAndSteps) {
  const AccountantKind kind = GetParam();
  const double delta = 1e-6;
  double prev = std::numeric_limits<double>::infinity();
  for (double z : {0.7, 0.8, 1.0, 1.5, 2.5, 5.0}) {
    const double e = Eps(DpSgdEvent(z, 0.01, 500), delta, kind);
    EXPECT_LT(e, prev) << "z " << z;
    prev = e;
  }
  prev = 0;
  for (double q : {0.001, 0.005, 0.01, 0.05, 0.2, 1.0}) {
    const double e = Eps(DpSgdEvent(1.2, q, 500), delta, kind);
    EXPECT_GT(e, prev) << "q " << q;
    prev = e;
  }
  prev = 0;
  for (int64_t t : {1, 10, 100, 1000, 5000}) {
    const double e = Eps(DpSgdEvent(1.2, 0.01, t), delta, kind);
    EXPECT_GT(e, prev) << "steps " << t;
    prev = e;
  }
  // And in delta: more delta, less epsilon.
  prev = std::numeric_limits<double>::infinity();
  for (double d : {1e-10, 1e-8, 1e-6, 1e-4, 1e-2}) {
    const double e = Eps(DpSgdEvent(1.2, 0.01, 500), d, kind);
    EXPECT_LT(e, prev) << "delta " << d;
    EXPECT_GE(e, 0);
    prev = e;
  }
}

INSTANTIATE_TEST_SUITE_P(Accountants, MonotonicityTest,
                         ::testing::Values(AccountantKind::kRdp,
                                           AccountantKind::kPld),
                         [](const auto& info) {
                           return AccountantName(info.param);
                         });

struct NamedEvent {
  std::string name;
  DpEvent event;
};

class SelfCompositionTest : public ::testing::TestWithParam<NamedEvent> {};

TEST_P(SelfCompositionTest, KFoldCostsKTimesOneFold) {
  std::vector<double> orders = DefaultRdpOrders();
  orders.push_back(std::numeric_limits<double>::infinity());
  const DpEvent& one = GetParam().event;
  ASSERT_OK_AND_ASSIGN(std::vector<double> r1, ComputeRdp(one, orders));
  for (int64_t k : {2, 7, 1000}) {
    ASSERT_OK_AND_ASSIGN(std::vector<double> rk,
                         ComputeRdp(DpEvent::SelfComposed(k, one), orders));
    // Composed of k copies is the same as SelfComposed(k).
    ASSERT_OK_AND_ASSIGN(std::vector<double> rc,
                         ComputeRdp(DpEvent::Composed(std::vector<DpEvent>(
                                        std::min<int64_t>(k, 7), one)),
                                    orders));
    if (k > 7) rc = rk;  // Composed checked for small k only (speed)
    for (size_t i = 0; i < orders.size(); ++i) {
      const double expected = static_cast<double>(k) * r1[i];
      if (std::isinf(expected)) {
        EXPECT_TRUE(std::isinf(rk[i]));
        EXPECT_TRUE(std::isinf(rc[i]));
      } else {
        EXPECT_NEAR(rk[i], expected, 1e-12 * expected) << orders[i];
        EXPECT_NEAR(rc[i], expected, 1e-9 * expected) << orders[i];
      }
    }
  }
  // Zero-fold is free.
  ASSERT_OK_AND_ASSIGN(std::vector<double> r0,
                       ComputeRdp(DpEvent::SelfComposed(0, one), orders));
  for (double v : r0) EXPECT_EQ(v, 0);
}

INSTANTIATE_TEST_SUITE_P(
    EveryEventType, SelfCompositionTest,
    ::testing::Values(
        NamedEvent{"Gaussian", DpEvent::Gaussian(1.3)},
        NamedEvent{"Laplace", DpEvent::Laplace(2)},
        NamedEvent{"DiscreteGaussian",
                   DpEvent::DiscreteGaussian(1.3, 1048576, 50)},
        NamedEvent{"DiscreteLaplace", DpEvent::DiscreteLaplace(3)},
        NamedEvent{"Exponential", DpEvent::Exponential(0.2)},
        NamedEvent{"SparseVector", DpEvent::SparseVector(0.4)},
        NamedEvent{"PureEpsilonDelta", DpEvent::EpsilonDelta(0.3, 0)},
        NamedEvent{"PoissonSampledGaussian",
                   DpEvent::PoissonSampled(0.02, DpEvent::Gaussian(1.1))},
        NamedEvent{"PoissonSampledLaplace",
                   DpEvent::PoissonSampled(0.05, DpEvent::Laplace(1))},
        NamedEvent{
            "SampledWithoutReplacement",
            DpEvent::SampledWithoutReplacement(1000, 10, DpEvent::Gaussian(2))},
        NamedEvent{"Composed", DpEvent::Composed({DpEvent::Gaussian(3),
                                                  DpEvent::Exponential(0.1)})},
        NamedEvent{"NoOp", DpEvent::NoOp()}),
    [](const auto& info) { return info.param.name; });

TEST(PldVersusRdpTest, PldNeverAboveRdpForDpSgd) {
  for (double z : {0.8, 1.5, 3.0}) {
    for (double q : {0.001, 0.01, 0.1}) {
      for (int64_t t : {10, 3000}) {
        const DpEvent e = DpSgdEvent(z, q, t);
        EXPECT_LE(Eps(e, 1e-6, AccountantKind::kPld),
                  Eps(e, 1e-6, AccountantKind::kRdp))
            << z << " " << q << " " << t;
      }
    }
  }
}

}  // namespace
}  // namespace dpopt::privacy
