#include "core/noise/skip_sampling.h"

// clang-format off
#include <stdint.h>  // before mpfr.h: enables mpfr_{get,set}_uj
#include <mpfr.h>
// clang-format on

#include <cassert>
#include <cstdint>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "core/noise/mpfr_util.h"

// Why the output is exactly Poisson(q) sampling.
//
// Notation: n rows, q in (0, 1/2] a double, so 1 - q is a dyadic rational
// (held exactly: at most 1075 significant bits). mu = -ln(1 - q), and
// lambda = s 2^-64 >= mu for the integer s of (4).
//
// (1) Exponential. SampleExponentialFixed() is von Neumann's method: draw a
// uniform U_1 (the candidate) and then uniforms U'_1, U'_2, ... while
// U_1 > U'_1 > U'_2 > ...; let N be the number of U' drawn (the last one
// breaks the chain). P(N > m | U_1 = x) = x^m / m!, so
// P(N odd | x) = sum_{m >= 0} (-1)^m x^m / m! = exp(-x). If N is odd, return
// E = V + U_1, else V += 1 and start again. A round is rejected with
// probability int_0^1 (1 - e^-x) dx = e^-1, so P(V >= v) = e^-v, and the
// accepted U_1 has density e^-x / (1 - e^-1) on [0, 1), independent of V:
// E = V + U_1 has density e^-E on [0, inf). Uniforms are compared exactly:
// their 64-bit words are compared and, on a tie (probability 2^-64), both
// are extended by further words from the generator (LazyLess); no value is
// ever rounded. We return floor(E 2^64) = V 2^64 + (first word of U_1).
//
// (2) Gaps. For the integer s >= 1, floor(E / lambda) = floor(E 2^64 / s) =
// floor(floor(E 2^64) / s), so the gap G = floor(floor(E 2^64) / s) is
// computed exactly, and P(G >= k) = P(E >= k lambda) = exp(-lambda k). The
// gaps are iid, so "row i is a candidate" (position pos + G, then the next
// gap starts after it) is a Bernoulli process: rows are candidates
// independently, each with probability r = 1 - exp(-lambda) (a run of k
// non-candidates followed by a candidate has probability exp(-lambda k) r,
// which is the product of independent per-row trials). Stopping at n only
// truncates the process.
//
// (3) Thinning. A candidate is kept iff a fresh uniform V >= c with
// c = ((1 - q) - exp(-lambda)) / (1 - exp(-lambda)) in [0, 1) (c >= 0 since
// lambda >= mu). P(keep) = 1 - c = q / r. Each decision uses fresh words,
// so rows stay independent and P(row included) = r (q / r) = q exactly.
// c is irrational (exp of a nonzero rational is transcendental, Lindemann),
// so V != c almost surely and the bracketed comparison below terminates with
// probability 1. The decision compares V's known words [a, a + 2^-64k) with
// a bracket c_lo <= c <= c_hi computed with MPFR's correctly rounded exp and
// directed rounding (every bound is rounded outward): a >= c_hi means
// V >= c; a + 2^-64k <= c_lo means V < c; otherwise one more word of V and
// twice the precision.
//
// (4) Certification of lambda >= mu: MPFR's log1p(-q) rounded toward -inf is
// <= ln(1 - q); negated and scaled by 2^64 (exact), rounded up to the
// integer s. MPFR's functions are correctly rounded in every rounding mode
// (its documented contract), which is all this proof relies on.

