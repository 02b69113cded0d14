#include "core/optim/piecewise_affine/lp.h"

#include <glpk.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "core/common/status_macros.h"

namespace dpopt::optim::piecewise_affine {
namespace {

// GLPK 4.61 and later, built with thread-local storage (Debian's 5.0 is:
// glp_config("TLS") is "_Thread_local"), keep their whole environment per
// thread and share nothing between threads: independent problems may then
// be solved on several threads at once, provided no problem object is used
// by a thread other than its creator (here every problem lives inside one
// call, on one thread). Built without it, GLPK has one environment for the
// process and every call must be serialised.
bool ComputeGlpkIsReentrant() {
  const char* tls = glp_config("TLS");
  return tls != nullptr && tls[0] != '\0';
}

absl::Mutex& GlpkMutex() {
  static absl::Mutex* const mu = new absl::Mutex();
  return *mu;
}

// Held around every use of GLPK: the process-wide mutex only when GLPK is
// not re-entrant, so that with a thread-local build one job's solve never
// waits for another's.
// (Conditional locking: outside the static analysis.)
class GlpkLock {
 public:
  GlpkLock() ABSL_NO_THREAD_SAFETY_ANALYSIS : locked_(!GlpkIsReentrant()) {
    if (locked_) GlpkMutex().Lock();
  }
  ~GlpkLock() ABSL_NO_THREAD_SAFETY_ANALYSIS {
    if (locked_) GlpkMutex().Unlock();
  }
  GlpkLock(const GlpkLock&) = delete;
  GlpkLock& operator=(const GlpkLock&) = delete;

 private:
  const bool locked_;
};

class GlpkProblem {
 public:
  GlpkProblem() {
    glp_term_out(GLP_OFF);
    lp_ = glp_create_prob();
  }
  ~GlpkProblem() {
    glp_delete_prob(lp_);
    glp_free_env();
  }
  GlpkProblem(const GlpkProblem&) = delete;
  GlpkProblem& operator=(const GlpkProblem&) = delete;

  glp_prob* get() { return lp_; }

  // Adds a coefficient of the constraint matrix (1-based row and column).
  void Add(int row, int col, double value) {
    if (value == 0) return;
    ia_.push_back(row);
    ja_.push_back(col);
    ar_.push_back(value);
  }

  // Loads the matrix and runs the simplex method. OK iff GLPK reports an
  // optimal basic solution.
  absl::Status Solve() {
    glp_load_matrix(lp_, static_cast<int>(ia_.size()) - 1, ia_.data(),
                    ja_.data(), ar_.data());
    glp_scale_prob(lp_, GLP_SF_AUTO);
    glp_std_basis(lp_);
    glp_smcp parm;
    glp_init_smcp(&parm);
    parm.msg_lev = GLP_MSG_OFF;
    parm.meth = GLP_DUALP;
    parm.it_lim = kLpIterationLimit;
    parm.tm_lim = 600000;  // 10 minutes: never reached at the size limits
    const int rc = glp_simplex(lp_, &parm);
    if (rc != 0 || glp_get_status(lp_) != GLP_OPT) {
      return absl::InternalError(
          absl::StrCat("the LP solver (GLPK) did not report an optimum (code ",
                       rc, ", status ", glp_get_status(lp_), ")"));
    }
    return absl::OkStatus();
  }

