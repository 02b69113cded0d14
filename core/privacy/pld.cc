#include "core/privacy/pld.h"

#include <algorithm>
#include <cmath>
#include <complex>
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/common/status_macros.h"
#include "core/privacy/log_math.h"
#include "unsupported/Eigen/FFT"

namespace dpopt::privacy {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

double NormCdf(double x) { return 0.5 * std::erfc(-x / std::sqrt(2.0)); }
double NormSf(double x) { return 0.5 * std::erfc(x / std::sqrt(2.0)); }

// ---------------------------------------------------------------------------
// Additive noise pair: P0 = noise centred at 0, P1 = centred at 1 (sensitivity
// 1, noise scale = noise multiplier). ell(x) = log(p1(x) / p0(x)) is
// nondecreasing in x.
class BaseNoise {
 public:
  virtual ~BaseNoise() = default;
  virtual double F0(double x) const = 0;  // P0(X <= x)
  virtual double S0(double x) const = 0;  // P0(X > x)
  virtual double F1(double x) const = 0;
  virtual double S1(double x) const = 0;
  virtual double Ell(double x) const = 0;
  // sup{x : ell(x) <= v} and inf{x : ell(x) >= v} (may be +-inf).
  virtual double XLe(double v) const = 0;
  virtual double XLt(double v) const = 0;
  // x-window outside of which both P0 and P1 have mass <= tail.
  virtual std::pair<double, double> Window(double tail) const = 0;
};

class GaussianNoise : public BaseNoise {
 public:
  explicit GaussianNoise(double z) : z_(z) {}
  double F0(double x) const override { return NormCdf(x / z_); }
  double S0(double x) const override { return NormSf(x / z_); }
  double F1(double x) const override { return NormCdf((x - 1) / z_); }
  double S1(double x) const override { return NormSf((x - 1) / z_); }
  // log N(x; 1, z^2) / N(x; 0, z^2) = (2x - 1) / (2 z^2).
  double Ell(double x) const override { return (2 * x - 1) / (2 * z_ * z_); }
  double XLe(double v) const override { return v * z_ * z_ + 0.5; }
  double XLt(double v) const override { return v * z_ * z_ + 0.5; }
  std::pair<double, double> Window(double tail) const override {
    double t = 1;
    while (NormSf(t) > tail) t += 0.25;
    return {-t * z_, 1 + t * z_};
  }

 private:
  double z_;
};

class LaplaceNoise : public BaseNoise {
 public:
  explicit LaplaceNoise(double b) : b_(b) {}
  double F0(double x) const override {
    if (std::isinf(x)) return x > 0 ? 1 : 0;
    return x < 0 ? 0.5 * std::exp(x / b_) : 1 - 0.5 * std::exp(-x / b_);
  }
  double S0(double x) const override {
    if (std::isinf(x)) return x > 0 ? 0 : 1;
    return x < 0 ? 1 - 0.5 * std::exp(x / b_) : 0.5 * std::exp(-x / b_);
  }
  double F1(double x) const override { return F0(x - 1); }
  double S1(double x) const override { return S0(x - 1); }
  // (|x| - |x - 1|) / b: -1/b for x <= 0, (2x - 1)/b on (0, 1), 1/b for x >= 1.
  double Ell(double x) const override {
    return (std::abs(x) - std::abs(x - 1)) / b_;
  }
  double XLe(double v) const override {
    if (v < -1 / b_) return -kInf;
    if (v >= 1 / b_) return kInf;
    return (v * b_ + 1) / 2;
  }
  double XLt(double v) const override {
    if (v <= -1 / b_) return -kInf;
    if (v > 1 / b_) return kInf;
    return (v * b_ + 1) / 2;
  }
  std::pair<double, double> Window(double tail) const override {
    const double w = b_ * std::log(0.5 / tail);
    return {-w, 1 + w};
  }

