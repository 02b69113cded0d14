// The CLI's connection policy (docs/security.md, "Transport"), as decision
// functions that open nothing: the CLI calls them before it creates a
// channel, and tests call them alone.
#ifndef DPOPT_CLIENT_TRANSPORT_POLICY_H_
#define DPOPT_CLIENT_TRANSPORT_POLICY_H_

#include <sys/types.h>

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace dpopt::client {

// OK when a channel to `server` may be opened: with TLS, to a literal
// loopback address or Unix socket (core/common/address.h), or with
// --insecure. Else FAILED_PRECONDITION naming the fixes: the bearer token
// would cross the network in clear text.
absl::Status CheckPlaintextPolicy(absl::string_view server, bool tls,
                                  bool insecure);

// OK unless `mode` (st_mode of the token file at `path`) gives group or
// others any access; then FAILED_PRECONDITION saying to chmod 600 it (ssh's
// rule for private keys).
absl::Status CheckTokenFileMode(const std::string& path, mode_t mode);
// stat(2) of `path`, then CheckTokenFileMode. NOT_FOUND if it is missing.
absl::Status CheckTokenFile(const std::string& path);

}  // namespace dpopt::client

#endif  // DPOPT_CLIENT_TRANSPORT_POLICY_H_