namespace dpopt::noise {
namespace {

using uint128 = unsigned __int128;

using internal::Mp;
// MPFR's per-thread caches are released when the MPFR work of a call is
// done (a job thread's caches would otherwise outlive it).
using internal::ReleaseMpfrThreadCache;

// c_lo <= c <= c_hi for c = ((1 - q) - exp(-lambda)) / (1 - exp(-lambda)),
// lambda = s 2^-64, computed at `prec` bits with outward rounding. c_lo is
// clamped at 0 (c >= 0 is proven). REQUIRES: prec >= 192.
void Bracket(double q, uint64_t s, mpfr_prec_t prec, mpfr_ptr c_lo,
             mpfr_ptr c_hi) {
  Mp lambda(prec), e_lo(prec), e_hi(prec), w(prec + 1200), num_lo(prec),
      num_hi(prec), den_lo(prec), den_hi(prec);
  mpfr_set_uj(lambda.get(), s, MPFR_RNDN);                  // exact: prec >= 64
  mpfr_div_2ui(lambda.get(), lambda.get(), 64, MPFR_RNDN);  // exact
  mpfr_neg(lambda.get(), lambda.get(), MPFR_RNDN);          // exact
  mpfr_exp(e_lo.get(), lambda.get(), MPFR_RNDD);            // <= exp(-l)
  mpfr_exp(e_hi.get(), lambda.get(), MPFR_RNDU);            // >= exp(-l)
  // 1 - q is exact with prec + 1200 bits (q has 53 significant bits and
  // exponent >= -1074).
  mpfr_set_d(w.get(), q, MPFR_RNDN);
  const int inexact = mpfr_ui_sub(w.get(), 1, w.get(), MPFR_RNDN);
  assert(inexact == 0);
  (void)inexact;
  mpfr_sub(num_lo.get(), w.get(), e_hi.get(), MPFR_RNDD);
  mpfr_sub(num_hi.get(), w.get(), e_lo.get(), MPFR_RNDU);
  mpfr_ui_sub(den_lo.get(), 1, e_hi.get(), MPFR_RNDD);
  mpfr_ui_sub(den_hi.get(), 1, e_lo.get(), MPFR_RNDU);
  if (mpfr_sgn(num_lo.get()) < 0) mpfr_set_zero(num_lo.get(), 1);
  mpfr_div(c_lo, num_lo.get(), den_hi.get(), MPFR_RNDD);
  mpfr_div(c_hi, num_hi.get(), den_lo.get(), MPFR_RNDU);
}

}  // namespace

SkipPoissonSampler::SkipPoissonSampler(double q, RandomSource& rng)
    : q_(q), rng_(rng) {
  assert(q > 0 && q <= kMaxRate);
  const ReleaseMpfrThreadCache release_cache;
  constexpr mpfr_prec_t kPrec = 192;
  {
    Mp x(kPrec), l(kPrec);
    mpfr_set_d(x.get(), -q, MPFR_RNDN);             // exact
    mpfr_log1p(l.get(), x.get(), MPFR_RNDD);        // l <= ln(1 - q) < 0
    mpfr_neg(l.get(), l.get(), MPFR_RNDN);          // exact: l >= mu
    mpfr_mul_2ui(l.get(), l.get(), 64, MPFR_RNDN);  // exact
    s_ = mpfr_get_uj(l.get(), MPFR_RNDU);           // ceil: s 2^-64 >= mu
    if (s_ == 0) s_ = 1;
  }
  Mp c_lo(kPrec), c_hi(kPrec);
  Bracket(q_, s_, kPrec, c_lo.get(), c_hi.get());
  mpfr_mul_2ui(c_lo.get(), c_lo.get(), 64, MPFR_RNDN);  // exact
  mpfr_mul_2ui(c_hi.get(), c_hi.get(), 64, MPFR_RNDN);  // exact
  // c < 1, so floor(c_lo 2^64) < 2^64.
  reject_below_ = mpfr_get_uj(c_lo.get(), MPFR_RNDD);
  // ceil(c_hi 2^64) may reach 2^64 (then the fast keep never fires).
  Mp limit(kPrec);
  mpfr_set_ui_2exp(limit.get(), 1, 64, MPFR_RNDN);
  if (mpfr_cmp(c_hi.get(), limit.get()) >= 0) {
    keep_from_ = static_cast<uint128>(1) << 64;
  } else {
    mpfr_ceil(c_hi.get(), c_hi.get());
    keep_from_ = mpfr_cmp(c_hi.get(), limit.get()) >= 0
                     ? static_cast<uint128>(1) << 64
                     : static_cast<uint128>(mpfr_get_uj(c_hi.get(), MPFR_RNDU));
  }
  prev_.reserve(8);
  cur_.reserve(8);
}

bool SkipPoissonSampler::LazyLess(std::vector<uint64_t>& a,
                                  std::vector<uint64_t>& b) {
  for (size_t k = 0;; ++k) {
    if (a.size() <= k) a.push_back(rng_.NextUint64());
    if (b.size() <= k) b.push_back(rng_.NextUint64());
    if (a[k] != b[k]) return a[k] < b[k];
    // A failed source returns zeros forever: never spin on its ties.
    if (!rng_.status().ok()) return false;
  }
}

uint128 SkipPoissonSampler::SampleExponentialFixed() {
  uint64_t v = 0;
  while (true) {
    // The candidate U_1. `prev` is the first word of the chain's last
    // uniform; while no tie has extended it, that word is all of it that was
    // drawn, and prev_ is stale. After a tie, prev_ holds its drawn words.
    // (The same draws and decisions as comparing lazily extended vectors
    // throughout, without building a vector per word.)
    const uint64_t u = rng_.NextUint64();
    uint64_t prev = u;
    bool extended = false;
    int64_t chain = 0;
    while (true) {
      const uint64_t c = rng_.NextUint64();
      ++chain;
      if (c != prev) {  // decided by the first words (fast path)
        if (c > prev) break;
        prev = c;
        extended = false;
        continue;
      }
      if (!extended) prev_.assign(1, prev);
      cur_.assign(1, c);
      if (!LazyLess(cur_, prev_)) break;
      prev_.swap(cur_);  // prev_[0] == c == prev
      extended = true;
    }
    if (!rng_.status().ok()) return 0;
    if (chain & 1) return (static_cast<uint128>(v) << 64) | u;
    ++v;
  }
}

bool SkipPoissonSampler::Keep(uint64_t word) {
  if (word >= keep_from_) return true;     // V >= c_hi >= c
  if (word < reject_below_) return false;  // V < c_lo <= c
  return KeepSlow(word);
}

bool SkipPoissonSampler::KeepSlow(uint64_t word) {
  ++slow_decisions_;
  const ReleaseMpfrThreadCache release_cache;
  std::vector<uint64_t> v = {word};
  for (mpfr_prec_t prec = 256;; prec *= 2) {
    Mp c_lo(prec), c_hi(prec);
    Bracket(q_, s_, prec, c_lo.get(), c_hi.get());
    const mpfr_prec_t bits = 64 * static_cast<mpfr_prec_t>(v.size()) + 64;
    Mp a(bits), b(bits);
    mpfr_set_zero(a.get(), 1);
    for (uint64_t x : v) {  // a = 0.v[0] v[1] ... (exact)
      mpfr_mul_2ui(a.get(), a.get(), 64, MPFR_RNDN);
      Mp word_mp(64);
      mpfr_set_uj(word_mp.get(), x, MPFR_RNDN);
      mpfr_add(a.get(), a.get(), word_mp.get(), MPFR_RNDN);
    }
    mpfr_div_2ui(a.get(), a.get(), 64 * v.size(), MPFR_RNDN);
    mpfr_set_ui_2exp(b.get(), 1, -64 * static_cast<mpfr_exp_t>(v.size()),
                     MPFR_RNDN);
    mpfr_add(b.get(), b.get(), a.get(), MPFR_RNDN);  // a + 2^-64k, exact
    if (mpfr_cmp(a.get(), c_hi.get()) >= 0) return true;
    if (mpfr_cmp(b.get(), c_lo.get()) <= 0) return false;
    v.push_back(rng_.NextUint64());
    if (!rng_.status().ok()) return false;
  }
}

absl::Status SkipPoissonSampler::Sample(int64_t n, std::vector<int64_t>* rows) {
  rows->clear();
  if (n <= 0) return rng_.status();
  rows->reserve(static_cast<size_t>(q_ * static_cast<double>(n) * 1.2) + 16);
  int64_t pos = 0;  // first row not yet decided
  while (true) {
    const uint128 x = SampleExponentialFixed();
    if (!rng_.status().ok()) break;
    const uint128 gap = x / s_;
    if (gap >= static_cast<uint128>(n - pos)) break;
    pos += static_cast<int64_t>(gap);  // a candidate
    if (Keep(rng_.NextUint64())) rows->push_back(pos);
    ++pos;
  }
  return rng_.status();
}

}  // namespace dpopt::noise
