// Fan-out of job events (privatized trace points and state changes) to the
// clients watching a job. Events are only ever privatized values.
#ifndef DPOPT_SERVER_TRACE_HUB_H_
#define DPOPT_SERVER_TRACE_HUB_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "dpopt/v1/dpopt.pb.h"
#include "server/job_limits.h"

namespace dpopt::server {

class TraceHub {
 public:
  struct Options {
    // Bytes of events one subscription may hold before its watcher takes
    // them (--max-watch-buffer-bytes). A watcher that falls further behind
    // is dropped: its queue is freed and it receives nothing more (it can
    // watch again and replay the stored trace). In [1 MiB, 1 GiB]: one
    // event (a trace point of 100000 values) must fit. Default
    // server/job_limits.h.
    int64_t max_buffered_bytes_per_watcher = kDefaultMaxWatchBufferBytes;
    absl::Status Validate() const;
  };

  // A subscription to one job. Events published after Subscribe() are queued
  // in order until the watcher takes them, up to the hub's byte bound.
  class Subscription {
   public:
    // Waits up to `timeout` for the next event. Returns false on timeout,
    // when the hub is shut down (then `closed()` is true) or when the
    // watcher was dropped (then `dropped()` is true).
    bool Next(v1::JobEvent* event, absl::Duration timeout);
    bool closed() const;
    bool dropped() const;
    // `f` runs once, on the publishing thread and without the hub's locks,
    // when this watcher is dropped (e.g. to end a stream whose write
    // blocks). Set it right after Subscribe().
    void OnDrop(std::function<void()> f);
    // Bytes queued now (for tests and metrics).
    int64_t buffered_bytes() const;

   private:
    friend class TraceHub;
    mutable absl::Mutex mu_;
    std::deque<v1::JobEvent> queue_ ABSL_GUARDED_BY(mu_);
    int64_t buffered_bytes_ ABSL_GUARDED_BY(mu_) = 0;
    bool closed_ ABSL_GUARDED_BY(mu_) = false;
    bool dropped_ ABSL_GUARDED_BY(mu_) = false;
    std::function<void()> on_drop_ ABSL_GUARDED_BY(mu_);
  };

  // REQUIRES: options.Validate() is OK.
  explicit TraceHub(const Options& options);
  TraceHub();

  std::shared_ptr<Subscription> Subscribe(const std::string& job_id);
  void Unsubscribe(const std::string& job_id,
                   const std::shared_ptr<Subscription>& sub);
  void Publish(const std::string& job_id, const v1::JobEvent& event);
  const Options& options() const { return options_; }
  // Watchers dropped so far (for tests and metrics).
  int64_t dropped_watchers() const;
  // Wakes and closes every subscription (server shutdown).
  void Shutdown();

 private:
  const Options options_;
  mutable absl::Mutex mu_;
  std::multimap<std::string, std::shared_ptr<Subscription>> subs_
      ABSL_GUARDED_BY(mu_);
  int64_t dropped_ ABSL_GUARDED_BY(mu_) = 0;
  bool shutdown_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace dpopt::server

#endif  // DPOPT_SERVER_TRACE_HUB_H_
