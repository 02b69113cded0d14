#include "server/dataset_cache.h"

#include <atomic>
#include <memory>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/common/status_matchers.h"

namespace dpopt::server {
namespace {

using ::dpopt::testing::StatusIs;

// A dense dataset of `rows` x `dim` whose first entry is `tag`.
Dataset Dense(int rows, int dim, double tag) {
  Eigen::MatrixXd x = Eigen::MatrixXd::Zero(rows, dim);
  x(0, 0) = tag;
  return Dataset::Dense(std::move(x), Eigen::VectorXd::Ones(rows),
                        LabelKind::kBinary);
}

// A sparse rows x dim dataset with `nnz_per_row` stored entries per row.
Dataset Sparse(int rows, int dim, int nnz_per_row) {
  SparseRows x(rows, dim);
  std::vector<Eigen::Triplet<double, int64_t>> t;
  for (int i = 0; i < rows; ++i) {
    for (int j = 0; j < nnz_per_row; ++j) t.emplace_back(i, j, 1.0);
  }
  x.setFromTriplets(t.begin(), t.end());
  return Dataset::Sparse(std::move(x), Eigen::VectorXd::Ones(rows),
                         LabelKind::kBinary);
}

CachedDatasetKey Key(int64_t id, int rows, int dim, bool is_public = false) {
  CachedDatasetKey k;
  k.id = id;
  k.rows = rows;
  k.dimension = dim;
  k.is_public = is_public;
  return k;
}

// 10 x 10 dense: 100 values + 10 labels + 10 x 2 cached row norms = 1040
// bytes.
constexpr int64_t kDense10 = 1040;

std::unique_ptr<DatasetCache> MakeCache(int64_t capacity) {
  DatasetCache::Options o;
  o.capacity_bytes = capacity;
  auto c = DatasetCache::Create(o);
  EXPECT_TRUE(c.ok()) << c.status();
  return *std::move(c);
}

TEST(DatasetCacheTest, ChargesAreHandComputedAndPublic) {
  EXPECT_EQ(DatasetCache::ChargeOf(Key(1, 10, 10), Dense(10, 10, 1)), kDense10);
  // Sparse CSR, int64 indices: 16 bytes per stored entry, 8 per row offset
  // (rows + 1), 8 per label and 16 per row for the cached norms. Public: the
  // actual entries (4 x 2 = 8).
  EXPECT_EQ(DatasetCache::ChargeOf(Key(1, 4, 100, true), Sparse(4, 100, 2)),
            8 * 16 + 5 * 8 + 4 * 24);
  // Private: every entry of the declared shape (400), whatever the rows
  // hold, so two private datasets of one shape cost the same.
  const int64_t bound = 400 * 16 + 5 * 8 + 4 * 24;
  EXPECT_EQ(DatasetCache::ChargeOf(Key(1, 4, 100), Sparse(4, 100, 2)), bound);
  EXPECT_EQ(DatasetCache::ChargeOf(Key(1, 4, 100), Sparse(4, 100, 50)), bound);
  // Shapes beyond int64 saturate instead of wrapping.
  EXPECT_GT(
      DatasetCache::ChargeOf(Key(1, 2000000000, 2000000000), Sparse(4, 100, 1)),
      int64_t{1} << 61);
}

TEST(DatasetCacheTest, HitReturnsTheSameRowsWithoutLoading) {
  auto cache = MakeCache(10 * kDense10);
  int loads = 0;
  auto load = [&]() -> absl::StatusOr<Dataset> {
    ++loads;
    return Dense(10, 10, 7);
  };
  ASSERT_OK_AND_ASSIGN(auto a, cache->Get(Key(1, 10, 10), load));
  ASSERT_OK_AND_ASSIGN(auto b, cache->Get(Key(1, 10, 10), load));
  EXPECT_EQ(loads, 1);
  EXPECT_EQ(a.get(), b.get());
  EXPECT_EQ(b->dense()(0, 0), 7);
  const DatasetCache::Stats s = cache->stats();
  EXPECT_EQ(s.hits, 1);
  EXPECT_EQ(s.misses, 1);
  EXPECT_EQ(s.entries, 1);
  EXPECT_EQ(s.charged_bytes, kDense10);
}

TEST(DatasetCacheTest, LeastRecentlyUsedGoesFirst) {
  auto cache = MakeCache(2 * kDense10);  // room for two
  std::vector<int> loads(4, 0);
  auto get = [&](int id) {
    auto r = cache->Get(Key(id, 10, 10), [&, id]() -> absl::StatusOr<Dataset> {
      ++loads[id];
      return Dense(10, 10, id);
    });
    EXPECT_TRUE(r.ok());
    EXPECT_EQ((*r)->dense()(0, 0), id);
  };
  get(1);
  get(2);
  get(1);  // 1 is now the most recent
  get(3);  // evicts 2
  EXPECT_EQ(cache->stats().evictions, 1);
  get(1);
  get(3);
  EXPECT_EQ(loads, (std::vector<int>{0, 1, 1, 1}));
  get(2);  // a miss again; evicts 1 (3 was used after it)
  EXPECT_EQ(loads[2], 2);
  get(3);
  EXPECT_EQ(loads[3], 1);
  get(1);
  EXPECT_EQ(loads[1], 2);
  EXPECT_LE(cache->stats().charged_bytes, 2 * kDense10);
  EXPECT_EQ(cache->stats().entries, 2);
}

TEST(DatasetCacheTest, TooLargeOrDisabledIsLoadedEveryTime) {
  for (int64_t capacity : {kDense10 - 1, int64_t{0}}) {
    auto cache = MakeCache(capacity);
    int loads = 0;
    auto load = [&]() -> absl::StatusOr<Dataset> {
      ++loads;
      return Dense(10, 10, 1);
    };
    for (int i = 0; i < 3; ++i) {
      ASSERT_OK_AND_ASSIGN(auto d, cache->Get(Key(1, 10, 10), load));
      EXPECT_EQ(d->rows(), 10);
    }
    EXPECT_EQ(loads, 3) << capacity;
    EXPECT_EQ(cache->stats().entries, 0);
  }
  DatasetCache::Options bad;
  bad.capacity_bytes = -1;
  EXPECT_THAT(DatasetCache::Create(bad).status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(DatasetCacheTest, EvictDropsTheEntryButNotTheHoldersCopy) {
  auto cache = MakeCache(10 * kDense10);
  int loads = 0;
  auto load = [&]() -> absl::StatusOr<Dataset> {
    ++loads;
    return Dense(10, 10, 3);
  };
  ASSERT_OK_AND_ASSIGN(auto held, cache->Get(Key(5, 10, 10), load));
  cache->Evict(5);
  cache->Evict(5);  // no-op
  EXPECT_EQ(cache->stats().entries, 0);
  EXPECT_EQ(cache->stats().charged_bytes, 0);
  EXPECT_EQ(held->dense()(0, 0), 3);  // a running job keeps its rows
  ASSERT_OK(cache->Get(Key(5, 10, 10), load));
  EXPECT_EQ(loads, 2);
}

TEST(DatasetCacheTest, LoadErrorIsReturnedAndNotCached) {
  auto cache = MakeCache(10 * kDense10);
  EXPECT_THAT(cache->Get(Key(1, 10, 10),
                         []() -> absl::StatusOr<Dataset> {
                           return absl::NotFoundError("gone");
                         }),
              StatusIs(absl::StatusCode::kNotFound, "gone"));
  EXPECT_EQ(cache->stats().entries, 0);
}

TEST(DatasetCacheTest, ConcurrentJobsGetTheirOwnDatasets) {
  auto cache = MakeCache(3 * kDense10);  // 3 of 5 datasets fit
  std::atomic<int> wrong{0}, failed{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 500; ++i) {
        const int id = 1 + (i * 7 + t) % 5;
        auto r = cache->Get(Key(id, 10, 10), [id]() -> absl::StatusOr<Dataset> {
          return Dense(10, 10, id);
        });
        if (!r.ok()) {
          ++failed;
        } else if ((*r)->dense()(0, 0) != id) {
          ++wrong;
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(failed.load(), 0);
  const DatasetCache::Stats s = cache->stats();
  EXPECT_EQ(s.hits + s.misses, 8 * 500);
  EXPECT_LE(s.charged_bytes, 3 * kDense10);
  EXPECT_EQ(s.charged_bytes, s.entries * kDense10);
}

}  // namespace
}  // namespace dpopt::server
