// Streaming ImportDataset through the server: chunks are parsed
// and stored as they arrive, the dataset stays invisible until the stream
// ends, other RPCs (admissions included) proceed meanwhile, and an error, a
// cancellation or a crash leaves nothing behind.
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "storage/database.h"
#include "storage/dataset_store.h"
#include "tests/integration/test_server.h"
#include "tests/storage/storage_test_util.h"

namespace dpopt::testing {
namespace {

using ::testing::HasSubstr;

v1::ImportHeader Header(const std::string& name) {
  v1::ImportHeader h;
  h.set_name(name);
  h.set_format(v1::DATASET_FORMAT_LIBSVM);
  h.set_dimension(3);
  h.set_epsilon_budget(3);
  h.set_delta_budget(1e-6);
  return h;
}

// Rows `first` .. `first + n - 1` of a valid 3-feature LIBSVM file.
std::string Rows(int first, int n) {
  std::string out;
  for (int i = first; i < first + n; ++i) {
    absl::StrAppendFormat(&out, "%s 1:1 2:%.3f 3:%d\n", i % 2 ? "+1" : "-1",
                          (i % 17) / 17.0, i % 3);
  }
  return out;
}

// An open ImportDataset stream.
class Upload {
 public:
  Upload(TestServer& s, const v1::ImportHeader& header)
      : writer_(s.datasets().ImportDataset(&ctx_, &info_)) {
    v1::ImportDatasetRequest req;
    *req.mutable_header() = header;
    ok_ = writer_->Write(req);
  }
  // Sends `bytes` in chunks of `chunk` bytes (lines straddle chunks).
  bool Send(const std::string& bytes, size_t chunk = 1000) {
    for (size_t off = 0; ok_ && off < bytes.size(); off += chunk) {
      v1::ImportDatasetRequest c;
      c.set_chunk(bytes.substr(off, chunk));
      ok_ = writer_->Write(c);
    }
    return ok_;
  }
  grpc::Status Finish() {
    writer_->WritesDone();
    return writer_->Finish();
  }
  grpc::Status Cancel() {
    ctx_.TryCancel();
    return writer_->Finish();
  }
  const v1::DatasetInfo& info() const { return info_; }