 private:
  glp_prob* lp_;
  // GLPK's arrays are 1-based: element 0 is unused.
  std::vector<int> ia_{0};
  std::vector<int> ja_{0};
  std::vector<double> ar_{0.0};
};

void SetColumnBox(glp_prob* lp, int col, double lo, double hi) {
  glp_set_col_bnds(lp, col, lo == hi ? GLP_FX : GLP_DB, lo, hi);
}

bool AllFinite(const Eigen::Ref<const Eigen::MatrixXd>& m) {
  return m.allFinite();
}

}  // namespace

bool GlpkIsReentrant() {
  static const bool reentrant = ComputeGlpkIsReentrant();
  return reentrant;
}

absl::StatusOr<LpSolution> SolveMaxAffine(const Eigen::MatrixXd& a,
                                          const Eigen::VectorXd& b,
                                          const Polytope& p) {
  const int64_t m = a.rows();
  const int64_t d = a.cols();
  if (m < 1 || b.size() != m || d != p.dimension() || d < 1) {
    return absl::InvalidArgumentError(
        "max-affine LP: slopes, offsets and polytope sizes disagree");
  }
  if (!AllFinite(a) || !AllFinite(b)) {
    return absl::InvalidArgumentError("max-affine LP: non-finite input");
  }
  // Normalised offsets (see the header): c_i = max(b_i - max b, -floor).
  double g = 0;
  for (int64_t i = 0; i < m; ++i) g = std::max(g, a.row(i).stableNorm());
  double x_bound = 0;
  for (int64_t j = 0; j < d; ++j) {
    const double r = std::max(std::abs(p.lower[j]), std::abs(p.upper[j]));
    x_bound += r * r;
  }
  x_bound = std::sqrt(x_bound);
  const double floor_gap = 2 * g * x_bound + 1;
  const double top = b.maxCoeff();
  Eigen::VectorXd c(m);
  for (int64_t i = 0; i < m; ++i) {
    c[i] = std::max(b[i] - top, -floor_gap);  // b_i - top may be -Inf: fine
  }

  GlpkLock lock;
  GlpkProblem lp;
  glp_prob* raw = lp.get();
  glp_set_obj_dir(raw, GLP_MIN);
  const int cols = static_cast<int>(d) + 1;
  const int rows = static_cast<int>(m + p.rows);
  glp_add_cols(raw, cols);
  glp_add_rows(raw, rows);
  for (int j = 1; j <= d; ++j) {
    SetColumnBox(raw, j, p.lower[j - 1], p.upper[j - 1]);
  }
  glp_set_col_bnds(raw, cols, GLP_FR, 0, 0);
  glp_set_obj_coef(raw, cols, 1.0);
  for (int i = 1; i <= m; ++i) {
    glp_set_row_bnds(raw, i, GLP_UP, 0, -c[i - 1]);
    for (int j = 1; j <= d; ++j) lp.Add(i, j, a(i - 1, j - 1));
    lp.Add(i, cols, -1.0);
  }
  for (int k = 1; k <= p.rows; ++k) {
    const int row = static_cast<int>(m) + k;
    glp_set_row_bnds(raw, row, GLP_UP, 0, p.h_vector[k - 1]);
    for (int j = 1; j <= d; ++j) {
      lp.Add(row, j, p.h_matrix[(k - 1) * d + (j - 1)]);
    }
  }
  RETURN_IF_ERROR(lp.Solve());

  LpSolution out;
  out.simplex_iterations = glp_get_it_cnt(raw);
  out.x.resize(d);
  for (int j = 1; j <= d; ++j) {
    out.x[j - 1] =
        std::clamp(glp_get_col_prim(raw, j), p.lower[j - 1], p.upper[j - 1]);
  }
  out.t = glp_get_col_prim(raw, cols) + top;
  out.duals.assign(m, 0.0);
  double sum = 0;
  for (int i = 1; i <= m; ++i) {
    // Minimisation with <= rows: duals are <= 0; lambda_i = -dual_i.
    const double lambda = std::max(0.0, -glp_get_row_dual(raw, i));
    out.duals[i - 1] = std::isfinite(lambda) ? lambda : 0.0;
    sum += out.duals[i - 1];
  }
  if (sum > 0) {
    for (double& l : out.duals) l /= sum;
  }
  double value = -std::numeric_limits<double>::infinity();
  for (int64_t i = 0; i < m; ++i) {
    value = std::max(value, a.row(i).dot(out.x) + b[i]);
  }
  out.value = value;
  if (!out.x.allFinite()) {
    return absl::InternalError("the LP solver returned a non-finite point");
  }
  return out;
}

absl::StatusOr<Ball> ChebyshevCenter(const Polytope& p) {
  const int64_t d = p.dimension();
  GlpkLock lock;
  GlpkProblem lp;
  glp_prob* raw = lp.get();
  glp_set_obj_dir(raw, GLP_MAX);
  const int cols = static_cast<int>(d) + 1;  // x_1..x_d, r
  glp_add_cols(raw, cols);
  for (int j = 1; j <= d; ++j) glp_set_col_bnds(raw, j, GLP_FR, 0, 0);
  glp_set_col_bnds(raw, cols, GLP_LO, 0, 0);
  glp_set_obj_coef(raw, cols, 1.0);
  const int rows = static_cast<int>(2 * d + p.rows);
  glp_add_rows(raw, rows);
  int row = 0;
  for (int j = 1; j <= d; ++j) {
    // x_j - r >= lower_j and x_j + r <= upper_j.
    ++row;
    glp_set_row_bnds(raw, row, GLP_LO, p.lower[j - 1], 0);
    lp.Add(row, j, 1.0);
    lp.Add(row, cols, -1.0);
    ++row;
    glp_set_row_bnds(raw, row, GLP_UP, 0, p.upper[j - 1]);
    lp.Add(row, j, 1.0);
    lp.Add(row, cols, 1.0);
  }
  for (int64_t k = 0; k < p.rows; ++k) {
    ++row;
    double norm2 = 0;
    for (int64_t j = 0; j < d; ++j) {
      const double h = p.h_matrix[k * d + j];
      norm2 += h * h;
      lp.Add(row, static_cast<int>(j) + 1, h);
    }
    lp.Add(row, cols, std::sqrt(norm2));
    glp_set_row_bnds(raw, row, GLP_UP, 0, p.h_vector[k]);
  }
  RETURN_IF_ERROR(lp.Solve());
  Ball ball;
  ball.center.resize(d);
  for (int j = 1; j <= d; ++j) ball.center[j - 1] = glp_get_col_prim(raw, j);
  ball.radius = glp_get_col_prim(raw, cols);
  if (!ball.center.allFinite() || !std::isfinite(ball.radius)) {
    return absl::InternalError(
        "Chebyshev centre LP returned non-finite values");
  }
  return ball;
}

absl::Status BoundingBox(const Polytope& p, std::vector<double>* lower,
                         std::vector<double>* upper) {
  const int64_t d = p.dimension();
  *lower = p.lower;
  *upper = p.upper;
  if (p.is_box()) return absl::OkStatus();
  GlpkLock lock;
  for (int64_t target = 0; target < d; ++target) {
    for (int dir : {GLP_MIN, GLP_MAX}) {
      GlpkProblem lp;
      glp_prob* raw = lp.get();
      glp_set_obj_dir(raw, dir);
      glp_add_cols(raw, static_cast<int>(d));
      for (int j = 1; j <= d; ++j) {
        SetColumnBox(raw, j, p.lower[j - 1], p.upper[j - 1]);
      }
      glp_set_obj_coef(raw, static_cast<int>(target) + 1, 1.0);
      glp_add_rows(raw, static_cast<int>(p.rows));
      for (int64_t k = 0; k < p.rows; ++k) {
        for (int64_t j = 0; j < d; ++j) {
          lp.Add(static_cast<int>(k) + 1, static_cast<int>(j) + 1,
                 p.h_matrix[k * d + j]);
        }
        glp_set_row_bnds(raw, static_cast<int>(k) + 1, GLP_UP, 0,
                         p.h_vector[k]);
      }
      if (!lp.Solve().ok()) continue;  // keep the declared bound
      const double v = glp_get_obj_val(raw);
      if (!std::isfinite(v)) continue;
      // Widen against solver tolerance; never beyond the declared box.
      const double margin = 1e-7 * (1 + std::abs(v));
      if (dir == GLP_MIN) {
        (*lower)[target] = std::max(p.lower[target], v - margin);
      } else {
        (*upper)[target] = std::min(p.upper[target], v + margin);
      }
    }
    if ((*lower)[target] > (*upper)[target]) {
      (*lower)[target] = p.lower[target];
      (*upper)[target] = p.upper[target];
    }
  }
  return absl::OkStatus();
}

}  // namespace dpopt::optim::piecewise_affine
