// The CLI's connection policy (docs/security.md, "Transport"), as decision
// functions that open nothing: the CLI calls them before it creates a
// channel, and tests call them alone.
#ifndef DPOPT_CLIENT_TRANSPORT_POLICY_H_
#define DPOPT_CLIENT_TRANSPORT_POLICY_H_

#include <sys/types.h>

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace dpopt::client {

// How the CLI talks to the server.
enum class Transport {
  kPlaintext,       // loopback, or --insecure
  kTlsSystemRoots,  // TLS verified against the system's trusted roots
  kTlsCustomCa,     // TLS verified against --tls-ca
};

struct TransportRequest {
  std::string server;       // --server
  bool has_tls_ca = false;  // --tls-ca given
  bool tls = false;         // --tls: TLS even to a loopback address
  bool insecure = false;    // --insecure: plaintext off loopback
};

// The transport for `request`; opens nothing:
//  * --tls-ca: TLS with that CA (with --insecure: INVALID_ARGUMENT);
//  * --tls: TLS with the system's roots;
//  * a literal loopback address or Unix socket (core/common/address.h):
//    plaintext (the server's default listener);
//  * --insecure: plaintext (the token crosses the network in clear text);
//  * anything else: TLS with the system's roots. Plaintext never reaches a
//    non-loopback address unless --insecure says so.
absl::StatusOr<Transport> ChooseTransport(const TransportRequest& request);

// OK unless `mode` (st_mode of the token file at `path`) gives group or
// others any access; then FAILED_PRECONDITION saying to chmod 600 it (ssh's
// rule for private keys).
absl::Status CheckTokenFileMode(const std::string& path, mode_t mode);
// stat(2) of `path`, then CheckTokenFileMode. NOT_FOUND if it is missing.
absl::Status CheckTokenFile(const std::string& path);

}  // namespace dpopt::client

#endif  // DPOPT_CLIENT_TRANSPORT_POLICY_H_
