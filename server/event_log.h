// The server's log: one line per event on standard error, as text
// ("dpopt-server: message") or, with --log-format=json, one JSON object per
// line: {"time", "level", "event", "message", and when known "job",
// "principal", "dataset", "status"}. Callers pass only public values: never
// a token, a row, or anything computed from private rows that was not
// privatized (docs/architecture.md, invariant "nothing unprivatized leaves
// the server").
#ifndef DPOPT_SERVER_EVENT_LOG_H_
#define DPOPT_SERVER_EVENT_LOG_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace dpopt::server {

enum class LogFormat { kText, kJson };
enum class LogLevel { kInfo, kWarning, kError };

// "text" or "json"; INVALID_ARGUMENT otherwise.
absl::StatusOr<LogFormat> ParseLogFormat(absl::string_view name);
// Process-wide; set once at start (default text).
void SetLogFormat(LogFormat format);

struct LogFields {
  std::string job;
  std::string principal;
  std::string dataset;
  // A gRPC status code name or a job state.
  std::string status;
};

// Writes one event. `event` is a short stable name ("server_started",
// "job_finished", ...); `message` the human-readable line.
void LogEvent(LogLevel level, absl::string_view event,
              absl::string_view message, const LogFields& fields = {});

// The line LogEvent writes (without the newline), for tests.
std::string FormatLogEvent(LogFormat format, LogLevel level,
                           absl::string_view event, absl::string_view message,
                           const LogFields& fields);

}  // namespace dpopt::server

#endif  // DPOPT_SERVER_EVENT_LOG_H_
