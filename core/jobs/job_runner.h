// JobRunner: a fixed pool of worker threads fed by a bounded FIFO queue, with
// per-job cancellation and deterministic shutdown (docs/architecture.md,
// convention "deterministic shutdown").
//
// Admission protocol (docs/architecture.md, invariant "charge before
// data"; a full queue never costs budget):
//   1. ticket = runner.Reserve()      // RESOURCE_EXHAUSTED "job queue full"
//   2. charge the ledger               // durable, before any data access
//   3. runner.Submit(std::move(ticket), job_id, work)
// A Ticket dropped without Submit frees its slot. `queue_capacity` bounds
// reserved + queued jobs (running jobs do not count).
//
// Cancellation: Cancel(job_id) sets the job's token. A queued job still runs
// (promptly, with the token already cancelled) so the caller's work function
// can record the final state; a running job sees the token within ~100 ms
// of work (its IterationCallback answers optim::StepReporter's stop
// questions from token.cancelled()).
//
// Thread-safe. Work functions run on worker threads and must not throw.
#ifndef DPOPT_CORE_JOBS_JOB_RUNNER_H_
#define DPOPT_CORE_JOBS_JOB_RUNNER_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace dpopt::jobs {

// Cheap to copy; all copies share one flag. Once cancelled, stays cancelled.
class CancellationToken {
 public:
  CancellationToken() : flag_(std::make_shared<std::atomic<bool>>(false)) {}
  bool cancelled() const { return flag_->load(std::memory_order_acquire); }
  void Cancel() const { flag_->store(true, std::memory_order_release); }

 private:
  std::shared_ptr<std::atomic<bool>> flag_;
};

class JobRunner {
 public:
  struct Options {
    // Worker threads, in [1, 256].
    int workers = 2;
    // Maximum reserved + queued (not yet running) jobs, in [1, 100000].
    int queue_capacity = 64;
    // INVALID_ARGUMENT outside the ranges.
    absl::Status Validate() const;
  };

  using Work = std::function<void(const CancellationToken&)>;

  // A reserved queue slot. Move-only. Destroying an unused ticket frees the
  // slot. REQUIRES: the JobRunner outlives its tickets.
  class Ticket {
   public:
    Ticket() = default;
    Ticket(Ticket&& other) noexcept;
    Ticket& operator=(Ticket&& other) noexcept;
    Ticket(const Ticket&) = delete;
    Ticket& operator=(const Ticket&) = delete;
    ~Ticket();
    bool valid() const { return runner_ != nullptr; }

   private:
    friend class JobRunner;
    explicit Ticket(JobRunner* runner) : runner_(runner) {}
    void Release();
    JobRunner* runner_ = nullptr;
  };

  // Starts the workers. Errors: INVALID_ARGUMENT for bad options.
  static absl::StatusOr<std::unique_ptr<JobRunner>> Create(
      const Options& options);

  // Calls Shutdown().
  ~JobRunner();
  JobRunner(const JobRunner&) = delete;
  JobRunner& operator=(const JobRunner&) = delete;

  // Reserves a queue slot. Errors: RESOURCE_EXHAUSTED "job queue full";
  // FAILED_PRECONDITION after Shutdown().
  absl::StatusOr<Ticket> Reserve();

  // Enqueues `work` under `job_id`, consuming the ticket's slot.
  // Errors (the ticket's slot is freed in every case): INVALID_ARGUMENT for
  // an invalid/foreign ticket, empty job_id or null work; ALREADY_EXISTS if
  // job_id is queued or running; FAILED_PRECONDITION after Shutdown() (the
  // caller must then mark the job failed: it may already be charged).
  absl::Status Submit(Ticket ticket, const std::string& job_id, Work work);

  // Sets the job's cancellation token. Returns true if the job was queued or
  // running, false if unknown or already finished.
  bool Cancel(const std::string& job_id);

  // Stops accepting (Reserve/Submit fail), cancels every queued and running
  // job, lets workers run the (cancelled) queued jobs, and joins them.
  // Idempotent; returns when all workers have exited.
  void Shutdown();

  // Snapshot counters, for health and tests.
  int queued() const;
  int running() const;
  int reserved() const;

 private:
  struct Job {
    std::string id;
    Work work;
    CancellationToken token;
  };

  explicit JobRunner(const Options& options);
  void WorkerLoop();
  void ReleaseSlot();

  const Options options_;
  mutable absl::Mutex mu_;
  bool accepting_ ABSL_GUARDED_BY(mu_) = true;
  int reserved_ ABSL_GUARDED_BY(mu_) = 0;
  int running_ ABSL_GUARDED_BY(mu_) = 0;
  std::deque<Job> queue_ ABSL_GUARDED_BY(mu_);
  // Tokens of queued and running jobs.
  absl::flat_hash_map<std::string, CancellationToken> active_
      ABSL_GUARDED_BY(mu_);
  std::vector<std::thread> workers_;  // written in Create / Shutdown only
  absl::Mutex join_mu_;               // serializes Shutdown's join
};

}  // namespace dpopt::jobs

#endif  // DPOPT_CORE_JOBS_JOB_RUNNER_H_
