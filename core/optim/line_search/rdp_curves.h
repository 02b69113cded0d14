// RDP formulas of line-search family (Chen & Lee 2022, "Stochastic Adaptive
// Line Search for Differentially Private Optimization", Sec. 3 and 4.1, and
// the sound replacements of its sparse-vector bounds). Pure functions of
// public parameters; no data, no randomness.
//
// Which of these the job is charged with: see job_filter.h. The ledger-facing
// costs are always ComputeRdp() of DpEvents (core/privacy); these formulas are
// the paper's curves, for comparison and known-answer tests. The sound
// Gaussian-SVT curve is privacy::RdpGaussianSparseVector (the DpEvent kind
// GaussianSparseVector); SoundGaussianSvt below forwards to it.
#ifndef DPOPT_CORE_OPTIM_LINE_SEARCH_RDP_CURVES_H_
#define DPOPT_CORE_OPTIM_LINE_SEARCH_RDP_CURVES_H_

#include <cstdint>
#include <functional>

namespace dpopt::optim::line_search {

// Paper Thm 2, eq. (4): RDP of the Laplace AboveThreshold as printed, with
// threshold budget eps1 and query budget eps2. NOT a valid bound on its own
// (the proof, Appendix B, bounds one output and omits the sum over the
// max_it + 1 possible outputs).
// REQUIRES: alpha > 1.
double Eq4LaplaceSvt(double alpha, double eps1, double eps2);

// Tight RDP of any pure eps-DP mechanism ("P2R"; tighter than the paper's
// Lemma 2, alpha eps^2 / 2):
// (1/(alpha-1)) log[(sinh(alpha eps) - sinh((alpha-1) eps)) / sinh eps],
// capped by min(eps, alpha eps^2 / 2). Equals privacy::RdpPureDp.
double PureToRdp(double epsilon, double alpha);

// Poisson-subsampled Gaussian at integer alpha >= 2 ("SGM"; Mironov, Talwar
// & Zhang 2019):
// (1/(alpha-1)) log sum_{l=0..alpha} C(alpha,l) (1-q)^{alpha-l} q^l
// exp(l(l-1) rho), rho = Delta^2 / (2 sigma^2). Log-space.
double SampledGaussianRdp(double q, double rho, int64_t alpha);

// Zhu & Wang (ICML 2019) general Poisson-subsampling upper bound (the
// paper's Lemma 4) at integer alpha >= 2, for a base mechanism whose RDP
// curve is `eps(l)` for l = 2..alpha. Not tight as eps -> 0: with eps = 0 it
// is still > 0, so at tiny budgets it exceeds the unamplified cost.
double ZhuWangAmplified(double q, const std::function<double(int64_t)>& eps,
                        int64_t alpha);

// min(raw, ZW) is always valid (subsampling never increases RDP).
double CappedAmplified(double q, const std::function<double(int64_t)>& eps,
                       int64_t alpha);

// Paper Thm 3: Gaussian SVT as printed, (alpha/2)(1/s1^2 +
// 4/s2^2) with noise multipliers s1, s2. With s1^2 = 3/(2 rho), s2^2 = 3/rho
// it is alpha * rho. NOT valid alone (same gap as Thm 2).
double PaperGaussianSvt(double alpha, double sigma1, double sigma2);

// Sound Gaussian SVT (Zhu & Wang NeurIPS 2020 Thm 8, autodp
// RDP_gaussian_svt_c1) with threshold std s1*Delta and query std s2*Delta
// and at most k queries (k = max_it + 1 counting the dummy):
// alpha/s1^2 + 2 alpha/s2^2 + log(k)/(alpha-1). Under the paper's
// calibration (s1^2 = 3/(2 rho), s2^2 = 3/rho) this is
// (4/3) alpha rho + log(k)/(alpha-1). REQUIRES: k >= 1.
double SoundGaussianSvt(double alpha, double sigma1, double sigma2, int64_t k);

// Sound Laplace-SVT raw curve without subsampling: the min of three valid
// bounds (pure DP, its tight RDP, and eq. (4) repaired with the outcome sum)
// min{eps_bt, P2R(eps_bt; alpha), eq4(alpha; eps_bt/2, eps_bt/4) +
// log(max_it + 1)/(alpha - 1)}.
double SoundLaplaceSvtRaw(double alpha, double eps_bt, int64_t max_it);

}  // namespace dpopt::optim::line_search

#endif  // DPOPT_CORE_OPTIM_LINE_SEARCH_RDP_CURVES_H_
