// Small HTML building blocks of the web console: escaping, numbers, times,
// links and tables. Every value that comes from a reply is escaped here.
#ifndef DPOPT_SERVER_CONSOLE_HTML_H_
#define DPOPT_SERVER_CONSOLE_HTML_H_

#include <string>
#include <vector>

#include "google/protobuf/timestamp.pb.h"
#include "server/console/svg_plot.h"

namespace dpopt::server::console {

// Percent-encodes a path segment (dataset names, job ids in links).
std::string UrlSegment(const std::string& s);
// <a href="/console/PREFIX/SEGMENT">text</a>, both escaped.
std::string Link(const std::string& prefix, const std::string& segment,
                 const std::string& text);
// "%.6g", "-" for non-finite.
std::string Number(double v);
// "2026-11-25 06:42:59Z", or "-" when unset.
std::string Time(const google::protobuf::Timestamp& t);
// Seconds since the epoch (0 when unset).
double Seconds(const google::protobuf::Timestamp& t);

// A table: header cells are escaped; row cells are HTML already (use Esc or
// Link to build them).
class Table {
 public:
  Table(std::string css_class, std::vector<std::string> headers);
  Table& Row(std::vector<std::string> cells);
  std::string Html() const;
  bool empty() const { return rows_.empty(); }

 private:
  std::string css_class_;
  std::vector<std::string> headers_;
  std::vector<std::vector<std::string>> rows_;
};

inline std::string Esc(const std::string& s) { return HtmlEscape(s); }

// A definition list of (term, HTML value) pairs.
std::string DefinitionList(
    const std::vector<std::pair<std::string, std::string>>& items);

// Spent/total budget bar as a small inline SVG.
std::string BudgetBar(double spent, double total);

}  // namespace dpopt::server::console

#endif  // DPOPT_SERVER_CONSOLE_HTML_H_
