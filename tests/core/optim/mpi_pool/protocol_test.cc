#include "core/optim/mpi_pool/protocol.h"

#include <string>

#include "gtest/gtest.h"
#include "tests/common/status_matchers.h"

namespace dpopt::optim::mpi_pool {
namespace {

using ::dpopt::testing::StatusIs;

TEST(ProtocolTest, MessagesArriveWholeFromAnyPieces) {
  SumRequest sum;
  sum.job_id = 42;
  sum.query = {0.25, Objective::ClipNorm::kL1, 3.5};
  sum.w = Eigen::VectorXd::LinSpaced(7, -1, 1);
  const std::string bytes =
      EncodeMessage(MessageType::kSum, EncodeSumRequest(sum)) +
      EncodeMessage(MessageType::kOk, "");
  MessageParser parser;
  Message m;
  for (char c : bytes.substr(0, bytes.size() - 1)) {
    parser.Append(std::string(1, c));
  }
  ASSERT_OK_AND_ASSIGN(bool got, parser.Next(&m));
  ASSERT_TRUE(got);
  EXPECT_EQ(m.type, MessageType::kSum);
  ASSERT_OK_AND_ASSIGN(SumRequest back, DecodeSumRequest(m.payload));
  EXPECT_EQ(back.job_id, 42u);
  EXPECT_EQ(back.kind, SumKind::kClippedGradient);
  EXPECT_EQ(back.query.sampling_rate, 0.25);
  EXPECT_EQ(back.query.norm, Objective::ClipNorm::kL1);
  EXPECT_EQ(back.query.clip, 3.5);
  EXPECT_EQ(back.w, sum.w);
  ASSERT_OK_AND_ASSIGN(got, parser.Next(&m));
  EXPECT_FALSE(got);  // the last message is one byte short
  parser.Append(bytes.substr(bytes.size() - 1));
  ASSERT_OK_AND_ASSIGN(got, parser.Next(&m));
  ASSERT_TRUE(got);
  EXPECT_EQ(m.type, MessageType::kOk);
}

TEST(ProtocolTest, CorruptStreamsAreRefused) {
  MessageParser garbage;
  garbage.Append("HTTP/1.1 200 OK\r\n");
  Message m;
  EXPECT_THAT(garbage.Next(&m).status(), StatusIs(absl::StatusCode::kDataLoss));

  std::string huge = EncodeMessage(MessageType::kSum, "");
  huge[15] = '\x7f';  // a length of about 2^63
  MessageParser too_long;
  too_long.Append(huge);
  EXPECT_THAT(too_long.Next(&m).status(),
              StatusIs(absl::StatusCode::kDataLoss));

  std::string payload = EncodeOpenJob({1, "ds", {}, 3});
  payload[payload.size() - 1] ^= 1;  // the checksum
  EXPECT_THAT(DecodeOpenJob(payload).status(),
              StatusIs(absl::StatusCode::kDataLoss));

  SumRequest bad;
  bad.query = {0.0, Objective::ClipNorm::kL2, 1.0};  // rate 0
  bad.w = Eigen::VectorXd::Zero(2);
  EXPECT_THAT(DecodeSumRequest(EncodeSumRequest(bad)).status(),
              StatusIs(absl::StatusCode::kDataLoss));
}

TEST(ProtocolTest, DatasetIdsAreSafeFileNames) {
  EXPECT_OK(CheckDatasetId("adult-2024_v1"));
  for (const char* bad : {"", "../x", "a/b", "a.b", "with space", "x\n"}) {
    EXPECT_THAT(CheckDatasetId(bad),
                StatusIs(absl::StatusCode::kInvalidArgument))
        << bad;
  }
  EXPECT_THAT(CheckDatasetId(std::string(65, 'a')),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(DecodeId(EncodeId("../x")).status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(ProtocolTest, ErrorsKeepTheirCode) {
  const absl::Status s =
      DecodeError(EncodeError(absl::NotFoundError("not placed")));
  EXPECT_THAT(s, StatusIs(absl::StatusCode::kNotFound));
  EXPECT_NE(s.message().find("not placed"), absl::string_view::npos);
}

TEST(ProtocolTest, RankReportsRoundTrip) {
  std::vector<RankReport> reports = {{0, "host-a", true, 10, ""},
                                     {1, "host-b", false, 0, "disk full"}};
  ASSERT_OK_AND_ASSIGN(std::vector<RankReport> back,
                       DecodeRankReports(EncodeRankReports(reports)));
  ASSERT_EQ(back.size(), 2u);
  EXPECT_EQ(back[1].host, "host-b");
  EXPECT_FALSE(back[1].ok);
  EXPECT_EQ(back[1].message, "disk full");
  EXPECT_EQ(back[0].count, 10);
}

}  // namespace
}  // namespace dpopt::optim::mpi_pool
