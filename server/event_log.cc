#include "server/event_log.h"

#include <atomic>
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "nlohmann/json.hpp"

namespace dpopt::server {
namespace {

std::atomic<LogFormat> g_format{LogFormat::kText};

const char* LevelName(LogLevel level) {
  switch (level) {
    case LogLevel::kInfo:
      return "info";
    case LogLevel::kWarning:
      return "warning";
    case LogLevel::kError:
      return "error";
  }
  return "info";
}

}  // namespace

absl::StatusOr<LogFormat> ParseLogFormat(absl::string_view name) {
  if (name == "text") return LogFormat::kText;
  if (name == "json") return LogFormat::kJson;
  return absl::InvalidArgumentError(
      absl::StrCat("--log-format must be text or json, got \"", name, "\""));
}

void SetLogFormat(LogFormat format) { g_format.store(format); }

std::string FormatLogEvent(LogFormat format, LogLevel level,
                           absl::string_view event, absl::string_view message,
                           const LogFields& fields) {
  if (format == LogFormat::kText) {
    return absl::StrCat("dpopt-server: ", message);
  }
  nlohmann::json j;
  j["time"] = absl::FormatTime("%Y-%m-%dT%H:%M:%E6SZ", absl::Now(),
                               absl::UTCTimeZone());
  j["level"] = LevelName(level);
  j["event"] = std::string(event);
  j["message"] = std::string(message);
  if (!fields.job.empty()) j["job"] = fields.job;
  if (!fields.principal.empty()) j["principal"] = fields.principal;
  if (!fields.dataset.empty()) j["dataset"] = fields.dataset;
  if (!fields.status.empty()) j["status"] = fields.status;
  // Invalid UTF-8 (a name is client text) is replaced, never thrown on.
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

void LogEvent(LogLevel level, absl::string_view event,
              absl::string_view message, const LogFields& fields) {
  const std::string line =
      FormatLogEvent(g_format.load(), level, event, message, fields) + "\n";
  // One write per line, so concurrent events do not interleave.
  std::fwrite(line.data(), 1, line.size(), stderr);
  std::fflush(stderr);
}

}  // namespace dpopt::server
