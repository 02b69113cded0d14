// Unit tests of the server's defences against hostile clients
// (docs/security.md): request field limits, per-principal limits, the
// aggregation of failed authentications, and what storage errors tell a
// client.
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "dpopt/v1/dpopt.pb.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/call_guards.h"
#include "server/principal_limits.h"
#include "server/request_limits.h"
#include "server/server.h"
#include "server/status_util.h"
#include "storage/sqlite.h"

namespace dpopt::server {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST(RequestLimitsTest, NamesIdsAndLabelsHaveLimits) {
  v1::GetDatasetRequest get;
  get.set_name(std::string(kMaxNameBytes, 'a'));
  EXPECT_TRUE(CheckRequestLimits(get).ok());
  get.set_name(std::string(kMaxNameBytes + 1, 'a'));
  const absl::Status s = CheckRequestLimits(get);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("field name"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("128"));
  // The error never echoes the value.
  EXPECT_THAT(std::string(s.message()), Not(HasSubstr("aaaa")));

  v1::GetJobRequest job;
  job.set_id("job-20261127-101010-0123456789abcdef");
  EXPECT_TRUE(CheckRequestLimits(job).ok());
  job.set_id("job with spaces");
  EXPECT_EQ(CheckRequestLimits(job).code(), absl::StatusCode::kInvalidArgument);
  job.set_id(std::string(kMaxIdBytes + 1, 'a'));
  EXPECT_EQ(CheckRequestLimits(job).code(), absl::StatusCode::kInvalidArgument);

