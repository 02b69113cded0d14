#include "core/privacy/dp_event.h"

#include <limits>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/common/status_matchers.h"

namespace dpopt::privacy {
namespace {

using ::dpopt::testing::StatusIs;
using ::testing::HasSubstr;

DpEvent EveryKind() {
  return DpEvent::Composed({
      DpEvent::NoOp(),
      DpEvent::Gaussian(1.1),
      DpEvent::Laplace(2.5),
      DpEvent::DiscreteGaussian(1.3, 1048576.5, 123),
      DpEvent::DiscreteLaplace(4),
      DpEvent::Exponential(0.25),
      DpEvent::ExponentialMechanisms(0.1 + 0.2, 100),
      DpEvent::SparseVector(0.5),
      DpEvent::EpsilonDelta(1, 1e-6),
      DpEvent::PoissonSampled(0.01, DpEvent::Gaussian(0.7)),
      DpEvent::SampledWithoutReplacement(1000, 10, DpEvent::Laplace(1)),
      DpEvent::SelfComposed(2000, DpEvent::Gaussian(3)),
      DpEvent::Composed({}),
  });
}

TEST(DpEventTest, JsonMatchesDocumentedForm) {
  DpEvent e = DpEvent::SelfComposed(
      2000, DpEvent::PoissonSampled(0.01, DpEvent::Gaussian(1.1)));
  EXPECT_EQ(e.ToJson(),
            "{\"self_composed\":{\"count\":2000,\"event\":"
            "{\"poisson_sampled\":{\"sampling_probability\":0.01,\"event\":"
            "{\"gaussian\":{\"noise_multiplier\":1.1}}}}}}");
}

TEST(DpEventTest, RoundTripsEveryKind) {
  DpEvent e = EveryKind();
  ASSERT_OK(e.Validate());
  ASSERT_OK_AND_ASSIGN(DpEvent back, DpEvent::FromJson(e.ToJson()));
  EXPECT_TRUE(back == e);
  EXPECT_EQ(back.ToJson(), e.ToJson());
  // Doubles survive exactly (shortest round-trip representation).
  ASSERT_OK_AND_ASSIGN(
      DpEvent g, DpEvent::FromJson(DpEvent::Gaussian(0.1 + 0.2).ToJson()));
  EXPECT_EQ(g.noise_multiplier(), 0.1 + 0.2);
}

TEST(DpEventTest, EqualityIsDeep) {
  EXPECT_TRUE(DpEvent() == DpEvent::NoOp());
  EXPECT_FALSE(DpEvent::Gaussian(1) == DpEvent::Laplace(1));
  EXPECT_FALSE(DpEvent::SelfComposed(2, DpEvent::Gaussian(1)) ==
               DpEvent::SelfComposed(2, DpEvent::Gaussian(1.5)));
  EXPECT_TRUE(DpEvent::SelfComposed(2, DpEvent::Gaussian(1)) ==
              DpEvent::SelfComposed(2, DpEvent::Gaussian(1)));
}

TEST(DpEventTest, ValidateRejectsBadParameters) {
  const std::vector<DpEvent> bad = {
      DpEvent::Gaussian(-1),
      DpEvent::Gaussian(std::numeric_limits<double>::quiet_NaN()),
      DpEvent::Laplace(std::numeric_limits<double>::infinity()),
      DpEvent::DiscreteGaussian(1, 0, 3),
      DpEvent::DiscreteGaussian(1, 10, 0),
      DpEvent::Exponential(-0.1),
      DpEvent::EpsilonDelta(1, 1.5),
      DpEvent::PoissonSampled(1.01, DpEvent::Gaussian(1)),
      DpEvent::PoissonSampled(0.5, DpEvent::Gaussian(-1)),
      DpEvent::SampledWithoutReplacement(10, 11, DpEvent::Gaussian(1)),
      DpEvent::SelfComposed(-1, DpEvent::Gaussian(1)),
      DpEvent::Composed({DpEvent::Gaussian(1), DpEvent::Laplace(-2)}),
  };
  for (const DpEvent& e : bad) {
    EXPECT_THAT(e.Validate(), StatusIs(absl::StatusCode::kInvalidArgument))
        << e.ToJson();
  }
}

// The Gaussian sparse vector (line-search family's Gaussian line search):
// stable JSON keys, exact round trip, and parameter ranges.
TEST(DpEventTest, GaussianSparseVectorJsonAndValidation) {
  const DpEvent e = DpEvent::GaussianSparseVector(1.5, 2.25, 15);
  EXPECT_EQ(e.kind(), DpEvent::Kind::kGaussianSparseVector);
  EXPECT_EQ(e.ToJson(),
            "{\"gaussian_sparse_vector\":{\"threshold_noise_multiplier\":1.5,"
            "\"query_noise_multiplier\":2.25,\"max_queries\":15}}");
  ASSERT_OK_AND_ASSIGN(DpEvent back, DpEvent::FromJson(e.ToJson()));
  EXPECT_EQ(back, e);
  const DpEvent odd = DpEvent::PoissonSampled(
      0.1, DpEvent::GaussianSparseVector(1.2247448713915890, 0.1 + 0.2, 7));
  ASSERT_OK_AND_ASSIGN(back, DpEvent::FromJson(odd.ToJson()));
  EXPECT_EQ(back, odd);
  EXPECT_OK(e.Validate());
  // Equality sees every parameter.
  EXPECT_FALSE(e == DpEvent::GaussianSparseVector(1.5, 2.25, 16));
  EXPECT_FALSE(e == DpEvent::GaussianSparseVector(1.5, 2.5, 15));
  EXPECT_FALSE(e == DpEvent::GaussianSparseVector(1.25, 2.25, 15));
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  for (const DpEvent& bad : {DpEvent::GaussianSparseVector(0, 1, 15),
                             DpEvent::GaussianSparseVector(1, 0, 15),
                             DpEvent::GaussianSparseVector(-1, 1, 15),
                             DpEvent::GaussianSparseVector(nan, 1, 15),
                             DpEvent::GaussianSparseVector(1, inf, 15),
                             DpEvent::GaussianSparseVector(1, 1, 0),
                             DpEvent::GaussianSparseVector(1, 1, -3),
                             DpEvent::GaussianSparseVector(1, 1, 1000001)}) {
    EXPECT_THAT(bad.Validate(), StatusIs(absl::StatusCode::kInvalidArgument))
        << bad.ToJson();
    EXPECT_THAT(DpEvent::FromJson(bad.ToJson()).status(),
                StatusIs(absl::StatusCode::kInvalidArgument));
  }
  // Strict keys and types.
  for (const char* j : {
           "{\"gaussian_sparse_vector\":{\"threshold_noise_multiplier\":1,"
           "\"query_noise_multiplier\":1}}",
           "{\"gaussian_sparse_vector\":{\"threshold_noise_multiplier\":1,"
           "\"query_noise_multiplier\":1,\"max_queries\":1.5}}",
           "{\"gaussian_sparse_vector\":{\"threshold_noise_multiplier\":1,"
           "\"query_noise_multiplier\":1,\"max_queries\":2,\"c\":1}}",
       }) {
    EXPECT_THAT(DpEvent::FromJson(j).status(),
                StatusIs(absl::StatusCode::kInvalidArgument))
        << j;
  }
}

// Composed exponential mechanisms (pa_subgradient's charge): stable JSON
// keys, exact round trip, parameter ranges, strict keys.
TEST(DpEventTest, ExponentialMechanismsJsonAndValidation) {
  const DpEvent e = DpEvent::ExponentialMechanisms(1, 100);
  EXPECT_EQ(e.kind(), DpEvent::Kind::kExponentialMechanisms);
  EXPECT_EQ(e.epsilon(), 1);
  EXPECT_EQ(e.count(), 100);
  EXPECT_EQ(e.ToJson(),
            "{\"exponential_mechanisms\":{\"epsilon\":1.0,\"count\":100}}");
  ASSERT_OK_AND_ASSIGN(DpEvent back, DpEvent::FromJson(e.ToJson()));
  EXPECT_EQ(back, e);
  EXPECT_OK(e.Validate());
  EXPECT_FALSE(e == DpEvent::ExponentialMechanisms(1, 99));
  EXPECT_FALSE(e == DpEvent::ExponentialMechanisms(0.5, 100));
  EXPECT_FALSE(e == DpEvent::Exponential(1));
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  for (const DpEvent& bad : {DpEvent::ExponentialMechanisms(-1, 10),
                             DpEvent::ExponentialMechanisms(nan, 10),
                             DpEvent::ExponentialMechanisms(inf, 10),
                             DpEvent::ExponentialMechanisms(1, 0),
                             DpEvent::ExponentialMechanisms(1, -5),
                             DpEvent::ExponentialMechanisms(1, 1000000001)}) {
    EXPECT_THAT(bad.Validate(), StatusIs(absl::StatusCode::kInvalidArgument))
        << bad.ToJson();
  }
  for (const char* j : {
           "{\"exponential_mechanisms\":{\"epsilon\":1}}",
           "{\"exponential_mechanisms\":{\"epsilon\":1,\"count\":2.5}}",
           "{\"exponential_mechanisms\":{\"epsilon\":1,\"count\":0}}",
           "{\"exponential_mechanisms\":{\"epsilon\":1,\"count\":2,"
           "\"delta\":0}}",
       }) {
    EXPECT_THAT(DpEvent::FromJson(j).status(),
                StatusIs(absl::StatusCode::kInvalidArgument))
        << j;
  }
}

TEST(DpEventTest, FromJsonRejectsMalformedInput) {
  const std::vector<std::string> bad = {
      "",
      "not json",
      "[]",
      "{}",
      "{\"gaussian\":{}}",
      "{\"gaussian\":{\"noise_multiplier\":\"1\"}}",
      "{\"gaussian\":{\"noise_multiplier\":1,\"extra\":2}}",
      "{\"gaussian\":{\"noise_multiplier\":-1}}",
      "{\"warp_drive\":{}}",
      "{\"gaussian\":{\"noise_multiplier\":1},\"laplace\":{\"noise_"
      "multiplier\":1}}",
      "{\"self_composed\":{\"count\":1.5,\"event\":{\"no_op\":{}}}}",
      "{\"self_composed\":{\"count\":18446744073709551615,\"event\":{\"no_op\":"
      "{}}}}",
      "{\"composed\":{\"events\":{}}}",
      "{\"gaussian\":{\"noise_multiplier\":null}}",
  };
  for (const std::string& s : bad) {
    EXPECT_THAT(DpEvent::FromJson(s).status(),
                StatusIs(absl::StatusCode::kInvalidArgument))
        << s;
  }
}

TEST(DpEventTest, FromJsonRejectsDeepNesting) {
  std::string s;
  for (int i = 0; i < 100; ++i)
    s += "{\"self_composed\":{\"count\":1,\"event\":";
  s += "{\"no_op\":{}}";
  for (int i = 0; i < 100; ++i) s += "}}";
  EXPECT_THAT(DpEvent::FromJson(s).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("deep")));
}

}  // namespace
}  // namespace dpopt::privacy
