// Noise benchmark (prints numbers; not a pass/fail test).
//
//   noise_bench [path/to/a9a]
//
// 1. Samples per second on one core for each sampler, with the secure
//    generator (what the server uses) and with the seeded test generator (to
//    separate sampler cost from kernel CSPRNG cost).
// 2. A self-contained DP-SGD step on a9a (n = 32561, d = 123, Poisson
//    sampling q = 0.01, per-example clipping of logistic-loss gradients to
//    norm 1, exact rounded Gaussian noise through AddGaussianNoise) and the
//    share of its time spent drawing noise.
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "Eigen/Dense"
#include "core/noise/discrete_samplers.h"
#include "core/noise/random.h"
#include "core/noise/rounded_gaussian.h"
#include "core/noise/subsampling.h"
#include "core/noise/testing/seeded_random.h"
#include "core/noise/vector_mechanisms.h"

namespace dpopt::noise {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Runs `fn` (which performs `per_call` operations) for about `budget`
// seconds; returns operations per second.
double Rate(const std::function<void()>& fn, double per_call,
            double budget = 1.0) {
  int64_t calls = 0;
  const auto start = Clock::now();
  double elapsed = 0;
  do {
    for (int i = 0; i < 64; ++i) fn();
    calls += 64;
    elapsed = Seconds(start);
  } while (elapsed < budget);
  return calls * per_call / elapsed;
}

volatile int64_t g_sink = 0;

template <typename Sampler>
void SamplerRow(const char* name, Sampler& sampler, RandomSource& rng,
                const char* rng_name) {
  RandomBits bits(rng);
  const double rate = Rate([&] { g_sink += sampler.Sample(bits); }, 1.0);
  std::printf("  %-34s %-8s %8.2f M samples/s\n", name, rng_name, rate / 1e6);
}

struct Row {
  std::vector<std::pair<int, double>> features;  // 0-based index, value
  double label;                                  // -1 or +1
};

std::vector<Row> LoadLibsvm(const std::string& path, int dimension) {
  std::vector<Row> rows;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ss(line);
    Row row;
    ss >> row.label;
    std::string tok;
    while (ss >> tok) {
      const size_t colon = tok.find(':');
      const int index = std::stoi(tok.substr(0, colon)) - 1;
      if (index >= 0 && index < dimension) {
        row.features.emplace_back(index, std::stod(tok.substr(colon + 1)));
      }
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

void DpSgdShare(const std::string& path) {
  constexpr int kD = 123;
  constexpr double kQ = 0.01, kClip = 1.0, kZ = 1.0, kLr = 0.5;
  constexpr int kSteps = 2000;
  const std::vector<Row> rows = LoadLibsvm(path, kD);
  if (rows.empty()) {
    std::printf("DP-SGD: cannot read %s; skipped\n", path.c_str());
    return;
  }
  auto rng_or = NewSecureRandom();
  if (!rng_or.ok()) return;
  RandomSource& rng = **rng_or;
  const auto plan = PlanGaussian(kClip, kZ, kD);
  if (!plan.ok()) return;
  Eigen::VectorXd w = Eigen::VectorXd::Zero(kD);
  Eigen::VectorXd sum(kD), g(kD);
  double t_sample = 0, t_grad = 0, t_noise = 0;
  int64_t batch_total = 0;
  const double expected_batch = kQ * rows.size();  // public normalisation
  for (int step = 0; step < kSteps; ++step) {
    // Poisson sampling of the batch (server-side, secure generator, exact
    // lazy-bit Bernoulli per row).
    auto t0 = Clock::now();
    auto batch_or = PoissonSubsample(rows.size(), kQ, rng);
    if (!batch_or.ok()) return;
    const std::vector<int64_t>& batch = *batch_or;
    t_sample += Seconds(t0);
    // Per-example clipped logistic-loss gradients, summed.
    t0 = Clock::now();
    sum.setZero();
    for (int64_t i : batch) {
      const Row& r = rows[i];
      double margin = 0;
      for (const auto& [j, x] : r.features) margin += w[j] * x;
      margin *= r.label;
      // d/dw log(1 + exp(-y <w,x>)) = -y x / (1 + exp(y <w,x>)).
      const double coef = -r.label / (1 + std::exp(margin));
      double norm2 = 0;
      for (const auto& [j, x] : r.features) norm2 += x * x;
      const double norm = std::abs(coef) * std::sqrt(norm2);
      const double scale = norm > kClip ? kClip / norm : 1.0;
      for (const auto& [j, x] : r.features) sum[j] += scale * coef * x;
    }
    t_grad += Seconds(t0);
    batch_total += batch.size();
    // Noise.
    t0 = Clock::now();
    if (!AddGaussianNoise(*plan, rng, sum).ok()) return;
    t_noise += Seconds(t0);
    w -= kLr / expected_batch * sum;
  }
  const double total = t_sample + t_grad + t_noise;
  std::printf(
      "DP-SGD on a9a (n=%zu, d=%d, q=%.2f, mean batch %.1f), %d steps:\n"
      "  per step: %.2f us total = %.2f us Poisson sampling + %.2f us "
      "clipped gradients + %.2f us noise\n"
      "  share drawing noise: %.1f%% (noise + sampling randomness: %.1f%%)\n",
      rows.size(), kD, kQ, static_cast<double>(batch_total) / kSteps, kSteps,
      1e6 * total / kSteps, 1e6 * t_sample / kSteps, 1e6 * t_grad / kSteps,
      1e6 * t_noise / kSteps, 100 * t_noise / total,
      100 * (t_noise + t_sample) / total);
}

int Main(int argc, char** argv) {
  auto secure_or = NewSecureRandom();
  if (!secure_or.ok()) {
    std::printf("secure random unavailable: %s\n",
                secure_or.status().ToString().c_str());
    return 1;
  }
  RandomSource& secure = **secure_or;
  testing::SeededRandomForTesting seeded(1);

  std::printf("Random words (one core):\n");
  std::printf("  %-34s %-8s %8.2f M words/s\n", "NextUint64", "secure",
              Rate([&] { g_sink += secure.NextUint64(); }, 1.0) / 1e6);
  if (auto kernel = NewKernelRandom(); kernel.ok()) {
    std::printf("  %-34s %-8s %8.2f M words/s\n", "NextUint64", "kernel",
                Rate([&] { g_sink += (*kernel)->NextUint64(); }, 1.0) / 1e6);
  }
  std::printf("  %-34s %-8s %8.2f M words/s\n", "NextUint64", "seeded",
              Rate([&] { g_sink += seeded.NextUint64(); }, 1.0) / 1e6);

  std::printf("Samplers (one core):\n");
  // Rows for one sampler type at each scale, secure and seeded generators.
  auto rows = [&](auto create, const char* label) {
    for (double scale : {3.0, 1024.0, 1048576.0, 1048587.1}) {
      auto s = create(scale);
      char name[64];
      std::snprintf(name, sizeof(name), "%s=%.1f", label, scale);
      SamplerRow(name, *s, secure, "secure");
      SamplerRow(name, *s, seeded, "seeded");
    }
  };
  rows(DiscreteGaussianSampler::Create, "discrete Gaussian sigma");
  rows(RoundedGaussianSampler::Create, "rounded Gaussian tau");
  for (double b : {3.0, 1048576.0}) {
    auto s = DiscreteLaplaceSampler::Create(b);
    char name[64];
    std::snprintf(name, sizeof(name), "discrete Laplace b=%.1f", b);
    SamplerRow(name, *s, secure, "secure");
    SamplerRow(name, *s, seeded, "seeded");
  }
  {
    auto plan = PlanGaussian(1.0, 1.0, 123);
    Eigen::VectorXd v = Eigen::VectorXd::Zero(123);
    const double rate =
        Rate([&] { (void)AddGaussianNoise(*plan, secure, v); }, 123.0);
    std::printf("  %-34s %-8s %8.2f M coords/s\n", "AddGaussianNoise d=123",
                "secure", rate / 1e6);
  }
  const std::string path =
      argc > 1 ? argv[1] : std::string(DPOPT_SOURCE_DIR) + "/data/adult/a9a";
  DpSgdShare(path);
  return 0;
}

}  // namespace
}  // namespace dpopt::noise

int main(int argc, char** argv) { return dpopt::noise::Main(argc, argv); }
