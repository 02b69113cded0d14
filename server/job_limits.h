// Server-wide limits on a job's work shared by the server's options and the
// job manager (a header without dependencies: server.h carries it).
#ifndef DPOPT_SERVER_JOB_LIMITS_H_
#define DPOPT_SERVER_JOB_LIMITS_H_

namespace dpopt::server {

// Default of the largest public work bound (optim::Calibration::work_units,
// row-coordinate operations) a server admits: about a few hours of one
// worker. The range is [1, 1e18].
inline constexpr double kDefaultMaxJobWork = 1e13;

}  // namespace dpopt::server

#endif  // DPOPT_SERVER_JOB_LIMITS_H_
