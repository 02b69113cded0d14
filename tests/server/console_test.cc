// Unit tests of the web console's building blocks: the SVG plots
// (ticks, escaping, non-finite data), HTML helpers, the HTTP status mapping
// and the listener's options. The pages themselves are tested in a real
// browser against a real server (tests/e2e/console/browser_test.py).
#include "server/console/console.h"

#include <cmath>
#include <limits>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
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

}  // namespace
}  // namespace dpopt::server::console
