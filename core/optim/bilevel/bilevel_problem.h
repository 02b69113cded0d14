// The server-side catalogue of bilevel problems of dp_bilevel (Kornowski
// 2024, Sec. 2 and Example 3.1; docs/algorithms/bilevel.md). A client never
// supplies code: it names a
// problem and its public parameters; the rows of the dataset are the data
// xi_i of the problem.
//
// Per-example oracle: for record i at (x, y) the problem
// returns grad_y g_i, grad_y f_i and the outer vector
//   v_i = grad_x f_i(x, y_lam) + lambda (grad_x g_i(x, y_lam) - grad_x g_i(x,
//   y))
// (differenced BEFORE any clipping: grad_x g_i itself need not be bounded,
// only its difference is), each possibly "absent"
// (identically zero); and the data-free (public) parts, already averaged.
// Per-example outputs may be non-finite on extreme rows; callers clip them
// with SafeClip, which is total.
//
// Catalogue:
//  * kQuadratic ("family Q", a quadratic test family with closed forms):
//    rows (u_i, v_i) in R^{2 dy};
//      g_i = 1/2 ||y - B x - u_i||^2,  f_i = 1/2 ||y - v_i||^2 + rho_x/2
//      ||x||^2
//    with a public B in R^{dy x dx}; then grad_x g_i(x, y_lam) -
//    grad_x g_i(x, y) = -B^T (y_lam - y) carries no data, so the outer
//    vector is public: rho_x x - lambda B^T (y_lam - y).
//  * kQuadraticNonconvex: the same with f_i = sum_k phi(y_k - v_ik) +
//    rho_x/2 ||x||^2, phi(s) = s^2 / (1 + s^2).
//  * kLeakExample (the paper's Example 3.1: privacy leaks from the lower to
//    the upper level): rows xi_i in R^d, dx = dy = d;
//      f(x, y) = 1/2 ||x + y||^2 (no data),  g_i = 1/2 ||y - xi_i||^2.
#ifndef DPOPT_CORE_OPTIM_BILEVEL_BILEVEL_PROBLEM_H_
#define DPOPT_CORE_OPTIM_BILEVEL_BILEVEL_PROBLEM_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "Eigen/Dense"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/data/dataset.h"

namespace dpopt::optim::bilevel {

// Declared constants of the paper's Assumptions 2.5/2.6. Public inputs:
// privacy never depends on their truth, only on the clip norms the server
// enforces.
struct ProblemConstants {
  double lipschitz_f = 0;          // L0^f
  double smoothness_f = 0;         // L1^f
  double lipschitz_g = 0;          // L0^g (over Y)
  double smoothness_g = 0;         // L1^g
  double hessian_lipschitz_g = 0;  // L2^g
  double strong_convexity_g = 0;   // mu_g
  // ell = max(L0^f, L1^f, L0^g, L1^g, L2^g), kappa = ell / mu_g.
  double ell() const;
  double kappa() const;
  // INVALID_ARGUMENT unless all are finite, >= 0, and mu_g > 0, L0^g > 0,
  // L1^g > 0.
  absl::Status Validate() const;
};

enum class ProblemKind { kQuadratic, kQuadraticNonconvex, kLeakExample };

// Public parameters of a catalogue problem.
struct ProblemOptions {
  ProblemKind kind = ProblemKind::kQuadratic;
  // kQuadratic*: dx (0 = dy). dy is half the dataset dimension.
  int64_t outer_dimension = 0;
  // kQuadratic*: B row-major, dy x dx, spectral norm <= 1 (empty: B_jk = 1
  // if j == k else 0).
  std::vector<double> b_matrix;
  // kQuadratic*: rho_x >= 0 (default 0.1).
  double rho_x = 0.1;
  // Per-field overrides of the problem's default constants (0 = default).
  ProblemConstants constants;
};

class BilevelProblem {
 public:
  virtual ~BilevelProblem() = default;
  virtual std::string name() const = 0;
  virtual int64_t dx() const = 0;
  virtual int64_t dy() const = 0;
  // Declared constants (defaults, overridden by ProblemOptions::constants).
  virtual const ProblemConstants& constants() const = 0;

  // Called once per run before any per-example call, with the job's data
  // (lets a problem keep a contiguous per-row copy of dense rows; the copy
  // never leaves the job).
  virtual void AttachData(const Dataset& data) = 0;

  // Per-example parts (out is resized). REQUIRES: 0 <= i < data.rows(),
  // data.dimension() matches the problem, AttachData(data) was called.
  virtual void ExampleGradYG(const Dataset& data, int64_t i,
                             const Eigen::VectorXd& x, const Eigen::VectorXd& y,
                             Eigen::VectorXd& out) const = 0;
  virtual bool has_example_f() const = 0;
  virtual void ExampleGradYF(const Dataset& data, int64_t i,
                             const Eigen::VectorXd& x, const Eigen::VectorXd& y,
                             Eigen::VectorXd& out) const = 0;
  virtual bool has_example_outer() const = 0;
  virtual void ExampleOuter(const Dataset& data, int64_t i,
                            const Eigen::VectorXd& x,
                            const Eigen::VectorXd& y_lambda,
                            const Eigen::VectorXd& y, double lambda,
                            Eigen::VectorXd& out) const = 0;

  // Data-free parts (out +=).
  virtual void AddPublicGradYG(const Eigen::VectorXd& x,
                               const Eigen::VectorXd& y,
                               Eigen::Ref<Eigen::VectorXd> out) const = 0;
  virtual void AddPublicGradYF(const Eigen::VectorXd& x,
                               const Eigen::VectorXd& y,
                               Eigen::Ref<Eigen::VectorXd> out) const = 0;
  virtual void AddPublicOuter(const Eigen::VectorXd& x,
                              const Eigen::VectorXd& y_lambda,
                              const Eigen::VectorXd& y, double lambda,
                              Eigen::Ref<Eigen::VectorXd> out) const = 0;
};

// Builds the problem for a dataset of `row_dimension` features.
// Errors: INVALID_ARGUMENT (dimension does not fit the problem, bad B,
// rho_x, or constants).
absl::StatusOr<std::unique_ptr<BilevelProblem>> MakeProblem(
    const ProblemOptions& options, int64_t row_dimension);

// "quadratic", "quadratic_nonconvex", "leak_example".
std::string ProblemKindName(ProblemKind kind);

}  // namespace dpopt::optim::bilevel

#endif  // DPOPT_CORE_OPTIM_BILEVEL_BILEVEL_PROBLEM_H_
