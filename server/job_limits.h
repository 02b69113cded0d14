// Server-wide limits on a job's work and trace shared by the server's options
// and the job manager (a header without dependencies: server.h carries it).
#ifndef DPOPT_SERVER_JOB_LIMITS_H_
#define DPOPT_SERVER_JOB_LIMITS_H_

#include <cstdint>

namespace dpopt::server {

// Default of the largest public work bound (optim::Calibration::work_units,
// row-coordinate operations) a server admits: about a few hours of one
// worker. The range is [1, 1e18].
inline constexpr double kDefaultMaxJobWork = 1e13;

// Default of the largest stored trace of a job, in bytes, as bounded from
// public values before the job is charged (TraceBytesBound). 0 = no limit.
inline constexpr int64_t kDefaultMaxTraceBytesPerJob = int64_t{64} << 20;

// What one trace point takes at most, for that bound: its scalar fields
// (step, norms, public evaluation) and record overhead, plus 8 bytes per
// value of the privatized iterate (JobSpec.trace_iterates).
inline constexpr int64_t kTracePointOverheadBytes = 64;
inline constexpr int64_t kTraceBytesPerValue = 8;

// A public upper bound on the bytes of a trace of `points` points with
// `traced_values` iterate values each (0 without trace_iterates).
constexpr int64_t TraceBytesBound(int64_t points, int64_t traced_values) {
  return points *
         (kTracePointOverheadBytes + kTraceBytesPerValue * traced_values);
}

// Default of the bytes of events the trace hub holds for one watcher before
// it drops the watcher (TraceHub::Options).
inline constexpr int64_t kDefaultMaxWatchBufferBytes = int64_t{8} << 20;

// One GetJobResult reply carries at most this many trace points, and at most
// kMaxTraceBytesPerReply bytes of them (always at least one point: the
// largest point, 100000 iterate values, fits).
inline constexpr int kMaxTracePointsPerReply = 1000;
inline constexpr int64_t kMaxTraceBytesPerReply = int64_t{1} << 20;

}  // namespace dpopt::server

#endif  // DPOPT_SERVER_JOB_LIMITS_H_
