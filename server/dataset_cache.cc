#include "server/dataset_cache.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"

namespace dpopt::server {
namespace {

// Saturating arithmetic in double: the bounds of a private dataset's shape
// can exceed int64 (rows x dimension x 16 bytes).
int64_t ToBytes(double bytes) {
  constexpr double kMax = static_cast<double>(int64_t{1} << 62);
  return bytes >= kMax ? (int64_t{1} << 62) : static_cast<int64_t>(bytes);
}

}  // namespace

absl::Status DatasetCache::Options::Validate() const {
  if (capacity_bytes < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "dataset cache capacity must be >= 0 bytes, got ", capacity_bytes));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<DatasetCache>> DatasetCache::Create(
    const Options& options) {
  if (absl::Status s = options.Validate(); !s.ok()) return s;
  return std::unique_ptr<DatasetCache>(new DatasetCache(options));
}

int64_t DatasetCache::ChargeOf(const CachedDatasetKey& key,
                               const Dataset& dataset) {
  const double rows = static_cast<double>(key.rows);
  const double cells = rows * static_cast<double>(key.dimension);
  // Per row: the label and the two cached norms (Dataset::row_norms_l2/l1).
  const double labels = rows * 3 * sizeof(double);
  if (!dataset.is_sparse()) {
    return ToBytes(labels + cells * sizeof(double));
  }
  // CSR with int64 indices: a value and a column index per stored entry,
  // one offset per row (+1).
  constexpr double kPerEntry = sizeof(double) + sizeof(int64_t);
  const double entries =
      key.is_public ? static_cast<double>(dataset.sparse().nonZeros()) : cells;
  return ToBytes(labels + entries * kPerEntry + (rows + 1) * sizeof(int64_t));
}

absl::StatusOr<std::shared_ptr<const Dataset>> DatasetCache::Get(
    const CachedDatasetKey& key, const Loader& load) {
  {
    absl::MutexLock lock(&mu_);
    auto it = index_.find(key.id);
    if (it != index_.end()) {
      lru_.splice(lru_.begin(), lru_, it->second);
      ++stats_.hits;
      return it->second->dataset;
    }
    ++stats_.misses;
  }
  absl::StatusOr<Dataset> loaded = load();
  if (!loaded.ok()) return loaded.status();
  auto dataset = std::make_shared<const Dataset>(*std::move(loaded));
  const int64_t charge = ChargeOf(key, *dataset);
  if (charge > options_.capacity_bytes) return dataset;
  absl::MutexLock lock(&mu_);
  auto it = index_.find(key.id);
  if (it != index_.end()) return it->second->dataset;  // a concurrent load won
  lru_.push_front(Entry{key.id, charge, dataset});
  index_[key.id] = lru_.begin();
  stats_.charged_bytes += charge;
  EvictOverCapLocked();
  return dataset;
}

void DatasetCache::EvictOverCapLocked() {
  while (stats_.charged_bytes > options_.capacity_bytes && !lru_.empty()) {
    const Entry& victim = lru_.back();
    stats_.charged_bytes -= victim.charge;
    ++stats_.evictions;
    index_.erase(victim.id);
    lru_.pop_back();
  }
}

void DatasetCache::Evict(int64_t id) {
  absl::MutexLock lock(&mu_);
  auto it = index_.find(id);
  if (it == index_.end()) return;
  stats_.charged_bytes -= it->second->charge;
  lru_.erase(it->second);
  index_.erase(it);
}

DatasetCache::Stats DatasetCache::stats() const {
  absl::MutexLock lock(&mu_);
  Stats s = stats_;
  s.entries = static_cast<int64_t>(lru_.size());
  return s;
}

}  // namespace dpopt::server