 private:
  double b_;
};

// Cumulative distribution of the loss L under P and Q for one direction of
// the Poisson-subsampled (q in (0, 1]) mechanism.
struct LossCdf {
  double p_le, p_gt, q_le, q_gt;
};

LossCdf RemoveCdf(const BaseNoise& n, double q, double u) {
  // P = (1-q) P0 + q P1, Q = P0, L = log(1 - q + q e^{ell(x)}) increasing.
  if (q < 1 && u <= std::log1p(-q)) return {0, 1, 0, 1};
  const double v = q == 1 ? u : std::log(std::expm1(u) + q) - std::log(q);
  const double x = n.XLe(v);
  return {(1 - q) * n.F0(x) + q * n.F1(x), (1 - q) * n.S0(x) + q * n.S1(x),
          n.F0(x), n.S0(x)};
}

LossCdf AddCdf(const BaseNoise& n, double q, double u) {
  // P = P0, Q = (1-q) P0 + q P1, L = -log(1 - q + q e^{ell(x)}) decreasing:
  // L <= u iff ell(x) >= v iff x >= XLt(v).
  if (q < 1 && u >= -std::log1p(-q)) return {1, 0, 1, 0};
  const double v = q == 1 ? -u : std::log(std::expm1(-u) + q) - std::log(q);
  const double x = n.XLt(v);
  return {n.S0(x), n.F0(x), (1 - q) * n.S0(x) + q * n.S1(x),
          (1 - q) * n.F0(x) + q * n.F1(x)};
}

// Mass of (lo, hi] from two cumulative evaluations, using whichever side is
// numerically smaller.
double IntervalMass(double le_lo, double gt_lo, double le_hi, double gt_hi) {
  const double m = le_lo < 0.5 ? le_hi - le_lo : gt_lo - gt_hi;
  return std::max(0.0, m);
}

void TrimPld(DiscretePld& pld, double tail) {
  auto& p = pld.pmf;
  // High losses -> infinity.
  size_t end = p.size();
  double acc = 0;
  while (end > 1 && acc + p[end - 1] <= tail) {
    acc += p[end - 1];
    --end;
  }
  pld.infinity_mass = std::min(1.0, pld.infinity_mass + acc);
  p.resize(end);
  // Low losses -> moved up into the first kept point.
  size_t begin = 0;
  acc = 0;
  while (begin + 1 < p.size() && acc + p[begin] <= tail) {
    acc += p[begin];
    ++begin;
  }
  if (begin > 0) {
    p[begin] += acc;
    p.erase(p.begin(), p.begin() + static_cast<std::ptrdiff_t>(begin));
    pld.offset += static_cast<int64_t>(begin);
  }
}

double Sum(const std::vector<double>& v) {
  long double s = 0;
  for (double x : v) s += x;
  return static_cast<double>(s);
}

// Connect-the-dots discretization of one direction.
absl::StatusOr<DiscretePld> DiscretizeMonotone(const BaseNoise& noise, double q,
                                               bool remove,
                                               const PldOptions& opt) {
  const double h = opt.value_discretization_interval;
  auto [x_lo, x_hi] = noise.Window(opt.tail_mass_truncation / 4);
  auto loss = [&](double x) {
    const double l = LogAdd(std::log1p(-q), std::log(q) + noise.Ell(x));
    return remove ? l : -l;
  };
  double u_lo = remove ? loss(x_lo) : loss(x_hi);
  double u_hi = remove ? loss(x_hi) : loss(x_lo);
  const double i_lo_d = std::floor(u_lo / h), i_hi_d = std::ceil(u_hi / h);
  if (!(i_hi_d - i_lo_d + 1 <= static_cast<double>(opt.max_points))) {
    return absl::OutOfRangeError(absl::StrCat(
        "PLD grid too large (", i_hi_d - i_lo_d + 1,
        " points); increase value_discretization_interval or use RDP"));
  }
  const int64_t i_lo = static_cast<int64_t>(i_lo_d);
  const int64_t n = static_cast<int64_t>(i_hi_d) - i_lo + 1;
  DiscretePld pld;
  pld.h = h;
  pld.offset = i_lo;
  pld.pmf.assign(n, 0.0);
  auto cdf = [&](int64_t k) {
    const double u = static_cast<double>(i_lo + k) * h;
    return remove ? RemoveCdf(noise, q, u) : AddCdf(noise, q, u);
  };
  LossCdf prev = cdf(0);
  pld.pmf[0] = prev.p_le;  // everything at or below l_0 moves up to l_0
  const double one_minus_e_mh = -std::expm1(-h);
  for (int64_t k = 0; k + 1 < n; ++k) {
    const LossCdf next = cdf(k + 1);
    const double pm = IntervalMass(prev.p_le, prev.p_gt, next.p_le, next.p_gt);
    const double qm = IntervalMass(prev.q_le, prev.q_gt, next.q_le, next.q_gt);
    if (pm > 0) {
      // Split pm between l_k and l_{k+1} preserving the Q-mass:
      // b = (pm - qm e^{l_k}) / (1 - e^{-h}).
      const double l_k = static_cast<double>(i_lo + k) * h;
      double r = qm > 0 ? std::exp(std::log(qm) + l_k) : 0;
      r = std::clamp(r, pm * std::exp(-h), pm);
      const double b = std::clamp((pm - r) / one_minus_e_mh, 0.0, pm);
      pld.pmf[k] += pm - b;
      pld.pmf[k + 1] += b;
    }
    prev = next;
  }
  pld.infinity_mass = prev.p_gt;
  TrimPld(pld, opt.tail_mass_truncation);
  return pld;
}

// Randomized response pair for (eps, delta)-DP, losses rounded up to the grid.
DiscretePld EpsilonDeltaPld(double eps, double delta, double h) {
  DiscretePld pld;
  pld.h = h;
  if (std::isinf(eps) || delta >= 1) {
    pld.offset = 0;
    pld.pmf = {0.0};
    pld.infinity_mass = 1;
    return pld;
  }
  pld.infinity_mass = delta;
  if (eps == 0) {
    pld.offset = 0;
    pld.pmf = {1 - delta};
    return pld;
  }
  const int64_t hi = static_cast<int64_t>(std::ceil(eps / h));
  const int64_t lo = static_cast<int64_t>(std::ceil(-eps / h));
  pld.offset = lo;
  pld.pmf.assign(hi - lo + 1, 0.0);
  pld.pmf.front() += (1 - delta) / (1 + std::exp(eps));
  pld.pmf.back() += (1 - delta) / (1 + std::exp(-eps));
  return pld;
}

DiscretePld NoOpPld(double h) {
  DiscretePld pld;
  pld.h = h;
  pld.pmf = {1.0};
  return pld;
}

size_t NextPow2(size_t n) {
  size_t p = 1;
  while (p < n) p <<= 1;
  return p;
}

std::complex<double> IntPow(std::complex<double> z, int64_t k) {
  std::complex<double> r(1, 0);
  while (k > 0) {
    if (k & 1) r *= z;
    z *= z;
    k >>= 1;
  }
  return r;
}

// Clamps FFT round-off and sends any lost mass to infinity.
void FinishFft(DiscretePld& out, double expected_finite_mass,
               const PldOptions& opt) {
  // Entries below the FFT's round-off floor are noise: zero them (the mass
  // they may have carried is recovered below as a deficit -> infinity).
  double max_entry = 0;
  for (double x : out.pmf) max_entry = std::max(max_entry, x);
  const double floor = 16 * std::numeric_limits<double>::epsilon() * max_entry;
  for (double& x : out.pmf) x = x < floor ? 0.0 : x;
  const double got = Sum(out.pmf);
  if (got < expected_finite_mass) {
    out.infinity_mass =
        std::min(1.0, out.infinity_mass + (expected_finite_mass - got));
  }
  TrimPld(out, opt.tail_mass_truncation);
}

absl::StatusOr<DiscretePld> Convolve(const DiscretePld& a, const DiscretePld& b,
                                     const PldOptions& opt) {
  DiscretePld out;
  out.h = a.h;
  out.offset = a.offset + b.offset;
  out.infinity_mass =
      a.infinity_mass + b.infinity_mass - a.infinity_mass * b.infinity_mass;
  const size_t n = a.pmf.size() + b.pmf.size() - 1;
  if (n > static_cast<size_t>(opt.max_points)) {
    return absl::OutOfRangeError("PLD composition too large");
  }
  if (static_cast<double>(a.pmf.size()) * static_cast<double>(b.pmf.size()) <=
      4e6) {
    out.pmf.assign(n, 0.0);
    for (size_t i = 0; i < a.pmf.size(); ++i) {
      if (a.pmf[i] == 0) continue;
      for (size_t j = 0; j < b.pmf.size(); ++j) {
        out.pmf[i + j] += a.pmf[i] * b.pmf[j];
      }
    }
    TrimPld(out, opt.tail_mass_truncation);
    return out;
  }
  const size_t nf = NextPow2(n);
  Eigen::FFT<double> fft;
  fft.SetFlag(Eigen::FFT<double>::HalfSpectrum);
  std::vector<double> xa(nf, 0.0), xb(nf, 0.0);
  std::copy(a.pmf.begin(), a.pmf.end(), xa.begin());
  std::copy(b.pmf.begin(), b.pmf.end(), xb.begin());
  std::vector<std::complex<double>> fa, fb;
  fft.fwd(fa, xa);
  fft.fwd(fb, xb);
  for (size_t i = 0; i < fa.size(); ++i) fa[i] *= fb[i];
  std::vector<double> y;
  fft.inv(y, fa, static_cast<Eigen::Index>(nf));
  y.resize(n);
  out.pmf = std::move(y);
  FinishFft(out, Sum(a.pmf) * Sum(b.pmf), opt);
  return out;
}

absl::StatusOr<DiscretePld> SelfCompose(const DiscretePld& pld, int64_t k,
                                        const PldOptions& opt) {
  if (k == 0) return NoOpPld(pld.h);
  if (k == 1) return pld;
  const double h = pld.h;
  const double dk = static_cast<double>(k);
  const int64_t n = static_cast<int64_t>(pld.pmf.size());
  const double mass = Sum(pld.pmf);
  DiscretePld out;
  out.h = h;
  out.infinity_mass = pld.infinity_mass >= 1
                          ? 1
                          : -std::expm1(dk * std::log1p(-pld.infinity_mass));
  if (mass <= 0) {
    out.pmf = {0.0};
    out.infinity_mass = 1;
    return out;
  }
  // Window [s_lo, s_hi] of composed indices: the exact support, or a
  // Chernoff window when that is narrower.
  // Chernoff: P(S >= U) <= M(t)^k e^{-tU}, M(t) = sum_j p_j e^{t l_j}
  // (computed relative to the top / bottom loss to avoid overflow).
  const double l_min = static_cast<double>(pld.offset) * h;
  const double l_max = static_cast<double>(pld.offset + n - 1) * h;
  auto log_mgf = [&](double t) {
    // Walk from the dominant end so that underflow only hits negligible
    // terms.
    const double step = std::exp(-std::abs(t) * h);
    double w = 1;
    long double m = 0;
    for (int64_t i = 0; i < n && w > 0; ++i) {
      const int64_t j = t > 0 ? n - 1 - i : i;
      m += pld.pmf[j] * w;
      w *= step;
    }
    return static_cast<double>(std::log(m)) + t * (t > 0 ? l_max : l_min);
  };
  const double log_tail = std::log(opt.tail_mass_truncation / 2);
  double upper = dk * l_max, lower = dk * l_min;
  for (double t = 1.0 / 64; t <= 256; t *= 2) {
    upper = std::min(upper, (dk * log_mgf(t) - log_tail) / t);
    lower = std::max(lower, -(dk * log_mgf(-t) - log_tail) / t);
  }
  int64_t s_lo = static_cast<int64_t>(std::floor(lower / h));
  int64_t s_hi = static_cast<int64_t>(std::ceil(upper / h));
  if (s_hi < s_lo) s_hi = s_lo;
  double alias_bound = opt.tail_mass_truncation / 2;  // upper tail outside
  const double full = dk * static_cast<double>(n - 1) + 1;
  if (full <= static_cast<double>(s_hi - s_lo + 1)) {
    s_lo = k * pld.offset;
    s_hi = s_lo + static_cast<int64_t>(full) - 1;
    alias_bound = 0;
  }
  const int64_t width = s_hi - s_lo + 1;
  if (width > opt.max_points) {
    return absl::OutOfRangeError("PLD self-composition window too large");
  }
  const size_t nf = NextPow2(std::max<size_t>(2, static_cast<size_t>(width)));
  std::vector<double> x(nf, 0.0);
  for (int64_t j = 0; j < n; ++j) x[static_cast<size_t>(j) % nf] += pld.pmf[j];
  Eigen::FFT<double> fft;
  fft.SetFlag(Eigen::FFT<double>::HalfSpectrum);
  std::vector<std::complex<double>> f;
  fft.fwd(f, x);
  for (auto& c : f) c = IntPow(c, k);
  std::vector<double> y;
  fft.inv(y, f, static_cast<Eigen::Index>(nf));
  out.offset = s_lo;
  out.pmf.assign(width, 0.0);
  const int64_t base = k * pld.offset;
  const int64_t nfi = static_cast<int64_t>(nf);
  for (int64_t s = s_lo; s <= s_hi; ++s) {
    const int64_t r = (((s - base) % nfi) + nfi) % nfi;
    out.pmf[s - s_lo] = y[r];
  }
  out.infinity_mass = std::min(1.0, out.infinity_mass + alias_bound);
  // Aliasing keeps all mass inside the window, so the expected finite mass is
  // mass^k (minus nothing).
  FinishFft(out, std::pow(mass, dk), opt);
  return out;
}

// Internal pair; `symmetric` means add == remove (only `remove` is kept).
struct Pair {
  DiscretePld remove, add;
  bool symmetric = false;
};

Pair Symmetric(DiscretePld p) {
  Pair out;
  out.remove = std::move(p);
  out.symmetric = true;
  return out;
}

absl::StatusOr<Pair> MonotonePair(const BaseNoise& noise, double q,
                                  bool symmetric, const PldOptions& opt) {
  Pair out;
  ASSIGN_OR_RETURN(out.remove, DiscretizeMonotone(noise, q, true, opt));
  if (symmetric) {
    out.symmetric = true;
  } else {
    ASSIGN_OR_RETURN(out.add, DiscretizeMonotone(noise, q, false, opt));
  }
  return out;
}

// Pure / approximate DP guarantee of an event, if it is one of the events
// known only by such a guarantee (returns false otherwise).
bool GuaranteeOf(const DpEvent& e, double* eps, double* delta) {
  using K = DpEvent::Kind;
  switch (e.kind()) {
    case K::kExponential:
    case K::kSparseVector:
      *eps = e.epsilon();
      *delta = 0;
      return true;
    case K::kEpsilonDelta:
      *eps = e.epsilon();
      *delta = e.delta();
      return true;
    case K::kDiscreteLaplace:
      *eps = e.noise_multiplier() == 0 ? kInf : 1 / e.noise_multiplier();
      *delta = 0;
      return true;
    default:
      return false;
  }
}

absl::StatusOr<Pair> PairOf(const DpEvent& e, const PldOptions& opt);

absl::StatusOr<Pair> Compose(const Pair& a, const Pair& b,
                             const PldOptions& opt) {
  Pair out;
  ASSIGN_OR_RETURN(out.remove, Convolve(a.remove, b.remove, opt));
  if (a.symmetric && b.symmetric) {
    out.symmetric = true;
    return out;
  }
  ASSIGN_OR_RETURN(out.add, Convolve(a.symmetric ? a.remove : a.add,
                                     b.symmetric ? b.remove : b.add, opt));
  return out;
}

absl::StatusOr<Pair> SampledPair(const DpEvent& inner, double q, bool poisson,
                                 const PldOptions& opt) {
  const double h = opt.value_discretization_interval;
  if (q == 0) return Symmetric(NoOpPld(h));
  if (q == 1) return PairOf(inner, opt);
  if (poisson && inner.kind() == DpEvent::Kind::kGaussian) {
    if (inner.noise_multiplier() == 0) {
      return Symmetric(EpsilonDeltaPld(kInf, 1, h));  // q > 0, no noise
    }
    GaussianNoise noise(inner.noise_multiplier());
    return MonotonePair(noise, q, false, opt);
  }
  if (poisson && inner.kind() == DpEvent::Kind::kLaplace) {
    if (inner.noise_multiplier() == 0) {
      return Symmetric(EpsilonDeltaPld(kInf, 1, h));
    }
    LaplaceNoise noise(inner.noise_multiplier());
    return MonotonePair(noise, q, false, opt);
  }
  double eps, delta;
  if (GuaranteeOf(inner, &eps, &delta) ||
      (inner.kind() == DpEvent::Kind::kLaplace &&
       (eps = 1 / inner.noise_multiplier(), delta = 0, true))) {
    // Amplification by subsampling of an (eps, delta)-DP mechanism: Poisson
    // (add/remove) and without replacement (replace-one) both give
    // (log(1 + q (e^eps - 1)), q delta) (Balle, Barthe, Gaboardi 2018,
    // Thms. 8 and 9).
    return Symmetric(
        EpsilonDeltaPld(std::log1p(q * std::expm1(eps)), q * delta, h));
  }
  return absl::UnimplementedError(absl::StrCat(
      "PLD accountant: no analysis for sampling around ", inner.ToJson()));
}

absl::StatusOr<Pair> PairOf(const DpEvent& e, const PldOptions& opt) {
  using K = DpEvent::Kind;
  const double h = opt.value_discretization_interval;
  double eps, delta;
  if (GuaranteeOf(e, &eps, &delta)) {
    return Symmetric(EpsilonDeltaPld(eps, delta, h));
  }
  switch (e.kind()) {
    case K::kNoOp:
      return Symmetric(NoOpPld(h));
    case K::kGaussian: {
      if (e.noise_multiplier() == 0)
        return Symmetric(EpsilonDeltaPld(kInf, 1, h));
      GaussianNoise noise(e.noise_multiplier());
      return MonotonePair(noise, 1.0, true, opt);
    }
    case K::kLaplace: {
      if (e.noise_multiplier() == 0)
        return Symmetric(EpsilonDeltaPld(kInf, 1, h));
      LaplaceNoise noise(e.noise_multiplier());
      return MonotonePair(noise, 1.0, true, opt);
    }
    case K::kPoissonSampled:
      return SampledPair(e.inner(), e.sampling_probability(), true, opt);
    case K::kSampledWithoutReplacement:
      return SampledPair(e.inner(),
                         static_cast<double>(e.sample_size()) /
                             static_cast<double>(e.source_size()),
                         false, opt);
    case K::kExponentialMechanisms:
      // Each share is (epsilon / count)-DP: the randomized-response pair of
      // each share, composed (no finer PLD of the exponential mechanism is
      // used here; at worst this is the pure epsilon-DP price).
      return PairOf(
          DpEvent::SelfComposed(
              e.count(), DpEvent::Exponential(e.epsilon() /
                                              static_cast<double>(e.count()))),
          opt);
    case K::kSelfComposed: {
      if (e.count() == 0) return Symmetric(NoOpPld(h));
      if (e.inner().kind() == K::kGaussian &&
          e.inner().noise_multiplier() > 0) {
        // k Gaussians with multiplier z compose exactly to one Gaussian with
        // multiplier z / sqrt(k) (Dong, Roth, Su 2019, Cor. 3.3).
        return PairOf(
            DpEvent::Gaussian(e.inner().noise_multiplier() /
                              std::sqrt(static_cast<double>(e.count()))),
            opt);
      }
      ASSIGN_OR_RETURN(Pair inner, PairOf(e.inner(), opt));
      Pair out;
      out.symmetric = inner.symmetric;
      ASSIGN_OR_RETURN(out.remove, SelfCompose(inner.remove, e.count(), opt));
      if (!inner.symmetric) {
        ASSIGN_OR_RETURN(out.add, SelfCompose(inner.add, e.count(), opt));
      }
      return out;
    }
    case K::kComposed: {
      Pair acc = Symmetric(NoOpPld(h));
      for (const DpEvent& c : e.events()) {
        ASSIGN_OR_RETURN(Pair p, PairOf(c, opt));
        ASSIGN_OR_RETURN(acc, Compose(acc, p, opt));
      }
      return acc;
    }
    case K::kDiscreteGaussian:
      return absl::UnimplementedError(
          "PLD accountant: the discrete Gaussian is priced by the RDP "
          "accountant only");
    case K::kGaussianSparseVector:
      return absl::UnimplementedError(
          "PLD accountant: the Gaussian sparse vector has no privacy loss "
          "distribution here; it is priced by the RDP accountant only "
          "(Zhu & Wang 2020, Thm 8)");
    default:
      break;
  }
  return absl::UnimplementedError(
      absl::StrCat("PLD accountant: unsupported event ", e.ToJson()));
}

// If `e` composes only Gaussian mechanisms (and no-ops), sets *mu2 to
// sum_i count_i / z_i^2: the composition is then exactly one Gaussian
// mechanism with mu = sqrt(mu2) (Dong, Roth, Su 2019, Cor. 3.3).
bool GaussianOnly(const DpEvent& e, double* mu2) {
  using K = DpEvent::Kind;
  switch (e.kind()) {
    case K::kNoOp:
      return true;
    case K::kGaussian: {
      const double z = e.noise_multiplier();
      *mu2 += z == 0 ? kInf : 1 / (z * z);
      return true;
    }
    case K::kSelfComposed: {
      double inner = 0;
      if (!GaussianOnly(e.inner(), &inner)) return false;
      if (e.count() > 0) *mu2 += static_cast<double>(e.count()) * inner;
      return true;
    }
    case K::kComposed:
      for (const DpEvent& c : e.events()) {
        if (!GaussianOnly(c, mu2)) return false;
      }
      return true;
    default:
      return false;
  }
}

// Exact privacy profile of the Gaussian mechanism with mu = 1 / z
// (Balle & Wang 2018, Thm. 8):
// delta(eps) = Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2).
double GaussianDelta(double mu, double eps) {
  if (mu == 0) return 0;
  if (std::isinf(mu)) return 1;
  const double a = 0.5 * std::erfc((eps / mu - mu / 2) / std::sqrt(2.0));
  const double b = std::exp(eps + std::log(0.5) +
                            LogErfc((eps / mu + mu / 2) / std::sqrt(2.0)));
  return std::clamp(a - b, 0.0, 1.0);
}

// Smallest eps >= 0 with GaussianDelta(mu, eps) <= delta, by bisection; the
// returned value is the upper end of the final bracket (never below it).
double GaussianEpsilon(double mu, double delta) {
  if (mu == 0) return 0;
  if (std::isinf(mu) || delta <= 0) return kInf;
  if (GaussianDelta(mu, 0) <= delta) return 0;
  double lo = 0, hi = 1;
  while (GaussianDelta(mu, hi) > delta) {
    lo = hi;
    hi *= 2;
    if (hi > 1e8) return kInf;
  }
  for (int i = 0; i < 200 && hi - lo > 1e-13 * hi; ++i) {
    const double mid = 0.5 * (lo + hi);
    (GaussianDelta(mu, mid) > delta ? lo : hi) = mid;
  }
  return hi;
}

}  // namespace

