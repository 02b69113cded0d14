#include "storage/checkpointer.h"

#include <utility>

#include "core/common/status_macros.h"

namespace dpopt::storage {

absl::Status CheckpointerOptions::Validate() const {
  if (request_frames < 1) {
    return absl::InvalidArgumentError("request_frames must be >= 1");
  }
  if (busy_retry <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("busy_retry must be positive");
  }
  if (max_pause <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("max_pause must be positive");
  }
  if (connection.read_only) {
    return absl::InvalidArgumentError(
        "a checkpointer needs a read-write connection");
  }
  return connection.Validate();
}

absl::StatusOr<std::unique_ptr<Checkpointer>> Checkpointer::Start(
    const std::string& path, const Options& options) {
  RETURN_IF_ERROR(options.Validate());
  ConnectionOptions conn_options = options.connection;
  conn_options.create_if_missing = false;
  ASSIGN_OR_RETURN(std::unique_ptr<Connection> conn,
                   Connection::Open(path, conn_options));
  std::unique_ptr<Checkpointer> c(new Checkpointer(options, std::move(conn)));
  c->thread_ = std::thread([raw = c.get()] { raw->Loop(); });
  return c;
}

Checkpointer::Checkpointer(const Options& options,
                           std::unique_ptr<Connection> conn)
    : options_(options), conn_(std::move(conn)) {}

Checkpointer::~Checkpointer() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

void Checkpointer::OnCommit(int64_t wal_frames) {
  if (wal_frames >= options_.request_frames) Request();
}

void Checkpointer::Request() {
  absl::MutexLock lock(&mu_);
  RequestLocked();
}

void Checkpointer::RequestLocked() {
  if (!requested_) requested_at_ = absl::Now();
  requested_ = true;
}

Checkpointer::ScopedPause::ScopedPause(Checkpointer& checkpointer)
    : checkpointer_(checkpointer) {
  absl::MutexLock lock(&checkpointer_.mu_);
  ++checkpointer_.pauses_;
}

Checkpointer::ScopedPause::~ScopedPause() {
  absl::MutexLock lock(&checkpointer_.mu_);
  --checkpointer_.pauses_;
}

Checkpointer::Stats Checkpointer::stats() const {
  absl::MutexLock lock(&mu_);
  return stats_;
}

bool Checkpointer::WaitIdle(absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  auto idle = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
    return !requested_ && !running_;
  };
  return mu_.AwaitWithTimeout(absl::Condition(&idle), timeout);
}

void Checkpointer::Loop() {
  for (;;) {
    {
      absl::MutexLock lock(&mu_);
      auto due = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
        return stop_ ||
               (requested_ && (pauses_ == 0 || absl::Now() - requested_at_ >=
                                                   options_.max_pause));
      };
      // Conditions are re-evaluated when the mutex is released; a paused
      // request also wakes the thread when it reaches max_pause (no timer
      // otherwise: an idle server does not wake this thread).
      while (!due()) {
        const bool was_requested = requested_;
        const absl::Time deadline = requested_
                                        ? requested_at_ + options_.max_pause
                                        : absl::InfiniteFuture();
        auto changed = [&]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
          return due() || requested_ != was_requested;
        };
        mu_.AwaitWithDeadline(absl::Condition(&changed), deadline);
      }
      if (stop_) return;
      requested_ = false;
      running_ = true;
    }
    const absl::Time started = absl::Now();
    absl::StatusOr<Connection::CheckpointResult> r = conn_->CheckpointPassive();
    const absl::Duration took = absl::Now() - started;
    absl::MutexLock lock(&mu_);
    running_ = false;
    if (!r.ok()) {
      stats_.last_error = r.status();
      continue;  // the next commit past the threshold requests again
    }
    if (r->wal_frames < 0) {
      // Another checkpoint holds the lock: retry shortly (or at stop).
      RequestLocked();
      auto stopping = [this]()
                          ABSL_SHARED_LOCKS_REQUIRED(mu_) { return stop_; };
      mu_.AwaitWithTimeout(absl::Condition(&stopping), options_.busy_retry);
      continue;
    }
    ++stats_.checkpoints;
    stats_.total_duration += took;
    stats_.last_duration = took;
    stats_.frames_checkpointed = r->checkpointed_frames;
    stats_.wal_frames = r->wal_frames;
  }
}

}  // namespace dpopt::storage
