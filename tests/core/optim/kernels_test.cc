// The batched row kernels (Objective::AddClippedGradientSum, AddGradientSum)
// and the deterministic multi-threading (parallel.h) against straightforward
// references:
// - within one chunk, the kernels do the per-example calls' operations in
//   the same order: exact equality (==, which identifies -0 and +0; the sums
//   start from +0 so even the bits agree);
// - over several chunks, exact equality with the documented chunk order
//   (chunk 0 into out, the others into zeroed partials, added in order),
//   and agreement with the plain sequential sum to 1e-12 of the sum of the
//   terms' magnitudes (reassociating n terms moves the result by at most
//   about n * 2^-53 of that sum: 1.7e-13 for the n = 1500 used here);
// - every result is bitwise identical for 1, 2 and 4 threads.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <numeric>
#include <random>
#include <thread>
#include <vector>

#include "core/noise/testing/seeded_random.h"
#include "core/optim/objective.h"
#include "core/optim/parallel.h"
#include "core/optim/private_oracle.h"
#include "core/optim/release_budget.h"
#include "core/optim/testing/noise_off.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/common/status_matchers.h"

namespace dpopt::optim {
namespace {

using ::dpopt::testing::StatusIs;

// Sets the process-wide thread count for one scope.
class ThreadsScope {
 public:
  explicit ThreadsScope(int threads) : saved_(GetParallelOptions()) {
    ParallelOptions o;
    o.threads = threads;
    EXPECT_OK(SetParallelOptions(o));
  }
  ~ThreadsScope() { EXPECT_OK(SetParallelOptions(saved_)); }

