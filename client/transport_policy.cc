#include "client/transport_policy.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/common/address.h"

namespace dpopt::client {

absl::StatusOr<Transport> ChooseTransport(const TransportRequest& request) {
  if (request.has_tls_ca) {
    if (request.insecure) {
      return absl::InvalidArgumentError(
          "--insecure (plaintext) and --tls-ca (TLS) contradict each other");
    }
    return Transport::kTlsCustomCa;
  }
  if (request.tls) {
    if (request.insecure) {
      return absl::InvalidArgumentError(
          "--insecure (plaintext) and --tls contradict each other");
    }
    return Transport::kTlsSystemRoots;
  }
  if (IsLoopbackAddress(request.server) || request.insecure) {
    return Transport::kPlaintext;
  }
  return Transport::kTlsSystemRoots;
}

absl::Status CheckTokenFileMode(const std::string& path, mode_t mode) {
  if ((mode & (S_IRWXG | S_IRWXO)) == 0) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrFormat(
      "the token file %s has mode %04o: other users may read the token. "
      "Make it private with: chmod 600 %s",
      path, mode & 07777, path));
}

absl::Status CheckTokenFile(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    return absl::NotFoundError(
        absl::StrCat("cannot stat ", path, ": ", std::strerror(errno)));
  }
  return CheckTokenFileMode(path, st.st_mode);
}

}  // namespace dpopt::client
