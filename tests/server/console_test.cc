// Unit tests of the web console's building blocks: the SVG plots
// (ticks, escaping, non-finite data), HTML helpers, the HTTP status mapping
// and the listener's options, headers and bounds against idle clients
// (loopback only). The pages themselves are tested in a real browser
// against a real server (tests/e2e/console/browser_test.py).
#include "server/console/console.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "httplib.h"
#include "server/console/html.h"
#include "server/console/pages.h"
#include "server/console/svg_plot.h"

namespace dpopt::server::console {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

TEST(NiceTicksTest, OneTwoFiveSteps) {
  EXPECT_THAT(NiceTicks(0, 1, 6),
              testing::Pointwise(testing::DoubleNear(1e-12),
                                 {0.0, 0.2, 0.4, 0.6, 0.8, 1.0}));
  EXPECT_THAT(NiceTicks(0, 3, 6), ElementsAre(0, 1, 2, 3));
  EXPECT_THAT(NiceTicks(0.76, 0.85, 6).front(),
              testing::DoubleNear(0.76, 1e-12));
  EXPECT_THAT(NiceTicks(-5, 5, 6), ElementsAre(-4, -2, 0, 2, 4));
}

TEST(NiceTicksTest, DegenerateRangesGiveNoTicks) {
  EXPECT_TRUE(NiceTicks(1, 1, 6).empty());
  EXPECT_TRUE(NiceTicks(2, 1, 6).empty());
  EXPECT_TRUE(NiceTicks(0, std::numeric_limits<double>::infinity(), 6).empty());
  EXPECT_TRUE(NiceTicks(std::nan(""), 1, 6).empty());
}

TEST(LinePlotTest, DrawsOnePolylinePerSeriesWithItsPoints) {
  PlotSeries a{"loss", {1, 2, 3}, {0.5, 0.4, 0.3}};
  PlotSeries b{"accuracy", {1, 2}, {0.7, 0.8}, "#2ca02c"};
  PlotOptions o;
  o.title = "Trace";
  const std::string svg = LinePlot({a, b}, o);
  EXPECT_THAT(svg, HasSubstr("<svg"));
  EXPECT_THAT(svg, HasSubstr("data-name=\"loss\" data-points=\"3\""));
  EXPECT_THAT(svg, HasSubstr("data-name=\"accuracy\" data-points=\"2\""));
  EXPECT_THAT(svg, HasSubstr(">Trace</text>"));
  EXPECT_THAT(svg, HasSubstr("</svg>"));
}

TEST(LinePlotTest, EscapesEveryText) {
  PlotSeries s{"<b>\"x\"</b>", {0, 1}, {0, 1}, "red\" onload=\"alert(1)"};
  PlotOptions o;
  o.title = "<script>alert(1)</script>";
  o.x_label = "a & b";
  const std::string svg = LinePlot({s}, o);
  EXPECT_THAT(svg, Not(HasSubstr("<script>")));
  EXPECT_THAT(svg, Not(HasSubstr("<b>")));
  EXPECT_THAT(svg, Not(HasSubstr("onload=\"")));
  EXPECT_THAT(svg, HasSubstr("&lt;script&gt;"));
  EXPECT_THAT(svg, HasSubstr("a &amp; b"));
}

TEST(LinePlotTest, SkipsNonFinitePointsAndSurvivesExtremes) {
  const double inf = std::numeric_limits<double>::infinity();
  PlotSeries s{"s", {0, 1, 2, 3, 4}, {std::nan(""), inf, -1e308, 1e308, 5}};
  const std::string svg = LinePlot({s}, PlotOptions());
  EXPECT_THAT(svg, HasSubstr("data-points=\"3\""));
  EXPECT_THAT(svg, Not(HasSubstr("nan")));
  EXPECT_THAT(svg, Not(HasSubstr("inf")));
  // -1e308, 1e308 and 5 at the bottom edge (y = 12 + 192), the top edge
  // (y = 12) and the middle (x from 58 to 460 - 24): no overflow of
  // 1e308 - (-1e308).
  EXPECT_THAT(svg, HasSubstr("points=\"58.0,204.0 247.0,12.0 436.0,108.0 \""));
}

TEST(LinePlotTest, EmptyAndConstantSeries) {
  EXPECT_THAT(LinePlot({}, PlotOptions()), HasSubstr("no data"));
  EXPECT_THAT(LinePlot({PlotSeries{"s", {}, {}}}, PlotOptions()),
              HasSubstr("no data"));
  const std::string flat =
      LinePlot({PlotSeries{"s", {0, 1, 2}, {3, 3, 3}}}, PlotOptions());
  EXPECT_THAT(flat, HasSubstr("data-points=\"3\""));
  EXPECT_THAT(flat, Not(HasSubstr("nan")));
  const std::string one = LinePlot({PlotSeries{"s", {7}, {1}}}, PlotOptions());
  EXPECT_THAT(one, HasSubstr("<circle"));
}

TEST(LinePlotTest, WholeNumberTicksInFull) {
  const std::string svg =
      LinePlot({PlotSeries{"s", {0, 15000}, {0, 1}}}, PlotOptions());
  EXPECT_THAT(svg, HasSubstr(">15000</text>"));
  EXPECT_THAT(svg, Not(HasSubstr("e+04")));
}

TEST(HtmlTest, EscapeAndUrlSegment) {
  EXPECT_EQ(HtmlEscape("<a href='x'>&\"</a>"),
            "&lt;a href=&#39;x&#39;&gt;&amp;&quot;&lt;/a&gt;");
  EXPECT_EQ(UrlSegment("a b/c?d"), "a%20b%2Fc%3Fd");
  EXPECT_EQ(Link("jobs", "j 1", "<j>"),
            "<a href=\"/console/jobs/j%201\">&lt;j&gt;</a>");
  EXPECT_EQ(Number(std::nan("")), "-");
  EXPECT_EQ(Number(0.999999), "0.999999");
}

TEST(HtmlTest, TableEscapesHeadersAndShowsEmpty) {
  Table t("x", {"<h>"});
  EXPECT_THAT(t.Html(), HasSubstr("&lt;h&gt;"));
  EXPECT_THAT(t.Html(), HasSubstr("none"));
}

TEST(PagesTest, HttpStatusOfGrpcCodes) {
  EXPECT_EQ(HttpStatus(grpc::OK), 200);
  EXPECT_EQ(HttpStatus(grpc::UNAUTHENTICATED), 401);
  EXPECT_EQ(HttpStatus(grpc::PERMISSION_DENIED), 403);
  EXPECT_EQ(HttpStatus(grpc::NOT_FOUND), 404);
  EXPECT_EQ(HttpStatus(grpc::INVALID_ARGUMENT), 400);
  EXPECT_EQ(HttpStatus(grpc::FAILED_PRECONDITION), 400);
  EXPECT_EQ(HttpStatus(grpc::RESOURCE_EXHAUSTED), 429);
  EXPECT_EQ(HttpStatus(grpc::UNAVAILABLE), 503);
  EXPECT_EQ(HttpStatus(grpc::INTERNAL), 500);
}

TEST(ConsoleOptionsTest, LoopbackOnlyWithoutTls) {
  ConsoleOptions o;
  o.listen = "127.0.0.1:0";
  EXPECT_TRUE(o.Validate().ok());
  o.listen = "[::1]:8080";
  EXPECT_TRUE(o.Validate().ok());
  o.listen = "0.0.0.0:8080";
  EXPECT_EQ(o.Validate().code(), absl::StatusCode::kFailedPrecondition);
  o.insecure = true;
  EXPECT_TRUE(o.Validate().ok());
  o.insecure = false;
  o.tls_cert = "cert.pem";
  EXPECT_EQ(o.Validate().code(), absl::StatusCode::kInvalidArgument);  // no key
  o.tls_key = "key.pem";
  EXPECT_TRUE(o.Validate().ok());
}

TEST(ConsoleOptionsTest, RejectsMalformedAddresses) {
  for (const char* bad : {"", "localhost", "127.0.0.1:x", "127.0.0.1:70000",
                          ":8080", "unix:/tmp/s"}) {
    ConsoleOptions o;
    o.listen = bad;
    EXPECT_EQ(o.Validate().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
}

// A console whose pages are never asked for: the API channel is never used
// by the routes these tests request (shell, static files, redirects).
std::unique_ptr<Console> StartConsole(const ConsoleOptions& o) {
  auto api =
      grpc::CreateChannel("127.0.0.1:1", grpc::InsecureChannelCredentials());
  auto c = Console::Start(o, api);
  EXPECT_TRUE(c.ok()) << c.status();
  return c.ok() ? *std::move(c) : nullptr;
}

TEST(ConsoleListenerTest, SecurityHeadersOnEveryResponseIncludingRedirects) {
  ConsoleOptions o;
  o.listen = "127.0.0.1:0";
  std::unique_ptr<Console> console = StartConsole(o);
  ASSERT_NE(console, nullptr);
  httplib::Client http("127.0.0.1", console->port());
  http.set_follow_location(false);
  for (const char* path : {"/", "/console", "/console/", "/console/login",
                           "/console/static/console.js", "/no/such/page"}) {
    httplib::Result r = http.Get(path);
    ASSERT_TRUE(r) << path;
    EXPECT_THAT(r->get_header_value("Content-Security-Policy"),
                HasSubstr("default-src 'none'"))
        << path << " " << r->status;
    EXPECT_EQ(r->get_header_value("X-Frame-Options"), "DENY") << path;
    EXPECT_EQ(r->get_header_value("X-Content-Type-Options"), "nosniff") << path;
    EXPECT_EQ(r->get_header_value("Cache-Control"), "no-store") << path;
    EXPECT_EQ(r->get_header_value("Referrer-Policy"), "no-referrer") << path;
  }
  httplib::Result redirect = http.Get("/");
  ASSERT_TRUE(redirect);
  EXPECT_EQ(redirect->status, 302);
  EXPECT_EQ(redirect->get_header_value("Location"), "/console/");
}

// Sockets this process has open (the test's clients and the console's
// accepted connections alike).
int SocketCount() {
  int n = 0;
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) {
    std::error_code ec;
    const auto target = std::filesystem::read_symlink(e.path(), ec);
    if (!ec && target.string().rfind("socket:", 0) == 0) ++n;
  }
  return n;
}

// Slowloris: connections that send half a request and then nothing. The
// console holds at most worker_threads + max_queued_connections (+1 being
// handed over) of them at once, closes each after its timeouts, and answers
// a real request afterwards.
TEST(ConsoleListenerTest, IdleAndSlowConnectionsAreBoundedAndClosed) {
  ConsoleOptions o;
  o.listen = "127.0.0.1:0";
  o.worker_threads = 2;
  o.max_queued_connections = 2;
  o.read_timeout = absl::Milliseconds(200);
  o.keep_alive_timeout = absl::Seconds(1);
  std::unique_ptr<Console> console = StartConsole(o);
  ASSERT_NE(console, nullptr);
  const int sockets_before = SocketCount();
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(console->port()));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  constexpr int kClients = 16;
  std::vector<int> fds;
  for (int i = 0; i < kClients; ++i) {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)),
              0);
    const char partial[] = "GET /console/ HTTP/1.1\r\nHost: x";
    ASSERT_GT(::send(fd, partial, sizeof(partial) - 1, MSG_NOSIGNAL), 0);
    fds.push_back(fd);
  }
  int most_accepted = 0;
  // Every connection is closed by the server (EOF), in rounds of
  // worker_threads per keep-alive wait plus read timeout (about 1.2 s):
  // 16 / 2 x 1.2 s = 10 s; 40 s bound.
  const absl::Time deadline = absl::Now() + absl::Seconds(40);
  int closed = 0;
  std::vector<bool> done(fds.size(), false);
  while (closed < kClients && absl::Now() < deadline) {
    // Open sockets = the clients' (all open until the end) + the
    // console's accepted ones.
    most_accepted =
        std::max(most_accepted, SocketCount() - sockets_before - kClients);
    for (size_t i = 0; i < fds.size(); ++i) {
      if (done[i]) continue;
      pollfd p{fds[i], POLLIN, 0};
      if (::poll(&p, 1, 0) <= 0) continue;
      char buf[4096];
      const ssize_t n = ::recv(fds[i], buf, sizeof(buf), MSG_DONTWAIT);
      if (n <= 0) {
        done[i] = true;
        ++closed;
      }
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
  for (int fd : fds) ::close(fd);
  EXPECT_EQ(closed, kClients) << "idle connections still open after 40 s";
  EXPECT_LE(most_accepted, o.worker_threads + o.max_queued_connections + 1);
  EXPECT_GT(most_accepted, 0);
  httplib::Client http("127.0.0.1", console->port());
  http.set_connection_timeout(5);
  httplib::Result r = http.Get("/console/");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
}

}  // namespace
}  // namespace dpopt::server::console
