#include "core/jobs/job_runner.h"

#include <atomic>
#include <string>
#include <vector>

#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "core/jobs/job_callback.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/common/status_matchers.h"

namespace dpopt::jobs {
namespace {

using ::dpopt::testing::StatusIs;
using ::testing::HasSubstr;

std::unique_ptr<JobRunner> MakeRunner(int workers, int capacity) {
  auto r = JobRunner::Create({workers, capacity});
  EXPECT_OK(r);
  return *std::move(r);
}

TEST(JobRunnerTest, OptionsValidate) {
  EXPECT_OK(JobRunner::Options{}.Validate());
  EXPECT_THAT(JobRunner::Create({0, 4}),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(JobRunner::Create({1, 0}),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(JobRunnerTest, RunsSubmittedWork) {
  auto runner = MakeRunner(2, 8);
  std::atomic<int> done{0};
  std::atomic<int> cancelled{0};
  absl::Notification all_done;
  for (int i = 0; i < 8; ++i) {
    ASSERT_OK_AND_ASSIGN(JobRunner::Ticket t, runner->Reserve());
    ASSERT_OK(runner->Submit(std::move(t), "job" + std::to_string(i),
                             [&](const CancellationToken& token) {
                               if (token.cancelled()) ++cancelled;
                               if (++done == 8) all_done.Notify();
                             }));
  }
  all_done.WaitForNotification();
  runner->Shutdown();
  EXPECT_EQ(done.load(), 8);
  EXPECT_EQ(cancelled.load(), 0);
}

// Bounded queue: with one busy worker, capacity 2 admits exactly two more
// (reserved or queued) jobs; a third Reserve fails without side effects, and
// a ticket released unused frees its slot.
TEST(JobRunnerTest, BoundedQueueAndTicketRelease) {
  auto runner = MakeRunner(1, 2);
  absl::Notification started, release;
  ASSERT_OK_AND_ASSIGN(JobRunner::Ticket t0, runner->Reserve());
  ASSERT_OK(
      runner->Submit(std::move(t0), "busy", [&](const CancellationToken&) {
        started.Notify();
        release.WaitForNotification();
      }));
  started.WaitForNotification();
  EXPECT_EQ(runner->running(), 1);

  ASSERT_OK_AND_ASSIGN(JobRunner::Ticket t1, runner->Reserve());
  {
    ASSERT_OK_AND_ASSIGN(JobRunner::Ticket t2, runner->Reserve());
    EXPECT_EQ(runner->reserved(), 2);
    EXPECT_THAT(runner->Reserve(),
                StatusIs(absl::StatusCode::kResourceExhausted,
                         HasSubstr("job queue full")));
  }  // t2 dropped unused: its slot is free again.
  EXPECT_EQ(runner->reserved(), 1);
  ASSERT_OK_AND_ASSIGN(JobRunner::Ticket t3, runner->Reserve());
  ASSERT_OK(
      runner->Submit(std::move(t1), "a", [](const CancellationToken&) {}));
  EXPECT_EQ(runner->queued(), 1);
  EXPECT_EQ(runner->reserved(), 1);
  // Queued jobs count against the capacity too.
  EXPECT_THAT(runner->Reserve(),
              StatusIs(absl::StatusCode::kResourceExhausted));
  // Duplicate ids are refused and the slot is freed.
  EXPECT_THAT(
      runner->Submit(std::move(t3), "a", [](const CancellationToken&) {}),
      StatusIs(absl::StatusCode::kAlreadyExists));
  EXPECT_EQ(runner->reserved(), 0);
  // Invalid ticket.
  EXPECT_THAT(
      runner->Submit(JobRunner::Ticket(), "b", [](const CancellationToken&) {}),
      StatusIs(absl::StatusCode::kInvalidArgument));
  release.Notify();
  runner->Shutdown();
  EXPECT_EQ(runner->queued(), 0);
  EXPECT_EQ(runner->running(), 0);
}

// Cancel a running job: the token flips and the job's loop (here polling the
// token like the solve loop's callback does) stops. Cancel a queued job: it
// still runs, with the token already cancelled.
TEST(JobRunnerTest, CancelRunningAndQueued) {
  auto runner = MakeRunner(1, 4);
  absl::Notification started;
  std::atomic<int> iterations{0};
  std::atomic<bool> running_saw_cancel{false};
  ASSERT_OK_AND_ASSIGN(JobRunner::Ticket t0, runner->Reserve());
  ASSERT_OK(runner->Submit(std::move(t0), "running",
                           [&](const CancellationToken& token) {
                             started.Notify();
                             while (!token.cancelled()) {
                               ++iterations;
                               absl::SleepFor(absl::Milliseconds(1));
                             }
                             running_saw_cancel = true;
                           }));
  started.WaitForNotification();
  std::atomic<bool> queued_ran{false}, queued_cancelled{false};
  ASSERT_OK_AND_ASSIGN(JobRunner::Ticket t1, runner->Reserve());
  ASSERT_OK(runner->Submit(std::move(t1), "queued",
                           [&](const CancellationToken& token) {
                             queued_ran = true;
                             queued_cancelled = token.cancelled();
                           }));
  EXPECT_TRUE(runner->Cancel("queued"));
  EXPECT_TRUE(runner->Cancel("running"));
  EXPECT_FALSE(runner->Cancel("unknown"));
  runner->Shutdown();
  EXPECT_TRUE(running_saw_cancel);
  EXPECT_TRUE(queued_ran);
  EXPECT_TRUE(queued_cancelled);
  EXPECT_FALSE(runner->Cancel("running"));  // finished
}

// Shutdown stops accepting, cancels running jobs and joins every worker.
TEST(JobRunnerTest, ShutdownCancelsAndJoins) {
  auto runner = MakeRunner(2, 8);
  std::atomic<int> finished{0};
  absl::Notification both_started;
  std::atomic<int> started{0};
  for (int i = 0; i < 2; ++i) {
    ASSERT_OK_AND_ASSIGN(JobRunner::Ticket t, runner->Reserve());
    ASSERT_OK(runner->Submit(std::move(t), "long" + std::to_string(i),
                             [&](const CancellationToken& token) {
                               if (++started == 2) both_started.Notify();
                               while (!token.cancelled()) {
                                 absl::SleepFor(absl::Milliseconds(1));
                               }
                               ++finished;
                             }));
  }
  both_started.WaitForNotification();
  ASSERT_OK_AND_ASSIGN(JobRunner::Ticket pending, runner->Reserve());
  runner->Shutdown();  // returns only after both jobs finished
  EXPECT_EQ(finished.load(), 2);
  EXPECT_THAT(runner->Reserve(),
              StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_THAT(runner->Submit(std::move(pending), "late",
                             [](const CancellationToken&) {}),
              StatusIs(absl::StatusCode::kFailedPrecondition));
  runner->Shutdown();  // idempotent
}

TEST(JobRunnerTest, DestructorShutsDown) {
  std::atomic<bool> ran{false};
  {
    auto runner = MakeRunner(1, 1);
    ASSERT_OK_AND_ASSIGN(JobRunner::Ticket t, runner->Reserve());
    ASSERT_OK(runner->Submit(std::move(t), "j",
                             [&](const CancellationToken&) { ran = true; }));
  }
  EXPECT_TRUE(ran);
}

// Many threads reserving concurrently never exceed the capacity.
TEST(JobRunnerTest, ConcurrentReserveNeverExceedsCapacity) {
  auto runner = MakeRunner(1, 5);
  std::atomic<int> granted{0};
  std::vector<JobRunner::Ticket> tickets[8];
  std::vector<std::thread> threads;
  for (int k = 0; k < 8; ++k) {
    threads.emplace_back([&, k] {
      for (int i = 0; i < 10; ++i) {
        auto t = runner->Reserve();
        if (t.ok()) {
          ++granted;
          tickets[k].push_back(*std::move(t));
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(granted.load(), 5);
  EXPECT_EQ(runner->reserved(), 5);
}

TEST(JobIterationCallbackTest, ForwardsAndStopsOnCancel) {
  CancellationToken token;
  std::vector<int64_t> seen;
  JobIterationCallback cb(
      token, [&](const optim::IterationSummary& s) { seen.push_back(s.step); });
  const Eigen::VectorXd w = Eigen::VectorXd::Zero(2);
  EXPECT_TRUE(cb.OnIteration({1, 10, w, 0.5}));
  token.Cancel();
  EXPECT_FALSE(cb.OnIteration({2, 10, w, 0.5}));
  EXPECT_EQ(seen, (std::vector<int64_t>{1, 2}));
}

}  // namespace
}  // namespace dpopt::jobs
