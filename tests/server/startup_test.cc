// The port while the server opens its database: health NOT_SERVING, every
// other method UNAVAILABLE with a message; then the real services on the
// same port. Loopback only; every wait is bounded.
#include <stdlib.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "dpopt/v1/dpopt.grpc.pb.h"
#include "gmock/gmock.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "server/server.h"
#include "server/startup_listener.h"

namespace dpopt::server {
namespace {

using grpc::health::v1::Health;
using grpc::health::v1::HealthCheckRequest;
using grpc::health::v1::HealthCheckResponse;
using ::testing::HasSubstr;

std::unique_ptr<grpc::ClientContext> Bounded() {
  auto ctx = std::make_unique<grpc::ClientContext>();
  ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  return ctx;
}

grpc::Status Check(grpc::Channel& channel, HealthCheckResponse* out) {
  auto stub = Health::NewStub(
      std::shared_ptr<grpc::Channel>(&channel, [](grpc::Channel*) {}));
  auto ctx = Bounded();
  return stub->Check(ctx.get(), HealthCheckRequest(), out);
}

TEST(StartupTest, NotServingWhileTheDatabaseOpensThenServingOnTheSamePort) {
  char dir[] = "/tmp/dpopt-startup-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  ServerOptions o;
  o.db_path = std::string(dir) + "/d.db";
  o.listen = "127.0.0.1:0";
  absl::Notification listening, release;
  int startup_port = 0;
  o.before_open_for_testing = [&](int port) {
    startup_port = port;
    listening.Notify();
    // Bounded: the test releases it; a broken test still ends.
    release.WaitForNotificationWithTimeout(absl::Seconds(30));
  };
  absl::StatusOr<std::unique_ptr<DpoptServer>> server;
  std::thread starter([&] { server = DpoptServer::Start(o); });
  ASSERT_TRUE(listening.WaitForNotificationWithTimeout(absl::Seconds(30)));
  ASSERT_GT(startup_port, 0);
  auto channel = grpc::CreateChannel(absl::StrCat("127.0.0.1:", startup_port),
                                     grpc::InsecureChannelCredentials());

  // Starting: NOT_SERVING, and every method UNAVAILABLE with the reason.
  HealthCheckResponse health;
  grpc::Status s = Check(*channel, &health);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(health.status(), HealthCheckResponse::NOT_SERVING);
  {
    auto stub = Health::NewStub(channel);
    auto ctx = Bounded();
    auto reader = stub->Watch(ctx.get(), HealthCheckRequest());
    HealthCheckResponse first;
    ASSERT_TRUE(reader->Read(&first));
    EXPECT_EQ(first.status(), HealthCheckResponse::NOT_SERVING);
    EXPECT_FALSE(reader->Read(&first));
    EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::UNAVAILABLE);
  }
  auto jobs = v1::JobService::NewStub(channel);
  {
    auto ctx = Bounded();
    v1::ListJobsResponse r;
    s = jobs->ListJobs(ctx.get(), v1::ListJobsRequest(), &r);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE);
    EXPECT_THAT(s.error_message(), HasSubstr("starting"));
  }
  // Nothing exists yet: the database is opened after the hook.
  EXPECT_FALSE(std::filesystem::exists(o.db_path));

  release.Notify();
  starter.join();
  ASSERT_TRUE(server.ok()) << server.status();
  EXPECT_EQ((*server)->port(), startup_port);

  // Serving: health SERVING on the same port, and the real services
  // (which want a token).
  s = Check(*channel, &health);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(health.status(), HealthCheckResponse::SERVING);
  {
    auto ctx = Bounded();
    v1::ListJobsResponse r;
    s = jobs->ListJobs(ctx.get(), v1::ListJobsRequest(), &r);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED)
        << s.error_message();
  }
  (*server)->Shutdown();
  std::filesystem::remove_all(dir);
}

TEST(StartupTest, AStartThatFailsClosesThePort) {
  char dir[] = "/tmp/dpopt-startup-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  // Not a database: opening fails after the port was opened.
  const std::string db = std::string(dir) + "/d.db";
  {
    std::FILE* f = std::fopen(db.c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fputs("this is not an SQLite database, it is just text\n", f);
    std::fclose(f);
  }
  ServerOptions o;
  o.db_path = db;
  o.listen = "127.0.0.1:0";
  int startup_port = 0;
  o.before_open_for_testing = [&](int port) { startup_port = port; };
  absl::StatusOr<std::unique_ptr<DpoptServer>> server = DpoptServer::Start(o);
  EXPECT_FALSE(server.ok());
  ASSERT_GT(startup_port, 0);
  auto channel = grpc::CreateChannel(absl::StrCat("127.0.0.1:", startup_port),
                                     grpc::InsecureChannelCredentials());
  HealthCheckResponse health;
  EXPECT_EQ(Check(*channel, &health).error_code(),
            grpc::StatusCode::UNAVAILABLE);
  std::filesystem::remove_all(dir);
}

TEST(StartupTest, WithPortReplacesOnlyThePort) {
  EXPECT_EQ(WithPort("127.0.0.1:0", 41234), "127.0.0.1:41234");
  EXPECT_EQ(WithPort("0.0.0.0:50051", 50051), "0.0.0.0:50051");
  EXPECT_EQ(WithPort("[::1]:0", 7), "[::1]:7");
  EXPECT_EQ(WithPort("localhost:0", 9), "localhost:9");
  EXPECT_EQ(WithPort("unix:/tmp/dpopt.sock", 5), "unix:/tmp/dpopt.sock");
  EXPECT_EQ(WithPort("[::1]", 5), "[::1]");
}

}  // namespace
}  // namespace dpopt::server
