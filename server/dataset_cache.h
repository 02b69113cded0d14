// Decoded datasets kept in memory between jobs, so a job on a
// large dataset does not re-read and re-decode it from SQLite.
//
// A least-recently-used map from dataset id to an immutable decoded Dataset,
// under a memory cap. Datasets are immutable once imported (an import is one
// transaction; there is no update), so an entry never goes stale; deletion
// evicts it (Evict), and callers check that the dataset is still live before
// using a hit (JobManager::RunJob).
//
// What an entry is charged against the cap depends only on public metadata,
// never on the rows: a dense dataset its exact size (rows x dimension values,
// the labels and two cached norms per row), a public sparse one its actual CSR
// size, a private sparse one the CSR size it would have if every entry were
// stored. So which datasets stay cached, and hence how soon a job starts,
// reveals nothing about private rows (the number of nonzeros of a private
// sparse dataset is not public; docs/architecture.md, invariant "outcomes
// depend only on what was charged"). The bound is an upper bound of
// the real footprint, so the cap also bounds memory. A dataset whose charge
// exceeds the cap is not cached: every job loads it, as without a cache.
//
// Thread-safe. Loads run outside the lock; two jobs missing on the same
// dataset at once may both load it (the first insert wins).
#ifndef DPOPT_SERVER_DATASET_CACHE_H_
#define DPOPT_SERVER_DATASET_CACHE_H_

#include <cstdint>
#include <functional>
#include <list>
#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "core/data/dataset.h"

namespace dpopt::server {

// What the cache needs to know about a dataset besides its rows: all public.
struct CachedDatasetKey {
  int64_t id = 0;  // storage's dataset id (never reused)
  bool is_public = false;
  int64_t rows = 0;
  int64_t dimension = 0;
};

class DatasetCache {
 public:
  struct Options {
    // Memory cap in bytes; 0 disables the cache (every Get loads).
    int64_t capacity_bytes = int64_t{512} << 20;
    // capacity_bytes >= 0.
    absl::Status Validate() const;
  };
  struct Stats {
    int64_t hits = 0;
    int64_t misses = 0;
    int64_t evictions = 0;
    int64_t entries = 0;        // datasets cached now
    int64_t charged_bytes = 0;  // sum of the entries' charges
  };
  using Loader = std::function<absl::StatusOr<Dataset>()>;

  static absl::StatusOr<std::unique_ptr<DatasetCache>> Create(
      const Options& options);

  // The cached dataset, or `load()`'s result, cached if its charge fits.
  // Errors of `load` are returned and nothing is cached.
  absl::StatusOr<std::shared_ptr<const Dataset>> Get(
      const CachedDatasetKey& key, const Loader& load);
  // Drops the entry (no-op if absent). Jobs still holding it keep their
  // shared_ptr until they end.
  void Evict(int64_t id);
  Stats stats() const;

  // The bytes `dataset` is charged (see the file comment); exposed for tests.
  static int64_t ChargeOf(const CachedDatasetKey& key, const Dataset& dataset);

 private:
  explicit DatasetCache(const Options& options) : options_(options) {}
  struct Entry {
    int64_t id;
    int64_t charge;
    std::shared_ptr<const Dataset> dataset;
  };
  void EvictOverCapLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const Options options_;
  mutable absl::Mutex mu_;
  std::list<Entry> lru_ ABSL_GUARDED_BY(mu_);  // most recently used first
  absl::flat_hash_map<int64_t, std::list<Entry>::iterator> index_
      ABSL_GUARDED_BY(mu_);
  Stats stats_ ABSL_GUARDED_BY(mu_);  // `entries` is lru_.size()
};

}  // namespace dpopt::server

#endif  // DPOPT_SERVER_DATASET_CACHE_H_
