// The Google Benchmark suite of dpopt: samplers, accountants,
// kernels and whole optimizer steps. Prints numbers; never a pass/fail test.
// scripts/bench.sh runs it (JSON output) and writes docs/performance.md;
// scripts/bench.sh --smoke runs a few milliseconds of each (ctest bench_smoke)
// so the suite cannot rot.
//
//   dpopt_bench [--benchmark_filter=REGEX] [--benchmark_min_time=S]
//
// Environment: DPOPT_BENCH_A9A (default <source>/data/adult/a9a) is the
// LIBSVM file of the a9a benchmarks; DPOPT_BENCH_MAX_ROWS (default 1000000)
// caps the generated dense datasets (the smoke run uses 10000);
// DPOPT_BENCH_THREADS (default ParallelOptions::DefaultThreads()) sets the
// threads of the kernels (SetParallelOptions).
#include <benchmark/benchmark.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "Eigen/Dense"
#include "absl/strings/str_format.h"
#include "core/data/dataset.h"
#include "core/noise/discrete_samplers.h"
#include "core/noise/random.h"
#include "core/noise/rounded_gaussian.h"
#include "core/noise/subsampling.h"
#include "core/noise/testing/seeded_random.h"
#include "core/noise/vector_mechanisms.h"
#include "core/optim/algorithm.h"
#include "core/optim/dp_sgd.h"
#include "core/optim/objective.h"
#include "core/optim/parallel.h"
#include "core/optim/private_oracle.h"
#include "core/optim/release_budget.h"
#include "core/privacy/accountant.h"
#include "core/privacy/dp_event.h"
#include "storage/dataset_import.h"

