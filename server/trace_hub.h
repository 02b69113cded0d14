// Fan-out of job events (privatized trace points and state changes) to the
// clients watching a job. Events are only ever privatized values.
#ifndef DPOPT_SERVER_TRACE_HUB_H_
#define DPOPT_SERVER_TRACE_HUB_H_

#include <deque>
#include <map>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "dpopt/v1/dpopt.pb.h"

namespace dpopt::server {

class TraceHub {
 public:
  // A subscription to one job. Events published after Subscribe() are queued
  // (a slow watcher drops the oldest trace points beyond `kMaxQueued`, never
  // state changes).
  class Subscription {
   public:
    // Waits up to `timeout` for the next event. Returns false on timeout or
    // when the hub is shut down (then `closed()` is true).
    bool Next(v1::JobEvent* event, absl::Duration timeout);
    bool closed() const;

   private:
    friend class TraceHub;
    mutable absl::Mutex mu_;
    std::deque<v1::JobEvent> queue_ ABSL_GUARDED_BY(mu_);
    bool closed_ ABSL_GUARDED_BY(mu_) = false;
  };

  static constexpr size_t kMaxQueued = 10000;

  std::shared_ptr<Subscription> Subscribe(const std::string& job_id);
  void Unsubscribe(const std::string& job_id,
                   const std::shared_ptr<Subscription>& sub);
  void Publish(const std::string& job_id, const v1::JobEvent& event);
  // Wakes and closes every subscription (server shutdown).
  void Shutdown();

 private:
  absl::Mutex mu_;
  std::multimap<std::string, std::shared_ptr<Subscription>> subs_
      ABSL_GUARDED_BY(mu_);
  bool shutdown_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace dpopt::server

#endif  // DPOPT_SERVER_TRACE_HUB_H_
