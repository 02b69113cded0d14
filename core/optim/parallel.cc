#include "core/optim/parallel.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"

namespace dpopt::optim {
namespace {

// The thread count SetParallelOptions stored; 0 = not set (the default).
// Constant-initialized: a dynamic initializer (DefaultThreads()) ran after
// static initializers of other files that had already set it (dpopt_bench's
// DPOPT_BENCH_THREADS), and silently reset it.
std::atomic<int> g_threads{0};

// Partial vectors alive at once in ChunkedVectorSum (beyond the threads'
// own): 32 MB.
constexpr int64_t kPartialBudgetDoubles = int64_t{4} << 20;

// One ParallelFor call. Owned jointly by the caller and the queue entries
// (tickets) it posted; a worker that takes a ticket after every task was
// handed out finds next >= tasks and never calls fn.
struct Job {
  Job(int64_t n, absl::FunctionRef<void(int64_t)> f) : tasks(n), fn(f) {}
  const int64_t tasks;
  // Only called for a task handed out, i.e. while the caller still waits.
  const absl::FunctionRef<void(int64_t)> fn;
  std::atomic<int64_t> next{0};
  std::mutex mu;
  std::condition_variable all_done;
  int64_t done = 0;  // guarded by mu
};

void RunTasks(Job& job) {
  int64_t finished = 0;
  for (;;) {
    const int64_t t = job.next.fetch_add(1, std::memory_order_relaxed);
    if (t >= job.tasks) break;
    job.fn(t);
    ++finished;
  }
  if (finished == 0) return;
  std::lock_guard<std::mutex> lock(job.mu);
  job.done += finished;
  if (job.done == job.tasks) job.all_done.notify_all();
}

// Workers wait (blocking, no spinning) for tickets. Never destroyed: the
// workers live until the process exits.
class Pool {
 public:
  static Pool& Get() {
    static Pool* const kPool = new Pool();
    return *kPool;
  }

  void Run(int64_t tasks, int helpers, absl::FunctionRef<void(int64_t)> fn) {
    auto job = std::make_shared<Job>(tasks, fn);
    {
      std::lock_guard<std::mutex> lock(mu_);
      while (workers_ < helpers) {
        std::thread([this] { WorkerLoop(); }).detach();
        ++workers_;
      }
      for (int h = 0; h < helpers; ++h) queue_.push_back(job);
    }
    if (helpers == 1) {
      wake_.notify_one();
    } else {
      wake_.notify_all();
    }
    RunTasks(*job);
    std::unique_lock<std::mutex> lock(job->mu);
    job->all_done.wait(lock, [&] { return job->done == job->tasks; });
  }

 private:
  Pool() = default;

  void WorkerLoop() {
    for (;;) {
      std::shared_ptr<Job> job;
      {
        std::unique_lock<std::mutex> lock(mu_);
        wake_.wait(lock, [&] { return !queue_.empty(); });
        job = std::move(queue_.front());
        queue_.pop_front();
      }
      RunTasks(*job);
    }
  }

