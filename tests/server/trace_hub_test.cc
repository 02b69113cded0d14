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

// A point of `values` iterate values (8 bytes each on the wire).
v1::JobEvent BigTrace(int64_t step, int values) {
  v1::JobEvent e = Trace(step);
  for (int i = 0; i < values; ++i) e.mutable_trace()->add_iterate(i);
  return e;
}

TEST(TraceHubTest, AWatcherThatStopsReadingIsDroppedAndItsBufferFreed) {
  TraceHub::Options options;
  options.max_buffered_bytes_per_watcher = 1 << 20;
  ASSERT_TRUE(options.Validate().ok());
  TraceHub hub(options);
  auto slow = hub.Subscribe("j");
  auto reader = hub.Subscribe("j");
  int drops = 0;
  slow->OnDrop([&drops] { ++drops; });
  v1::JobEvent state;
  state.mutable_job()->set_id("j");
  hub.Publish("j", state);
  v1::JobEvent e;
  // 200 points of 8 KB: 1.6 MB, more than the 1 MiB a watcher may hold.
  for (int i = 1; i <= 200; ++i) {
    hub.Publish("j", BigTrace(i, 1000));
    EXPECT_LE(slow->buffered_bytes(), options.max_buffered_bytes_per_watcher);
    // The other watcher keeps up and loses nothing.
    ASSERT_TRUE(reader->Next(&e, absl::Milliseconds(10)));
  }
  EXPECT_TRUE(slow->dropped());
  EXPECT_FALSE(reader->dropped());
  EXPECT_EQ(drops, 1);
  EXPECT_EQ(hub.dropped_watchers(), 1);
  EXPECT_EQ(slow->buffered_bytes(), 0);
  // A dropped watcher gets nothing more, not even what was queued before.
  EXPECT_FALSE(slow->Next(&e, absl::Milliseconds(10)));
  // A callback set after the drop runs at once.
  slow->OnDrop([&drops] { ++drops; });
  EXPECT_EQ(drops, 2);
  // A new subscription starts empty.
  auto again = hub.Subscribe("j");
  hub.Publish("j", Trace(201));
  ASSERT_TRUE(again->Next(&e, absl::Milliseconds(10)));
  EXPECT_EQ(e.trace().step(), 201);
}

TEST(TraceHubTest, OptionsAreValidated) {
  TraceHub::Options options;
  EXPECT_TRUE(options.Validate().ok());
  options.max_buffered_bytes_per_watcher = 1000;
  EXPECT_FALSE(options.Validate().ok());
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
