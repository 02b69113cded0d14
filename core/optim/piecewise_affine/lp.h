// The non-private LP of the max-affine problem, behind a small interface backed
// by GLPK (libglpk-dev): the epigraph form
//     minimise t  s.t.  a_i^T x - t <= -b_i (i = 1..m),  x in P,
// with x's box as column bounds and P's half-spaces as extra rows.
//
// Why GLPK: a well-kept Debian package (libglpk-dev 5.0) whose small C API
// fits this LP directly (rows, column bounds, one simplex call, row duals);
// its GPL-3+ licence suits a service built from source. COIN-OR Clp (EPL-2.0)
// would do as well; HiGHS is not packaged in Debian 12.
//
// GLPK keeps its state in an environment and can print to stdout: every
// call here runs with terminal output switched off, so nothing (least of
// all a private offset) reaches the logs, and the thread's GLPK environment
// is freed after every solve (no memory outlives it on job threads). A
// GLPK built with thread-local storage (GlpkIsReentrant(); Debian's 5.0 is)
// has one environment per thread, so LPs of different jobs are solved in
// parallel; otherwise every call runs under one process-wide mutex (one
// job's solve then delays the others' by its length, which depends only on
// the public kLpIterationLimit bound, not on how long it actually takes).
//
// Offsets are normalised before solving (shift invariance, as in the proof
// of Han, Topcu & Pappas 2014, Lemma 18: f(x; b + c 1) = f(x; b) + c):
// b_i - max_j b_j, raised to at least -(2 G X + 1) where X bounds ||x|| on
// the box. Pieces below that bound can never attain the max on P, so the
// minimisers are unchanged, and the LP's numbers stay bounded whatever the
// offsets (1e308 included).
#ifndef DPOPT_CORE_OPTIM_PIECEWISE_AFFINE_LP_H_
#define DPOPT_CORE_OPTIM_PIECEWISE_AFFINE_LP_H_

#include <cstdint>
#include <vector>

#include "Eigen/Dense"
#include "absl/status/statusor.h"
#include "core/optim/piecewise_affine/problem.h"

namespace dpopt::optim::piecewise_affine {

struct LpSolution {
  Eigen::VectorXd x;  // a minimiser, clipped into P's box
  // f(x; b) at the returned x, recomputed from the data (reported instead
  // of t*, which carries the solver's tolerance). May be +-Inf only for
  // offsets near the double range.
  double value = 0;
  // The LP's optimal t (in the original, un-normalised offsets).
  double t = 0;
  // Normalised row duals lambda_i >= 0, sum 1 (zero for clamped pieces): a
  // dual certificate, any such lambda gives the lower bound
  //   b^T lambda + min_{x in box} (A^T lambda)^T x <= f_opt  (P a box).
  std::vector<double> duals;
  // GLPK's simplex iterations for this solve (what its run time grows with).
  int64_t simplex_iterations = 0;
};

// Whether the linked GLPK keeps its environment per thread (glp_config("TLS")
// is set): LPs on different threads then run in parallel, without a lock.
bool GlpkIsReentrant();

// GLPK's simplex iteration limit for every solve (public).
inline constexpr int kLpIterationLimit = 10000000;

// Solves min_{x in P} max_i (a_i^T x + b_i). `a` is m x d (public slopes),
// `b` the offsets (finite). Errors: INVALID_ARGUMENT on size mismatch or
// non-finite input; INTERNAL if GLPK does not report an optimum (callers on
// private data fall back to a data-independent point, see the mechanisms).
absl::StatusOr<LpSolution> SolveMaxAffine(const Eigen::MatrixXd& a,
                                          const Eigen::VectorXd& b,
                                          const Polytope& p);

// Chebyshev centre of P: the centre of the largest ball inside P
// (max r s.t. H_k x + r ||H_k|| <= h_k, lower + r <= x <= upper - r).
struct Ball {
  Eigen::VectorXd center;
  double radius = 0;
};
absl::StatusOr<Ball> ChebyshevCenter(const Polytope& p);

// min and max of x_j over P for every j (2d LPs), each widened by a small
// margin against solver tolerance and intersected with the declared box.
absl::Status BoundingBox(const Polytope& p, std::vector<double>* lower,
                         std::vector<double>* upper);

}  // namespace dpopt::optim::piecewise_affine

#endif  // DPOPT_CORE_OPTIM_PIECEWISE_AFFINE_LP_H_