absl::Status PldOptions::Validate() const {
  if (!(value_discretization_interval > 0 &&
        value_discretization_interval <= 1)) {
    return absl::InvalidArgumentError(
        "value_discretization_interval must be in (0, 1]");
  }
  if (!(tail_mass_truncation > 0 && tail_mass_truncation < 1e-3)) {
    return absl::InvalidArgumentError(
        "tail_mass_truncation must be in (0, 1e-3)");
  }
  if (max_points < 16) {
    return absl::InvalidArgumentError("max_points must be >= 16");
  }
  return absl::OkStatus();
}

double DiscretePld::Delta(double epsilon) const {
  long double d = 0;
  for (size_t i = 0; i < pmf.size(); ++i) {
    const double l = static_cast<double>(offset + static_cast<int64_t>(i)) * h;
    if (l > epsilon && pmf[i] > 0) d += pmf[i] * -std::expm1(epsilon - l);
  }
  return std::min(1.0, static_cast<double>(d) + infinity_mass);
}

double DiscretePld::Epsilon(double delta) const {
  if (infinity_mass > delta) return kInf;
  // Walk down from the top. With A = sum_{l_j > eps} p_j and
  // D(eps) = sum_{l_j > eps} p_j e^{eps - l_j}, delta(eps) = inf + A - D(eps).
  long double a = 0, d = 0;
  const int64_t n = static_cast<int64_t>(pmf.size());
  const double e_mh = std::exp(-h);
  for (int64_t i = n - 1; i >= 0; --i) {
    // Include point i; evaluate at eps = l_{i-1} = l_i - h.
    a += pmf[i];
    d = (d + pmf[i]) * e_mh;
    const double l_prev = static_cast<double>(offset + i - 1) * h;
    const long double at_prev = infinity_mass + a - d;
    if (at_prev > delta || i == 0) {
      // Solve inf + a - e^{eps - l_prev} d = delta on (l_prev, l_i].
      if (d <= 0) return 0;  // then a == 0 and delta(eps) = inf <= delta
      const long double ratio = (infinity_mass + a - delta) / d;
      double eps =
          ratio <= 0 ? -kInf : l_prev + static_cast<double>(std::log(ratio));
      if (at_prev <= delta) eps = std::min(eps, l_prev);
      return std::max(0.0, std::min(eps, l_prev + h));
    }
  }
  return 0;
}

