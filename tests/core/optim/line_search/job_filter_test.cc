// Job-internal filter: never over budget, refusals without side effects,
// one charge per access, and CHEB driven adversarially against it.
#include "core/optim/line_search/job_filter.h"

#include <cmath>
#include <limits>
#include <vector>

#include "core/optim/line_search/cheb.h"
#include "core/optim/line_search/svt_line_search.h"
#include "core/privacy/accountant.h"
#include "core/privacy/rdp.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/common/status_matchers.h"

namespace dpopt::optim::line_search {
namespace {

using ::dpopt::testing::StatusIs;
using privacy::DpEvent;

DpEvent Grad(double rho, double q) {
  return DpEvent::PoissonSampled(q, DpEvent::Gaussian(1 / std::sqrt(2 * rho)));
}
DpEvent Svt(double eps, double q) {
  return DpEvent::PoissonSampled(q, DpEvent::SparseVector(eps));
}
DpEvent Reservation(int t, double rho, double eps, double q) {
  return DpEvent::SelfComposed(t,
                               DpEvent::Composed({Grad(rho, q), Svt(eps, q)}));
}

void ExpectWithin(const JobPrivacyFilter& f) {
  for (size_t i = 0; i < f.orders().size(); ++i) {
    EXPECT_LE(f.spent_curve()[i], f.reservation_curve()[i])
        << "order " << f.orders()[i];
  }
}

TEST(JobPrivacyFilterTest, AdmitsExactlyThePlannedIterations) {
  const DpEvent r = Reservation(20, 1e-3, 0.04, 0.1);
  ASSERT_OK_AND_ASSIGN(auto f, JobPrivacyFilter::Create(r));
  int admitted = 0;
  while (f->Charge(Grad(1e-3, 0.1)).ok() && f->Charge(Svt(0.04, 0.1)).ok()) {
    ++admitted;
  }
  // 20 iterations fit (up to the 1e-9 safety margin, which the 20th might
  // hit at equality: then 19).
  EXPECT_GE(admitted, 19);
  EXPECT_LE(admitted, 20);
  ExpectWithin(*f);
}

TEST(JobPrivacyFilterTest, RefusalChangesNothing) {
  ASSERT_OK_AND_ASSIGN(auto f,
                       JobPrivacyFilter::Create(Reservation(2, 1e-3, 0.04, 1)));
  ASSERT_OK(f->Charge(Grad(1e-3, 1)));
  const std::vector<double> before = f->spent_curve();
  const DpEvent spent_before = f->Spent();
  EXPECT_THAT(f->Charge(Grad(1.0, 1)),
              StatusIs(absl::StatusCode::kResourceExhausted));
  EXPECT_EQ(f->spent_curve(), before);
  EXPECT_EQ(f->Spent(), spent_before);
  EXPECT_EQ(f->charges(), 1);
  EXPECT_THAT(f->CanAfford({Grad(1e-3, 1), Svt(0.04, 1), Grad(1e-3, 1),
                            Svt(0.04, 1), Grad(1e-3, 1)}),
              StatusIs(absl::StatusCode::kResourceExhausted));
  EXPECT_OK(f->CanAfford({Svt(0.04, 1), Grad(1e-3, 1)}));
}

// The adversary: every line search fails, so CHEB runs after every search and
// always takes the most expensive branch sequence it can (alternating
// raises of rho_grad and eps_BT by 1.3). The filter must stop the job with
// the spend inside the reservation at every order, and the composition of
// what was charged must replay to the same curve.
TEST(JobPrivacyFilterTest, AdversarialChebNeverOverspends) {
  const double epsilon = 0.8, delta = 1e-8, q = 0.1;
  const double rho0 = 2e-3, eps0 = std::sqrt(2 * rho0);
  const DpEvent r = Reservation(50, rho0, eps0, q);
  ASSERT_OK_AND_ASSIGN(
      auto reserved,
      privacy::ComputeEpsilon(r, delta, privacy::AccountantKind::kRdp));
  ASSERT_OK_AND_ASSIGN(auto f, JobPrivacyFilter::Create(r));
  double rho = rho0, eps = eps0;
  int gradients = 0, searches = 0, chebs = 0;
  ChebOptions o;
  Eigen::VectorXd g(2), g2(2);
  bool stopped = false;
  for (int t = 0; t < 100000 && !stopped; ++t) {
    if (!f->CanAfford({Grad(rho, q), Svt(eps, q)}).ok()) break;
    ASSERT_OK(f->Charge(Grad(rho, q)));
    ++gradients;
    while (true) {
      absl::Status s = f->Charge(Svt(eps, q));
      if (!s.ok()) {
        ASSERT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
        stopped = true;
        break;
      }
      ++searches;
      // Search "failed": CHEB.
      if (!f->CanAfford({Grad(rho, q), Svt(eps, q)}).ok()) {
        stopped = true;
        break;
      }
      ASSERT_OK(f->Charge(Grad(rho, q)));
      ++gradients;
      g << 1, 0;
      // Alternate the branches: opposite direction (raise rho), then nearly
      // the same direction (raise eps_BT).
      if (chebs++ % 2 == 0) {
        g2 << -1, 0.1;
      } else {
        g2 << 1, 0.001;
      }
      Cheb(g2, 60, o, &g, &rho, &eps);
    }
  }
  EXPECT_TRUE(stopped);
  EXPECT_GT(rho, rho0);
  EXPECT_GT(eps, eps0);
  EXPECT_EQ(f->charges(), gradients + searches);
  ExpectWithin(*f);
  // Replay: the recorded composition prices to the filter's running sum.
  ASSERT_OK_AND_ASSIGN(std::vector<double> replay,
                       privacy::ComputeRdp(f->Spent(), f->orders()));
  for (size_t i = 0; i < replay.size(); ++i) {
    if (std::isinf(replay[i])) {
      EXPECT_TRUE(std::isinf(f->spent_curve()[i]));
      continue;
    }
    EXPECT_NEAR(replay[i], f->spent_curve()[i], 1e-12 * replay[i] + 1e-300);
  }
  // The ex-post epsilon of the spend is within the reservation's.
  ASSERT_OK_AND_ASSIGN(auto spent,
                       privacy::ComputeEpsilon(f->Spent(), delta,
                                               privacy::AccountantKind::kRdp));
  EXPECT_LE(spent.epsilon, reserved.epsilon);
  EXPECT_LE(reserved.epsilon, epsilon * 1.5);  // sanity of the setup
}

// Spent never decreases; every order stays within its budget after every
// charge; the reported epsilon stays within the reservation's; and the
// conversion (Mironov 2017 Prop. 3, the paper's Proposition 1): after every
// charge of an adaptive sequence, the accountant's epsilon of the spend is
// at most min_alpha [spent(alpha) + log(K / delta) / (alpha - 1)] with K = 1
// (the job filter is an all-orders filter, so no union over orders is needed
// inside the job; the ledger's own any-order filter splits delta over its
// orders, K = |Lambda|, tested in tests/core/privacy) and is monotone in the
// spend.
TEST(JobPrivacyFilterTest, SpendIsMonotoneAndConvertsWithinTheSpecBound) {
  const double delta = 1e-8, q = 0.1;
  const DpEvent r = Reservation(30, 2e-3, 0.06, q);
  ASSERT_OK_AND_ASSIGN(
      auto reserved,
      privacy::ComputeEpsilon(r, delta, privacy::AccountantKind::kRdp));
  ASSERT_OK_AND_ASSIGN(auto f, JobPrivacyFilter::Create(r));
  std::vector<double> prev(f->orders().size(), 0.0);
  double prev_eps = 0;
  double rho = 2e-3, eps = 0.06;
  int admitted = 0;
  for (int k = 0; k < 1000; ++k) {
    // A data-dependent-looking pattern: gradients, searches, growing budgets.
    const DpEvent e = k % 2 == 1 ? Svt(eps, q) : Grad(rho, q);
    if (!f->Charge(e).ok()) break;
    ++admitted;
    if (k % 13 == 12) rho *= 1.3;
    if (k % 17 == 16) eps *= 1.3;
    const std::vector<double>& spent = f->spent_curve();
    double mironov = std::numeric_limits<double>::infinity();
    for (size_t i = 0; i < spent.size(); ++i) {
      EXPECT_GE(spent[i], prev[i]) << "order " << f->orders()[i];
      EXPECT_LE(spent[i], f->reservation_curve()[i]);
      const double a = f->orders()[i];
      if (std::isfinite(a)) {
        mironov = std::min(mironov, spent[i] + std::log(1 / delta) / (a - 1));
      }
    }
    prev = spent;
    ASSERT_OK_AND_ASSIGN(
        auto rep, privacy::ComputeEpsilon(f->Spent(), delta,
                                          privacy::AccountantKind::kRdp));
    EXPECT_LE(rep.epsilon, mironov * (1 + 1e-9));
    EXPECT_GE(rep.epsilon, prev_eps * (1 - 1e-12));
    EXPECT_LE(rep.epsilon, reserved.epsilon * (1 + 1e-9));
    prev_eps = rep.epsilon;
  }
  EXPECT_GT(admitted, 10);
  EXPECT_LT(admitted, 1000);  // the filter did stop the sequence
}

TEST(JobPrivacyFilterTest, SpentFoldsRepeats) {
  ASSERT_OK_AND_ASSIGN(
      auto f, JobPrivacyFilter::Create(Reservation(10, 1e-3, 0.04, 1)));
  EXPECT_EQ(f->Spent(), DpEvent::NoOp());
  ASSERT_OK(f->Charge(Grad(1e-3, 1)));
  ASSERT_OK(f->Charge(Grad(1e-3, 1)));
  ASSERT_OK(f->Charge(Svt(0.04, 1)));
  EXPECT_EQ(f->Spent(),
            DpEvent::Composed(
                {DpEvent::SelfComposed(2, Grad(1e-3, 1)), Svt(0.04, 1)}));
}

}  // namespace
}  // namespace dpopt::optim::line_search
