// Loopback detection and the CLI's connection policy, as decision functions
// alone: no channel is created and no packet leaves the machine.
#include "client/transport_policy.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "core/common/address.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dpopt {
namespace {

using ::testing::HasSubstr;

TEST(LoopbackTest, OnlyLiteralLoopbackAddressesAndUnixSockets) {
  for (const char* a :
       {"127.0.0.1:50051", "127.0.0.1", "127.255.1.2:9", "[::1]:50051", "::1",
        "ipv4:127.0.0.1:5", "ipv6:[::1]:5", "dns:///127.0.0.1:5",
        "unix:/tmp/dpopt.sock", "unix-abstract:dpopt",
        "[::ffff:127.0.0.1]:9"}) {
    EXPECT_TRUE(IsLoopbackAddress(a)) << a;
  }
  for (const char* a :
       {"unixhost:50051", "127.x.example.com:50051",
        "127.0.0.1.example.com:50051", "localhost:50051", "localhost",
        "10.0.0.1:50051", "0.0.0.0:50051", "[::]:50051", "[::2]:1",
        "example.org:443", "127.1:50051", "[::1", "[::1]x",
        "dns://8.8.8.8/127.0.0.1.example.com:1", "", ":50051"}) {
    EXPECT_FALSE(IsLoopbackAddress(a)) << a;
  }
}

TEST(PlaintextPolicyTest, PlaintextOffLoopbackNeedsInsecure) {
  EXPECT_TRUE(
      client::CheckPlaintextPolicy("127.0.0.1:50051", false, false).ok());
  EXPECT_TRUE(client::CheckPlaintextPolicy("10.0.0.1:50051", true, false).ok());
  EXPECT_TRUE(client::CheckPlaintextPolicy("10.0.0.1:50051", false, true).ok());
  for (const char* a : {"10.0.0.1:50051", "unixhost:50051",
                        "127.x.example.com:50051", "localhost:50051"}) {
    const absl::Status s = client::CheckPlaintextPolicy(a, false, false);
    EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << a;
    EXPECT_THAT(std::string(s.message()), HasSubstr("--insecure")) << a;
    EXPECT_THAT(std::string(s.message()), HasSubstr("--tls-ca")) << a;
  }
}

TEST(TokenFileTest, GroupOrOtherAccessIsRefusedWithTheFix) {
  EXPECT_TRUE(client::CheckTokenFileMode("t", S_IFREG | 0600).ok());
  EXPECT_TRUE(client::CheckTokenFileMode("t", S_IFREG | 0400).ok());
  for (mode_t m : {0640, 0604, 0644, 0660, 0610, 0601, 0666}) {
    const absl::Status s = client::CheckTokenFileMode("/x/tok", S_IFREG | m);
    EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << m;
    EXPECT_THAT(std::string(s.message()), HasSubstr("chmod 600 /x/tok")) << m;
  }
  // On a real file (stat).
  char tmpl[] = "/tmp/dpopt-token-XXXXXX";
  const int fd = mkstemp(tmpl);
  ASSERT_GE(fd, 0);
  close(fd);
  ASSERT_EQ(chmod(tmpl, 0600), 0);
  EXPECT_TRUE(client::CheckTokenFile(tmpl).ok());
  ASSERT_EQ(chmod(tmpl, 0644), 0);
  EXPECT_EQ(client::CheckTokenFile(tmpl).code(),
            absl::StatusCode::kFailedPrecondition);
  std::remove(tmpl);
  EXPECT_EQ(client::CheckTokenFile(tmpl).code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace dpopt