 private:
  grpc::ClientContext ctx_;
  v1::DatasetInfo info_;
  std::unique_ptr<grpc::ClientWriter<v1::ImportDatasetRequest>> writer_;
  bool ok_ = false;
};

std::vector<std::string> Names(TestServer& s) {
  grpc::ClientContext ctx;
  v1::ListDatasetsResponse list;
  EXPECT_TRUE(
      s.datasets().ListDatasets(&ctx, v1::ListDatasetsRequest(), &list).ok());
  std::vector<std::string> out;
  for (const auto& d : list.datasets()) out.push_back(d.name());
  return out;
}

grpc::StatusCode GetCode(TestServer& s, const std::string& name) {
  grpc::ClientContext ctx;
  v1::GetDatasetRequest req;
  req.set_name(name);
  v1::DatasetInfo info;
  return s.datasets().GetDataset(&ctx, req, &info).error_code();
}

// The server's block is 4096 rows: 10,000 rows store two blocks before the
// stream ends.
constexpr int kRows = 10000;

TEST(StreamingImportTest, InvisibleUntilTheStreamEndsWhileOthersProceed) {
  TestServer s;
  ASSERT_TRUE(s.Import(Header("existing"), Rows(0, 500)).ok());
  Upload up(s, Header("streamed"));
  ASSERT_TRUE(up.Send(Rows(0, kRows)));
  // Give the server time to store the blocks it has received.
  absl::SleepFor(absl::Milliseconds(300));
  EXPECT_THAT(Names(s), ::testing::ElementsAre("existing"));
  EXPECT_EQ(GetCode(s, "streamed"), grpc::NOT_FOUND);
  // Admissions (a charge on another dataset) and other imports proceed.
  grpc::ClientContext jctx;
  v1::SubmitJobRequest sub;
  *sub.mutable_spec() = QuickDpGdSpec("existing", 0.5);
  v1::Job job;
  ASSERT_TRUE(s.jobs().SubmitJob(&jctx, sub, &job).ok());
  EXPECT_EQ(s.WaitForJob(job.id()).state(), v1::JOB_STATE_SUCCEEDED);
  ASSERT_TRUE(s.Import(Header("other"), Rows(0, 100)).ok());
  // The name is reserved while the stream is open.
  grpc::Status dup = s.Import(Header("streamed"), Rows(0, 10));
  EXPECT_EQ(dup.error_code(), grpc::ALREADY_EXISTS);
  EXPECT_THAT(dup.error_message(), HasSubstr("being imported"));

  ASSERT_TRUE(up.Send(Rows(kRows, 5)));
  grpc::Status st = up.Finish();
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_EQ(up.info().rows(), kRows + 5);
  EXPECT_EQ(GetCode(s, "streamed"), grpc::OK);
  EXPECT_EQ(Names(s).size(), 3u);
}

TEST(StreamingImportTest, BadLineInALateChunkStopsTheUploadAndLeavesNothing) {
  TestServer s;
  Upload up(s, Header("bad"));
  ASSERT_TRUE(up.Send(Rows(0, kRows)));
  up.Send("+1 1:1 4:1\n");  // line kRows + 1: index beyond the dimension
  up.Send(Rows(0, kRows));  // the server may have stopped reading by now
  grpc::Status st = up.Finish();
  EXPECT_EQ(st.error_code(), grpc::INVALID_ARGUMENT);
  EXPECT_THAT(
      st.error_message(),
      HasSubstr(absl::StrCat("line ", kRows + 1, ": feature index 4 exceeds")));
  EXPECT_EQ(GetCode(s, "bad"), grpc::NOT_FOUND);
  EXPECT_TRUE(Names(s).empty());
  ASSERT_TRUE(s.Import(Header("bad"), Rows(0, 10)).ok());  // name free
}

TEST(StreamingImportTest, CancelledUploadLeavesNothing) {
  TestServer s;
  {
    Upload up(s, Header("cancelled"));
    ASSERT_TRUE(up.Send(Rows(0, kRows)));
    absl::SleepFor(absl::Milliseconds(300));
    EXPECT_EQ(up.Cancel().error_code(), grpc::CANCELLED);
  }
  // The server discards the staged rows when it sees the cancellation; the
  // name is free again once it has (bounded wait).
  grpc::Status st;
  for (int i = 0; i < 100; ++i) {
    st = s.Import(Header("cancelled"), Rows(0, 10));
    if (st.error_code() != grpc::ALREADY_EXISTS) break;
    absl::SleepFor(absl::Milliseconds(100));
  }
  ASSERT_TRUE(st.ok()) << st.error_message();
  v1::DatasetInfo info;
  grpc::ClientContext ctx;
  v1::GetDatasetRequest req;
  req.set_name("cancelled");
  ASSERT_TRUE(s.datasets().GetDataset(&ctx, req, &info).ok());
  EXPECT_EQ(info.rows(), 10);
}

TEST(StreamingImportTest, ImportInterruptedByACrashIsRemovedAtStart) {
  TestServer s;
  s.Stop();
  {
    // The state a crash mid-import leaves (storage_staged_import_test makes
    // it with a real killed process): a record marked in progress, with
    // stored blocks. Made here without fork (this process has gRPC threads).
    auto db = storage::Database::Open(s.db_path());
    ASSERT_TRUE(db.ok()) << db.status();
    storage::ImportOptions o;
    o.name = "crashed";
    o.dimension = 3;
    o.epsilon_budget = 3;
    ASSERT_TRUE((*db)->datasets().Import(o, Rows(0, kRows)).ok());
    ASSERT_TRUE(storage::DatabaseTestPeer::Execute(
                    **db, absl::StrCat("UPDATE datasets SET deleted_at = ",
                                       storage::kImportInProgress,
                                       " WHERE name = 'crashed'"))
                    .ok());
    auto blocks = storage::DatabaseTestPeer::QueryInt(
        **db, "SELECT count(*) FROM dataset_blocks");
    ASSERT_TRUE(blocks.ok());
    ASSERT_GT(*blocks, 0);
  }
  s.Start();
  EXPECT_TRUE(Names(s).empty());
  {
    auto db = storage::Database::Open(s.db_path());
    ASSERT_TRUE(db.ok()) << db.status();
    auto blocks = storage::DatabaseTestPeer::QueryInt(
        **db, "SELECT count(*) FROM dataset_blocks");
    ASSERT_TRUE(blocks.ok());
    EXPECT_EQ(*blocks, 0);  // the start removed the staged rows
  }
  grpc::Status st = s.Import(Header("crashed"), Rows(0, 10));
  EXPECT_TRUE(st.ok()) << st.error_message();
}

}  // namespace
}  // namespace dpopt::testing
