#include "client/transport_policy.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/common/address.h"

namespace dpopt::client {

absl::Status CheckPlaintextPolicy(absl::string_view server, bool tls,
                                  bool insecure) {
  if (tls || insecure || IsLoopbackAddress(server)) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      "refusing to connect to ", server,
      " without TLS: the bearer token would cross the network in clear "
      "text. Give --tls-ca (the CA of the server's certificate), connect to "
      "127.0.0.1, or pass --insecure if the network path is trusted"));
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
