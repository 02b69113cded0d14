#include "server/event_log.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace dpopt::server {
namespace {

TEST(EventLogTest, TextIsTheClassicLine) {
  EXPECT_EQ(FormatLogEvent(LogFormat::kText, LogLevel::kInfo, "listening",
                           "listening on port 1", {}),
            "dpopt-server: listening on port 1");
}

TEST(EventLogTest, JsonIsOneObjectWithTheFieldsThatAreSet) {
  LogFields f;
  f.job = "job-1";
  f.principal = "alice";
  f.dataset = "adult";
  f.status = "JOB_STATE_SUCCEEDED";
  const std::string line = FormatLogEvent(LogFormat::kJson, LogLevel::kWarning,
                                          "job_finished", "ended", f);
  EXPECT_EQ(line.find('\n'), std::string::npos);
  const nlohmann::json j = nlohmann::json::parse(line);
  EXPECT_EQ(j["level"], "warning");
  EXPECT_EQ(j["event"], "job_finished");
  EXPECT_EQ(j["message"], "ended");
  EXPECT_EQ(j["job"], "job-1");
  EXPECT_EQ(j["principal"], "alice");
  EXPECT_EQ(j["dataset"], "adult");
  EXPECT_EQ(j["status"], "JOB_STATE_SUCCEEDED");
  EXPECT_TRUE(j.contains("time"));
  const nlohmann::json bare = nlohmann::json::parse(
      FormatLogEvent(LogFormat::kJson, LogLevel::kInfo, "e", "m", {}));
  EXPECT_FALSE(bare.contains("job"));
  EXPECT_FALSE(bare.contains("principal"));
}

TEST(EventLogTest, ClientTextCannotBreakTheLineOrTheJson) {
  LogFields f;
  f.dataset = "a\"b\n{\"level\":\"error\"}\xff\xfe";  // quotes, newline, bad UTF-8
  const std::string line =
      FormatLogEvent(LogFormat::kJson, LogLevel::kInfo, "job_refused", "x", f);
  EXPECT_EQ(line.find('\n'), std::string::npos);
  const nlohmann::json j = nlohmann::json::parse(line);
  EXPECT_EQ(j["level"], "info");
  EXPECT_THAT(j["dataset"].get<std::string>(), ::testing::StartsWith("a\"b\n"));
}

TEST(EventLogTest, ParsesOnlyKnownFormats) {
  EXPECT_TRUE(ParseLogFormat("json").ok());
  EXPECT_TRUE(ParseLogFormat("text").ok());
  EXPECT_FALSE(ParseLogFormat("xml").ok());
}

}  // namespace
}  // namespace dpopt::server
