#include "server/console/html.h"

#include <algorithm>
#include <cctype>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"

namespace dpopt::server::console {

std::string UrlSegment(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += absl::StrFormat("%%%02X", c);
    }
  }
  return out;
}

std::string Link(const std::string& prefix, const std::string& segment,
                 const std::string& text) {
  return absl::StrCat("<a href=\"/console/", prefix, "/", UrlSegment(segment),
                      "\">", HtmlEscape(text), "</a>");
}

std::string Number(double v) {
  return std::isfinite(v) ? absl::StrFormat("%.6g", v) : "-";
}

double Seconds(const google::protobuf::Timestamp& t) {
  return static_cast<double>(t.seconds()) + t.nanos() * 1e-9;
}

std::string Time(const google::protobuf::Timestamp& t) {
  if (t.seconds() == 0 && t.nanos() == 0) return "-";
  return absl::FormatTime("%Y-%m-%d %H:%M:%SZ",
                          absl::FromUnixSeconds(t.seconds()),
                          absl::UTCTimeZone());
}

Table::Table(std::string css_class, std::vector<std::string> headers)
    : css_class_(std::move(css_class)), headers_(std::move(headers)) {}

Table& Table::Row(std::vector<std::string> cells) {
  rows_.push_back(std::move(cells));
  return *this;
}

std::string Table::Html() const {
  std::string out =
      absl::StrCat("<table class=\"", HtmlEscape(css_class_), "\"><thead><tr>");
  for (const std::string& h : headers_) {
    absl::StrAppend(&out, "<th>", HtmlEscape(h), "</th>");
  }
  out += "</tr></thead><tbody>";
  for (const auto& row : rows_) {
    out += "<tr>";
    for (const std::string& c : row) absl::StrAppend(&out, "<td>", c, "</td>");
    out += "</tr>";
  }
  if (rows_.empty()) {
    absl::StrAppend(&out, "<tr><td class=\"empty\" colspan=\"",
                    std::max<size_t>(1, headers_.size()), "\">none</td></tr>");
  }
  out += "</tbody></table>";
  return out;
}

std::string DefinitionList(
    const std::vector<std::pair<std::string, std::string>>& items) {
  std::string out = "<dl class=\"facts\">";
  for (const auto& [term, value] : items) {
    absl::StrAppend(&out, "<dt>", HtmlEscape(term), "</dt><dd>", value,
                    "</dd>");
  }
  return out + "</dl>";
}

std::string BudgetBar(double spent, double total) {
  const double frac = total > 0 && std::isfinite(spent)
                          ? std::clamp(spent / total, 0.0, 1.0)
                          : 0.0;
  const int w = 160, h = 12;
  return absl::StrFormat(
      "<svg class=\"budget-bar\" width=\"%d\" height=\"%d\" role=\"img\" "
      "aria-label=\"%.1f%% spent\"><rect width=\"%d\" height=\"%d\" "
      "fill=\"#e5efe5\" stroke=\"#9a9\"/><rect width=\"%.1f\" height=\"%d\" "
      "fill=\"%s\"/></svg>",
      w, h, 100 * frac, w, h, w * frac, h, frac > 0.9 ? "#c0392b" : "#e67e22");
}

}  // namespace dpopt::server::console
