// Deterministic multi-threading for the row kernels.
//
// Large sums over rows (full-batch gradients, evaluation on large sets, DP-GD
// clipped sums) are split into chunks of consecutive rows. The partition
// depends only on the data's shape (ChunkRows: number of rows, dimension,
// parameter size), never on the number of threads, and the chunk partial
// sums are added in chunk order. So every result is bitwise identical for
// any thread count (1, 2, 4, ... and the MPI ranks' own settings), which the
// reproductions and the MPI mode rely on. Work that fits in one chunk (e.g.
// a9a DP-SGD minibatches: 533 rows per chunk at d = 123) runs on the calling
// thread with no thread overhead, and its result is bitwise the same as the
// plain sequential loop.
//
// Threads come from one small process-wide pool of std::threads, started on
// first use; the calling thread always takes part, so a busy pool (several
// jobs at once) delays a call but never blocks it. Why not OpenMP: no new
// runtime library (the Docker runtime stage lists its libraries and checks
// them with ldd; clang's sanitizer build would need libomp), workers block
// instead of spinning on the shared cores, and concurrent jobs share one
// bounded set of workers instead of one OpenMP team per job thread.
//
// Timing: how long a call takes depends on the number of rows (or sampled
// rows), the dimension and the number of nonzeros they hold, and on the
// thread count and the load of the machine; not on the values in the rows
// (up to the exceptions for extreme rows in objective.h, "Timing"). The
// partition of a sampled batch depends on the batch's length, which is
// already visible in the timing.
#ifndef DPOPT_CORE_OPTIM_PARALLEL_H_
#define DPOPT_CORE_OPTIM_PARALLEL_H_

#include <cstdint>

#include "Eigen/Dense"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"

namespace dpopt::optim {

struct ParallelOptions {
  // Most threads one kernel call uses, the calling thread included
  // (1 = everything on the caller). Results never depend on it.
  int threads = DefaultThreads();

  // hardware_concurrency(), capped at kDefaultMaxThreads (at least 1).
  static int DefaultThreads();
  static constexpr int kDefaultMaxThreads = 4;
  static constexpr int kMaxThreads = 64;
  // INVALID_ARGUMENT unless 1 <= threads <= kMaxThreads.
  absl::Status Validate() const;
};

// The process-wide setting used by Objective and PrivateGradientOracle
// (default: ParallelOptions{}). Errors: INVALID_ARGUMENT from Validate(),
// the setting is then unchanged. Thread-safe.
absl::Status SetParallelOptions(const ParallelOptions& options);
ParallelOptions GetParallelOptions();

// Runs fn(t) for every t in [0, tasks) on up to `threads` threads (the
// caller and pool workers) and returns when all have finished. Which thread
// runs which task is unspecified: fn must only write task-local state.
void ParallelFor(int64_t tasks, int threads,
                 absl::FunctionRef<void(int64_t)> fn);

// A fixed partition of `count` consecutive items (rows, or positions in a
// batch) into chunks of `chunk_size` items, the last one shorter.
struct Chunking {
  int64_t count = 0;
  int64_t chunk_size = 1;
  int64_t chunks() const {
    return count == 0 ? 1 : (count + chunk_size - 1) / chunk_size;
  }
  int64_t begin(int64_t c) const { return c * chunk_size; }
  int64_t end(int64_t c) const {
    return c * chunk_size + chunk_size < count ? c * chunk_size + chunk_size
                                               : count;
  }
};

// The partition used for sums over `count` rows of a dataset of the given
// dimension, for a model with `parameter_size` parameters:
//   chunk_size = max(256, ceil(65536 / dimension), ceil(parameter_size / 16))
// i.e. about 2^16 entries of dense rows per chunk (0.05-0.5 ms of work), and
// enough rows that adding a chunk's partial sum (parameter_size additions)
// is small next to computing it. Depends only on these three numbers.
Chunking ChunkRows(int64_t count, int64_t dimension, int64_t parameter_size);

// Deterministic chunked vector sum:
//   fn(0, out) accumulates chunk 0 directly into `out`;
//   fn(c, P_c) accumulates chunk c >= 1 into a zeroed vector P_c;
//   then out += P_1, out += P_2, ... in chunk order.
// With one chunk this is exactly fn(0, out) on the calling thread. Partial
// vectors are computed in waves, so at most a few tens of MB of them exist
// at once. The result does not depend on `threads`.
void ChunkedVectorSum(
    const Chunking& chunking, int threads,
    absl::FunctionRef<void(int64_t chunk, Eigen::Ref<Eigen::VectorXd> acc)> fn,
    Eigen::Ref<Eigen::VectorXd> out);

// Deterministic chunked scalar sum: s_0 + s_1 + ... added in chunk order,
// where s_c = fn(c). With one chunk, fn(0) on the calling thread.
double ChunkedScalarSum(const Chunking& chunking, int threads,
                        absl::FunctionRef<double(int64_t chunk)> fn);

}  // namespace dpopt::optim

#endif  // DPOPT_CORE_OPTIM_PARALLEL_H_
