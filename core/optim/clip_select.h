// Internal to core/optim: the per-row arithmetic of the clipped-gradient
// kernels (objective.cc), without branches on values. Whether a row's
// gradient is clipped, and the sign of its margin, depend on the rows'
// values and, at a real iterate, are close to coin flips per row: as
// branches their mispredictions made a DP-GD step on a9a 12-17% slower than
// a GD step, and made a step's time depend on the data (DEVELOPERS.md,
// "Kernels and threads"). GCC compiles a ternary on doubles here into a
// jump whatever is written, so with SSE2 (every amd64 host) the selections
// are masks in the vector registers; the portable versions are the same
// rules as plain expressions, and the tests check both agree bit for bit.
#ifndef DPOPT_CORE_OPTIM_CLIP_SELECT_H_
#define DPOPT_CORE_OPTIM_CLIP_SELECT_H_

#include <cmath>
#include <limits>

#include "absl/base/attributes.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace dpopt::optim::internal {

#if defined(__SSE2__)
inline constexpr bool kHaveSse2 = true;
#else
inline constexpr bool kHaveSse2 = false;
#endif

// Rows whose norm is in [kLowNorm, kHighNorm] are clipped directly; the
// others through Dataset::RowScale (no overflow or underflow).
inline constexpr double kLowNorm = 0x1.0p-500;
inline constexpr double kHighNorm = 0x1.0p400;

// d/dm log(1 + exp(-m)) = -1 / (1 + exp(m)): -e / (1 + e) with e = exp(-m)
// for m > 0, else -1 / (1 + e) with e = exp(m). In both cases
// e = exp(-|m|): one exp, then a selection of the numerator.
inline double LogisticDerivativePortable(double m) {
  const double e = std::exp(-std::abs(m));
  return (m > 0 ? -e : -1.0) / (1.0 + e);
}

ABSL_ATTRIBUTE_ALWAYS_INLINE inline double LogisticDerivative(double m) {
#if defined(__SSE2__)
  const double e = std::exp(-std::abs(m));
  const __m128d positive = _mm_cmpgt_sd(_mm_set_sd(m), _mm_setzero_pd());
  const double numerator =
      _mm_cvtsd_f64(_mm_or_pd(_mm_and_pd(positive, _mm_set_sd(-e)),
                              _mm_andnot_pd(positive, _mm_set_sd(-1.0))));
  return numerator / (1.0 + e);
#else
  return LogisticDerivativePortable(m);
#endif
}

// The coefficient of a row's clipped gradient, from its unclipped
// coefficient c and its norm r: +0 if c == 0, c if |c| r <= param, else
// +-(param / r) with the sign of c. For finite c != 0, c / |c| is exactly
// +-1, so this is the per-example rule param * (c / |c|) / r
// (Objective::AddClippedExampleGradient) bit for bit, with one division
// (IEEE rounding is symmetric). *in_range tells whether r is in
// [kLowNorm, kHighNorm]; for other r the result is 0 and the caller clips
// the row another way. Non-finite c: the result is not the per-example
// rule's (the caller handles it; see ClipCoefficients).
inline double ClippedCoefficientPortable(double c, double r, double param,
                                         bool* in_range) {
  const double c_norm = std::abs(c);
  const double v = c_norm == 0           ? 0.0
                   : c_norm * r <= param ? c
                                         : std::copysign(param / r, c);
  *in_range = r >= kLowNorm && r <= kHighNorm;
  return *in_range ? v : 0.0;
}

