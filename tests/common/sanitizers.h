// Whether this test binary is built with AddressSanitizer (gcc defines
// __SANITIZE_ADDRESS__, clang answers __has_feature). Tests use it to do
// fewer repetitions of the same code path under the sanitizer, where each
// one costs several times more, and to skip checks that would measure the
// sanitizer (resident memory, run times); the ordinary build keeps the
// full counts and checks.
#ifndef DPOPT_TESTS_COMMON_SANITIZERS_H_
#define DPOPT_TESTS_COMMON_SANITIZERS_H_

namespace dpopt::testing {

#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool kUnderAddressSanitizer = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
inline constexpr bool kUnderAddressSanitizer = true;
#else
inline constexpr bool kUnderAddressSanitizer = false;
#endif
#else
inline constexpr bool kUnderAddressSanitizer = false;
#endif

}  // namespace dpopt::testing

#endif  // DPOPT_TESTS_COMMON_SANITIZERS_H_
