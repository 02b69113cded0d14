#include "server/call_guards.h"

#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace dpopt::server {

std::string AuditedPeer(absl::string_view grpc_peer) {
  return std::string(grpc_peer.substr(0, kMaxPeerBytes));
}

std::string PeerHost(absl::string_view grpc_peer) {
  absl::string_view host = grpc_peer;
  if (absl::StartsWith(host, "ipv4:") || absl::StartsWith(host, "ipv6:")) {
    const size_t colon = host.rfind(':');
    if (colon != absl::string_view::npos && colon > 4) {
      host = host.substr(0, colon);
    }
  }
  return std::string(host.substr(0, kMaxPeerBytes));
}

absl::Status AuthFailureLog::Options::Validate() const {
  if (window <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("the window must be positive");
  }
  if (max_peers < 1) {
    return absl::InvalidArgumentError("max_peers must be at least 1");
  }
  return absl::OkStatus();
}

std::optional<int64_t> AuthFailureLog::Admit(const std::string& peer_host,
                                             absl::Time now) {
  absl::MutexLock lock(&mu_);
  auto it = peers_.find(peer_host);
  if (it == peers_.end()) {
    if (peers_.size() >= static_cast<size_t>(options_.max_peers)) {
      // Forget peers whose window ended with nothing suppressed: nothing
      // of theirs is lost.
      absl::erase_if(peers_, [&](const auto& kv) {
        return kv.second.suppressed == 0 &&
               now - kv.second.window_start >= options_.window;
      });
    }
    std::string key = peer_host;
    if (peers_.size() >= static_cast<size_t>(options_.max_peers)) {
      key = std::string(kOverflowPeer);
    }
    auto [slot, inserted] = peers_.try_emplace(key);
    if (inserted) {
      slot->second.window_start = now;
      return 0;
    }
    it = slot;
  }
  Entry& e = it->second;
  if (now - e.window_start < options_.window) {
    ++e.suppressed;
    return std::nullopt;
  }
  const int64_t suppressed = e.suppressed;
  e.window_start = now;
  e.suppressed = 0;
  return suppressed;
}

StreamRegistry::Handle::~Handle() { owner_->Unregister(id_); }

std::unique_ptr<StreamRegistry::Handle> StreamRegistry::Register(
    std::string token_id, std::string principal, grpc::ServerContext* ctx) {
  absl::MutexLock lock(&mu_);
  const int64_t id = next_id_++;
  streams_.emplace(id, Stream{std::move(token_id), std::move(principal), ctx});
  return std::unique_ptr<Handle>(new Handle(this, id));
}

void StreamRegistry::Unregister(int64_t id) {
  absl::MutexLock lock(&mu_);
  streams_.erase(id);
}

int StreamRegistry::CancelToken(absl::string_view token_id) {
  absl::MutexLock lock(&mu_);
  int n = 0;
  for (auto& [id, s] : streams_) {
    if (s.token_id == token_id) {
      s.ctx->TryCancel();
      ++n;
    }
  }
  return n;
}

int StreamRegistry::CancelPrincipal(absl::string_view principal) {
  absl::MutexLock lock(&mu_);
  int n = 0;
  for (auto& [id, s] : streams_) {
    if (s.principal == principal) {
      s.ctx->TryCancel();
      ++n;
    }
  }
  return n;
}

}  // namespace dpopt::server
