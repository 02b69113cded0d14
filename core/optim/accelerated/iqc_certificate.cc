#include "core/optim/accelerated/iqc_certificate.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>

#include "Eigen/Dense"
#include "Eigen/Eigenvalues"

namespace dpopt::optim::accelerated {
namespace {

constexpr int kDim = 4;  // x = (P11, P12, P22, c0); c = 1.
using Vec = Eigen::Matrix<double, kDim, 1>;
using Mat = Eigen::Matrix<double, kDim, kDim>;

Eigen::Matrix2d PFromX(const Vec& x) {
  Eigen::Matrix2d p;
  p << x(0), x(1), x(1), x(2);
  return p;
}

// Projects x onto {P PSD, c0 >= 0} so that PSD holds exactly in the 2x2
// criterion P11 >= 0, P22 >= 0, P11 P22 >= P12^2 (no eigen round-off).
Vec Project(const Vec& x) {
  Vec y = x;
  Eigen::SelfAdjointEigenSolver<Eigen::Matrix2d> es(PFromX(x));
  if (es.eigenvalues()(0) < 0.0) {
    Eigen::Vector2d lam = es.eigenvalues().cwiseMax(0.0);
    Eigen::Matrix2d p =
        es.eigenvectors() * lam.asDiagonal() * es.eigenvectors().transpose();
    y(0) = p(0, 0);
    y(1) = 0.5 * (p(0, 1) + p(1, 0));
    y(2) = p(1, 1);
  }
  y(0) = std::max(y(0), 0.0);
  y(2) = std::max(y(2), 0.0);
  const double bound = std::sqrt(y(0) * y(2));
  if (std::abs(y(1)) > bound) y(1) = std::copysign(bound, y(1));
  while (y(1) * y(1) > y(0) * y(2)) y(1) = std::nextafter(y(1), 0.0);
  y(3) = std::max(y(3), 0.0);
  return y;
}

struct Evaluation {
  double value = 0.0;  // g(x)
  Vec subgradient = Vec::Zero();
  double max_eigenvalue = 0.0;  // lambda_max(M(x))
};

class Objective {
 public:
  Objective(const IqcProblem& problem, double rho)
      : m_(BuildIqcMatrices(problem)) {
    const Eigen::Matrix3d rest = m_.x1 + (1.0 - rho * rho) * m_.x2;
    constant_ = -rest;  // c = 1.
    Eigen::Matrix2d e;
    e << 1, 0, 0, 0;
    d_[0] = IqcPhi(m_, e, rho);
    e << 0, 1, 1, 0;
    d_[1] = IqcPhi(m_, e, rho);
    e << 0, 0, 0, 1;
    d_[2] = IqcPhi(m_, e, rho);
    d_[3] = -m_.x0;
  }

  // M(x) is affine: constant + sum_i x_i d_i.
  Eigen::Matrix3d Lmi(const Vec& x) const {
    Eigen::Matrix3d out = constant_;
    for (int i = 0; i < kDim; ++i) out += x(i) * d_[i];
    return out;
  }

  Evaluation Evaluate(const Vec& x) const {
    Evaluation ev;
    Eigen::SelfAdjointEigenSolver<Eigen::Matrix3d> es(Lmi(x));
    ev.max_eigenvalue = es.eigenvalues()(2);
    const Eigen::Vector3d v = es.eigenvectors().col(2);
    ev.value = ev.max_eigenvalue;
    for (int i = 0; i < kDim; ++i) ev.subgradient(i) = v.dot(d_[i] * v);

    Eigen::SelfAdjointEigenSolver<Eigen::Matrix2d> ps(PFromX(x));
    if (-ps.eigenvalues()(0) > ev.value) {
      const Eigen::Vector2d u = ps.eigenvectors().col(0);
      ev.value = -ps.eigenvalues()(0);
      ev.subgradient << -u(0) * u(0), -2.0 * u(0) * u(1), -u(1) * u(1), 0.0;
    }
    if (-x(3) > ev.value) {
      ev.value = -x(3);
      ev.subgradient << 0.0, 0.0, 0.0, -1.0;
    }
    return ev;
  }

