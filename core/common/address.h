// Whether a gRPC address stays on this machine (docs/security.md,
// "Transport"). Used by the server and the console (plaintext listeners
// only on loopback unless --insecure) and by the CLI (plaintext only to
// loopback unless --insecure). Decides from the text alone: nothing is
// resolved and no socket is opened.
#ifndef DPOPT_CORE_COMMON_ADDRESS_H_
#define DPOPT_CORE_COMMON_ADDRESS_H_

#include "absl/strings/string_view.h"

namespace dpopt {

// True only for a literal loopback address, 127.0.0.0/8 in dotted-quad form
// or ::1 (also IPv4-mapped ::ffff:127.x.y.z), with or without a port and an
// "ipv4:", "ipv6:" or "dns:" scheme, and for Unix-domain sockets ("unix:",
// "unix-abstract:"). Host names are not loopback, "localhost" included (a
// name can resolve anywhere); neither is "unixhost:50051" nor
// "127.0.0.1.example.com".
bool IsLoopbackAddress(absl::string_view address);

}  // namespace dpopt

#endif  // DPOPT_CORE_COMMON_ADDRESS_H_
