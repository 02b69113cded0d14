#include "server/console/svg_plot.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace dpopt::server::console {

std::string HtmlEscape(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::vector<double> NiceTicks(double lo, double hi, int max_ticks) {
  std::vector<double> ticks;
  if (!std::isfinite(lo) || !std::isfinite(hi) || hi <= lo || max_ticks < 2) {
    return ticks;
  }
  const double raw = (hi - lo) / (max_ticks - 1);
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  double step = mag;
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    step = m * mag;
    if (step >= raw) break;
  }
  if (!std::isfinite(step) || step <= 0) return ticks;
  const double first = std::ceil(lo / step - 1e-9) * step;
  for (int i = 0; i < 100; ++i) {
    const double t = first + i * step;
    if (t > hi + step * 1e-9) break;
    ticks.push_back(std::abs(t) < step * 1e-9 ? 0.0 : t);
  }
  return ticks;
}

namespace {

std::string Num(double v) { return absl::StrFormat("%.1f", v); }
// Tick labels: whole numbers in full (steps: 15000, not 1.5e+04).
std::string Label(double v) {
  if (v == std::floor(v) && std::abs(v) < 1e9) {
    return absl::StrFormat("%.0f", v);
  }
  return absl::StrFormat("%.4g", v);
}

struct Range {
  double lo = std::numeric_limits<double>::infinity();
  double hi = -std::numeric_limits<double>::infinity();
  void Add(double v) {
    if (!std::isfinite(v)) return;
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  bool empty() const { return !(lo <= hi); }
  // Widens degenerate ranges.
  void Fix() {
    if (empty()) {
      lo = 0;
      hi = 1;
      return;
    }
    if (hi / 2 - lo / 2 <= std::abs(hi) * 5e-13 || hi == lo) {
      const double pad = lo == 0 ? 1.0 : std::abs(lo) * 0.1;
      lo -= pad;
      hi += pad;
    }
  }
};

}  // namespace

std::string LinePlot(const std::vector<PlotSeries>& series,
                     const PlotOptions& o) {
  int named = 0;
  for (const PlotSeries& s : series) named += s.name.empty() ? 0 : 1;
  // The legend is one row under the x axis label.
  const double left = 58, right = 24, top = o.title.empty() ? 12 : 28,
               bottom = named > 0 ? 56 : 40;
  const double pw = std::max(10.0, o.width - left - right);
  const double ph = std::max(10.0, o.height - top - bottom);
  Range xr, yr;
  bool any = false;
  for (const PlotSeries& s : series) {
    const size_t n = std::min(s.x.size(), s.y.size());
    for (size_t i = 0; i < n; ++i) {
      if (std::isfinite(s.x[i]) && std::isfinite(s.y[i])) {
        xr.Add(s.x[i]);
        yr.Add(s.y[i]);
        any = true;
      }
    }
  }
  if (o.y_from_zero) yr.Add(0.0);
  xr.Fix();
  yr.Fix();
  // Halves first: differences of finite doubles may overflow, of halves not.
  auto X = [&](double v) {
    return left + (v / 2 - xr.lo / 2) / (xr.hi / 2 - xr.lo / 2) * pw;
  };
  auto Y = [&](double v) {
    return top + ph - (v / 2 - yr.lo / 2) / (yr.hi / 2 - yr.lo / 2) * ph;
  };

  std::string svg = absl::StrCat(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"plot\" width=\"",
      o.width, "\" height=\"", o.height, "\" viewBox=\"0 0 ", o.width, " ",
      o.height, "\" role=\"img\" aria-label=\"", HtmlEscape(o.title), "\">");
  if (!o.title.empty()) {
    absl::StrAppend(&svg, "<text class=\"plot-title\" x=\"", Num(left),
                    "\" y=\"16\" font-size=\"13\" font-weight=\"bold\">",
                    HtmlEscape(o.title), "</text>");
  }
  absl::StrAppend(&svg, "<rect x=\"", Num(left), "\" y=\"", Num(top),
                  "\" width=\"", Num(pw), "\" height=\"", Num(ph),
                  "\" fill=\"#fff\" stroke=\"#999\"/>");
  for (double t : NiceTicks(yr.lo, yr.hi, 6)) {
    const double y = Y(t);
    absl::StrAppend(&svg, "<line x1=\"", Num(left), "\" x2=\"", Num(left + pw),
                    "\" y1=\"", Num(y), "\" y2=\"", Num(y),
                    "\" stroke=\"#eee\"/><text x=\"", Num(left - 4), "\" y=\"",
                    Num(y + 4),
                    "\" font-size=\"10\" text-anchor=\"end\" class=\"ytick\">",
                    Label(t), "</text>");
  }
  for (double t : NiceTicks(xr.lo, xr.hi, 6)) {
    const double x = X(t);
    absl::StrAppend(&svg, "<line x1=\"", Num(x), "\" x2=\"", Num(x), "\" y1=\"",
                    Num(top), "\" y2=\"", Num(top + ph),
                    "\" stroke=\"#eee\"/><text x=\"", Num(x), "\" y=\"",
                    Num(top + ph + 14),
                    "\" font-size=\"10\" text-anchor=\"middle\" "
                    "class=\"xtick\">",
                    Label(t), "</text>");
  }
  if (!o.x_label.empty()) {
    absl::StrAppend(&svg, "<text x=\"", Num(left + pw / 2), "\" y=\"",
                    Num(top + ph + 30),
                    "\" font-size=\"11\" text-anchor=\"middle\">",
                    HtmlEscape(o.x_label), "</text>");
  }
  if (!o.y_label.empty()) {
    absl::StrAppend(&svg, "<text x=\"12\" y=\"", Num(top + ph / 2),
                    "\" font-size=\"11\" text-anchor=\"middle\" "
                    "transform=\"rotate(-90 12 ",
                    Num(top + ph / 2), ")\">", HtmlEscape(o.y_label),
                    "</text>");
  }
  if (!any) {
    absl::StrAppend(&svg, "<text x=\"", Num(left + pw / 2), "\" y=\"",
                    Num(top + ph / 2),
                    "\" font-size=\"12\" text-anchor=\"middle\" "
                    "fill=\"#777\">no data</text></svg>");
    return svg;
  }
  double legend_x = left;
  const double legend_y = o.height - 6;
  for (const PlotSeries& s : series) {
    std::string points;
    const size_t n = std::min(s.x.size(), s.y.size());
    double prev_x = 0, prev_y = 0;
    bool have_prev = false;
    int count = 0;
    for (size_t i = 0; i < n; ++i) {
      if (!std::isfinite(s.x[i]) || !std::isfinite(s.y[i])) continue;
      const double x = X(s.x[i]), y = Y(s.y[i]);
      if (s.step && have_prev) {
        absl::StrAppend(&points, Num(x), ",", Num(prev_y), " ");
      }
      absl::StrAppend(&points, Num(x), ",", Num(y), " ");
      prev_x = x;
      prev_y = y;
      have_prev = true;
      ++count;
    }
    if (count == 0) continue;
    const std::string color = HtmlEscape(s.color);
    absl::StrAppend(
        &svg, "<polyline class=\"series\" data-name=\"", HtmlEscape(s.name),
        "\" data-points=\"", count, "\" fill=\"none\" stroke=\"", color,
        "\" stroke-width=\"1.6\"", s.dashed ? " stroke-dasharray=\"5,4\"" : "",
        " points=\"", points, "\"/>");
    if (count == 1) {
      absl::StrAppend(&svg, "<circle cx=\"", Num(prev_x), "\" cy=\"",
                      Num(prev_y), "\" r=\"3\" fill=\"", color, "\"/>");
    }
    if (!s.name.empty()) {
      absl::StrAppend(
          &svg, "<line x1=\"", Num(legend_x), "\" x2=\"", Num(legend_x + 20),
          "\" y1=\"", Num(legend_y - 4), "\" y2=\"", Num(legend_y - 4),
          "\" stroke=\"", color, "\" stroke-width=\"2\"",
          s.dashed ? " stroke-dasharray=\"5,4\"" : "",
          "/><text class=\"legend\" x=\"", Num(legend_x + 24), "\" y=\"",
          Num(legend_y), "\" font-size=\"10\">", HtmlEscape(s.name), "</text>");
      // About 6 px per character at font-size 10.
      legend_x += 36 + 6.0 * s.name.size();
    }
  }
  svg += "</svg>";
  return svg;
}

}  // namespace dpopt::server::console
