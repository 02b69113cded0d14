// Per-principal resource limits (docs/security.md, "Limits"): one analyst
// cannot starve the others. Every limit is checked before anything is
// charged or stored; over a limit the call fails with RESOURCE_EXHAUSTED and
// a message naming the limit and its server flag.
//
//  * ConcurrencyLimiter: at most N concurrent holders of a slot per key
//    (queued + running jobs; open WatchJob streams). A slot is released
//    when its last owner drops it.
//  * RateLimiter: a token bucket per key (EstimateJob calls per second;
//    bursts up to one second's worth).
//
// Memory is bounded by the number of principals (created by curators): a
// key's entry goes when its count drops to zero (ConcurrencyLimiter) or its
// bucket is full again (RateLimiter, swept when the map grows).
#ifndef DPOPT_SERVER_PRINCIPAL_LIMITS_H_
#define DPOPT_SERVER_PRINCIPAL_LIMITS_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace dpopt::server {

// The per-principal limits of a server (ServerOptions::limits). Public-dataset
// jobs (which cost no budget) count like any other job. 0 = no limit.
struct PrincipalLimits {
  // Queued + running jobs of one principal (--max-jobs-per-principal).
  int max_active_jobs = 8;
  // EstimateJob calls per second of one principal
  // (--max-estimates-per-second).
  int max_estimates_per_second = 20;
  // Open WatchJob streams of one principal (--max-watches-per-principal).
  int max_watch_streams = 8;
  absl::Status Validate() const;
};

class ConcurrencyLimiter {
 public:
  // Held while the resource is in use; releases its slot on destruction.
  class Slot {
   public:
    Slot(const Slot&) = delete;
    Slot& operator=(const Slot&) = delete;
    ~Slot();

   private:
    friend class ConcurrencyLimiter;
    Slot(ConcurrencyLimiter* owner, std::string key)
        : owner_(owner), key_(std::move(key)) {}
    ConcurrencyLimiter* owner_;
    std::string key_;
  };

  // `max_per_key` 0 = no limit. `what` names the resource and `flag` the
  // server flag in the error message ("jobs queued or running",
  // "--max-jobs-per-principal").
  ConcurrencyLimiter(int max_per_key, std::string what, std::string flag)
      : max_(max_per_key), what_(std::move(what)), flag_(std::move(flag)) {}
  ConcurrencyLimiter(const ConcurrencyLimiter&) = delete;
  ConcurrencyLimiter& operator=(const ConcurrencyLimiter&) = delete;
  // REQUIRES: every Slot is gone.
  ~ConcurrencyLimiter() = default;

  // RESOURCE_EXHAUSTED when `key` already holds max_per_key slots, or
  // `own_max` if set (the principal's own limit; 0 = none).
  absl::StatusOr<std::shared_ptr<Slot>> Acquire(
      const std::string& key, std::optional<int> own_max = std::nullopt);
  int64_t InUse(const std::string& key) const;

 private:
  void Release(const std::string& key);

  const int max_;
  const std::string what_;
  const std::string flag_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, int64_t> in_use_ ABSL_GUARDED_BY(mu_);
};

class RateLimiter {
 public:
  // `per_second` 0 = no limit.
  RateLimiter(int per_second, std::string what, std::string flag)
      : rate_(per_second), what_(std::move(what)), flag_(std::move(flag)) {}
  // OK and takes one token, or RESOURCE_EXHAUSTED (nothing taken). `own_rate`
  // if set replaces per_second for this key (the principal's own limit).
  absl::Status Allow(const std::string& key, absl::Time now = absl::Now(),
                     std::optional<int> own_rate = std::nullopt);

 private:
  struct Bucket {
    double tokens = 0;
    absl::Time refilled;
  };
  const int rate_;
  const std::string what_;
  const std::string flag_;
  absl::Mutex mu_;
  absl::flat_hash_map<std::string, Bucket> buckets_ ABSL_GUARDED_BY(mu_);
};

}  // namespace dpopt::server

#endif  // DPOPT_SERVER_PRINCIPAL_LIMITS_H_
