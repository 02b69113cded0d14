#include "server/trace_hub.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

namespace dpopt::server {
namespace {

// What a queued event holds in memory: its values plus the message itself.
int64_t EventBytes(const v1::JobEvent& event) {
  return static_cast<int64_t>(event.ByteSizeLong() + sizeof(v1::JobEvent));
}

}  // namespace

absl::Status TraceHub::Options::Validate() const {
  if (max_buffered_bytes_per_watcher < (int64_t{1} << 20) ||
      max_buffered_bytes_per_watcher > (int64_t{1} << 30)) {
    return absl::InvalidArgumentError(
        "--max-watch-buffer-bytes must be in [1 MiB, 1 GiB]");
  }
  return absl::OkStatus();
}

TraceHub::TraceHub(const Options& options) : options_(options) {}
TraceHub::TraceHub() : TraceHub(Options()) {}

bool TraceHub::Subscription::Next(v1::JobEvent* event, absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return !queue_.empty() || closed_ || dropped_;
  };
  mu_.AwaitWithTimeout(absl::Condition(&ready), timeout);
  if (queue_.empty() || dropped_) return false;
  *event = std::move(queue_.front());
  queue_.pop_front();
  buffered_bytes_ -= EventBytes(*event);
  return true;
}

bool TraceHub::Subscription::closed() const {
  absl::MutexLock lock(&mu_);
  return closed_;
}

bool TraceHub::Subscription::dropped() const {
  absl::MutexLock lock(&mu_);
  return dropped_;
}

void TraceHub::Subscription::OnDrop(std::function<void()> f) {
  bool run_now = false;
  {
    absl::MutexLock lock(&mu_);
    if (dropped_) {
      run_now = true;
    } else {
      on_drop_ = std::move(f);
    }
  }
  if (run_now && f) f();
}

int64_t TraceHub::Subscription::buffered_bytes() const {
  absl::MutexLock lock(&mu_);
  return buffered_bytes_;
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
  const int64_t bytes = EventBytes(event);
  std::vector<std::function<void()>> on_drop;
  {
    absl::MutexLock lock(&mu_);
    auto range = subs_.equal_range(job_id);
    for (auto it = range.first; it != range.second;) {
      Subscription& s = *it->second;
      absl::MutexLock sub_lock(&s.mu_);
      if (s.buffered_bytes_ + bytes <=
          options_.max_buffered_bytes_per_watcher) {
        s.queue_.push_back(event);
        s.buffered_bytes_ += bytes;
        ++it;
        continue;
      }
      // The watcher stopped reading (or reads slower than the job writes):
      // free what it holds and send it nothing more. Dropping the oldest
      // points instead would leave it a trace with silent gaps.
      s.dropped_ = true;
      s.queue_.clear();
      s.buffered_bytes_ = 0;
      if (s.on_drop_) on_drop.push_back(std::move(s.on_drop_));
      s.on_drop_ = nullptr;
      ++dropped_;
      it = subs_.erase(it);
    }
  }
  for (auto& f : on_drop) f();
}

int64_t TraceHub::dropped_watchers() const {
  absl::MutexLock lock(&mu_);
  return dropped_;
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
