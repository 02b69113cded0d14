#include "core/common/address.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <string>

#include "absl/strings/match.h"
#include "absl/strings/strip.h"

namespace dpopt {

bool IsLoopbackAddress(absl::string_view address) {
  absl::string_view a = address;
  if (absl::StartsWith(a, "unix:") || absl::StartsWith(a, "unix-abstract:")) {
    return true;
  }
  if (absl::ConsumePrefix(&a, "dns:")) {
    // dns:[//authority/]host[:port]
    if (absl::ConsumePrefix(&a, "//")) {
      const size_t slash = a.find('/');
      if (slash == absl::string_view::npos) return false;
      a.remove_prefix(slash + 1);
    }
  } else if (!absl::ConsumePrefix(&a, "ipv4:")) {
    absl::ConsumePrefix(&a, "ipv6:");
  }
  absl::string_view host = a;
  if (absl::ConsumePrefix(&host, "[")) {
    const size_t close = host.find(']');
    if (close == absl::string_view::npos) return false;
    absl::string_view rest = host.substr(close + 1);
    host = host.substr(0, close);
    if (!rest.empty() && rest[0] != ':') return false;
  } else {
    const size_t first = host.find(':');
    // One colon: HOST:PORT. More: a bare IPv6 address without brackets.
    if (first != absl::string_view::npos && host.rfind(':') == first) {
      host = host.substr(0, first);
    }
  }
  const std::string h(host);
  in_addr v4;
  if (inet_pton(AF_INET, h.c_str(), &v4) == 1) {
    return (ntohl(v4.s_addr) >> 24) == 127;
  }
  in6_addr v6;
  if (inet_pton(AF_INET6, h.c_str(), &v6) == 1) {
    if (IN6_IS_ADDR_LOOPBACK(&v6)) return true;
    return IN6_IS_ADDR_V4MAPPED(&v6) && v6.s6_addr[12] == 127;
  }
  return false;
}

}  // namespace dpopt
