// What a Call (server/services.cc) consults besides the authenticator
// (docs/security.md):
//  * AuthFailureLog: failed authentications are audited at most once per
//    peer per window (one minute); the row written at the start of a window
//    carries how many were suppressed in the previous one. Memory is bounded
//    (max_peers entries; past that, new peers share one overflow entry).
//  * StreamRegistry: the open streaming calls (WatchJob, ImportDataset) by
//    token and principal, so that revoking a token or a principal cancels
//    them at once.
#ifndef DPOPT_SERVER_CALL_GUARDS_H_
#define DPOPT_SERVER_CALL_GUARDS_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "grpcpp/server_context.h"

namespace dpopt::server {

// Longest peer address stored in an audit record.
inline constexpr size_t kMaxPeerBytes = 64;

// The peer as audited: gRPC's peer string ("ipv4:127.0.0.1:41234"), cut to
// kMaxPeerBytes.
std::string AuditedPeer(absl::string_view grpc_peer);
// The peer without its port ("ipv4:127.0.0.1"): a client cannot escape the
// per-peer aggregation by opening new connections. Cut to kMaxPeerBytes.
std::string PeerHost(absl::string_view grpc_peer);

class AuthFailureLog {
 public:
  struct Options {
    absl::Duration window = absl::Minutes(1);
    int max_peers = 4096;
    absl::Status Validate() const;
  };
  explicit AuthFailureLog(const Options& options) : options_(options) {}

  // The key under which overflowing peers are aggregated.
  static constexpr absl::string_view kOverflowPeer = "(other peers)";

  // Whether this failure from `peer_host` is to be written: nullopt if it
  // is suppressed (counted), else the number suppressed for that peer since
  // its last written record.
  std::optional<int64_t> Admit(const std::string& peer_host,
                               absl::Time now = absl::Now());

 private:
  struct Entry {
    absl::Time window_start;
    int64_t suppressed = 0;
  };
  const Options options_;
  absl::Mutex mu_;
  absl::flat_hash_map<std::string, Entry> peers_ ABSL_GUARDED_BY(mu_);
};

class StreamRegistry {
 public:
  // Registered while a streaming call runs.
  class Handle {
   public:
    Handle(const Handle&) = delete;
    Handle& operator=(const Handle&) = delete;
    ~Handle();

   private:
    friend class StreamRegistry;
    Handle(StreamRegistry* owner, int64_t id) : owner_(owner), id_(id) {}
    StreamRegistry* owner_;
    int64_t id_;
  };

  // REQUIRES: ctx outlives the handle.
  std::unique_ptr<Handle> Register(std::string token_id, std::string principal,
                                   grpc::ServerContext* ctx);
  // Cancels the open streams of a token / of a principal; returns how many.
  int CancelToken(absl::string_view token_id);
  int CancelPrincipal(absl::string_view principal);

 private:
  struct Stream {
    std::string token_id;
    std::string principal;
    grpc::ServerContext* ctx;
  };
  void Unregister(int64_t id);

  absl::Mutex mu_;
  int64_t next_id_ ABSL_GUARDED_BY(mu_) = 0;
  absl::flat_hash_map<int64_t, Stream> streams_ ABSL_GUARDED_BY(mu_);
};

}  // namespace dpopt::server

#endif  // DPOPT_SERVER_CALL_GUARDS_H_
