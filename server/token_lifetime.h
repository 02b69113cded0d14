// How long bearer tokens live: ServerOptions carries it, the
// Authenticator applies it. Its own header so that server.h stays light.
#ifndef DPOPT_SERVER_TOKEN_LIFETIME_H_
#define DPOPT_SERVER_TOKEN_LIFETIME_H_

#include <cstdint>

#include "absl/status/status.h"

namespace dpopt::server {

// How long tokens live (docs/security.md, "Tokens").
struct TokenLifetimeOptions {
  // The longest lifetime a token may be given, and the lifetime of one
  // requested without a lifetime. 0: no maximum, and a token requested
  // without a lifetime never expires. (dpopt-server --max-token-ttl-days)
  int64_t max_ttl_seconds = int64_t{90} * 86400;
  absl::Status Validate() const;
};

}  // namespace dpopt::server

#endif  // DPOPT_SERVER_TOKEN_LIFETIME_H_
