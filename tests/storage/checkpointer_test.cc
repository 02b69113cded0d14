// Background WAL checkpoints (storage/checkpointer.h): commits wake the
// checkpointer instead of checkpointing inline, pauses (streaming imports)
// hold it back.
#include "storage/checkpointer.h"

#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "storage/database.h"
#include "storage/dataset_store.h"
#include "storage/staged_import.h"
#include "tests/common/status_matchers.h"
#include "tests/storage/storage_test_util.h"

namespace dpopt::storage {
namespace {

using ::dpopt::storage::testing::Csv;
using ::dpopt::storage::testing::TempDir;
using ::dpopt::testing::StatusIs;

// `n` CSV rows of one feature and a binary label.
std::string CsvRows(int n) {
  std::string out;
  for (int i = 0; i < n; ++i) {
    absl::StrAppend(&out, 0.001 * i, i % 2 == 0 ? ",1\n" : ",-1\n");
  }
  return out;
}

TEST(CheckpointerOptionsTest, Validate) {
  CheckpointerOptions o;
  EXPECT_OK(o.Validate());
  o.request_frames = 0;
  EXPECT_THAT(o.Validate(), StatusIs(absl::StatusCode::kInvalidArgument));
  o = CheckpointerOptions();
  o.busy_retry = absl::ZeroDuration();
  EXPECT_THAT(o.Validate(), StatusIs(absl::StatusCode::kInvalidArgument));
  o = CheckpointerOptions();
  o.max_pause = absl::ZeroDuration();
  EXPECT_THAT(o.Validate(), StatusIs(absl::StatusCode::kInvalidArgument));
  o = CheckpointerOptions();
  o.connection.read_only = true;
  EXPECT_THAT(o.Validate(), StatusIs(absl::StatusCode::kInvalidArgument));
  Database::Options db;
  db.checkpoint_request_frames = 0;
  EXPECT_THAT(db.Validate(), StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(CheckpointerStartTest, NeedsAnExistingDatabase) {
  TempDir dir;
  EXPECT_THAT(Checkpointer::Start(dir.File("missing.db")).status(),
              StatusIs(absl::StatusCode::kNotFound));
}

class CheckpointerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Database::Options o;
    o.block_rows = 2;
    o.checkpoint_request_frames = 4;
    ASSERT_OK_AND_ASSIGN(db_, Database::Open(dir_.File("d.db"), o));
    ASSERT_TRUE(cp().WaitIdle(absl::Seconds(30)));
  }
  Checkpointer& cp() { return db_->checkpointer(); }

  TempDir dir_;
  std::unique_ptr<Database> db_;
};

TEST_F(CheckpointerTest,
       CommitsPastTheThresholdAreCheckpointedInTheBackground) {
  const int64_t before = cp().stats().checkpoints;
  ASSERT_OK(db_->datasets().Import(Csv("a", 1), CsvRows(500)).status());
  ASSERT_TRUE(cp().WaitIdle(absl::Seconds(30)));
  const Checkpointer::Stats s = cp().stats();
  // With SQLite's automatic checkpoint the commits would have checkpointed
  // inline and the checkpointer would have nothing to count.
  EXPECT_GT(s.checkpoints, before);
  EXPECT_OK(s.last_error);
  EXPECT_GE(s.wal_frames, 4);
  EXPECT_EQ(s.frames_checkpointed, s.wal_frames);  // no reader held any back
  // Timed (the metrics export these).
  EXPECT_GT(s.last_duration, absl::ZeroDuration());
  EXPECT_GE(s.total_duration, s.last_duration);
}

TEST_F(CheckpointerTest, APauseHoldsRequestedCheckpointsBack) {
  const int64_t before = cp().stats().checkpoints;
  {
    Checkpointer::ScopedPause pause(cp());
    {
      Checkpointer::ScopedPause nested(cp());
      cp().Request();
    }
    EXPECT_FALSE(cp().WaitIdle(absl::Milliseconds(200)));
    EXPECT_EQ(cp().stats().checkpoints, before);
  }
  EXPECT_TRUE(cp().WaitIdle(absl::Seconds(30)));
  EXPECT_EQ(cp().stats().checkpoints, before + 1);
}

TEST_F(CheckpointerTest, APauseHoldsARequestBackAtMostMaxPause) {
  // A second checkpointer on the same file, with a short limit.
  CheckpointerOptions o;
  o.max_pause = absl::Milliseconds(300);
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Checkpointer> short_pause,
                       Checkpointer::Start(dir_.File("d.db"), o));
  Checkpointer::ScopedPause pause(*short_pause);  // never released here
  short_pause->Request();
  EXPECT_FALSE(short_pause->WaitIdle(absl::Milliseconds(100)));
  EXPECT_EQ(short_pause->stats().checkpoints, 0);
  EXPECT_TRUE(short_pause->WaitIdle(absl::Seconds(30)));
  EXPECT_EQ(short_pause->stats().checkpoints, 1);
}

TEST_F(CheckpointerTest, AStreamingImportHoldsCheckpointsUntilItCommits) {
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<StagedImport> import,
                       db_->datasets().BeginImport(Csv("s", 1)));
  ASSERT_OK(import->Write(CsvRows(400)));
  ASSERT_OK(import->Sync());  // 200 blocks committed, each past 4 frames
  EXPECT_FALSE(cp().WaitIdle(absl::Milliseconds(200)));
  const int64_t held = cp().stats().checkpoints;
  ASSERT_OK(import->Commit().status());
  ASSERT_TRUE(cp().WaitIdle(absl::Seconds(30)));
  EXPECT_GT(cp().stats().checkpoints, held);
  EXPECT_EQ(cp().stats().frames_checkpointed, cp().stats().wal_frames);
  ASSERT_OK_AND_ASSIGN(Dataset data, db_->datasets().Load("s"));
  EXPECT_EQ(data.rows(), 400);
}

TEST_F(CheckpointerTest, ADiscardedImportReleasesThePause) {
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<StagedImport> import,
                       db_->datasets().BeginImport(Csv("s", 1)));
  ASSERT_OK(import->Write(CsvRows(100)));
  ASSERT_OK(import->Sync());
  EXPECT_FALSE(cp().WaitIdle(absl::Milliseconds(100)));
  ASSERT_OK(import->Discard());
  // The checkpoints the blocks requested run now, while `import` lives on.
  EXPECT_TRUE(cp().WaitIdle(absl::Seconds(30)));
}

}  // namespace
}  // namespace dpopt::storage