 private:
  IqcMatrices m_;
  Eigen::Matrix3d constant_;
  Eigen::Matrix3d d_[kDim];
};

}  // namespace

IqcMatrices BuildIqcMatrices(const IqcProblem& pr) {
  IqcMatrices m;
  const double a = pr.alpha, be = pr.beta, mu = pr.mu, l = pr.L;
  // (3.10), with the sign of B chosen by pr.b_sign (the paper's sign is a
  // typo; iqc_certificate.h).
  m.a << 1.0 + be, -be, 1.0, 0.0;
  const double sign = pr.b_sign == IqcBSign::kMinusAlpha ? -1.0 : 1.0;
  m.b << sign * a, 0.0;
  m.c << 1.0, 0.0;
  // X0 (sector IQC; [e; g]^T X0 [e; g] <= 0 for F in S_{mu,L}), acting on
  // (x_t - x*, x_{t-1} - x*, grad).
  m.x0 << 2.0 * mu * l, 0.0, -(mu + l),  //
      0.0, 0.0, 0.0,                     //
      -(mu + l), 0.0, 2.0;
  // X1 (from L-smoothness, (B.7)-(B.8)).
  const double k = (1.0 - l * a) * be;
  m.x1 << -l * be * be, l * be * be, -k,  //
      l * be * be, -l * be * be, k,       //
      -k, k, a * (2.0 - l * a);
  m.x1 *= 0.5;
  // X2 (from strong convexity, (B.9)).
  m.x2 << mu, 0.0, -1.0,  //
      0.0, 0.0, 0.0,      //
      -1.0, 0.0, 0.0;
  m.x2 *= 0.5;
  return m;
}

Eigen::Matrix3d IqcPhi(const IqcMatrices& m, const Eigen::Matrix2d& p,
                       double rho) {
  Eigen::Matrix3d phi;
  phi.topLeftCorner<2, 2>() = m.a.transpose() * p * m.a - rho * rho * p;
  phi.topRightCorner<2, 1>() = m.a.transpose() * p * m.b;
  phi.bottomLeftCorner<1, 2>() = (m.a.transpose() * p * m.b).transpose();
  phi(2, 2) = m.b.dot(p * m.b);
  return phi;
}

Eigen::Matrix3d IqcLmiMatrix(const IqcProblem& problem, double rho,
                             const Eigen::Matrix2d& p, double c0, double c) {
  const IqcMatrices m = BuildIqcMatrices(problem);
  return IqcPhi(m, p, rho) - c0 * m.x0 - c * (m.x1 + (1.0 - rho * rho) * m.x2);
}

IqcSearchResult FindIqcCertificate(const IqcProblem& problem, double rho,
                                   const IqcSearchOptions& options) {
  const Objective objective(problem, rho);
  Vec x;
  x << 1.0, 0.0, 1.0, 1.0;
  Mat e = Mat::Identity() * options.box_radius * options.box_radius;
  Vec best_x = x;
  double best_value = std::numeric_limits<double>::infinity();
  const double n = kDim;
  int it = 0;
  for (; it < options.max_iterations; ++it) {
    const Evaluation ev = objective.Evaluate(x);
    if (ev.value < best_value) {
      best_value = ev.value;
      best_x = x;
    }
    if (ev.value <= -options.target_slack) break;
    // Central-cut ellipsoid step: the minimiser lies in {y : s^T (y - x)
    // <= 0} for a subgradient s of the convex g.
    const Vec eg = e * ev.subgradient;
    const double gamma = ev.subgradient.dot(eg);
    if (!(gamma > 0.0) || !std::isfinite(gamma)) break;  // Degenerate/optimal.
    const Vec step = eg / std::sqrt(gamma);
    x -= step / (n + 1.0);
    e = (n * n / (n * n - 1.0)) *
        (e - (2.0 / (n + 1.0)) * step * step.transpose());
    e = 0.5 * (e + e.transpose());
    if (e.trace() < 1e-30) break;  // Ellipsoid collapsed.
  }

  const Vec y = Project(best_x);
  IqcSearchResult result;
  result.iterations = it;
  result.best.rho = rho;
  result.best.p = PFromX(y);
  result.best.c0 = y(3);
  result.best.c = 1.0;
  Eigen::SelfAdjointEigenSolver<Eigen::Matrix3d> es(objective.Lmi(y));
  result.best.max_eigenvalue = es.eigenvalues()(2);
  result.found = result.best.max_eigenvalue <= options.tolerance;
  return result;
}

std::optional<double> SmallestCertifiedRhoOnGrid(
    const IqcProblem& problem, double rho_lo, double rho_hi, double step,
    const IqcSearchOptions& options) {
  for (int k = 0;; ++k) {
    const double rho = rho_lo + k * step;
    if (rho > rho_hi + 1e-12) break;
    if (FindIqcCertificate(problem, rho, options).found) return rho;
  }
  return std::nullopt;
}

}  // namespace dpopt::optim::accelerated