namespace dpopt {
namespace {

// ------------------------------------------------------------------ data

std::string A9aPath() {
  const char* env = std::getenv("DPOPT_BENCH_A9A");
  return env != nullptr ? env : DPOPT_SOURCE_DIR "/data/adult/a9a";
}

const bool kThreadsSet = [] {
  const char* env = std::getenv("DPOPT_BENCH_THREADS");
  if (env == nullptr) return false;
  optim::ParallelOptions options;
  options.threads = std::atoi(env);
  if (!optim::SetParallelOptions(options).ok()) std::abort();
  return true;
}();

int64_t MaxRows() {
  const char* env = std::getenv("DPOPT_BENCH_MAX_ROWS");
  return env != nullptr ? std::atoll(env) : 1'000'000;
}

// a9a as the server holds it: sparse CSR, labels in {-1, +1}.
const Dataset* A9a() {
  static const Dataset* const kData = [] {
    std::ifstream in(A9aPath());
    std::vector<Eigen::Triplet<double, int64_t>> entries;
    std::vector<double> labels;
    std::string line;
    while (std::getline(in, line)) {
      std::istringstream ss(line);
      double y = 0;
      if (!(ss >> y)) continue;
      const int64_t row = static_cast<int64_t>(labels.size());
      labels.push_back(y > 0 ? 1.0 : -1.0);
      std::string tok;
      while (ss >> tok) {
        const size_t colon = tok.find(':');
        const int64_t j = std::stoll(tok.substr(0, colon)) - 1;
        if (j >= 0 && j < 123) {
          entries.emplace_back(row, j, std::stod(tok.substr(colon + 1)));
        }
      }
    }
    SparseRows x(static_cast<int64_t>(labels.size()), 123);
    x.setFromTriplets(entries.begin(), entries.end());
    return new Dataset(Dataset::Sparse(
        std::move(x), Eigen::Map<Eigen::VectorXd>(labels.data(), labels.size()),
        LabelKind::kBinary));
  }();
  return kData->rows() > 0 ? kData : nullptr;
}

// Dense n x 100 rows (standard normal entries, one row in 50 scaled by 10 so
// that clipping binds), labels from a fixed linear model. Deterministic.
const Dataset* Dense(int64_t n) {
  static std::map<int64_t, const Dataset*>* const kCache =
      new std::map<int64_t, const Dataset*>();
  auto it = kCache->find(n);
  if (it != kCache->end()) return it->second;
  constexpr int kD = 100;
  noise::testing::SeededRandomForTesting rng(7);
  auto uniform = [&] { return (rng.NextUint64() >> 11) * 0x1.0p-53; };
  Eigen::MatrixXd x(n, kD);
  Eigen::VectorXd y(n);
  for (int64_t i = 0; i < n; ++i) {
    double score = 0;
    const double scale = i % 50 == 0 ? 10.0 : 1.0;
    for (int j = 0; j < kD; j += 2) {
      // Box-Muller: two normals per pair of uniforms.
      const double r = std::sqrt(-2 * std::log(1 - uniform()));
      const double t = 2 * M_PI * uniform();
      x(i, j) = scale * r * std::cos(t);
      x(i, j + 1) = scale * r * std::sin(t);
      score += x(i, j) * (j % 3 == 0 ? 1 : -0.5) + x(i, j + 1) * 0.25;
    }
    y[i] = score + (uniform() - 0.5) > 0 ? 1.0 : -1.0;
  }
  const Dataset* d = new Dataset(
      Dataset::Dense(std::move(x), std::move(y), LabelKind::kBinary));
  kCache->emplace(n, d);
  return d;
}

const Dataset* DataFor(int64_t arg) {
  if (arg == 0) return A9a();
  if (arg > MaxRows()) return nullptr;
  return Dense(arg);
}

std::string DataLabel(int64_t arg) {
  return arg == 0 ? "a9a" : "dense" + std::to_string(arg) + "x100";
}

std::unique_ptr<noise::RandomSource> Secure() {
  auto rng = noise::NewSecureRandom();
  if (!rng.ok()) std::abort();
  return *std::move(rng);
}

// ------------------------------------------------------------ randomness

void BM_SecureWords(benchmark::State& state) {
  auto rng = Secure();
  uint64_t sink = 0;
  for (auto _ : state) sink += rng->NextUint64();
  benchmark::DoNotOptimize(sink);
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_SecureWords);

void BM_KernelWords(benchmark::State& state) {
  auto rng = noise::NewKernelRandom();
  if (!rng.ok()) return state.SkipWithError("getrandom unavailable");
  uint64_t sink = 0;
  for (auto _ : state) sink += (*rng)->NextUint64();
  benchmark::DoNotOptimize(sink);
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_KernelWords);

// ---------------------------------------------------------------- samplers

template <typename Sampler>
void RunSampler(benchmark::State& state, const Sampler& sampler) {
  auto rng = Secure();
  noise::RandomBits bits(*rng);
  int64_t sink = 0;
  for (auto _ : state) sink += sampler.Sample(bits);
  benchmark::DoNotOptimize(sink);
  state.SetItemsProcessed(state.iterations());
}

// Arg: the scale (sigma, tau or b).
void BM_RoundedGaussian(benchmark::State& state) {
  auto sampler = noise::RoundedGaussianSampler::Create(state.range(0));
  if (!sampler.ok()) return state.SkipWithError("bad scale");
  auto rng = Secure();
  noise::RandomBits bits(*rng);
  int64_t sink = 0;
  for (auto _ : state) sink += sampler->Sample(bits);
  benchmark::DoNotOptimize(sink);
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_RoundedGaussian)->Arg(3)->Arg(1024)->Arg(1 << 20);

void BM_DiscreteGaussian(benchmark::State& state) {
  auto sampler = noise::DiscreteGaussianSampler::Create(state.range(0));
  if (!sampler.ok()) return state.SkipWithError("bad scale");
  RunSampler(state, *sampler);
}
BENCHMARK(BM_DiscreteGaussian)->Arg(3)->Arg(1024)->Arg(1 << 20);

void BM_DiscreteLaplace(benchmark::State& state) {
  auto sampler = noise::DiscreteLaplaceSampler::Create(state.range(0));
  if (!sampler.ok()) return state.SkipWithError("bad scale");
  RunSampler(state, *sampler);
}
BENCHMARK(BM_DiscreteLaplace)->Arg(3)->Arg(1 << 20);

// The Gaussian noise of one DP-SGD release on a9a (d = 123, C = 1, z = 1).
void BM_AddGaussianNoise(benchmark::State& state) {
  auto plan = noise::PlanGaussian(1.0, 1.0, state.range(0));
  if (!plan.ok()) return state.SkipWithError("bad plan");
  auto rng = Secure();
  Eigen::VectorXd v = Eigen::VectorXd::Zero(state.range(0));
  for (auto _ : state) {
    if (!noise::AddGaussianNoise(*plan, *rng, v).ok()) std::abort();
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
}
BENCHMARK(BM_AddGaussianNoise)->Arg(123)->Arg(100);

// Poisson subsampling, exact. Args: n, expected batch.
void BM_PoissonSample(benchmark::State& state) {
  const int64_t n = state.range(0);
  const double q = static_cast<double>(state.range(1)) / n;
  auto rng = Secure();
  noise::PoissonSampler sampler(q, *rng);
  std::vector<int64_t> batch;
  for (auto _ : state) {
    if (!sampler.Sample(n, &batch).ok()) std::abort();
    benchmark::DoNotOptimize(batch.data());
  }
}
BENCHMARK(BM_PoissonSample)
    ->Args({32561, 325})
    ->Args({1'000'000, 1000})
    ->Unit(benchmark::kMicrosecond);

// ------------------------------------------------------------- accountants

privacy::DpEvent DpSgdEvent(double z, int64_t steps) {
  return privacy::DpEvent::SelfComposed(
      steps,
      privacy::DpEvent::PoissonSampled(0.01, privacy::DpEvent::Gaussian(z)));
}

// Arg: 0 = RDP, 1 = PLD. Epsilon of 2000 DP-SGD steps at q = 0.01, z = 1.
void BM_AccountantEpsilon(benchmark::State& state) {
  const auto kind = state.range(0) == 0 ? privacy::AccountantKind::kRdp
                                        : privacy::AccountantKind::kPld;
  state.SetLabel(privacy::AccountantName(kind));
  for (auto _ : state) {
    auto eps = privacy::ComputeEpsilon(DpSgdEvent(1.0, 2000), 1e-6, kind);
    if (!eps.ok()) return state.SkipWithError("accountant failed");
    benchmark::DoNotOptimize(eps->epsilon);
  }
}
BENCHMARK(BM_AccountantEpsilon)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);

// The noise calibration a job estimate runs (RDP): z for eps = 1.
void BM_CalibrateNoise(benchmark::State& state) {
  for (auto _ : state) {
    auto z = privacy::CalibrateNoiseMultiplier(
        [](double z) { return DpSgdEvent(z, 2000); }, 1.0, 1e-6,
        privacy::AccountantKind::kRdp);
    if (!z.ok()) return state.SkipWithError("calibration failed");
    benchmark::DoNotOptimize(*z);
  }
}
BENCHMARK(BM_CalibrateNoise)->Unit(benchmark::kMillisecond);

// ----------------------------------------------------------------- kernels

std::unique_ptr<optim::Objective> Logistic(const Dataset& d) {
  optim::ModelConfig model;
  model.loss = optim::LossKind::kLogistic;
  model.l2 = 1e-4;
  auto objective = optim::Objective::Create(model, d.dimension());
  if (!objective.ok()) std::abort();
  return *std::move(objective);
}

// The gradient work of one DP-SGD step alone: per-example clipped logistic
// gradients of a fixed batch, summed (no sampling, no noise). Args: dataset
// (0 = a9a, else n dense rows), batch size.
//
// BM_ClippedGradientSum runs the oracle's kernel
// (Objective::AddClippedGradientSum, row norms from the dataset);
// BM_ClippedGradientSumPerRow the per-example call with the norms cached
// (what the oracle did before the batched kernel, and what distributed-DDA
// family's nodes call).
struct GradientBatches {
  // 64 different batches in rotation: like real steps, rows come from
  // anywhere in the dataset (a single repeated batch would stay in cache
  // and understate the gradient work on a large dataset).
  static constexpr int kBatches = 64;
  GradientBatches(const Dataset& data, int64_t batch)
      : rows(kBatches, std::vector<int64_t>(batch)),
        norms(kBatches, std::vector<double>(batch)) {
    noise::testing::SeededRandomForTesting pick(3);
    for (int b = 0; b < kBatches; ++b) {
      for (int64_t& r : rows[b]) {
        r = static_cast<int64_t>(pick.NextUint64() % data.rows());
      }
      std::sort(rows[b].begin(), rows[b].end());
      for (int64_t k = 0; k < batch; ++k)
        norms[b][k] = data.RowNorm(rows[b][k]);
    }
  }
  std::vector<std::vector<int64_t>> rows;
  std::vector<std::vector<double>> norms;
};

void BM_ClippedGradientSum(benchmark::State& state) {
  const Dataset* data = DataFor(state.range(0));
  if (data == nullptr) return state.SkipWithError("dataset unavailable");
  state.SetLabel(DataLabel(state.range(0)));
  auto objective = Logistic(*data);
  const int64_t batch = state.range(1);
  const GradientBatches batches(*data, batch);
  const int64_t p = objective->parameter_size();
  Eigen::VectorXd w = Eigen::VectorXd::Constant(p, 0.01);
  Eigen::VectorXd sum(p);
  int b = 0;
  for (auto _ : state) {
    sum.setZero();
    objective->AddClippedGradientSum(*data, batches.rows[b], w,
                                     optim::Objective::ClipNorm::kL2, 1.0, sum);
    b = (b + 1) % GradientBatches::kBatches;
    benchmark::DoNotOptimize(sum.data());
  }
  state.SetItemsProcessed(state.iterations() * batch);
}
BENCHMARK(BM_ClippedGradientSum)
    ->Args({0, 325})
    ->Args({1'000'000, 1000})
    ->Unit(benchmark::kMicrosecond);

void BM_ClippedGradientSumPerRow(benchmark::State& state) {
  const Dataset* data = DataFor(state.range(0));
  if (data == nullptr) return state.SkipWithError("dataset unavailable");
  state.SetLabel(DataLabel(state.range(0)));
  auto objective = Logistic(*data);
  const int64_t batch = state.range(1);
  const GradientBatches batches(*data, batch);
  const int64_t p = objective->parameter_size();
  Eigen::VectorXd w = Eigen::VectorXd::Constant(p, 0.01);
  Eigen::VectorXd c(objective->outputs()), sum(p);
  int b = 0;
  for (auto _ : state) {
    sum.setZero();
    for (int64_t k = 0; k < batch; ++k) {
      objective->AddClippedExampleGradient(*data, batches.rows[b][k], w,
                                           optim::Objective::ClipNorm::kL2, 1.0,
                                           batches.norms[b][k], c, sum);
    }
    b = (b + 1) % GradientBatches::kBatches;
    benchmark::DoNotOptimize(sum.data());
  }
  state.SetItemsProcessed(state.iterations() * batch);
}
BENCHMARK(BM_ClippedGradientSumPerRow)
    ->Args({0, 325})
    ->Args({1'000'000, 1000})
    ->Unit(benchmark::kMicrosecond);

// The full-batch kernels of a DP-GD step (clipped, first arg 1) and a GD
// step (scaled, first arg 0) at the same iterate: the DP-GD overhead without
// noise, sampling or the job loop. Second arg, the iterate: 0 = the constant
// 0.01 (every row's gradient is clipped: a branch on it would be perfectly
// predicted), 1 = after 100 steps of gradient descent (rate 0.5, as the
// bench's jobs), where clipped and unclipped rows mix as in a real job.
Eigen::VectorXd BenchIterate(const Dataset& data,
                             const optim::Objective& objective, int kind) {
  const int64_t p = objective.parameter_size();
  Eigen::VectorXd w = Eigen::VectorXd::Constant(p, 0.01);
  if (kind == 0) return w;
  w.setZero();
  for (int t = 0; t < 100; ++t) w -= 0.5 * objective.SmoothGradient(data, w);
  return w;
}

void BM_FullGradientSum(benchmark::State& state) {
  const Dataset* data = DataFor(0);
  if (data == nullptr) return state.SkipWithError("dataset unavailable");
  const bool clipped = state.range(0) == 1;
  const int iterate = static_cast<int>(state.range(1));
  state.SetLabel(
      std::string(clipped ? "a9a clipped (DP-GD)" : "a9a scaled (GD)") +
      (iterate == 0 ? ", w = 0.01" : ", w after 100 GD steps"));
  auto objective = Logistic(*data);
  const int64_t p = objective->parameter_size();
  const Eigen::VectorXd w = BenchIterate(*data, *objective, iterate);
  Eigen::VectorXd sum(p);
  for (auto _ : state) {
    sum.setZero();
    if (clipped) {
      objective->AddClippedGradientSum(
          *data, w, optim::Objective::ClipNorm::kL2, 1.0, sum);
    } else {
      objective->AddGradientSum(*data, w, 1.0, sum);
    }
    benchmark::DoNotOptimize(sum.data());
  }
  state.SetItemsProcessed(state.iterations() * data->rows());
}
BENCHMARK(BM_FullGradientSum)
    ->Args({0, 0})
    ->Args({1, 0})
    ->Args({0, 1})
    ->Args({1, 1})
    ->Unit(benchmark::kMicrosecond);

// Non-private full-batch loss (the evaluation of a model on a public set).
void BM_FullLoss(benchmark::State& state) {
  const Dataset* data = DataFor(state.range(0));
  if (data == nullptr) return state.SkipWithError("dataset unavailable");
  state.SetLabel(DataLabel(state.range(0)));
  auto objective = Logistic(*data);
  Eigen::VectorXd w =
      Eigen::VectorXd::Constant(objective->parameter_size(), 0.01);
  for (auto _ : state) benchmark::DoNotOptimize(objective->Loss(*data, w));
  state.SetItemsProcessed(state.iterations() * data->rows());
}
BENCHMARK(BM_FullLoss)->Arg(0)->Arg(1'000'000)->Unit(benchmark::kMillisecond);

// ------------------------------------------------------------------- steps

// One oracle call as the job runs it: charge, Poisson sample (secure),
// clipped sum, exact Gaussian noise. Args: dataset, expected batch
// (0 = full batch, i.e. a DP-GD step).
void BM_DpSgdStep(benchmark::State& state) {
  const Dataset* data = DataFor(state.range(0));
  if (data == nullptr) return state.SkipWithError("dataset unavailable");
  const double q = state.range(1) == 0
                       ? 1.0
                       : static_cast<double>(state.range(1)) / data->rows();
  state.SetLabel(DataLabel(state.range(0)) + (q == 1.0 ? " DP-GD" : " DP-SGD"));
  auto objective = Logistic(*data);
  auto rng = Secure();
  const optim::GaussianGradientQuery query{q, 1.0, 1.0};
  auto event = optim::GaussianGradientEvent(query, objective->parameter_size());
  if (!event.ok()) return state.SkipWithError("bad query");
  optim::PlannedReleases budget;
  budget.Allow(*event, int64_t{1} << 40);
  auto oracle = optim::PrivateGradientOracle::Create(
      *data, *objective, data->rows(), *rng, optim::SecureNoise(), budget);
  if (!oracle.ok()) return state.SkipWithError("oracle");
  Eigen::VectorXd w = Eigen::VectorXd::Zero(objective->parameter_size());
  Eigen::VectorXd g;
  if (!(*oracle)->GaussianGradient(query, w, &g).ok()) std::abort();  // warm
  for (auto _ : state) {
    if (!(*oracle)->GaussianGradient(query, w, &g).ok()) std::abort();
    w -= 0.1 * g;
  }
}
BENCHMARK(BM_DpSgdStep)
    ->Args({0, 325})
    ->Args({0, 0})
    ->Args({1'000'000, 1000})
    ->Unit(benchmark::kMicrosecond);

// The non-private full-batch step of the same binary (NonPrivateGd's oracle
// call): the reference of the DP-GD overhead.
void BM_ExactGradientStep(benchmark::State& state) {
  const Dataset* data = DataFor(state.range(0));
  if (data == nullptr) return state.SkipWithError("dataset unavailable");
  state.SetLabel(DataLabel(state.range(0)) + " GD");
  auto objective = Logistic(*data);
  auto rng = Secure();
  optim::PlannedReleases budget;
  budget.Allow(privacy::DpEvent::NoOp(), int64_t{1} << 40);
  auto oracle = optim::PrivateGradientOracle::Create(
      *data, *objective, data->rows(), *rng, optim::SecureNoise(), budget);
  if (!oracle.ok()) return state.SkipWithError("oracle");
  Eigen::VectorXd w = Eigen::VectorXd::Zero(objective->parameter_size());
  Eigen::VectorXd g;
  for (auto _ : state) {
    if (!(*oracle)->ExactGradient(w, &g).ok()) std::abort();
    w -= 0.1 * g;
  }
}
BENCHMARK(BM_ExactGradientStep)
    ->Arg(0)
    ->Arg(1'000'000)
    ->Unit(benchmark::kMicrosecond);

// Whole DP-SGD runs as a job runs them (NewDpSgd: calibrate, then Run
// through the solve loop with the secure generator and a callback that
// asks to stop never), 1000 steps per iteration; reported per step, so the
// per-step cost of the loop (budget, event, trace callback, update) shows
// next to BM_DpSgdStep's oracle call. The callback does what a trace
// recorder does at the least: reads the iterate's norm. Args: dataset,
// expected batch.
class NormReadingCallback final : public optim::IterationCallback {
 public:
  double sink = 0;

