// optim::StepReporter: the one path from an algorithm to its
// IterationCallback (trace points and stop questions).
#include "core/optim/step_reporter.h"

#include <vector>

#include "gtest/gtest.h"

namespace dpopt::optim {
namespace {

class Recorder final : public IterationCallback {
 public:
  std::vector<int64_t> steps;
  int questions = 0;
  bool stop_on_question = false;
  int64_t stop_after_step = -1;

 private:
  bool OnIteration(const IterationSummary& s) override {
    steps.push_back(s.step);
    EXPECT_EQ(s.total_steps, 10);
    return s.step != stop_after_step;
  }
  bool StopRequested() override {
    ++questions;
    return stop_on_question;
  }
};

TEST(StepReporterTest, ForwardsStepsAndStopsStickily) {
  Recorder rec;
  rec.stop_after_step = 3;
  StepReporter reporter(&rec, 10);
  const Eigen::VectorXd w = Eigen::VectorXd::Ones(2);
  EXPECT_TRUE(reporter.Report(1, w, 0.5));
  EXPECT_FALSE(reporter.StopRequested());
  EXPECT_TRUE(reporter.Report(2, w));
  EXPECT_FALSE(reporter.Report(3, w));
  EXPECT_TRUE(reporter.stopped());
  // Once stopped, nothing more reaches the callback.
  EXPECT_FALSE(reporter.Report(4, w));
  EXPECT_TRUE(reporter.StopRequested());
  EXPECT_EQ(rec.steps, (std::vector<int64_t>{1, 2, 3}));
  EXPECT_EQ(rec.questions, 1);
}

TEST(StepReporterTest, StopQuestionRecordsNothing) {
  Recorder rec;
  StepReporter reporter(&rec, 10);
  const Eigen::VectorXd w = Eigen::VectorXd::Zero(1);
  for (int i = 0; i < 5; ++i) EXPECT_FALSE(reporter.StopRequested());
  rec.stop_on_question = true;
  EXPECT_TRUE(reporter.StopRequested());
  EXPECT_TRUE(rec.steps.empty());
  EXPECT_FALSE(reporter.Report(1, w));
  EXPECT_TRUE(rec.steps.empty());
  EXPECT_EQ(rec.questions, 6);
}

TEST(StepReporterTest, NullCallbackNeverStops) {
  StepReporter reporter(nullptr, 10);
  EXPECT_TRUE(reporter.Report(1, Eigen::VectorXd::Zero(1)));
  EXPECT_FALSE(reporter.StopRequested());
  EXPECT_FALSE(reporter.stopped());
}

}  // namespace
}  // namespace dpopt::optim
