// The MPI worker pool's costs (prints numbers; docs/scale-out.md reports
// them). Not a test. Two modes:
//
//   pool_bench [--rows=N] [--dim=D] [--steps=S]
//     per-step cost of the pool's request and reduce at 1, 2 and 4 ranks
//     (mpirun --oversubscribe on this machine): the median time of one
//     clipped gradient sum through the pool (a) with a sampling rate so small
//     that no row is sampled (the pure overhead: the request, the broadcast,
//     the gather of p values, the reply), (b) at batch about 1000 and (c) the
//     full batch, next to the same sums in this process on one shard.
//
//   pool_bench --placement --rows=10000000 --dim=100 --ranks=4
//     places an N x D dense dataset on the ranks and reports this process's
//     resident memory (the server's side of the pool) before the dataset
//     exists, with it, after placing it and freeing it, and during full-batch
//     sums on the pool, with the placement time and the step time.
#include <stdlib.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "core/noise/random.h"
#include "core/optim/mpi_pool/worker_pool.h"
#include "core/optim/objective.h"
#include "core/optim/row_sums.h"

namespace dpopt::optim::mpi_pool {
namespace {

double NowMs() {
  return std::chrono::duration<double, std::milli>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// VmRSS of this process, MiB.
double RssMiB() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (absl::StartsWith(line, "VmRSS:")) {
      return std::strtod(line.c_str() + 6, nullptr) / 1024.0;
    }
  }
  return -1;
}

Dataset Generate(int64_t n, int64_t d) {
  DenseRows x(n, d);
  Eigen::VectorXd y(n);
  std::mt19937_64 gen(1);
  std::normal_distribution<double> normal;
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < d; ++j) x(i, j) = normal(gen);
    y[i] = normal(gen) > 0 ? 1.0 : -1.0;
  }
  return Dataset::DenseRowMajor(std::move(x), std::move(y), LabelKind::kBinary);
}

std::string Store() {
  std::string dir = "/tmp/dpopt_pool_bench_XXXXXX";
  if (mkdtemp(dir.data()) == nullptr) std::abort();
  return dir;
}

WorkerPoolOptions Options(int ranks, const std::string& store) {
  WorkerPoolOptions o;
  o.mpirun = "mpirun";
  o.worker = DPOPT_POOL_WORKER;
  o.ranks = ranks;
  o.store_dir = store;
  o.mpirun_args = {"--oversubscribe", "--bind-to", "none"};
  o.request_timeout = absl::Minutes(30);
  return o;
}