  std::mutex mu_;
  std::condition_variable wake_;
  std::deque<std::shared_ptr<Job>> queue_;  // guarded by mu_
  int workers_ = 0;                         // guarded by mu_
};

}  // namespace

int ParallelOptions::DefaultThreads() {
  // Once: hardware_concurrency() reads /sys on every call (glibc), and every
  // ParallelOptions{} calls this.
  static const int kThreads = static_cast<int>(
      std::clamp<unsigned>(std::thread::hardware_concurrency(), 1u,
                           static_cast<unsigned>(kDefaultMaxThreads)));
  return kThreads;
}

absl::Status ParallelOptions::Validate() const {
  if (threads < 1 || threads > kMaxThreads) {
    return absl::InvalidArgumentError(
        absl::StrCat("threads must be in [1, ", kMaxThreads, "]"));
  }
  return absl::OkStatus();
}

absl::Status SetParallelOptions(const ParallelOptions& options) {
  if (absl::Status s = options.Validate(); !s.ok()) return s;
  g_threads.store(options.threads, std::memory_order_relaxed);
  return absl::OkStatus();
}

ParallelOptions GetParallelOptions() {
  ParallelOptions o;  // DefaultThreads() is cached: no system call here
  const int threads = g_threads.load(std::memory_order_relaxed);
  if (threads > 0) o.threads = threads;
  return o;
}

void ParallelFor(int64_t tasks, int threads,
                 absl::FunctionRef<void(int64_t)> fn) {
  if (tasks <= 0) return;
  const int64_t helpers =
      std::min<int64_t>(std::clamp(threads, 1, ParallelOptions::kMaxThreads),
                        tasks) -
      1;
  if (helpers == 0) {
    for (int64_t t = 0; t < tasks; ++t) fn(t);
    return;
  }
  Pool::Get().Run(tasks, static_cast<int>(helpers), fn);
}

Chunking ChunkRows(int64_t count, int64_t dimension, int64_t parameter_size) {
  constexpr int64_t kMinRows = 256;
  constexpr int64_t kEntries = int64_t{1} << 16;
  constexpr int64_t kRowsPerParameter = 16;  // chunk_size >= p / 16
  const int64_t d = std::max<int64_t>(dimension, 1);
  const int64_t p = std::max<int64_t>(parameter_size, 1);
  Chunking c;
  c.count = std::max<int64_t>(count, 0);
  c.chunk_size = std::max({kMinRows, (kEntries + d - 1) / d,
                           (p + kRowsPerParameter - 1) / kRowsPerParameter});
  return c;
}

void ChunkedVectorSum(
    const Chunking& chunking, int threads,
    absl::FunctionRef<void(int64_t chunk, Eigen::Ref<Eigen::VectorXd> acc)> fn,
    Eigen::Ref<Eigen::VectorXd> out) {
  const int64_t chunks = chunking.chunks();
  if (chunks == 1) {
    fn(0, out);
    return;
  }
  const int64_t size = out.size();
  threads = std::clamp(threads, 1, ParallelOptions::kMaxThreads);
  // Chunks per wave: every chunk if their partials fit the budget, else as
  // many as fit (at least one per thread). Only memory and scheduling depend
  // on it; the additions below are always in chunk order.
  const int64_t fit = kPartialBudgetDoubles / std::max<int64_t>(size, 1);
  const int64_t wave = std::min(chunks, std::max<int64_t>(fit, threads));
  std::vector<Eigen::VectorXd> partial(
      static_cast<size_t>(std::min<int64_t>(wave, chunks - 1)));
  for (int64_t lo = 0; lo < chunks; lo += wave) {
    const int64_t hi = std::min(chunks, lo + wave);
    // Chunk c of this wave goes to partial[c - lo - (lo == 0)]; chunk 0
    // straight into out.
    const int64_t first = lo == 0 ? 1 : lo;
    ParallelFor(hi - lo, threads, [&](int64_t t) {
      const int64_t c = lo + t;
      if (c == 0) {
        fn(0, out);
        return;
      }
      Eigen::VectorXd& p = partial[static_cast<size_t>(c - first)];
      p.setZero(size);
      fn(c, p);
    });
    for (int64_t c = first; c < hi; ++c) {
      out += partial[static_cast<size_t>(c - first)];
    }
  }
}

double ChunkedScalarSum(const Chunking& chunking, int threads,
                        absl::FunctionRef<double(int64_t chunk)> fn) {
  const int64_t chunks = chunking.chunks();
  if (chunks == 1) return fn(0);
  std::vector<double> s(static_cast<size_t>(chunks));
  ParallelFor(chunks, threads,
              [&](int64_t c) { s[static_cast<size_t>(c)] = fn(c); });
  double total = s[0];
  for (int64_t c = 1; c < chunks; ++c) total += s[static_cast<size_t>(c)];
  return total;
}

}  // namespace dpopt::optim
