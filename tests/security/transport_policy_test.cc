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

// Plaintext reaches a non-loopback address only with --insecure; without a
// CA the clients use TLS with the system's roots.
TEST(TransportPolicyTest, PlaintextOnlyToLoopbackOrWithInsecure) {
  using client::ChooseTransport;
  using client::Transport;
  using client::TransportRequest;
  auto choose = [](const std::string& server, bool ca, bool tls,
                   bool insecure) {
    TransportRequest r;
    r.server = server;
    r.has_tls_ca = ca;
    r.tls = tls;
    r.insecure = insecure;
    return ChooseTransport(r);
  };
  for (const char* a : {"127.0.0.1:50051", "[::1]:50051", "unix:/tmp/s"}) {
    EXPECT_EQ(*choose(a, false, false, false), Transport::kPlaintext) << a;
    EXPECT_EQ(*choose(a, false, true, false), Transport::kTlsSystemRoots) << a;
    EXPECT_EQ(*choose(a, true, false, false), Transport::kTlsCustomCa) << a;
  }
  for (const char* a :
       {"10.0.0.1:50051", "unixhost:50051", "127.x.example.com:50051",
        "localhost:50051", "dpopt.example.org:443"}) {
    EXPECT_EQ(*choose(a, false, false, false), Transport::kTlsSystemRoots) << a;
    EXPECT_EQ(*choose(a, true, false, false), Transport::kTlsCustomCa) << a;
    EXPECT_EQ(*choose(a, false, false, true), Transport::kPlaintext) << a;
    EXPECT_EQ(choose(a, true, false, true).status().code(),
              absl::StatusCode::kInvalidArgument)
        << a;
    EXPECT_EQ(choose(a, false, true, true).status().code(),
              absl::StatusCode::kInvalidArgument)
        << a;
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