absl::StatusOr<PldPair> ComputePld(const DpEvent& event,
                                   const PldOptions& options) {
  RETURN_IF_ERROR(options.Validate());
  RETURN_IF_ERROR(event.Validate());
  ASSIGN_OR_RETURN(Pair p, PairOf(event, options));
  PldPair out;
  out.remove = p.remove;
  out.add = p.symmetric ? p.remove : std::move(p.add);
  return out;
}

absl::StatusOr<EpsilonResult> ComputeEpsilonPld(const DpEvent& event,
                                                double delta,
                                                const PldOptions& options) {
  if (!(delta >= 0 && delta <= 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("delta must be in [0, 1], got ", delta));
  }
  RETURN_IF_ERROR(options.Validate());
  RETURN_IF_ERROR(event.Validate());
  double mu2 = 0;
  if (GaussianOnly(event, &mu2)) {
    // Exact: the PLD of a Gaussian mechanism is Gaussian.
    return EpsilonResult{GaussianEpsilon(std::sqrt(mu2), delta), 0};
  }
  ASSIGN_OR_RETURN(PldPair p, ComputePld(event, options));
  EpsilonResult r;
  r.epsilon = std::max(p.remove.Epsilon(delta), p.add.Epsilon(delta));
  r.optimal_order = 0;
  return r;
}

absl::StatusOr<double> ComputeDeltaPld(const DpEvent& event, double epsilon,
                                       const PldOptions& options) {
  if (!(epsilon >= 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("epsilon must be >= 0, got ", epsilon));
  }
  RETURN_IF_ERROR(options.Validate());
  RETURN_IF_ERROR(event.Validate());
  double mu2 = 0;
  if (GaussianOnly(event, &mu2)) return GaussianDelta(std::sqrt(mu2), epsilon);
  ASSIGN_OR_RETURN(PldPair p, ComputePld(event, options));
  return std::max(p.remove.Delta(epsilon), p.add.Delta(epsilon));
}

}  // namespace dpopt::privacy
