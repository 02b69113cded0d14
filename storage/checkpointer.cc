#include "storage/checkpointer.h"

#include <algorithm>
#include <atomic>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
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
  if (truncate_retry <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("truncate_retry must be positive");
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

void Checkpointer::RequestTruncate() {
  absl::MutexLock lock(&mu_);
  if (!truncate_pending_) truncate_due_ = absl::Now();
  truncate_pending_ = true;
}

bool Checkpointer::truncate_pending() const {
  absl::MutexLock lock(&mu_);
  return truncate_pending_;
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
    bool truncate = false;
    {
      absl::MutexLock lock(&mu_);
      auto truncate_due = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
        return truncate_pending_ && absl::Now() >= truncate_due_;
      };
      auto due = [&]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
        return stop_ || truncate_due() ||
               (requested_ && (pauses_ == 0 || absl::Now() - requested_at_ >=
                                                   options_.max_pause));
      };
      // Conditions are re-evaluated when the mutex is released; a paused
      // request also wakes the thread when it reaches max_pause, and a
      // pending truncation when its retry is due (no timer otherwise: an
      // idle server does not wake this thread).
      while (!due()) {
        const bool was_requested = requested_;
        const bool was_truncating = truncate_pending_;
        absl::Time deadline = requested_ ? requested_at_ + options_.max_pause
                                         : absl::InfiniteFuture();
        if (truncate_pending_) deadline = std::min(deadline, truncate_due_);
        auto changed = [&]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
          return due() || requested_ != was_requested ||
                 truncate_pending_ != was_truncating;
        };
        mu_.AwaitWithDeadline(absl::Condition(&changed), deadline);
      }
      if (stop_) return;
      truncate = truncate_due();
      if (!truncate) requested_ = false;
      running_ = true;
    }
    if (truncate) {
      absl::StatusOr<bool> done =
          CompletePendingWalTruncation(*conn_, absl::ZeroDuration());
      absl::MutexLock lock(&mu_);
      running_ = false;
      ++stats_.truncate_attempts;
      if (done.ok() && *done) {
        truncate_pending_ = false;
        ++stats_.truncations;
      } else {
        if (!done.ok()) stats_.last_error = done.status();
        truncate_due_ = absl::Now() + options_.truncate_retry;
      }
      continue;
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

namespace {

absl::StatusOr<std::optional<std::string>> ReadPendingFlag(Connection& conn) {
  ASSIGN_OR_RETURN(Statement st,
                   conn.Prepare("SELECT value FROM meta WHERE key = ?"));
  RETURN_IF_ERROR(st.BindText(1, kWalTruncationPendingKey));
  ASSIGN_OR_RETURN(bool row, st.Step());
  if (!row) return std::optional<std::string>();
  return std::optional<std::string>(st.ColumnText(0));
}

}  // namespace

absl::Status MarkWalTruncationPending(Connection& conn) {
  static std::atomic<int64_t> counter{0};
  ASSIGN_OR_RETURN(Statement st,
                   conn.Prepare("INSERT INTO meta(key, value) VALUES(?, ?) ON "
                                "CONFLICT(key) DO UPDATE SET value = "
                                "excluded.value"));
  RETURN_IF_ERROR(st.BindText(1, kWalTruncationPendingKey));
  RETURN_IF_ERROR(st.BindText(
      2, absl::StrCat(absl::ToUnixMicros(absl::Now()), ".", ++counter)));
  return st.Run();
}

absl::StatusOr<bool> WalTruncationPending(Connection& conn) {
  ASSIGN_OR_RETURN(std::optional<std::string> flag, ReadPendingFlag(conn));
  return flag.has_value();
}

absl::StatusOr<bool> CompletePendingWalTruncation(Connection& conn,
                                                  absl::Duration wait) {
  ASSIGN_OR_RETURN(std::optional<std::string> flag, ReadPendingFlag(conn));
  if (!flag.has_value()) return true;
  const absl::Time deadline = absl::Now() + wait;
  for (;;) {
    ASSIGN_OR_RETURN(Connection::CheckpointResult r, conn.CheckpointTruncate());
    if (r.wal_frames >= 0) break;
    if (absl::Now() >= deadline) return false;
    absl::SleepFor(absl::Milliseconds(100));
  }
  // Cleared only if no deletion committed since the flag was read (that
  // one's rows may be in the WAL again: still pending).
  ASSIGN_OR_RETURN(
      Statement clear,
      conn.Prepare("DELETE FROM meta WHERE key = ? AND value = ?"));
  RETURN_IF_ERROR(clear.BindText(1, kWalTruncationPendingKey));
  RETURN_IF_ERROR(clear.BindText(2, *flag));
  RETURN_IF_ERROR(clear.Run());
  ASSIGN_OR_RETURN(flag, ReadPendingFlag(conn));
  return !flag.has_value();
}

}  // namespace dpopt::storage
