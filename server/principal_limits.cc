#include "server/principal_limits.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace dpopt::server {

absl::Status PrincipalLimits::Validate() const {
  if (max_active_jobs < 0 || max_active_jobs > 100000) {
    return absl::InvalidArgumentError(
        "--max-jobs-per-principal must be in [0, 100000] (0 = no limit)");
  }
  if (max_estimates_per_second < 0 || max_estimates_per_second > 100000) {
    return absl::InvalidArgumentError(
        "--max-estimates-per-second must be in [0, 100000] (0 = no limit)");
  }
  if (max_watch_streams < 0 || max_watch_streams > 100000) {
    return absl::InvalidArgumentError(
        "--max-watches-per-principal must be in [0, 100000] (0 = no limit)");
  }
  return absl::OkStatus();
}

ConcurrencyLimiter::Slot::~Slot() { owner_->Release(key_); }

absl::StatusOr<std::shared_ptr<ConcurrencyLimiter::Slot>>
ConcurrencyLimiter::Acquire(const std::string& key,
                            std::optional<int> own_max) {
  const int max = own_max.value_or(max_);
  absl::MutexLock lock(&mu_);
  int64_t& n = in_use_[key];
  if (max > 0 && n >= max) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "\"", key, "\" already has ", n, " ", what_, ", the most ",
        own_max.has_value()
            ? "this principal may have (its own limit, set by a curator: "
              "dpopt principal limits)"
            : absl::StrCat("one principal may have (server flag ", flag_, ")"),
        "; nothing was charged. Wait for one to end"));
  }
  ++n;
  return std::shared_ptr<Slot>(new Slot(this, key));
}

int64_t ConcurrencyLimiter::InUse(const std::string& key) const {
  absl::MutexLock lock(&mu_);
  auto it = in_use_.find(key);
  return it == in_use_.end() ? 0 : it->second;
}

void ConcurrencyLimiter::Release(const std::string& key) {
  absl::MutexLock lock(&mu_);
  auto it = in_use_.find(key);
  if (it == in_use_.end()) return;
  if (--it->second <= 0) in_use_.erase(it);
}

absl::Status RateLimiter::Allow(const std::string& key, absl::Time now,
                                std::optional<int> own_rate) {
  const int rate = own_rate.value_or(rate_);
  if (rate == 0) return absl::OkStatus();
  absl::MutexLock lock(&mu_);
  const double capacity = rate;  // a burst of one second's worth
  if (buckets_.size() > 4096) {
    // Forget full buckets (idle keys): they hold nothing a new bucket lacks.
    absl::erase_if(buckets_, [&](const auto& kv) {
      return kv.second.tokens +
                 absl::ToDoubleSeconds(now - kv.second.refilled) * rate_ >=
             capacity;
    });
  }
  auto [it, inserted] = buckets_.try_emplace(key);
  Bucket& b = it->second;
  if (inserted) {
    b.tokens = capacity;
  } else {
    const double elapsed =
        std::max(0.0, absl::ToDoubleSeconds(now - b.refilled));
    b.tokens = std::min(capacity, b.tokens + elapsed * rate);
  }
  b.refilled = now;
  if (b.tokens < 1) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "\"", key, "\" made more than ", rate, " ", what_,
        " per second, the most ",
        own_rate.has_value()
            ? "this principal may make (its own limit, set by a curator: "
              "dpopt principal limits)"
            : absl::StrCat("one principal may make (server flag ", flag_, ")"),
        "; nothing was charged. Retry in a second"));
  }
  b.tokens -= 1;
  return absl::OkStatus();
}

}  // namespace dpopt::server