 private:
  bool OnIteration(const optim::IterationSummary& s) override {
    sink += s.iterate.norm();
    return true;
  }
};

void BM_DpSgdRun(benchmark::State& state) {
  const Dataset* data = DataFor(state.range(0));
  if (data == nullptr) return state.SkipWithError("dataset unavailable");
  constexpr int64_t kSteps = 1000;
  optim::DpSgdOptions options;
  options.sampling_rate =
      static_cast<double>(state.range(1)) / static_cast<double>(data->rows());
  options.steps = kSteps;
  options.clip_norm = 1.0;
  options.learning_rate = 0.1;
  options.model.loss = optim::LossKind::kLogistic;
  options.model.l2 = 1e-4;
  auto algorithm = optim::NewDpSgd(options);
  if (!algorithm.ok()) return state.SkipWithError("options");
  optim::PublicDatasetInfo info;
  info.rows = data->rows();
  info.dimension = data->dimension();
  optim::PrivacyTarget target;
  target.epsilon = 1.0;
  target.delta = 1e-6;
  auto calibration = (*algorithm)->Calibrate(info, target);
  if (!calibration.ok()) return state.SkipWithError("calibration");
  auto rng = Secure();
  NormReadingCallback callback;
  optim::SolveContext context(rng.get(), &callback);
  state.SetLabel(DataLabel(state.range(0)) + " DP-SGD, per step");
  for (auto _ : state) {
    auto result = (*algorithm)->Run(*data, *calibration, context);
    if (!result.ok() || result->steps_done != kSteps) std::abort();
  }
  benchmark::DoNotOptimize(callback.sink);
  state.SetItemsProcessed(state.iterations() * kSteps);
  state.counters["step_us"] = benchmark::Counter(
      static_cast<double>(state.iterations() * kSteps) * 1e-6,
      benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_DpSgdRun)
    ->Args({0, 325})
    ->Args({1'000'000, 1000})
    ->Unit(benchmark::kMillisecond);

// ------------------------------------------------------------------ floors
// What this machine can do at best for the work of a step, measured in the
// same run as the steps (docs/performance.md reports each step as a ratio
// to its floor). Plain loops over plain arrays: no dpopt code.

// A row-major copy of the dense dataset (n x 100), as a floor can read it:
// one contiguous row per sampled example.
const std::vector<double>& RowMajorDense(int64_t n) {
  static std::map<int64_t, std::vector<double>>* const kCache =
      new std::map<int64_t, std::vector<double>>();
  auto it = kCache->find(n);
  if (it != kCache->end()) return it->second;
  const Dataset* d = Dense(n);
  std::vector<double> rows(static_cast<size_t>(n) * 100);
  for (int64_t i = 0; i < n; ++i) {
    for (int j = 0; j < 100; ++j) rows[i * 100 + j] = d->dense()(i, j);
  }
  return kCache->emplace(n, std::move(rows)).first->second;
}

// The gather floor of a DP-SGD step: `batch` random rows of a row-major
// n x 100 array (far larger than the last-level cache at n = 1e6: 800 MB),
// each read twice (the margin, then the clipped gradient's multiply-adds
// into the sum), four partial sums and one exp per row. Args: n, batch.
void BM_FloorGather(benchmark::State& state) {
  const int64_t n = state.range(0);
  if (n > MaxRows()) return state.SkipWithError("dataset unavailable");
  const int64_t batch = state.range(1);
  const std::vector<double>& x = RowMajorDense(n);
  const Dataset* d = Dense(n);
  const GradientBatches batches(*d, batch);
  std::vector<double> w(100, 0.01), sum(100);
  int b = 0;
  for (auto _ : state) {
    std::fill(sum.begin(), sum.end(), 0.0);
    for (const int64_t r : batches.rows[b]) {
      const double* row = &x[r * 100];
      double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
      for (int j = 0; j < 100; j += 4) {
        s0 += row[j] * w[j];
        s1 += row[j + 1] * w[j + 1];
        s2 += row[j + 2] * w[j + 2];
        s3 += row[j + 3] * w[j + 3];
      }
      const double margin = d->labels()[r] * ((s0 + s1) + (s2 + s3));
      const double c = -d->labels()[r] / (1 + std::exp(margin));
      for (int j = 0; j < 100; ++j) sum[j] += c * row[j];
    }
    b = (b + 1) % GradientBatches::kBatches;
    benchmark::DoNotOptimize(sum.data());
  }
  state.SetLabel(
      absl::StrFormat("%d random rows of a row-major %d x 100", batch, n));
  state.SetItemsProcessed(state.iterations() * batch);
}
BENCHMARK(BM_FloorGather)
    ->Args({10'000, 1000})
    ->Args({1'000'000, 1000})
    ->Unit(benchmark::kMicrosecond);

// The arithmetic floor of a DP-SGD step's gradient on a9a: the work of
// `batch` rows of its CSR arrays (one sorted batch, as Poisson sampling
// lists them, read again every iteration, so it stays in the L2 cache and
// only the arithmetic is timed), each read twice (the margin, then the
// clipped gradient's multiply-adds into the sum), one exp per row, in plain
// loops. The rest of a step's unavoidable work is the secure sampling
// (BM_PoissonSample/32561/325) and the exact noise
// (BM_AddGaussianNoise/123). Arg: batch.
void BM_FloorSparseGather(benchmark::State& state) {
  const Dataset* d = A9a();
  if (d == nullptr) return state.SkipWithError("dataset unavailable");
  const int64_t batch = state.range(0);
  const GradientBatches batches(*d, batch);
  const std::vector<int64_t>& rows = batches.rows[0];
  const SparseRows& x = d->sparse();
  const int64_t* outer = x.outerIndexPtr();
  const int64_t* inner = x.innerIndexPtr();
  const double* value = x.valuePtr();
  const double* norms = d->row_norms_l2().data();
  std::vector<double> w(123, 0.01), sum(123);
  for (auto _ : state) {
    std::fill(sum.begin(), sum.end(), 0.0);
    for (const int64_t r : rows) {
      double s = 0;
      for (int64_t t = outer[r]; t < outer[r + 1]; ++t) {
        s += value[t] * w[inner[t]];
      }
      const double y = d->labels()[r];
      const double c = -y / (1 + std::exp(y * s));
      const double a = c * std::min(1.0, 1.0 / (std::abs(c) * norms[r]));
      for (int64_t t = outer[r]; t < outer[r + 1]; ++t) {
        sum[inner[t]] += a * value[t];
      }
    }
    benchmark::DoNotOptimize(sum.data());
  }
  state.SetLabel(absl::StrFormat("%d rows of a9a (CSR, in cache)", batch));
  state.SetItemsProcessed(state.iterations() * batch);
}
BENCHMARK(BM_FloorSparseGather)->Arg(325)->Unit(benchmark::kMicrosecond);

// The streaming floor of a full-batch step: one pass summing every value of
// the n x 100 dense dataset (as the server holds it), split into `threads`
// contiguous parts, each on its own thread. Args: n, threads.
void BM_FloorStream(benchmark::State& state) {
  const Dataset* d = DataFor(state.range(0));
  if (d == nullptr) return state.SkipWithError("dataset unavailable");
  const int threads = static_cast<int>(state.range(1));
  const double* values = d->dense().data();
  const int64_t count = d->dense().size();
  std::vector<double> partial(threads);
  auto part = [&](int t) {
    const int64_t begin = count * t / threads, end = count * (t + 1) / threads;
    double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    int64_t i = begin;
    for (; i + 4 <= end; i += 4) {
      s0 += values[i];
      s1 += values[i + 1];
      s2 += values[i + 2];
      s3 += values[i + 3];
    }
    for (; i < end; ++i) s0 += values[i];
    partial[t] = (s0 + s1) + (s2 + s3);
  };
  for (auto _ : state) {
    std::vector<std::thread> workers;
    for (int t = 1; t < threads; ++t) workers.emplace_back(part, t);
    part(0);
    for (std::thread& worker : workers) worker.join();
    benchmark::DoNotOptimize(partial.data());
  }
  state.SetLabel(
      absl::StrFormat("%s, %d thread(s)", DataLabel(state.range(0)), threads));
  state.SetBytesProcessed(state.iterations() * count *
                          static_cast<int64_t>(sizeof(double)));
}
BENCHMARK(BM_FloorStream)
    ->Args({10'000, 1})
    ->Args({10'000, 2})
    ->Args({1'000'000, 1})
    ->Args({1'000'000, 2})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// The arithmetic floor: multiply-adds per second on data in the L1 cache
// (a 128-value row against the model, four partial sums), the rate a
// kernel reaches when memory is not the limit. Items: multiply-adds.
void BM_FloorMultiplyAdds(benchmark::State& state) {
  std::vector<double> row(128), w(128, 0.01);
  for (int j = 0; j < 128; ++j) row[j] = 0.5 + j * 1e-3;
  for (auto _ : state) {
    double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    for (int j = 0; j < 128; j += 4) {
      s0 += row[j] * w[j];
      s1 += row[j + 1] * w[j + 1];
      s2 += row[j + 2] * w[j + 2];
      s3 += row[j + 3] * w[j + 3];
    }
    const double s = (s0 + s1) + (s2 + s3);
    benchmark::DoNotOptimize(s);
    row[0] += s * 1e-300;  // a dependency: the loop is not hoisted
  }
  state.SetItemsProcessed(state.iterations() * 128);
}
BENCHMARK(BM_FloorMultiplyAdds);

// The durable-commit floor: one small INSERT in its own transaction on a
// SQLite database in WAL mode with synchronous=FULL (what the ledger's
// charge pays), in a temporary directory next to the working directory.
void BM_FloorDurableCommit(benchmark::State& state) {
  char dir[] = "dpopt-bench-commit-XXXXXX";
  if (mkdtemp(dir) == nullptr) return state.SkipWithError("mkdtemp");
  const std::string path = std::string(dir) + "/floor.db";
  sqlite3* db = nullptr;
  bool ok = sqlite3_open(path.c_str(), &db) == SQLITE_OK &&
            sqlite3_exec(db,
                         "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL;"
                         "CREATE TABLE t(k INTEGER PRIMARY KEY, v REAL);",
                         nullptr, nullptr, nullptr) == SQLITE_OK;
  sqlite3_stmt* insert = nullptr;
  ok = ok && sqlite3_prepare_v2(db, "INSERT INTO t(v) VALUES (?1)", -1, &insert,
                                nullptr) == SQLITE_OK;
  for (auto _ : state) {
    if (!ok) break;
    sqlite3_bind_double(insert, 1, 0.5);
    ok = sqlite3_step(insert) == SQLITE_DONE &&
         sqlite3_reset(insert) == SQLITE_OK;
  }
  sqlite3_finalize(insert);
  sqlite3_close(db);
  std::remove((path + "-wal").c_str());
  std::remove((path + "-shm").c_str());
  std::remove(path.c_str());
  rmdir(dir);
  if (!ok) return state.SkipWithError("sqlite");
  state.SetLabel("SQLite WAL, synchronous=FULL, one INSERT per commit");
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_FloorDurableCommit)->Unit(benchmark::kMicrosecond);

// The DP-GD step on the dense dataset at 1 and 2 kernel threads (the
// kernels' fixed-order sums give identical results for any thread count).
// Args: n, threads.
void BM_DpGdStepThreads(benchmark::State& state) {
  const Dataset* data = DataFor(state.range(0));
  if (data == nullptr) return state.SkipWithError("dataset unavailable");
  const optim::ParallelOptions previous = optim::GetParallelOptions();
  optim::ParallelOptions parallel;
  parallel.threads = static_cast<int>(state.range(1));
  if (!optim::SetParallelOptions(parallel).ok()) {
    return state.SkipWithError("threads");
  }
  state.SetLabel(absl::StrFormat("%s DP-GD, %d thread(s)",
                                 DataLabel(state.range(0)), parallel.threads));
  auto objective = Logistic(*data);
  auto rng = Secure();
  const optim::GaussianGradientQuery query{1.0, 1.0, 1.0};
  auto event = optim::GaussianGradientEvent(query, objective->parameter_size());
  if (!event.ok()) return state.SkipWithError("bad query");
  optim::PlannedReleases budget;
  budget.Allow(*event, int64_t{1} << 40);
  auto oracle = optim::PrivateGradientOracle::Create(
      *data, *objective, data->rows(), *rng, optim::SecureNoise(), budget);
  if (!oracle.ok()) return state.SkipWithError("oracle");
  Eigen::VectorXd w = Eigen::VectorXd::Zero(objective->parameter_size());
  Eigen::VectorXd g;
  for (auto _ : state) {
    if (!(*oracle)->GaussianGradient(query, w, &g).ok()) std::abort();
    w -= 0.1 * g;
  }
  optim::SetParallelOptions(previous).IgnoreError();
}
BENCHMARK(BM_DpGdStepThreads)
    ->Args({10'000, 1})
    ->Args({10'000, 2})
    ->Args({1'000'000, 1})
    ->Args({1'000'000, 2})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// ---------------------------------------------------------------- import
// The import's parsing (storage::DatasetParser) on CSV as the import
// benchmark writes it: 100 standard normal features ("%.6g", one row in 50
// scaled by 10) and a +-1 label, in 1 MiB chunks as the CLI sends them.
// Items: values parsed.
const std::string& CsvText() {
  static const std::string* text = [] {
    auto* out = new std::string;
    std::mt19937_64 rng(11);  // benchmark input, not noise
    std::normal_distribution<double> normal;
    for (int i = 0; i < 20000; ++i) {
      for (int j = 0; j < 100; ++j) {
        double v = normal(rng);
        if (i % 50 == 0) v *= 10;
        absl::StrAppendFormat(out, "%.6g,", v);
      }
      out->append(i % 3 == 0 ? "-1\n" : "1\n");
    }
    return out;
  }();
  return *text;
}

void BM_ParseCsv(benchmark::State& state) {
  const std::string& text = CsvText();
  storage::ImportOptions options;
  options.name = "bench";
  options.format = storage::DatasetFormat::kCsv;
  options.dimension = 100;
  options.epsilon_budget = 1;
  int64_t values = 0;
  for (auto _ : state) {
    auto parser = storage::DatasetParser::Create(
        options, {}, [&values](storage::ParsedRows& block) {
          values += static_cast<int64_t>(block.values.size());
          return absl::OkStatus();
        });
    if (!parser.ok()) return state.SkipWithError("parser");
    for (size_t at = 0; at < text.size(); at += size_t{1} << 20) {
      if (!(*parser)->Feed(absl::string_view(text).substr(at, 1 << 20)).ok()) {
        return state.SkipWithError("parse");
      }
    }
    if (!(*parser)->Finish().ok()) return state.SkipWithError("finish");
  }
  state.SetLabel("20,000 x 100 CSV, items = values");
  state.SetBytesProcessed(state.iterations() *
                          static_cast<int64_t>(text.size()));
  state.SetItemsProcessed(values);
}
BENCHMARK(BM_ParseCsv)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace dpopt

BENCHMARK_MAIN();
