// Small RAII helpers for the MPFR certificates of the exact samplers
// (skip_sampling.cc, rounded_gaussian.cc).
#ifndef DPOPT_CORE_NOISE_MPFR_UTIL_H_
#define DPOPT_CORE_NOISE_MPFR_UTIL_H_

// clang-format off
#include <stdint.h>  // before mpfr.h: enables mpfr_{get,set}_uj
#include <mpfr.h>
// clang-format on

namespace dpopt::noise::internal {

// An mpfr_t of the given precision, cleared on destruction.
class Mp {
 public:
  explicit Mp(mpfr_prec_t prec) { mpfr_init2(x_, prec); }
  ~Mp() { mpfr_clear(x_); }
  Mp(const Mp&) = delete;
  Mp& operator=(const Mp&) = delete;
  mpfr_ptr get() { return x_; }

 private:
  mpfr_t x_;
};

// MPFR keeps per-thread caches of constants (log 2, ...) that mpfr_exp and
// mpfr_log1p fill; they are not freed when a job thread exits. Destroying
// one of these frees the calling thread's caches (callers choose when:
// after each call, or at thread exit through a thread_local).
class ReleaseMpfrThreadCache {
 public:
  ReleaseMpfrThreadCache() = default;
  ReleaseMpfrThreadCache(const ReleaseMpfrThreadCache&) = delete;
  ReleaseMpfrThreadCache& operator=(const ReleaseMpfrThreadCache&) = delete;
  ~ReleaseMpfrThreadCache() { mpfr_free_cache2(MPFR_FREE_LOCAL_CACHE); }
};

}  // namespace dpopt::noise::internal

#endif  // DPOPT_CORE_NOISE_MPFR_UTIL_H_