 private:
  const ParallelOptions saved_;
};

bool BitwiseEqual(const Eigen::VectorXd& a, const Eigen::VectorXd& b) {
  return a.size() == b.size() &&
         std::memcmp(a.data(), b.data(), sizeof(double) * a.size()) == 0;
}

bool BitwiseEqual(double a, double b) {
  return std::memcmp(&a, &b, sizeof(double)) == 0;
}

ModelConfig Config(LossKind loss) {
  ModelConfig c;
  c.loss = loss;
  c.num_classes = loss == LossKind::kSoftmax ? 3 : 2;
  if (loss == LossKind::kLeastSquares) c.label_bound = 1.5;
  if (loss == LossKind::kHuberizedHinge) c.huber_width = 0.5;
  return c;
}

double RandomLabel(const ModelConfig& config, std::mt19937& gen) {
  std::normal_distribution<double> normal;
  switch (RequiredLabelKind(config.loss)) {
    case LabelKind::kBinary:
      return normal(gen) > 0 ? 1 : -1;
    case LabelKind::kMulticlass:
      return static_cast<double>(gen() % config.num_classes);
    case LabelKind::kReal:
      return 2 * normal(gen);
  }
  return 0;
}

// Which unusual rows EdgeCaseData mixes in: empty, huge (norm above 2^400)
// and tiny (below 2^-500) ones; only empty ones (unclipped sums of huge rows
// overflow); none (kTypical: every row also has a nonzero entry, so every
// norm is in the direct-clipping range).
enum class Rows { kEdgeCases, kEmptyOnly, kTypical };

// Random rows of varied scale (the clip binds on some, not on others) with
// the unusual rows `rows` asks for (huge and tiny ones take the per-example
// overflow-free path). `sparse`: CSR with about a third of the entries
// present.

Dataset EdgeCaseData(const ModelConfig& config, int64_t n, int64_t d,
                     bool sparse, uint32_t seed, Rows rows = Rows::kEdgeCases) {
  const bool typical = rows == Rows::kTypical;
  std::mt19937 gen(seed);
  std::normal_distribution<double> normal;
  std::uniform_real_distribution<double> unif;
  Eigen::MatrixXd x = Eigen::MatrixXd::Zero(n, d);
  Eigen::VectorXd y(n);
  for (int64_t i = 0; i < n; ++i) {
    y[i] = RandomLabel(config, gen);
    const double scale = std::pow(10.0, static_cast<int>(i % 5) - 2);
    const int kind = rows == Rows::kEdgeCases   ? i % 23
                     : rows == Rows::kEmptyOnly ? (i % 23 == 5 ? 5 : 0)
                                                : 0;
    switch (kind) {
      case 5:  // empty row
        continue;
      case 11:  // huge entries: norm above 2^400
        x(i, i % d) = 1e300;
        x(i, (i + 1) % d) = -3e299;
        continue;
      case 17:  // tiny entries: norm below 2^-500
        x(i, i % d) = 1e-300;
        x(i, (i + 2) % d) = 4e-310;  // subnormal
        continue;
      default:
        break;
    }
    for (int64_t j = 0; j < d; ++j) {
      const bool forced = typical && j == i % d;  // a nonzero in every row
      if (sparse && !forced && unif(gen) > 0.35) continue;
      x(i, j) = scale * (forced ? 1.0 + std::abs(normal(gen)) : normal(gen));
    }
  }
  if (sparse) {
    SparseRows s = x.sparseView();
    return Dataset::Sparse(std::move(s), std::move(y),
                           RequiredLabelKind(config.loss), config.num_classes);
  }
  return Dataset::Dense(std::move(x), std::move(y),
                        RequiredLabelKind(config.loss), config.num_classes);
}

Eigen::VectorXd RandomW(int64_t p, uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<double> normal;
  Eigen::VectorXd w(p);
  for (int64_t j = 0; j < p; ++j) w[j] = normal(gen);
  return w;
}

// ||x_i|| as the kernel documents it.
double ReferenceNorm(const Dataset& data, int64_t i, Objective::ClipNorm n) {
  if (n == Objective::ClipNorm::kL2) return data.RowNorm(i);
  if (!data.is_sparse()) return data.dense().row(i).lpNorm<1>();
  double s = 0;
  for (SparseRows::InnerIterator it(data.sparse(), i); it; ++it) {
    s += std::abs(it.value());
  }
  return s;
}

// The per-example loop over rows[begin, end) into out.
void ReferenceClipped(const Objective& obj, const Dataset& data,
                      const std::vector<int64_t>& rows, int64_t begin,
                      int64_t end, const Eigen::VectorXd& w,
                      Objective::ClipNorm norm, double clip,
                      Eigen::Ref<Eigen::VectorXd> out) {
  Eigen::VectorXd c(obj.outputs());
  for (int64_t k = begin; k < end; ++k) {
    obj.AddClippedExampleGradient(data, rows[k], w, norm, clip,
                                  ReferenceNorm(data, rows[k], norm), c, out);
  }
}

// The documented chunk order, written out.
Eigen::VectorXd ChunkOrdered(
    const Chunking& chunking, int64_t p,
    const std::function<void(int64_t, int64_t, Eigen::Ref<Eigen::VectorXd>)>&
        add_range) {
  Eigen::VectorXd out = Eigen::VectorXd::Zero(p);
  add_range(chunking.begin(0), chunking.end(0), out);
  for (int64_t c = 1; c < chunking.chunks(); ++c) {
    Eigen::VectorXd partial = Eigen::VectorXd::Zero(p);
    add_range(chunking.begin(c), chunking.end(c), partial);
    out += partial;
  }
  return out;
}

// ------------------------------------------------------------ parallel.h

TEST(ParallelOptionsTest, ValidateAndDefault) {
  const int def = ParallelOptions::DefaultThreads();
  EXPECT_GE(def, 1);
  EXPECT_LE(def, ParallelOptions::kDefaultMaxThreads);
  EXPECT_EQ(ParallelOptions{}.threads, def);
  for (int t : {1, 2, 4, ParallelOptions::kMaxThreads}) {
    ParallelOptions o;
    o.threads = t;
    EXPECT_OK(o.Validate());
  }
  for (int t : {0, -1, ParallelOptions::kMaxThreads + 1}) {
    ParallelOptions o;
    o.threads = t;
    EXPECT_THAT(o.Validate(), StatusIs(absl::StatusCode::kInvalidArgument));
    const int before = GetParallelOptions().threads;
    EXPECT_THAT(SetParallelOptions(o),
                StatusIs(absl::StatusCode::kInvalidArgument));
    EXPECT_EQ(GetParallelOptions().threads, before);
  }
}

TEST(ParallelForTest, RunsEveryTaskOnce) {
  for (int threads : {1, 2, 4, 8}) {
    for (int64_t tasks : {0, 1, 3, 1000}) {
      std::vector<std::atomic<int>> hits(static_cast<size_t>(tasks));
      ParallelFor(tasks, threads, [&](int64_t t) { ++hits[t]; });
      for (int64_t t = 0; t < tasks; ++t) {
        EXPECT_EQ(hits[t].load(), 1) << threads << " " << tasks << " " << t;
      }
    }
  }
}

TEST(ParallelForTest, ConcurrentCallersShareThePool) {
  constexpr int kCallers = 6;
  std::vector<int64_t> sums(kCallers, 0);
  std::vector<std::thread> callers;
  for (int c = 0; c < kCallers; ++c) {
    callers.emplace_back([&sums, c] {
      for (int round = 0; round < 50; ++round) {
        std::vector<int64_t> v(64, 0);
        ParallelFor(64, 3, [&](int64_t t) { v[t] = t + c; });
        for (int64_t x : v) sums[c] += x;
      }
    });
  }
  for (auto& t : callers) t.join();
  for (int c = 0; c < kCallers; ++c) {
    EXPECT_EQ(sums[c], 50 * (64 * 63 / 2 + 64 * c));
  }
}

TEST(ChunkRowsTest, DependsOnShapeOnly) {
  EXPECT_EQ(ChunkRows(32561, 123, 123).chunk_size, 533);  // a9a
  EXPECT_EQ(ChunkRows(32561, 123, 123).chunks(), 62);
  EXPECT_EQ(ChunkRows(1000, 100, 100).chunk_size, 656);  // dense 1M bench
  EXPECT_EQ(ChunkRows(1000, 100, 100).chunks(), 2);
  EXPECT_EQ(ChunkRows(325, 123, 123).chunks(), 1);  // a9a minibatch
  EXPECT_EQ(ChunkRows(10, 100000, 100000).chunk_size, 6250);
  EXPECT_EQ(ChunkRows(10, 1000, 1000).chunk_size, 256);
  EXPECT_EQ(ChunkRows(0, 5, 5).chunks(), 1);
  const Chunking c = ChunkRows(1000, 100, 100);
  EXPECT_EQ(c.begin(1), 656);
  EXPECT_EQ(c.end(1), 1000);
}

TEST(ChunkedSumTest, FixedOrderForAnyThreadCountAndWaves) {
  // 2^21-entry partials: at most two fit the 32 MB budget, so the sum runs
  // in several waves.
  for (int64_t size : {int64_t{7}, int64_t{1} << 21}) {
    Chunking chunking;
    chunking.count = 7 * 10;
    chunking.chunk_size = 10;
    auto fn = [size](int64_t chunk, Eigen::Ref<Eigen::VectorXd> acc) {
      for (int64_t j = 0; j < size; j += (size > 100 ? 4099 : 1)) {
        acc[j] += 1.0 / (3.0 + chunk + j);
        acc[j] += 1e-17 * chunk;
      }
    };
    const Eigen::VectorXd start = Eigen::VectorXd::Constant(size, 0.25);
    Eigen::VectorXd expected = start;
    fn(0, expected);
    for (int64_t c = 1; c < chunking.chunks(); ++c) {
      Eigen::VectorXd partial = Eigen::VectorXd::Zero(size);
      fn(c, partial);
      expected += partial;
    }
    for (int threads : {1, 2, 4}) {
      Eigen::VectorXd out = start;
      ChunkedVectorSum(chunking, threads, fn, out);
      EXPECT_TRUE(BitwiseEqual(out, expected)) << size << " " << threads;
    }
    for (int threads : {1, 2, 4}) {
      auto scalar = [](int64_t c) { return 1.0 / (7.0 + c) + 1e-17 * c; };
      double want = scalar(0);
      for (int64_t c = 1; c < chunking.chunks(); ++c) want += scalar(c);
      EXPECT_TRUE(
          BitwiseEqual(ChunkedScalarSum(chunking, threads, scalar), want));
    }
  }
}

// ------------------------------------------------------------- kernels

struct KernelCase {
  LossKind loss;
  bool sparse;
  Objective::ClipNorm norm;
};

std::string CaseString(const KernelCase& k) {
  return LossName(k.loss) + (k.sparse ? "_sparse" : "_dense") +
         (k.norm == Objective::ClipNorm::kL2 ? "_l2" : "_l1");
}
void PrintTo(const KernelCase& k, std::ostream* os) { *os << CaseString(k); }
std::string CaseName(const ::testing::TestParamInfo<KernelCase>& info) {
  return CaseString(info.param);
}

class KernelTest : public ::testing::TestWithParam<KernelCase> {};

// One chunk: the batched kernel is the per-example loop, bit for bit, for a
// binding clip, a clip that never binds, and rows listed in any order with
// repeats.
TEST_P(KernelTest, OneChunkEqualsPerExampleLoop) {
  const KernelCase k = GetParam();
  const ModelConfig config = Config(k.loss);
  const int64_t n = 300, d = 12;
  ASSERT_OK_AND_ASSIGN(auto obj, Objective::Create(config, d));
  const Dataset data = EdgeCaseData(config, n, d, k.sparse, 3);
  ASSERT_OK(obj->CheckDataset(data));
  std::mt19937 gen(9);
  std::vector<int64_t> rows;
  for (int64_t i = 0; i < n; ++i) rows.push_back(i);
  for (int r = 0; r < 100; ++r) rows.push_back(gen() % n);  // repeats
  std::shuffle(rows.begin() + n, rows.end(), gen);
  ASSERT_EQ(ChunkRows(rows.size(), d, obj->parameter_size()).chunks(), 1);
  for (double scale_w : {0.0, 1.0, 1e3}) {
    const Eigen::VectorXd w = scale_w * RandomW(obj->parameter_size(), 4);
    for (double clip : {1e-3, 0.5, 1e6}) {
      Eigen::VectorXd want = Eigen::VectorXd::Zero(obj->parameter_size());
      ReferenceClipped(*obj, data, rows, 0, rows.size(), w, k.norm, clip, want);
      for (int threads : {1, 2, 4}) {
        ThreadsScope scope(threads);
        Eigen::VectorXd got = Eigen::VectorXd::Zero(obj->parameter_size());
        obj->AddClippedGradientSum(data, rows, w, k.norm, clip, got);
        EXPECT_TRUE(BitwiseEqual(got, want))
            << "w scale " << scale_w << " clip " << clip << " threads "
            << threads << "\n"
            << (got - want).transpose();
        EXPECT_TRUE(got.allFinite());
      }
    }
  }
}

// On typical rows the branch-free clipping is the per-example loop, bit for
// bit, at iterates where some rows are clipped and others not, for both
// overloads.
TEST_P(KernelTest, TypicalRowsEqualPerExampleLoop) {
  const KernelCase k = GetParam();
  const ModelConfig config = Config(k.loss);
  const int64_t n = 300, d = 12;
  ASSERT_OK_AND_ASSIGN(auto obj, Objective::Create(config, d));
  const Dataset data = EdgeCaseData(config, n, d, k.sparse, 21, Rows::kTypical);
  ASSERT_OK(obj->CheckDataset(data));
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_GT(data.row_norms_l1()[i], 0);
    ASSERT_LT(data.row_norms_l1()[i], 1e6);
  }
  std::vector<int64_t> rows(n);
  std::iota(rows.begin(), rows.end(), int64_t{0});
  for (double scale_w : {0.0, 1.0, 1e3}) {
    const Eigen::VectorXd w = scale_w * RandomW(obj->parameter_size(), 22);
    for (double clip : {1e-3, 0.05, 0.5, 1e6}) {
      Eigen::VectorXd want = Eigen::VectorXd::Zero(obj->parameter_size());
      ReferenceClipped(*obj, data, rows, 0, rows.size(), w, k.norm, clip, want);
      Eigen::VectorXd listed = Eigen::VectorXd::Zero(obj->parameter_size());
      obj->AddClippedGradientSum(data, rows, w, k.norm, clip, listed);
      EXPECT_TRUE(BitwiseEqual(listed, want))
          << "w scale " << scale_w << " clip " << clip;
      if (ChunkRows(n, d, obj->parameter_size()).chunks() == 1) {
        Eigen::VectorXd all = Eigen::VectorXd::Zero(obj->parameter_size());
        obj->AddClippedGradientSum(data, w, k.norm, clip, all);
        EXPECT_TRUE(BitwiseEqual(all, want))
            << "w scale " << scale_w << " clip " << clip;
      }
    }
  }
}

// The full-batch overload (DP-GD) is the listed-rows sum over 0..n-1, bit
// for bit, over several chunks and for any thread count.
TEST_P(KernelTest, AllRowsOverloadEqualsListedRows) {
  const KernelCase k = GetParam();
  const ModelConfig config = Config(k.loss);
  const int64_t n = 1500, d = 200;
  ASSERT_OK_AND_ASSIGN(auto obj, Objective::Create(config, d));
  const int64_t p = obj->parameter_size();
  const Dataset data = EdgeCaseData(config, n, d, k.sparse, 17);
  ASSERT_GT(ChunkRows(n, d, p).chunks(), 3);
  std::vector<int64_t> rows(n);
  std::iota(rows.begin(), rows.end(), int64_t{0});
  const Eigen::VectorXd w = 0.3 * RandomW(p, 18);
  for (double clip : {1e-3, 0.5, 1e6}) {
    Eigen::VectorXd want = Eigen::VectorXd::Zero(p);
    obj->AddClippedGradientSum(data, rows, w, k.norm, clip, want);
    for (int threads : {1, 2, 4}) {
      ThreadsScope scope(threads);
      Eigen::VectorXd got = Eigen::VectorXd::Zero(p);
      obj->AddClippedGradientSum(data, w, k.norm, clip, got);
      EXPECT_TRUE(BitwiseEqual(got, want))
          << "clip " << clip << " threads " << threads;
    }
  }
}

// Several chunks: the documented chunk order exactly, the plain sequential
// loop to 1e-13 relative, the same bits for 1, 2 and 4 threads.
TEST_P(KernelTest, ChunksAreDeterministic) {
  const KernelCase k = GetParam();
  const ModelConfig config = Config(k.loss);
  const int64_t d = 200;  // chunks of 328 rows
  const int64_t n = 1500;
  ASSERT_OK_AND_ASSIGN(auto obj, Objective::Create(config, d));
  const int64_t p = obj->parameter_size();
  const Dataset data = EdgeCaseData(config, n, d, k.sparse, 5);
  std::mt19937 gen(13);
  std::vector<int64_t> rows;
  for (int64_t r = 0; r < n; ++r) rows.push_back(gen() % n);
  std::sort(rows.begin(), rows.end());
  const Chunking chunking = ChunkRows(rows.size(), d, p);
  ASSERT_GT(chunking.chunks(), 3);
  const Eigen::VectorXd w = 0.3 * RandomW(p, 6);
  const double clip = 0.5;
  const Eigen::VectorXd want =
      ChunkOrdered(chunking, p, [&](int64_t b, int64_t e, auto out) {
        ReferenceClipped(*obj, data, rows, b, e, w, k.norm, clip, out);
      });
  Eigen::VectorXd sequential = Eigen::VectorXd::Zero(p);
  ReferenceClipped(*obj, data, rows, 0, rows.size(), w, k.norm, clip,
                   sequential);
  // Each clipped term has entries of magnitude <= clip.
  const double tol = 1e-12 * clip * static_cast<double>(rows.size());
  EXPECT_LE((want - sequential).lpNorm<Eigen::Infinity>(), tol);
  for (int threads : {1, 2, 4}) {
    ThreadsScope scope(threads);
    Eigen::VectorXd got = Eigen::VectorXd::Zero(p);
    obj->AddClippedGradientSum(data, rows, w, k.norm, clip, got);
    EXPECT_TRUE(BitwiseEqual(got, want)) << "threads " << threads;
  }
}

// The unclipped full-data sum (ExactGradient, SmoothGradient) and the
// evaluations: the documented chunk order, and thread-independent bits.
class FullDataTest : public ::testing::TestWithParam<KernelCase> {};

TEST_P(FullDataTest, SumsAreDeterministic) {
  const KernelCase k = GetParam();
  const ModelConfig config = Config(k.loss);
  const int64_t d = 200;
  for (int64_t n : {int64_t{300}, int64_t{1500}}) {
    ASSERT_OK_AND_ASSIGN(auto obj, Objective::Create(config, d));
    const int64_t p = obj->parameter_size();
    const Dataset data =
        EdgeCaseData(config, n, d, k.sparse, 7, Rows::kEmptyOnly);
    const Chunking chunking = ChunkRows(n, d, p);
    const Eigen::VectorXd w = 0.3 * RandomW(p, 8);
    const double scale = 1.0 / 3.0;
    Eigen::VectorXd c(obj->outputs());
    const Eigen::VectorXd want =
        ChunkOrdered(chunking, p, [&](int64_t b, int64_t e, auto out) {
          for (int64_t i = b; i < e; ++i) {
            obj->ExampleCoefficients(data, i, w, c);
            obj->AddScaledExampleGradient(data, i, c, scale, out);
          }
        });
    auto chunk_loss = [&](int64_t ch) {
      double s = 0;
      for (int64_t i = chunking.begin(ch); i < chunking.end(ch); ++i) {
        s += obj->ExampleCoefficients(data, i, w, c);
      }
      return s;
    };
    double loss_sum = chunk_loss(0);
    for (int64_t ch = 1; ch < chunking.chunks(); ++ch) {
      loss_sum += chunk_loss(ch);
    }
    const double want_loss =
        loss_sum / static_cast<double>(n) + obj->Regularizer(w);
    const Eigen::VectorXd want_smooth =
        want * 3.0 / static_cast<double>(n) + config.l2 * w;
    double first_accuracy = 0;
    for (int threads : {1, 2, 4}) {
      ThreadsScope scope(threads);
      Eigen::VectorXd got = Eigen::VectorXd::Zero(p);
      obj->AddGradientSum(data, w, scale, got);
      EXPECT_TRUE(BitwiseEqual(got, want)) << n << " threads " << threads;
      const double loss = obj->Loss(data, w);
      EXPECT_TRUE(BitwiseEqual(loss, want_loss))
          << n << " threads " << threads << ": " << loss << " vs " << want_loss;
      // SmoothGradient scales each row by 1/n: close to the sum / n.
      const Eigen::VectorXd smooth = obj->SmoothGradient(data, w);
      EXPECT_LE((smooth - want_smooth).lpNorm<Eigen::Infinity>(),
                1e-12 * (1 + want_smooth.lpNorm<Eigen::Infinity>()));
      if (config.loss != LossKind::kLeastSquares) {
        const double acc = obj->Accuracy(data, w);
        if (threads == 1) first_accuracy = acc;
        EXPECT_EQ(acc, first_accuracy);
      }
    }
    if (chunking.chunks() == 1) {
      // One chunk: SmoothGradient is the old row-by-row loop.
      Eigen::VectorXd g = Eigen::VectorXd::Zero(p);
      for (int64_t i = 0; i < n; ++i) {
        obj->ExampleCoefficients(data, i, w, c);
        obj->AddScaledExampleGradient(data, i, c, 1.0 / n, g);
      }
      obj->AddSmoothRegularizerGradient(w, g);
      EXPECT_TRUE(BitwiseEqual(obj->SmoothGradient(data, w), g));
    }
  }
}

// Loss and accuracy (through the gather kernel for one-score losses) on
// rows with extreme and zero entries: the per-example values summed in the
// documented chunk order, for any thread count.
TEST_P(FullDataTest, LossAndAccuracyOnEdgeCases) {
  const KernelCase k = GetParam();
  const ModelConfig config = Config(k.loss);
  const int64_t d = 200;
  for (int64_t n : {int64_t{300}, int64_t{1500}}) {
    ASSERT_OK_AND_ASSIGN(auto obj, Objective::Create(config, d));
    const Dataset data = EdgeCaseData(config, n, d, k.sparse, 17);
    const Chunking chunking = ChunkRows(n, d, obj->parameter_size());
    const Eigen::VectorXd w = 0.3 * RandomW(obj->parameter_size(), 18);
    Eigen::VectorXd c(obj->outputs());
    auto chunk_loss = [&](int64_t ch) {
      double s = 0;
      for (int64_t i = chunking.begin(ch); i < chunking.end(ch); ++i) {
        s += obj->ExampleCoefficients(data, i, w, c);
      }
      return s;
    };
    double loss_sum = chunk_loss(0);
    for (int64_t ch = 1; ch < chunking.chunks(); ++ch) {
      loss_sum += chunk_loss(ch);
    }
    const double want_loss =
        loss_sum / static_cast<double>(n) + obj->Regularizer(w);
    int64_t correct = 0;
    for (int64_t i = 0; i < n; ++i) {
      if (config.loss == LossKind::kSoftmax) {
        int best = 0;
        for (int j = 1; j < obj->outputs(); ++j) {
          if (data.RowDot(i, w.segment(j * d, d)) >
              data.RowDot(i, w.segment(best * d, d))) {
            best = j;
          }
        }
        correct += best == static_cast<int>(data.label(i));
      } else {
        correct += (data.RowDot(i, w) >= 0 ? 1.0 : -1.0) == data.label(i);
      }
    }
    for (int threads : {1, 2, 4}) {
      ThreadsScope scope(threads);
      const double loss = obj->Loss(data, w);
      EXPECT_TRUE(BitwiseEqual(loss, want_loss))
          << n << " threads " << threads << ": " << loss << " vs " << want_loss;
      if (config.loss != LossKind::kLeastSquares) {
        EXPECT_EQ(obj->Accuracy(data, w),
                  static_cast<double>(correct) / static_cast<double>(n));
      }
    }
  }
}

std::vector<KernelCase> AllCases() {
  std::vector<KernelCase> cases;
  for (LossKind loss :
       {LossKind::kLogistic, LossKind::kHinge, LossKind::kHuberizedHinge,
        LossKind::kLeastSquares, LossKind::kSoftmax}) {
    for (bool sparse : {false, true}) {
      for (auto norm : {Objective::ClipNorm::kL2, Objective::ClipNorm::kL1}) {
        cases.push_back({loss, sparse, norm});
      }
    }
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(AllLossesAndLayouts, KernelTest,
                         ::testing::ValuesIn(AllCases()), CaseName);

std::vector<KernelCase> UnclippedCases() {
  std::vector<KernelCase> cases;
  for (const KernelCase& k : AllCases()) {
    if (k.norm == Objective::ClipNorm::kL2) cases.push_back(k);
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(AllLossesAndLayouts, FullDataTest,
                         ::testing::ValuesIn(UnclippedCases()), CaseName);

// Zero coefficients and zero rows add +-0: equal to the reference, and the
// sum of an all-zero batch is +0 everywhere.
// Dense rows are read in blocks of 16, their scores in groups of 8 (two per
// SSE2 register, two columns at a time) and scattered eight entries at a
// time: every batch length and dimension around those sizes is still the
// per-example loop, bit for bit (one chunk), unclipped (scaled) and clipped.
TEST(DenseBlockTest, AnyBatchLengthAndDimensionEqualsPerExampleLoop) {
  const ModelConfig config = Config(LossKind::kLogistic);
  for (int64_t d : {1, 2, 3, 7, 8, 9, 15, 17, 100}) {
    ASSERT_OK_AND_ASSIGN(auto obj, Objective::Create(config, d));
    const int64_t n = 60;
    for (Rows kind : {Rows::kTypical, Rows::kEdgeCases}) {
      const Dataset data =
          EdgeCaseData(config, n, d, false, 7 + static_cast<uint32_t>(d), kind);
      ASSERT_OK(obj->CheckDataset(data));
      const Eigen::VectorXd w = RandomW(d, 11);
      std::mt19937 gen(13);
      for (int64_t batch : {1, 2, 7, 8, 9, 15, 16, 17, 24, 33, 60}) {
        std::vector<int64_t> rows(batch);
        for (int64_t& r : rows) r = gen() % n;
        for (Objective::ClipNorm norm :
             {Objective::ClipNorm::kL2, Objective::ClipNorm::kL1}) {
          for (double clip : {1e-3, 1e6}) {
            Eigen::VectorXd want = Eigen::VectorXd::Zero(d);
            ReferenceClipped(*obj, data, rows, 0, batch, w, norm, clip, want);
            Eigen::VectorXd got = Eigen::VectorXd::Zero(d);
            obj->AddClippedGradientSum(data, rows, w, norm, clip, got);
            EXPECT_TRUE(BitwiseEqual(got, want))
                << "d " << d << " batch " << batch << " clip " << clip;
          }
        }
      }
      // Every row in order (full batch), unclipped.
      if (kind == Rows::kTypical) {
        Eigen::VectorXd want = Eigen::VectorXd::Zero(d);
        Eigen::VectorXd c(1);
        for (int64_t i = 0; i < n; ++i) {
          obj->ExampleCoefficients(data, i, w, c);
          obj->AddScaledExampleGradient(data, i, c, 0.5, want);
        }
        Eigen::VectorXd got = Eigen::VectorXd::Zero(d);
        obj->AddGradientSum(data, w, 0.5, got);
        EXPECT_TRUE(BitwiseEqual(got, want)) << "d " << d;
      }
    }
  }
}

TEST(KernelEdgeTest, EmptyBatchAndZeroRows) {
  ASSERT_OK_AND_ASSIGN(auto obj,
                       Objective::Create(Config(LossKind::kHinge), 3));
  Eigen::MatrixXd x(3, 3);
  x << 0, 0, 0,   //
      -1, 2, -3,  //
      1, -2, 3;
  Eigen::VectorXd y(3);
  y << 1, 1, -1;
  const Dataset data = Dataset::Dense(x, y, LabelKind::kBinary);
  // w with margin y <x, w> = 14 > 1 on rows 1 and 2: zero coefficients.
  const Eigen::Vector3d w(-1, 2, -3);
  Eigen::VectorXd out = Eigen::VectorXd::Zero(3);
  obj->AddClippedGradientSum(data, {}, w, Objective::ClipNorm::kL2, 1, out);
  EXPECT_TRUE(BitwiseEqual(out, Eigen::VectorXd::Zero(3)));
  const std::vector<int64_t> rows = {0, 1, 2, 1};
  obj->AddClippedGradientSum(data, rows, w, Objective::ClipNorm::kL2, 1, out);
  EXPECT_TRUE(BitwiseEqual(out, Eigen::VectorXd::Zero(3)));
}

// Dataset's norm cache holds exactly the norms the kernels documented
// before it existed (computed row by row), including rows whose norm
// overflows to Inf or underflows to 0, for dense and sparse storage.
TEST(RowNormCacheTest, EqualsDirectNorms) {
  const ModelConfig config = Config(LossKind::kLogistic);
  for (bool sparse : {false, true}) {
    const Dataset data = EdgeCaseData(config, 230, 9, sparse, 31);
    // Append rows whose direct norms overflow and underflow.
    Eigen::MatrixXd x(3, 9);
    x.setZero();
    x(0, 0) = 1e308;
    x(0, 4) = -1e308;  // L2 and L1 overflow to Inf
    x(1, 2) = 1e-200;
    x(1, 3) = -1e-200;  // L2 underflows to 0, L1 does not
    x(2, 8) = -0.0;
    const Eigen::Vector3d y(1, -1, 1);
    const Dataset extreme = sparse ? Dataset::Sparse(SparseRows(x.sparseView()),
                                                     y, LabelKind::kBinary)
                                   : Dataset::Dense(x, y, LabelKind::kBinary);
    for (const Dataset* dd : {&data, &extreme}) {
      ASSERT_EQ(dd->row_norms_l2().size(), dd->rows());
      ASSERT_EQ(dd->row_norms_l1().size(), dd->rows());
      for (int64_t i = 0; i < dd->rows(); ++i) {
        EXPECT_TRUE(BitwiseEqual(dd->row_norms_l2()[i], dd->RowNorm(i)))
            << sparse << " row " << i;
        EXPECT_TRUE(
            BitwiseEqual(dd->row_norms_l1()[i],
                         ReferenceNorm(*dd, i, Objective::ClipNorm::kL1)))
            << sparse << " row " << i;
      }
    }
    EXPECT_EQ(extreme.row_norms_l2()[0],
              std::numeric_limits<double>::infinity());
    EXPECT_EQ(extreme.row_norms_l1()[0],
              std::numeric_limits<double>::infinity());
    EXPECT_EQ(extreme.row_norms_l2()[1], 0.0);
    EXPECT_EQ(extreme.row_norms_l1()[1], 2e-200);
    EXPECT_EQ(extreme.row_norms_l2()[2], 0.0);
  }
}

// The oracle's releases (noise off) are bitwise the same for any thread
// count: DP-GD on sparse and dense data, and the exact gradient.
// The oracle plans a query's event and noise once and reuses them while the
// query stays the same: every release is still charged, before the data is
// read, with the event of the query it makes (a different query is planned
// anew, and a refused charge leaves the output untouched).
TEST(OracleChargeTest, EveryReleaseIsChargedWithItsOwnQuerysEvent) {
  const ModelConfig config = Config(LossKind::kLogistic);
  const int64_t n = 200, d = 10;
  ASSERT_OK_AND_ASSIGN(auto obj, Objective::Create(config, d));
  const Dataset data = EdgeCaseData(config, n, d, false, 31, Rows::kTypical);
  const GaussianGradientQuery a{0.1, 0.5, 1.0};
  const GaussianGradientQuery b{0.1, 0.5, 2.0};
  ASSERT_OK_AND_ASSIGN(privacy::DpEvent ea, GaussianGradientEvent(a, d));
  ASSERT_OK_AND_ASSIGN(privacy::DpEvent eb, GaussianGradientEvent(b, d));
  PlannedReleases budget;
  budget.Allow(ea, 2);
  budget.Allow(eb, 1);
  noise::testing::SeededRandomForTesting rng(3);
  testing::NoNoiseForTesting no_noise;
  ASSERT_OK_AND_ASSIGN(auto oracle, PrivateGradientOracle::Create(
                                        data, *obj, n, rng, no_noise, budget));
  const Eigen::VectorXd w = RandomW(d, 5);
  Eigen::VectorXd g;
  ASSERT_OK(oracle->GaussianGradient(a, w, &g));
  ASSERT_OK(oracle->GaussianGradient(b, w, &g));
  ASSERT_OK(oracle->GaussianGradient(a, w, &g));
  const Eigen::VectorXd last = g;
  EXPECT_THAT(oracle->GaussianGradient(a, w, &g),
              StatusIs(absl::StatusCode::kResourceExhausted));
  EXPECT_THAT(oracle->GaussianGradient(b, w, &g),
              StatusIs(absl::StatusCode::kResourceExhausted));
  EXPECT_TRUE(BitwiseEqual(g, last));
  EXPECT_TRUE(
      budget.Spent() ==
      privacy::DpEvent::Composed({privacy::DpEvent::SelfComposed(2, ea), eb}));
  // An invalid query is refused whatever was planned before.
  EXPECT_THAT(oracle->GaussianGradient({0.1, 0.5, 0.0}, w, &g),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(OracleThreadsTest, FullBatchReleasesIndependentOfThreads) {
  for (bool sparse : {false, true}) {
    const ModelConfig config = Config(LossKind::kLogistic);
    const int64_t n = 2000, d = 150;
    ASSERT_OK_AND_ASSIGN(auto obj, Objective::Create(config, d));
    const Dataset data =
        EdgeCaseData(config, n, d, sparse, 21, Rows::kEmptyOnly);
    ASSERT_GT(ChunkRows(n, d, d).chunks(), 2);
    const Eigen::VectorXd w = 0.2 * RandomW(d, 22);
    const GaussianGradientQuery query{1.0, 0.5, 1.0};
    ASSERT_OK_AND_ASSIGN(privacy::DpEvent ev, GaussianGradientEvent(query, d));
    std::vector<Eigen::VectorXd> dp_gd, exact;
    for (int threads : {1, 2, 4}) {
      ThreadsScope scope(threads);
      PlannedReleases budget;
      budget.Allow(ev, 1);
      noise::testing::SeededRandomForTesting rng(1);
      testing::NoNoiseForTesting no_noise;
      ASSERT_OK_AND_ASSIGN(
          auto oracle,
          PrivateGradientOracle::Create(data, *obj, n, rng, no_noise, budget));
      Eigen::VectorXd g;
      ASSERT_OK(oracle->GaussianGradient(query, w, &g));
      dp_gd.push_back(g);
      PlannedReleases free_budget;
      free_budget.Allow(privacy::DpEvent::NoOp(), 1);
      ASSERT_OK_AND_ASSIGN(auto exact_oracle,
                           PrivateGradientOracle::Create(
                               data, *obj, n, rng, no_noise, free_budget));
      ASSERT_OK(exact_oracle->ExactGradient(w, &g));
      exact.push_back(g);
    }
    for (size_t t = 1; t < dp_gd.size(); ++t) {
      EXPECT_TRUE(BitwiseEqual(dp_gd[t], dp_gd[0])) << sparse << " " << t;
      EXPECT_TRUE(BitwiseEqual(exact[t], exact[0])) << sparse << " " << t;
    }
    // And they are the sums they claim to be (to 1e-13).
    Eigen::VectorXd c(1);
    Eigen::VectorXd clipped = Eigen::VectorXd::Zero(d), plain = clipped;
    double magnitude = 0;  // bounds sum_i |c_i x_ij| for every j
    for (int64_t i = 0; i < n; ++i) {
      obj->AddClippedExampleGradient(data, i, w, Objective::ClipNorm::kL2, 0.5,
                                     data.RowNorm(i), c, clipped);
      obj->ExampleCoefficients(data, i, w, c);
      obj->AddScaledExampleGradient(data, i, c, 1.0, plain);
      magnitude += std::abs(c[0]) * data.RowNorm(i);
    }
    clipped = clipped / n + config.l2 * w;
    plain = plain / n + config.l2 * w;
    EXPECT_LE((dp_gd[0] - clipped).lpNorm<Eigen::Infinity>(), 1e-12 * 0.5);
    EXPECT_LE((exact[0] - plain).lpNorm<Eigen::Infinity>(),
              1e-12 * magnitude / n);
  }
}

}  // namespace
}  // namespace dpopt::optim