  v1::CreateTokenRequest token;
  token.set_principal("bob");
  token.set_label(std::string(kMaxTextBytes, 'x'));
  EXPECT_TRUE(CheckRequestLimits(token).ok());
  token.set_label(std::string(kMaxTextBytes + 1, 'x'));
  EXPECT_EQ(CheckRequestLimits(token).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(RequestLimitsTest, NestedAndRepeatedFieldsAreChecked) {
  v1::SubmitJobRequest submit;
  submit.mutable_spec()->set_dataset("d");
  EXPECT_TRUE(CheckRequestLimits(submit).ok());
  submit.mutable_spec()->set_evaluate_on(std::string(1000, 'e'));
  const absl::Status s = CheckRequestLimits(submit);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("spec.evaluate_on"));

  v1::ImportHeader header;
  header.set_name("ok");
  header.add_feature_names("f0");
  header.add_feature_names(std::string(kMaxNameBytes + 1, 'f'));
  const absl::Status h = CheckRequestLimits(header, 0);
  EXPECT_EQ(h.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(h.message()), HasSubstr("feature_names[1]"));
}

TEST(RequestLimitsTest, WholeMessageSizeAndBytesFields) {
  v1::ImportDatasetRequest chunk;
  chunk.set_chunk(std::string(2 << 20, 'x'));
  // A bytes field has no field limit; the message limit applies when given.
  EXPECT_TRUE(CheckRequestLimits(chunk, 0).ok());
  const absl::Status s = CheckRequestLimits(chunk, kMaxRequestBytes);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("the limit for"));
}

TEST(ConcurrencyLimiterTest, SlotsAreCountedPerKeyAndReleased) {
  ConcurrencyLimiter limiter(2, "jobs queued or running", "--flag");
  auto a1 = limiter.Acquire("alice");
  auto a2 = limiter.Acquire("alice");
  ASSERT_TRUE(a1.ok());
  ASSERT_TRUE(a2.ok());
  auto a3 = limiter.Acquire("alice");
  EXPECT_EQ(a3.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(a3.status().message()), HasSubstr("--flag"));
  EXPECT_TRUE(limiter.Acquire("bob").ok());  // bob is not alice
  a1->reset();
  EXPECT_EQ(limiter.InUse("alice"), 1);
  EXPECT_TRUE(limiter.Acquire("alice").ok());
  ConcurrencyLimiter unlimited(0, "x", "--x");
  std::vector<std::shared_ptr<ConcurrencyLimiter::Slot>> held;
  for (int i = 0; i < 1000; ++i) {
    auto s = unlimited.Acquire("k");
    ASSERT_TRUE(s.ok());
    held.push_back(*s);
  }
  held.clear();
  EXPECT_EQ(unlimited.InUse("k"), 0);
}

TEST(ConcurrencyLimiterTest, APrincipalsOwnLimitReplacesTheServers) {
  ConcurrencyLimiter limiter(1, "open WatchJob streams", "--flag");
  // Own limit 3 (the server's is 1).
  std::vector<std::shared_ptr<ConcurrencyLimiter::Slot>> held;
  for (int i = 0; i < 3; ++i) {
    auto s = limiter.Acquire("alice", 3);
    ASSERT_TRUE(s.ok()) << i;
    held.push_back(*s);
  }
  auto over = limiter.Acquire("alice", 3);
  EXPECT_EQ(over.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(over.status().message()), HasSubstr("its own limit"));
  // Own limit 0: none; the server's still binds everyone else.
  for (int i = 0; i < 50; ++i) {
    auto s = limiter.Acquire("carol", 0);
    ASSERT_TRUE(s.ok());
    held.push_back(*s);
  }
  auto bob = limiter.Acquire("bob");
  ASSERT_TRUE(bob.ok());
  EXPECT_EQ(limiter.Acquire("bob").status().code(),
            absl::StatusCode::kResourceExhausted);
}

TEST(RateLimiterTest, APrincipalsOwnRateReplacesTheServers) {
  RateLimiter limiter(2, "EstimateJob calls", "--max-estimates-per-second");
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  for (int i = 0; i < 7; ++i) EXPECT_TRUE(limiter.Allow("a", t0, 7).ok()) << i;
  const absl::Status over = limiter.Allow("a", t0, 7);
  EXPECT_EQ(over.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(over.message()), HasSubstr("its own limit"));
  for (int i = 0; i < 100; ++i) EXPECT_TRUE(limiter.Allow("c", t0, 0).ok());
  EXPECT_TRUE(limiter.Allow("b", t0).ok());
  EXPECT_TRUE(limiter.Allow("b", t0).ok());
  EXPECT_FALSE(limiter.Allow("b", t0).ok());
}

TEST(RateLimiterTest, BurstOfOneSecondThenTheRate) {
  RateLimiter limiter(5, "EstimateJob calls", "--max-estimates-per-second");
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  for (int i = 0; i < 5; ++i) EXPECT_TRUE(limiter.Allow("a", t0).ok()) << i;
  const absl::Status over = limiter.Allow("a", t0);
  EXPECT_EQ(over.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(over.message()),
              HasSubstr("--max-estimates-per-second"));
  EXPECT_TRUE(limiter.Allow("b", t0).ok());
  // 200 ms later one token has come back, not two.
  const absl::Time t1 = t0 + absl::Milliseconds(200);
  EXPECT_TRUE(limiter.Allow("a", t1).ok());
  EXPECT_FALSE(limiter.Allow("a", t1).ok());
  // Idle for a long time: a burst of 5 again, not more.
  const absl::Time t2 = t1 + absl::Hours(1);
  for (int i = 0; i < 5; ++i) EXPECT_TRUE(limiter.Allow("a", t2).ok()) << i;
  EXPECT_FALSE(limiter.Allow("a", t2).ok());
  RateLimiter unlimited(0, "x", "--x");
  for (int i = 0; i < 1000; ++i) ASSERT_TRUE(unlimited.Allow("a", t0).ok());
}

TEST(PrincipalLimitsTest, ValidateRejectsNegatives) {
  EXPECT_TRUE(PrincipalLimits().Validate().ok());
  PrincipalLimits l;
  l.max_active_jobs = -1;
  EXPECT_FALSE(l.Validate().ok());
  l = PrincipalLimits();
  l.max_estimates_per_second = -1;
  EXPECT_FALSE(l.Validate().ok());
  l = PrincipalLimits();
  l.max_watch_streams = -1;
  EXPECT_FALSE(l.Validate().ok());
}

TEST(AuthFailureLogTest, OneRecordPerPeerPerWindowWithTheCount) {
  AuthFailureLog log(AuthFailureLog::Options{});
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  EXPECT_EQ(log.Admit("ipv4:10.0.0.1", t0), 0);
  for (int i = 0; i < 99; ++i) {
    EXPECT_EQ(log.Admit("ipv4:10.0.0.1", t0 + absl::Seconds(i % 59)),
              std::nullopt);
  }
  // Another peer is not suppressed by the first one.
  EXPECT_EQ(log.Admit("ipv4:10.0.0.2", t0), 0);
  // Next window: written, with the count of the suppressed ones.
  EXPECT_EQ(log.Admit("ipv4:10.0.0.1", t0 + absl::Seconds(61)), 99);
  EXPECT_EQ(log.Admit("ipv4:10.0.0.1", t0 + absl::Seconds(62)), std::nullopt);
}

TEST(AuthFailureLogTest, MemoryIsBoundedByMaxPeers) {
  AuthFailureLog::Options o;
  o.max_peers = 10;
  AuthFailureLog log(o);
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  int written = 0;
  for (int i = 0; i < 10000; ++i) {
    if (log.Admit(absl::StrCat("ipv4:10.0.", i / 256, ".", i % 256), t0)
            .has_value()) {
      ++written;
    }
  }
  // Ten peers of their own, then one shared overflow entry: 11 records in
  // the window, not 10000.
  EXPECT_EQ(written, 11);
}

TEST(PeerTest, PortsAreDroppedForAggregationAndLengthIsBounded) {
  EXPECT_EQ(PeerHost("ipv4:127.0.0.1:41234"), "ipv4:127.0.0.1");
  EXPECT_EQ(PeerHost("ipv6:[::1]:41234"), "ipv6:[::1]");
  EXPECT_EQ(PeerHost("unix:/tmp/x"), "unix:/tmp/x");
  const std::string long_peer = "unix:" + std::string(1 << 20, 'p');
  EXPECT_EQ(AuditedPeer(long_peer).size(), kMaxPeerBytes);
  EXPECT_EQ(PeerHost(long_peer).size(), kMaxPeerBytes);
}

TEST(StatusUtilTest, StorageErrorsReachClientsWithoutSqliteTextOrPaths) {
  const absl::Status raw = storage::SqliteStatus(
      SQLITE_CANTOPEN, "opening /var/lib/secret-dir/dpopt.db",
      "unable to open database file");
  const grpc::Status g = ToGrpcStatus(raw);
  EXPECT_EQ(g.error_code(), grpc::UNAVAILABLE);
  EXPECT_THAT(g.error_message(), Not(HasSubstr("secret-dir")));
  EXPECT_THAT(g.error_message(), Not(HasSubstr("unable to open")));
  const grpc::Status corrupt = ToGrpcStatus(storage::SqliteStatus(
      SQLITE_CORRUPT, "reading /srv/x.db", "database disk image is malformed"));
  EXPECT_EQ(corrupt.error_code(), grpc::DATA_LOSS);
  EXPECT_THAT(corrupt.error_message(), Not(HasSubstr("/srv/x.db")));
  // Other errors keep their message.
  EXPECT_EQ(ToGrpcStatus(absl::NotFoundError("dataset \"d\" not found"))
                .error_message(),
            "dataset \"d\" not found");
}

TEST(ServerOptionsTest, ReflectionIsOffByDefault) {
  EXPECT_FALSE(ServerOptions().reflection);
}

TEST(DatabaseDirectoryTest, WarnsWhenOthersCanListTheDirectory) {
  char tmpl[] = "/tmp/dpopt-dir-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string db = std::string(tmpl) + "/dpopt.db";
  ASSERT_EQ(chmod(tmpl, 0700), 0);
  EXPECT_EQ(DatabaseDirectoryWarning(db), "");
  ASSERT_EQ(chmod(tmpl, 0755), 0);
  EXPECT_THAT(DatabaseDirectoryWarning(db), HasSubstr("chmod 700"));
  ASSERT_EQ(chmod(tmpl, 0750), 0);
  EXPECT_THAT(DatabaseDirectoryWarning(db), HasSubstr("0750"));
  rmdir(tmpl);
}

}  // namespace
}  // namespace dpopt::server
