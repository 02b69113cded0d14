// Length limits of request fields, checked before a handler uses anything
// from its request (docs/security.md, "Limits"). One reflection-based check
// over the whole request message (nested messages and repeated fields
// included), applied by every RPC handler (server/services.cc, class Call):
//
//   field name                               limit
//   name, dataset, principal, evaluate_on,   kMaxNameBytes (128)
//   feature_names
//   id, job_id                               kMaxIdBytes (64) of
//                                            [A-Za-z0-9_.-]
//   label, description, and any other        kMaxTextBytes (200)
//   string
//   page_token                               kMaxPageTokenBytes (512)
//   bytes fields                             the message limit only
//
// and the whole message's serialized size: kMaxRequestBytes for every
// message except ImportDataset's (its header and chunks are bounded by the
// server's receive limit, ServerOptions::max_message_bytes).
// Errors name the field and the limit, never the value.
#ifndef DPOPT_SERVER_REQUEST_LIMITS_H_
#define DPOPT_SERVER_REQUEST_LIMITS_H_

#include <cstddef>

#include "absl/status/status.h"
#include "google/protobuf/message.h"

namespace dpopt::server {

inline constexpr size_t kMaxNameBytes = 128;
inline constexpr size_t kMaxIdBytes = 64;
inline constexpr size_t kMaxTextBytes = 200;
inline constexpr size_t kMaxPageTokenBytes = 512;
// Every request but ImportDataset's messages: a job spec with initial points
// of a few thousand coordinates fits.
inline constexpr size_t kMaxRequestBytes = 256 << 10;

// INVALID_ARGUMENT if a field of `request` is over its limit, or the message
// is larger than `max_message_bytes` (0: no whole-message limit).
absl::Status CheckRequestLimits(const google::protobuf::Message& request,
                                size_t max_message_bytes = kMaxRequestBytes);

}  // namespace dpopt::server

#endif  // DPOPT_SERVER_REQUEST_LIMITS_H_
