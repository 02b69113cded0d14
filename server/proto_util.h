// Small conversions shared by the server's managers.
#ifndef DPOPT_SERVER_PROTO_UTIL_H_
#define DPOPT_SERVER_PROTO_UTIL_H_

#include <cstdint>

#include "google/protobuf/timestamp.pb.h"

namespace dpopt::server {

inline google::protobuf::Timestamp ToTimestamp(int64_t unix_micros) {
  google::protobuf::Timestamp t;
  t.set_seconds(unix_micros / 1000000);
  t.set_nanos(static_cast<int32_t>((unix_micros % 1000000) * 1000));
  return t;
}

}  // namespace dpopt::server

#endif  // DPOPT_SERVER_PROTO_UTIL_H_
