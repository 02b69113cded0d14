// Budget growth and step-size schedules of line-search family (Chen & Lee
// 2022; docs/algorithms/line_search.md): CHEB (the paper's Algorithm 3), the
// angle moving average (eq. (7)), the initial-step schedule ("intelligent
// backtracking", Sec. 4.2) and clipping adaptation (Sec. 4.4).
//
// Everything here is post-processing of released (noisy) vectors and steps:
// it reads no data and costs no privacy. Angles are in degrees.
#ifndef DPOPT_CORE_OPTIM_LINE_SEARCH_CHEB_H_
#define DPOPT_CORE_OPTIM_LINE_SEARCH_CHEB_H_

#include <vector>

#include "Eigen/Dense"
#include "absl/status/status.h"

namespace dpopt::optim::line_search {

// angle(a, b) = arccos(a.b / (|a||b|)) in degrees, in [0, 180]; 90 if either
// vector is zero (the paper leaves this case open; 90 means "no change").
double AngleDegrees(const Eigen::VectorXd& a, const Eigen::VectorXd& b);

struct ChebOptions {
  double growth = 0.3;   // xi > 0: budgets grow by (1 + xi)
  double phi_max = 1.1;  // theta_max = phi_max * theta_bar (eq. 8)
  double phi_min = 0.5;  // theta_min = phi_min * theta_bar; < phi_max
  absl::Status Validate() const;
};

enum class ChebBranch { kRaiseGradient, kRaiseLineSearch, kNoChange };

struct ChebOutcome {
  ChebBranch branch = ChebBranch::kNoChange;
  double angle = 90;  // theta between the two noisy gradients
};

// Alg. 3 lines 5-11: decides the branch from g (current direction) and
// g2 (the second noisy gradient), multiplies *rho_grad or *eps_bt by
// (1 + xi) accordingly, and replaces *g by (g + g2) / 2 in every case.
// REQUIRES: g->size() == g2.size(); options valid.
ChebOutcome Cheb(const Eigen::VectorXd& g2, double theta_bar,
                 const ChebOptions& options, Eigen::VectorXd* g,
                 double* rho_grad, double* eps_bt);

// Eq. (7): theta_bar starts at 90 degrees; the first successful update
// only records its direction; later ones set
// theta_bar <- psi theta_bar + (1 - psi) angle(g, g_prev).
class AngleAverage {
 public:
  explicit AngleAverage(double psi = 0.8) : psi_(psi) {}
  double value() const { return theta_bar_; }
  // Call with the direction actually used by a successful step.
  void OnSuccessfulStep(const Eigen::VectorXd& g);

 private:
  double psi_;
  double theta_bar_ = 90;
  bool has_prev_ = false;
  Eigen::VectorXd prev_;
};

// Intelligent backtracking (Sec. 4.2): every tau outer iterations, if steps
// were selected, eta0 <- min(varsigma * max(selected), eta0_initial); then
// forget them. The cap is the INITIAL eta0: the paper's min(varsigma max,
// eta0) is ambiguous, and capping at the current eta0 would make eta0
// non-increasing, unable to recover.
class InitialStepSchedule {
 public:
  InitialStepSchedule(double eta0_initial, int tau = 10, double varsigma = 1.2)
      : eta0_initial_(eta0_initial),
        eta0_(eta0_initial),
        tau_(tau),
        varsigma_(varsigma) {}
  double eta0() const { return eta0_; }
  // A step eta > 0 was selected.
  void RecordStep(double eta) { selected_.push_back(eta); }
  // Outer iteration t (0-based) has ended.
  void EndIteration(long long t);

 private:
  double eta0_initial_;
  double eta0_;
  int tau_;
  double varsigma_;
  std::vector<double> selected_;
};

// Clipping adaptation (Sec. 4.4, DP-BLSGD-AC): at most one decay per outer
// iteration, only if CHEB raised rho_grad in it; C <- (1 - zeta) C, floored
// at floor_fraction * C0 (the paper has no floor).
class ClipAdaptation {
 public:
  ClipAdaptation(double clip_grad, double clip_obj, double zeta = 0.05,
                 double floor_fraction = 1e-3)
      : c_grad0_(clip_grad),
        c_obj0_(clip_obj),
        c_grad_(clip_grad),
        c_obj_(clip_obj),
        zeta_(zeta),
        floor_(floor_fraction) {}
  double clip_grad() const { return c_grad_; }
  double clip_obj() const { return c_obj_; }
  void BeginIteration() { decayed_ = false; }
  // CHEB took the rho-increase branch. Returns true if a decay happened.
  bool OnGradientBudgetRaised();

 private:
  double c_grad0_, c_obj0_, c_grad_, c_obj_, zeta_, floor_;
  bool decayed_ = false;
};

}  // namespace dpopt::optim::line_search

#endif  // DPOPT_CORE_OPTIM_LINE_SEARCH_CHEB_H_
