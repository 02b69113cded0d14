#include "core/privacy/dp_event.h"

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
