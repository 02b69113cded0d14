// Accelerated (Kuru et al. 2022), Proposition 3.4: a small NUMERICAL
// feasibility checker for the 3x3 IQC / dissipativity LMI (3.14) of DP-SHB.
//
// LMI (3.14), Kronecker factor I_d dropped: find P (2x2,
// symmetric, PSD) and c0, c >= 0 with
//
//   c0 X0 + c [X1 + (1 - rho^2) X2]  ⪰  Phi(A, B, P, rho),
//   Phi = [[A^T P A - rho^2 P, A^T P B], [B^T P A, B^T P B]],
//
// A, B, C as in (3.10) and X0, X1, X2 as printed under (3.14). The paper
// prints B = [alpha; 0]; the dynamics (3.8)/(B.5) need B = [-alpha; 0] (a
// sign typo in the paper), which is the default here. B = [+alpha; 0] is
// offered only to show that with the printed sign only the trivial P = 0
// certificate exists.
//
// The LMI is homogeneous in (P, c0, c). A certificate is only useful for the
// bound (3.15) when c > 0 (it divides by c), so c = 1 is fixed and the search
// is over x = (P11, P12, P22, c0). The map x -> M(x) = Phi - c0 X0 -
// c [X1 + (1 - rho^2) X2] is affine, so
//
//   g(x) = max(lambda_max(M(x)), -lambda_min(P), -c0)
//
// is convex and (3.14) holds at x iff g(x) <= 0. g is minimised by a
// deterministic central-cut ellipsoid method (subgradients from the
// eigenvectors of Eigen's SelfAdjointEigenSolver) started from a ball of
// radius `box_radius`.
//
// THIS IS A NUMERICAL SEARCH, NOT AN SDP SOLVER. A returned certificate is
// checkable (and the tests re-check it independently); "not found" only means
// no certificate was found inside the search ball within the iteration
// budget and tolerance. It is NOT a proof of infeasibility. (Lower bounds on
// the certifiable rate need an argument; see the test for rho < 0.5 on GD.)
#ifndef DPOPT_CORE_OPTIM_ACCELERATED_IQC_CERTIFICATE_H_
#define DPOPT_CORE_OPTIM_ACCELERATED_IQC_CERTIFICATE_H_

#include <optional>

#include "Eigen/Dense"

namespace dpopt::optim::accelerated {

// Sign of B = [sign * alpha; 0] in (3.10).
enum class IqcBSign {
  kMinusAlpha,  // B = [-alpha; 0]: matches (3.8) and (B.5).
  kPlusAlpha,   // B = [+alpha; 0]: as printed in the paper (a typo).
};

// Constant-parameter heavy ball x+ = (1+beta) x - beta x- - alpha grad, on
// F in S_{mu,L}. beta = 0 is gradient descent.
struct IqcProblem {
  double alpha = 0.0;
  double beta = 0.0;
  double mu = 0.0;
  double L = 0.0;
  IqcBSign b_sign = IqcBSign::kMinusAlpha;
};

// The matrices of (3.10) and (3.14) (3x3 reduced form; the "2 I_d" of X0 is
// the scalar 2).
struct IqcMatrices {
  Eigen::Matrix2d a;
  Eigen::Vector2d b;
  Eigen::RowVector2d c;
  Eigen::Matrix3d x0;
  Eigen::Matrix3d x1;
  Eigen::Matrix3d x2;
};
IqcMatrices BuildIqcMatrices(const IqcProblem& problem);

// Phi(A, B, P, rho) of (3.14).
Eigen::Matrix3d IqcPhi(const IqcMatrices& m, const Eigen::Matrix2d& p,
                       double rho);

// M = Phi - c0 X0 - c [X1 + (1 - rho^2) X2]; (3.14) holds iff M ⪯ 0.
Eigen::Matrix3d IqcLmiMatrix(const IqcProblem& problem, double rho,
                             const Eigen::Matrix2d& p, double c0, double c);

struct IqcCertificate {
  double rho = 0.0;
  Eigen::Matrix2d p = Eigen::Matrix2d::Zero();  // PSD (exactly: P11, P22 >=
                                                // 0 and P11 P22 >= P12^2).
  double c0 = 0.0;                              // >= 0
  double c = 1.0;                               // normalisation
  double max_eigenvalue = 0.0;                  // lambda_max of IqcLmiMatrix
};

struct IqcSearchOptions {
  // Radius of the initial ball around (P11, P12, P22, c0) = (1, 0, 1, 1).
  double box_radius = 1.0e3;
  int max_iterations = 4000;
  // Stop early once g(x) <= -target_slack (a strictly feasible point).
  double target_slack = 1.0e-8;
  // After projecting the best point onto {P PSD, c0 >= 0}, a certificate is
  // reported iff lambda_max(M) <= tolerance.
  double tolerance = 1.0e-9;
};

struct IqcSearchResult {
  bool found = false;
  // The best point (after projection onto P PSD, c0 >= 0), whether or not it
  // meets the tolerance.
  IqcCertificate best;
  int iterations = 0;
};

// Searches for a certificate of (3.14) at the given rho (see file comment).
IqcSearchResult FindIqcCertificate(const IqcProblem& problem, double rho,
                                   const IqcSearchOptions& options = {});

// The smallest rho = rho_lo + k * step (k = 0, 1, ...) in [rho_lo, rho_hi]
// at which FindIqcCertificate finds a certificate; nullopt if none. A scan,
// not a bisection: feasibility need not be monotone in rho, because the
// (1 - rho^2) X2 term is indefinite. Same caveat as above: a numerical
// upper bound on the best certifiable rate, not a proof of optimality.
std::optional<double> SmallestCertifiedRhoOnGrid(
    const IqcProblem& problem, double rho_lo, double rho_hi, double step,
    const IqcSearchOptions& options = {});

}  // namespace dpopt::optim::accelerated

#endif  // DPOPT_CORE_OPTIM_ACCELERATED_IQC_CERTIFICATE_H_
