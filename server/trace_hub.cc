#include "server/trace_hub.h"

#include <utility>

namespace dpopt::server {

bool TraceHub::Subscription::Next(v1::JobEvent* event, absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return !queue_.empty() || closed_;
  };
  mu_.AwaitWithTimeout(absl::Condition(&ready), timeout);
  if (queue_.empty()) return false;
  *event = std::move(queue_.front());
  queue_.pop_front();
  return true;
}

bool TraceHub::Subscription::closed() const {
  absl::MutexLock lock(&mu_);
  return closed_;
}

std::shared_ptr<TraceHub::Subscription> TraceHub::Subscribe(
    const std::string& job_id) {
  auto sub = std::make_shared<Subscription>();
  absl::MutexLock lock(&mu_);
  if (shutdown_) {
    absl::MutexLock sub_lock(&sub->mu_);
    sub->closed_ = true;
  } else {
    subs_.emplace(job_id, sub);
  }
  return sub;
}

void TraceHub::Unsubscribe(const std::string& job_id,
                           const std::shared_ptr<Subscription>& sub) {
  absl::MutexLock lock(&mu_);
  auto range = subs_.equal_range(job_id);
  for (auto it = range.first; it != range.second; ++it) {
    if (it->second == sub) {
      subs_.erase(it);
      return;
    }
  }
}

void TraceHub::Publish(const std::string& job_id, const v1::JobEvent& event) {
  absl::MutexLock lock(&mu_);
  auto range = subs_.equal_range(job_id);
  for (auto it = range.first; it != range.second; ++it) {
    Subscription& s = *it->second;
    absl::MutexLock sub_lock(&s.mu_);
    if (event.has_trace() && s.queue_.size() >= kMaxQueued) {
      // Drop the oldest trace point; state changes are never dropped.
      for (auto q = s.queue_.begin(); q != s.queue_.end(); ++q) {
        if (q->has_trace()) {
          s.queue_.erase(q);
          break;
        }
      }
    }
    s.queue_.push_back(event);
  }
}

void TraceHub::Shutdown() {
  absl::MutexLock lock(&mu_);
  shutdown_ = true;
  for (auto& [id, sub] : subs_) {
    absl::MutexLock sub_lock(&sub->mu_);
    sub->closed_ = true;
  }
  subs_.clear();
}

}  // namespace dpopt::server
