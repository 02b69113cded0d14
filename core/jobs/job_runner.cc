#include "core/jobs/job_runner.h"

#include <utility>

namespace dpopt::jobs {

absl::Status JobRunner::Options::Validate() const {
  if (workers < 1 || workers > 256) {
    return absl::InvalidArgumentError("workers must be in [1, 256]");
  }
  if (queue_capacity < 1 || queue_capacity > 100000) {
    return absl::InvalidArgumentError("queue_capacity must be in [1, 100000]");
  }
  return absl::OkStatus();
}

JobRunner::Ticket::Ticket(Ticket&& other) noexcept : runner_(other.runner_) {
  other.runner_ = nullptr;
}

JobRunner::Ticket& JobRunner::Ticket::operator=(Ticket&& other) noexcept {
  if (this != &other) {
    Release();
    runner_ = other.runner_;
    other.runner_ = nullptr;
  }
  return *this;
}

JobRunner::Ticket::~Ticket() { Release(); }

void JobRunner::Ticket::Release() {
  if (runner_ != nullptr) {
    runner_->ReleaseSlot();
    runner_ = nullptr;
  }
}

absl::StatusOr<std::unique_ptr<JobRunner>> JobRunner::Create(
    const Options& options) {
  if (absl::Status s = options.Validate(); !s.ok()) return s;
  std::unique_ptr<JobRunner> runner(new JobRunner(options));
  runner->workers_.reserve(options.workers);
  for (int i = 0; i < options.workers; ++i) {
    runner->workers_.emplace_back([r = runner.get()] { r->WorkerLoop(); });
  }
  return runner;
}

JobRunner::JobRunner(const Options& options) : options_(options) {}

JobRunner::~JobRunner() { Shutdown(); }

absl::StatusOr<JobRunner::Ticket> JobRunner::Reserve() {
  absl::MutexLock lock(&mu_);
  if (!accepting_) {
    return absl::FailedPreconditionError("job runner is shutting down");
  }
  if (reserved_ + static_cast<int>(queue_.size()) >= options_.queue_capacity) {
    return absl::ResourceExhaustedError("job queue full");
  }
  ++reserved_;
  return Ticket(this);
}

void JobRunner::ReleaseSlot() {
  absl::MutexLock lock(&mu_);
  --reserved_;
}

absl::Status JobRunner::Submit(Ticket ticket, const std::string& job_id,
                               Work work) {
  if (ticket.runner_ != this) {
    return absl::InvalidArgumentError("invalid job ticket");
  }
  if (job_id.empty() || !work) {
    return absl::InvalidArgumentError("job id and work are required");
  }
  absl::MutexLock lock(&mu_);
  if (!accepting_) {
    return absl::FailedPreconditionError("job runner is shutting down");
  }
  if (active_.contains(job_id)) {
    return absl::AlreadyExistsError("job id is already queued or running");
  }
  // Consume the slot: it moves from "reserved" to "queued".
  ticket.runner_ = nullptr;
  --reserved_;
  Job job{job_id, std::move(work), CancellationToken()};
  active_.emplace(job_id, job.token);
  queue_.push_back(std::move(job));
  return absl::OkStatus();
}

bool JobRunner::Cancel(const std::string& job_id) {
  absl::MutexLock lock(&mu_);
  auto it = active_.find(job_id);
  if (it == active_.end()) return false;
  it->second.Cancel();
  return true;
}

void JobRunner::WorkerLoop() {
  while (true) {
    Job job;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](JobRunner* r) ABSL_EXCLUSIVE_LOCKS_REQUIRED(r->mu_) {
            return !r->queue_.empty() || !r->accepting_;
          },
          this));
      if (queue_.empty()) return;  // shutting down and drained
      job = std::move(queue_.front());
      queue_.pop_front();
      ++running_;
    }
    job.work(job.token);
    {
      absl::MutexLock lock(&mu_);
      --running_;
      active_.erase(job.id);
    }
  }
}

void JobRunner::Shutdown() {
  {
    absl::MutexLock lock(&mu_);
    accepting_ = false;
    for (auto& [id, token] : active_) token.Cancel();
  }
  absl::MutexLock join_lock(&join_mu_);
  for (std::thread& t : workers_) {
    if (t.joinable()) t.join();
  }
}

int JobRunner::queued() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(queue_.size());
}

int JobRunner::running() const {
  absl::MutexLock lock(&mu_);
  return running_;
}

int JobRunner::reserved() const {
  absl::MutexLock lock(&mu_);
  return reserved_;
}

}  // namespace dpopt::jobs