#if defined(__SSE2__)
// The rule above on both lanes: returns the coefficients, *ok the lanes
// whose norm is in range (all-ones masks).
ABSL_ATTRIBUTE_ALWAYS_INLINE inline __m128d ClippedCoefficients2(__m128d vc,
                                                                 __m128d vr,
                                                                 __m128d vparam,
                                                                 __m128d* ok) {
  const __m128d sign = _mm_set1_pd(-0.0);
  const __m128d c_norm = _mm_andnot_pd(sign, vc);
  // +-(param / r): the quotient's magnitude with c's sign bit.
  const __m128d clipped =
      _mm_or_pd(_mm_div_pd(vparam, vr), _mm_and_pd(sign, vc));
  const __m128d keep = _mm_cmple_pd(_mm_mul_pd(c_norm, vr), vparam);
  __m128d v = _mm_or_pd(_mm_and_pd(keep, vc), _mm_andnot_pd(keep, clipped));
  // c == 0 (either sign): +0.
  v = _mm_andnot_pd(_mm_cmpeq_pd(c_norm, _mm_setzero_pd()), v);
  *ok = _mm_and_pd(_mm_cmpge_pd(vr, _mm_set1_pd(kLowNorm)),
                   _mm_cmple_pd(vr, _mm_set1_pd(kHighNorm)));
  return _mm_and_pd(*ok, v);
}
#endif

ABSL_ATTRIBUTE_ALWAYS_INLINE inline double ClippedCoefficient(double c,
                                                              double r,
                                                              double param,
                                                              bool* in_range) {
#if defined(__SSE2__)
  // The upper lane (0 / 0) is ignored.
  __m128d ok;
  const __m128d v = ClippedCoefficients2(_mm_set_sd(c), _mm_set_sd(r),
                                         _mm_set_sd(param), &ok);
  *in_range = (_mm_movemask_pd(ok) & 1) != 0;
  return _mm_cvtsd_f64(v);
#else
  return ClippedCoefficientPortable(c, r, param, in_range);
#endif
}

// a[k] = the clipped coefficient of row k (c[k], norm[k]) for k < n, and
// slow[k] = whether norm[k] is out of range; returns whether any is. A
// non-finite c[k] with its norm in range gets param * (c / |c|) / r, as the
// per-example rule. kSimd (with SSE2) does two rows at a time.
template <bool kSimd>
bool ClipCoefficientsImpl(const double* c, const double* norm, int n,
                          double param, double* a, bool* slow) {
  int k = 0;
  int bad = 0;  // bit 0/1: norm out of range, bit 2/3: non-finite c
#if defined(__SSE2__)
  if constexpr (kSimd) {
    const __m128d vparam = _mm_set1_pd(param);
    const __m128d max = _mm_set1_pd(std::numeric_limits<double>::max());
    for (; k + 2 <= n; k += 2) {
      const __m128d vc = _mm_loadu_pd(c + k);
      __m128d ok;
      _mm_storeu_pd(
          a + k, ClippedCoefficients2(vc, _mm_loadu_pd(norm + k), vparam, &ok));
      const int out = _mm_movemask_pd(ok) ^ 3;
      slow[k] = (out & 1) != 0;
      slow[k + 1] = (out & 2) != 0;
      const __m128d c_norm = _mm_andnot_pd(_mm_set1_pd(-0.0), vc);
      bad |= out | (_mm_movemask_pd(_mm_cmple_pd(c_norm, max)) ^ 3) << 2;
    }
  }
#endif
  for (; k < n; ++k) {
    bool in_range;
    a[k] = kSimd ? ClippedCoefficient(c[k], norm[k], param, &in_range)
                 : ClippedCoefficientPortable(c[k], norm[k], param, &in_range);
    slow[k] = !in_range;
    bad |= (in_range ? 0 : 1) | (std::isfinite(c[k]) ? 0 : 4);
  }
  if ((bad & 12) != 0) {
    // A non-finite coefficient (never for finite data and iterates).
    for (int j = 0; j < n; ++j) {
      if (!std::isfinite(c[j]) && !slow[j]) {
        a[j] = param * (c[j] / std::abs(c[j])) / norm[j];
      }
    }
  }
  return (bad & 3) != 0;
}

inline bool ClipCoefficients(const double* c, const double* norm, int n,
                             double param, double* a, bool* slow) {
  return ClipCoefficientsImpl<kHaveSse2>(c, norm, n, param, a, slow);
}

}  // namespace dpopt::optim::internal

#endif  // DPOPT_CORE_OPTIM_CLIP_SELECT_H_