// Median milliseconds of `steps` sums.
double MedianMs(RowSums& sums, const ClippedSumQuery& q,
                const Eigen::VectorXd& w, int steps) {
  std::vector<double> ms;
  Eigen::VectorXd s;
  for (int t = 0; t < steps; ++t) {
    const double start = NowMs();
    if (!sums.ClippedSum(q, w, &s).ok()) std::abort();
    ms.push_back(NowMs() - start);
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

int Overheads(int64_t n, int64_t d, int steps) {
  const Dataset data = Generate(n, d);
  auto objective = *Objective::Create({}, d);
  const Eigen::VectorXd w = Eigen::VectorXd::Constant(d, 0.01);
  const double q_batch = std::min(1.0, 1000.0 / static_cast<double>(n));
  const ClippedSumQuery none{1e-12, Objective::ClipNorm::kL2, 1.0};
  const ClippedSumQuery batch{q_batch, Objective::ClipNorm::kL2, 1.0};
  const ClippedSumQuery full{1.0, Objective::ClipNorm::kL2, 1.0};
  auto rng = *noise::NewSecureRandom();
  LocalRowSums local(data, *objective, *rng);
  std::printf("rows %lld, dimension %lld, median of %d sums (ms)\n",
              static_cast<long long>(n), static_cast<long long>(d), steps);
  std::printf("%-22s %12s %12s %12s\n", "", "no row", "batch ~1000",
              "full batch");
  std::printf("%-22s %12.3f %12.3f %12.3f\n", "in process, 1 shard",
              MedianMs(local, none, w, steps), MedianMs(local, batch, w, steps),
              MedianMs(local, full, w, steps));
  for (int ranks : {1, 2, 4}) {
    const std::string store = Store();
    WorkerPool pool(Options(ranks, store));
    if (!pool.Place("bench", data).ok()) {
      std::fprintf(stderr, "placement failed\n");
      return 1;
    }
    auto rows = pool.RowsFor("bench", 1);
    auto sums = *rows->Open(*objective);
    char label[64];
    std::snprintf(label, sizeof label, "pool, %d rank%s", ranks,
                  ranks > 1 ? "s" : "");
    std::printf(
        "%-22s %12.3f %12.3f %12.3f\n", label, MedianMs(*sums, none, w, steps),
        MedianMs(*sums, batch, w, steps), MedianMs(*sums, full, w, steps));
    sums.reset();
    (void)pool.Drop("bench");
  }
  return 0;
}

int Placement(int64_t n, int64_t d, int ranks, int steps) {
  std::printf("rows %lld, dimension %lld, %d ranks\n",
              static_cast<long long>(n), static_cast<long long>(d), ranks);
  std::printf("RSS before the dataset exists: %.0f MiB\n", RssMiB());
  const std::string store = Store();
  WorkerPool pool(Options(ranks, store));
  if (!pool.EnsureStarted().ok()) return 1;
  {
    double start = NowMs();
    const Dataset data = Generate(n, d);
    std::printf("generated in %.1f s; RSS with the dataset: %.0f MiB\n",
                (NowMs() - start) / 1000, RssMiB());
    start = NowMs();
    if (!pool.Place("bench", data).ok()) return 1;
    std::printf("placed in %.1f s\n", (NowMs() - start) / 1000);
  }
  std::printf("RSS after placing it and freeing it: %.0f MiB\n", RssMiB());
  auto objective = *Objective::Create({}, d);
  auto rows = pool.RowsFor("bench", 1);
  double start = NowMs();
  auto sums = *rows->Open(*objective);
  std::printf("job opened (ranks load their shards) in %.1f s\n",
              (NowMs() - start) / 1000);
  const Eigen::VectorXd w = Eigen::VectorXd::Constant(d, 0.01);
  const double full =
      MedianMs(*sums, {1.0, Objective::ClipNorm::kL2, 1.0}, w, steps);
  const double batch =
      MedianMs(*sums, {1000.0 / n, Objective::ClipNorm::kL2, 1.0}, w, steps);
  std::printf("full-batch sum: median %.1f ms; batch ~1000: %.3f ms\n", full,
              batch);
  std::printf("RSS during the job: %.0f MiB\n", RssMiB());
  sums.reset();
  (void)pool.Drop("bench");
  return 0;
}

}  // namespace
}  // namespace dpopt::optim::mpi_pool

int main(int argc, char** argv) {
  int64_t rows = 100000, dim = 100;
  int ranks = 4, steps = 20;
  bool placement = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--placement") {
      placement = true;
    } else if (absl::StartsWith(a, "--rows=")) {
      if (!absl::SimpleAtoi(a.substr(7), &rows)) return 2;
    } else if (absl::StartsWith(a, "--dim=")) {
      if (!absl::SimpleAtoi(a.substr(6), &dim)) return 2;
    } else if (absl::StartsWith(a, "--ranks=")) {
      if (!absl::SimpleAtoi(a.substr(8), &ranks)) return 2;
    } else if (absl::StartsWith(a, "--steps=")) {
      if (!absl::SimpleAtoi(a.substr(8), &steps)) return 2;
    } else {
      std::fprintf(stderr, "pool_bench: unknown argument %s\n", argv[i]);
      return 2;
    }
  }
  return placement ? dpopt::optim::mpi_pool::Placement(rows, dim, ranks, steps)
                   : dpopt::optim::mpi_pool::Overheads(rows, dim, steps);
}
