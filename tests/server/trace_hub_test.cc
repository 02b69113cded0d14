#include "server/trace_hub.h"

#include <thread>

#include "gtest/gtest.h"

namespace dpopt::server {
namespace {

v1::JobEvent Trace(int64_t step) {
  v1::JobEvent e;
  e.mutable_trace()->set_step(step);
  return e;
}

TEST(TraceHubTest, DeliversOnlyToSubscribersOfTheJobInOrder) {
  TraceHub hub;
  auto a = hub.Subscribe("a");
  auto b = hub.Subscribe("b");
  hub.Publish("a", Trace(1));
  hub.Publish("a", Trace(2));
  v1::JobEvent e;
  ASSERT_TRUE(a->Next(&e, absl::Milliseconds(10)));
  EXPECT_EQ(e.trace().step(), 1);
  ASSERT_TRUE(a->Next(&e, absl::Milliseconds(10)));
  EXPECT_EQ(e.trace().step(), 2);
  EXPECT_FALSE(a->Next(&e, absl::Milliseconds(10)));
  EXPECT_FALSE(b->Next(&e, absl::Milliseconds(10)));
  hub.Unsubscribe("a", a);
  hub.Publish("a", Trace(3));
  EXPECT_FALSE(a->Next(&e, absl::Milliseconds(10)));
}

TEST(TraceHubTest, SlowWatchersDropOldTracePointsButNeverStateChanges) {
  TraceHub hub;
  auto s = hub.Subscribe("j");
  v1::JobEvent state;
  state.mutable_job()->set_id("j");
  hub.Publish("j", state);
  for (size_t i = 0; i < TraceHub::kMaxQueued + 5; ++i) {
    hub.Publish("j", Trace(static_cast<int64_t>(i)));
  }
  v1::JobEvent e;
  ASSERT_TRUE(s->Next(&e, absl::Milliseconds(10)));
  EXPECT_TRUE(e.has_job());  // the state change survived
  ASSERT_TRUE(s->Next(&e, absl::Milliseconds(10)));
  EXPECT_GT(e.trace().step(), 0);  // the oldest trace points were dropped
}

TEST(TraceHubTest, ShutdownWakesWaitingWatchers) {
  TraceHub hub;
  auto s = hub.Subscribe("j");
  std::thread t([&] {
    absl::SleepFor(absl::Milliseconds(50));
    hub.Shutdown();
  });
  v1::JobEvent e;
  EXPECT_FALSE(s->Next(&e, absl::Seconds(30)));
  EXPECT_TRUE(s->closed());
  t.join();
  EXPECT_TRUE(hub.Subscribe("k")->closed());
}

}  // namespace
}  // namespace dpopt::server
