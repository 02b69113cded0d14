// gtest matchers for absl::Status / absl::StatusOr (Debian's Abseil has none).
//   EXPECT_OK(status_or_statusor);  ASSERT_OK(...);
//   ASSERT_OK_AND_ASSIGN(auto x, MakeX());
//   EXPECT_THAT(s, StatusIs(absl::StatusCode::kInvalidArgument));
//   EXPECT_THAT(s, StatusIs(absl::StatusCode::kNotFound, HasSubstr("adult")));
#ifndef DPOPT_TESTS_COMMON_STATUS_MATCHERS_H_
#define DPOPT_TESTS_COMMON_STATUS_MATCHERS_H_

#include <ostream>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dpopt::testing {

inline const absl::Status& GetStatus(const absl::Status& s) { return s; }
template <typename T>
const absl::Status& GetStatus(const absl::StatusOr<T>& s) {
  return s.status();
}

MATCHER_P2(StatusIsImpl, code, message_matcher, "") {
  const absl::Status& s = ::dpopt::testing::GetStatus(arg);
  *result_listener << "status is " << s.ToString();
  return s.code() == code &&
         ::testing::Matches(message_matcher)(std::string(s.message()));
}

template <typename M>
auto StatusIs(absl::StatusCode code, M message_matcher) {
  return StatusIsImpl(code, ::testing::Matcher<std::string>(message_matcher));
}
inline auto StatusIs(absl::StatusCode code) {
  return StatusIsImpl(code, ::testing::Matcher<std::string>(::testing::_));
}

}  // namespace dpopt::testing

#define EXPECT_OK(expr) \
  EXPECT_TRUE(::dpopt::testing::GetStatus(expr).ok()) \
      << ::dpopt::testing::GetStatus(expr).ToString()
#define ASSERT_OK(expr) \
  ASSERT_TRUE(::dpopt::testing::GetStatus(expr).ok()) \
      << ::dpopt::testing::GetStatus(expr).ToString()

#define DPOPT_TEST_CONCAT_INNER_(x, y) x##y
#define DPOPT_TEST_CONCAT_(x, y) DPOPT_TEST_CONCAT_INNER_(x, y)
#define ASSERT_OK_AND_ASSIGN(lhs, expr) \
  ASSERT_OK_AND_ASSIGN_IMPL_(DPOPT_TEST_CONCAT_(dpopt_sor_, __LINE__), lhs, expr)
#define ASSERT_OK_AND_ASSIGN_IMPL_(sor, lhs, expr)          \
  auto sor = (expr);                                         \
  ASSERT_TRUE(sor.ok()) << sor.status().ToString();          \
  lhs = std::move(sor).value()

#endif  // DPOPT_TESTS_COMMON_STATUS_MATCHERS_H_
