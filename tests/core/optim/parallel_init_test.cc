// A thread count set during static initialization (as dpopt_bench does from
// DPOPT_BENCH_THREADS) is kept: parallel.cc's own state is constant-
// initialized, so its initialization cannot run later and reset it.
#include <cstdlib>

#include "core/optim/parallel.h"
#include "gtest/gtest.h"

namespace dpopt::optim {
namespace {

constexpr int kThreads = 3;  // neither the default (1 to 4 cores) nor 1

const bool kSetAtStaticInit = [] {
  ParallelOptions o;
  o.threads = kThreads;
  if (!SetParallelOptions(o).ok()) std::abort();
  return true;
}();

TEST(ParallelInitTest, SettingMadeDuringStaticInitializationIsKept) {
  ASSERT_TRUE(kSetAtStaticInit);
  EXPECT_EQ(GetParallelOptions().threads, kThreads);
}

}  // namespace
}  // namespace dpopt::optim
