// Server-side SVG line plots for the web console: no JavaScript
// charting library, nothing fetched at run time (air-gapped sites).
#ifndef DPOPT_SERVER_CONSOLE_SVG_PLOT_H_
#define DPOPT_SERVER_CONSOLE_SVG_PLOT_H_

#include <string>
#include <vector>

namespace dpopt::server::console {

struct PlotSeries {
  std::string name;
  std::vector<double> x;
  std::vector<double> y;  // same length as x; non-finite points are skipped
  std::string color = "#1f77b4";
  bool step = false;  // draw as a step function (cumulative spending)
  bool dashed = false;
};

struct PlotOptions {
  std::string title;
  std::string x_label;
  std::string y_label;
  int width = 460;   // pixels
  int height = 260;  // pixels
  // Forces the y axis to include 0 (budgets, norms).
  bool y_from_zero = false;
};

// Renders an <svg> element (self-contained, every text HTML-escaped). Empty
// or all-non-finite input gives a plot frame with "no data"; a constant
// series gets a small range around its value. Never fails.
std::string LinePlot(const std::vector<PlotSeries>& series,
                     const PlotOptions& options);

// "Nice" tick positions (1-2-5 steps) covering [lo, hi], at most ~max_ticks.
std::vector<double> NiceTicks(double lo, double hi, int max_ticks);

// Escapes &, <, >, " and ' for HTML text and attribute values.
std::string HtmlEscape(const std::string& s);

}  // namespace dpopt::server::console

#endif  // DPOPT_SERVER_CONSOLE_SVG_PLOT_H_
