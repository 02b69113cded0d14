#include "core/optim/bilevel/bilevel_problem.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/common/status_macros.h"

namespace dpopt::optim::bilevel {
namespace {

// Dense rows as contiguous columns of a copy (written when the dataset was
// stored column-major; it is row-major now, Dataset::dense_row gives the
// same contiguous access without this copy).
class RowCache {
 public:
  void Attach(const Dataset& data) {
    if (!data.is_sparse()) columns_ = data.dense().transpose();
  }
  // out <- x_i restricted to [begin, begin + size).
  void Slice(const Dataset& data, int64_t i, int64_t begin, int64_t size,
             Eigen::VectorXd& out) const {
    out.resize(size);
    if (!data.is_sparse()) {
      if (columns_.cols() == data.rows()) {
        out = columns_.col(i).segment(begin, size);
      } else {
        out = data.dense().row(i).segment(begin, size).transpose();
      }
      return;
    }
    out.setZero();
    for (SparseRows::InnerIterator it(data.sparse(), i); it; ++it) {
      const int64_t j = it.col() - begin;
      if (j >= 0 && j < size) out[j] = it.value();
    }
  }

 private:
  Eigen::MatrixXd columns_;
};

// Fills the zero fields of `overrides` from `defaults`.
ProblemConstants Merge(const ProblemConstants& defaults,
                       const ProblemConstants& overrides) {
  auto pick = [](double o, double d) { return o != 0 ? o : d; };
  ProblemConstants c;
  c.lipschitz_f = pick(overrides.lipschitz_f, defaults.lipschitz_f);
  c.smoothness_f = pick(overrides.smoothness_f, defaults.smoothness_f);
  c.lipschitz_g = pick(overrides.lipschitz_g, defaults.lipschitz_g);
  c.smoothness_g = pick(overrides.smoothness_g, defaults.smoothness_g);
  c.hessian_lipschitz_g =
      pick(overrides.hessian_lipschitz_g, defaults.hessian_lipschitz_g);
  c.strong_convexity_g =
      pick(overrides.strong_convexity_g, defaults.strong_convexity_g);
  return c;
}

// The quadratic family and its nonconvex variant.
class QuadraticProblem final : public BilevelProblem {
 public:
  QuadraticProblem(Eigen::MatrixXd b, double rho_x, bool nonconvex,
                   ProblemConstants constants)
      : b_(std::move(b)),
        rho_x_(rho_x),
        nonconvex_(nonconvex),
        constants_(constants) {}

  std::string name() const override {
    return nonconvex_ ? "quadratic_nonconvex" : "quadratic";
  }
  int64_t dx() const override { return b_.cols(); }
  int64_t dy() const override { return b_.rows(); }
  const ProblemConstants& constants() const override { return constants_; }

  void AttachData(const Dataset& data) override { rows_.Attach(data); }
  void ExampleGradYG(const Dataset& data, int64_t i, const Eigen::VectorXd& x,
                     const Eigen::VectorXd& y,
                     Eigen::VectorXd& out) const override {
    // B x is the same for every record of a release: computed once.
    if (cached_x_.size() != x.size() || cached_x_ != x) {
      cached_x_ = x;
      cached_bx_ = b_ * x;
    }
    rows_.Slice(data, i, 0, dy(), out);  // u_i
    out = y - cached_bx_ - out;
  }
  bool has_example_f() const override { return true; }
  void ExampleGradYF(const Dataset& data, int64_t i, const Eigen::VectorXd& x,
                     const Eigen::VectorXd& y,
                     Eigen::VectorXd& out) const override {
    rows_.Slice(data, i, dy(), dy(), out);  // v_i
    out = y - out;
    if (nonconvex_) {
      // phi'(s) = 2 s / (1 + s^2)^2, computed without overflow.
      for (Eigen::Index k = 0; k < out.size(); ++k) {
        const double s = out[k];
        const double a = std::abs(s);
        out[k] = a > 1e100 ? 0.0 : 2 * s / ((1 + s * s) * (1 + s * s));
      }
    }
  }
  // grad_x f_i = rho_x x (public); grad_x g_i(x, y_lam) - grad_x g_i(x, y) =
  // -B^T (y_lam - y) (no data): the outer vector has no per-example part.
  bool has_example_outer() const override { return false; }
  void ExampleOuter(const Dataset&, int64_t, const Eigen::VectorXd&,
                    const Eigen::VectorXd&, const Eigen::VectorXd&, double,
                    Eigen::VectorXd& out) const override {
    out = Eigen::VectorXd::Zero(dx());
  }
  void AddPublicGradYG(const Eigen::VectorXd&, const Eigen::VectorXd&,
                       Eigen::Ref<Eigen::VectorXd>) const override {}
  void AddPublicGradYF(const Eigen::VectorXd&, const Eigen::VectorXd&,
                       Eigen::Ref<Eigen::VectorXd>) const override {}
  void AddPublicOuter(const Eigen::VectorXd& x, const Eigen::VectorXd& y_lambda,
                      const Eigen::VectorXd& y, double lambda,
                      Eigen::Ref<Eigen::VectorXd> out) const override {
    out += rho_x_ * x - lambda * (b_.transpose() * (y_lambda - y));
  }

 private:
  const Eigen::MatrixXd b_;
  const double rho_x_;
  const bool nonconvex_;
  const ProblemConstants constants_;
  RowCache rows_;
  mutable Eigen::VectorXd cached_x_;
  mutable Eigen::VectorXd cached_bx_;
};

// Example 3.1 of Kornowski 2024.
class LeakExample final : public BilevelProblem {
 public:
  LeakExample(int64_t d, ProblemConstants constants)
      : d_(d), constants_(constants) {}
  std::string name() const override { return "leak_example"; }
  int64_t dx() const override { return d_; }
  int64_t dy() const override { return d_; }
  const ProblemConstants& constants() const override { return constants_; }

  void AttachData(const Dataset& data) override { rows_.Attach(data); }
  void ExampleGradYG(const Dataset& data, int64_t i, const Eigen::VectorXd&,
                     const Eigen::VectorXd& y,
                     Eigen::VectorXd& out) const override {
    rows_.Slice(data, i, 0, d_, out);
    out = y - out;
  }
  bool has_example_f() const override { return false; }
  void ExampleGradYF(const Dataset&, int64_t, const Eigen::VectorXd&,
                     const Eigen::VectorXd&,
                     Eigen::VectorXd& out) const override {
    out = Eigen::VectorXd::Zero(d_);
  }
  bool has_example_outer() const override { return false; }
  void ExampleOuter(const Dataset&, int64_t, const Eigen::VectorXd&,
                    const Eigen::VectorXd&, const Eigen::VectorXd&, double,
                    Eigen::VectorXd& out) const override {
    out = Eigen::VectorXd::Zero(d_);
  }
  void AddPublicGradYG(const Eigen::VectorXd&, const Eigen::VectorXd&,
                       Eigen::Ref<Eigen::VectorXd>) const override {}
  // grad_y f = x + y.
  void AddPublicGradYF(const Eigen::VectorXd& x, const Eigen::VectorXd& y,
                       Eigen::Ref<Eigen::VectorXd> out) const override {
    out += x + y;
  }
  // grad_x f(x, y_lam) = x + y_lam; grad_x g_i = 0.
  void AddPublicOuter(const Eigen::VectorXd& x, const Eigen::VectorXd& y_lambda,
                      const Eigen::VectorXd&, double,
                      Eigen::Ref<Eigen::VectorXd> out) const override {
    out += x + y_lambda;
  }

 private:
  const int64_t d_;
  const ProblemConstants constants_;
  RowCache rows_;
};

}  // namespace

double ProblemConstants::ell() const {
  return std::max({lipschitz_f, smoothness_f, lipschitz_g, smoothness_g,
                   hessian_lipschitz_g});
}

double ProblemConstants::kappa() const { return ell() / strong_convexity_g; }

absl::Status ProblemConstants::Validate() const {
  for (double v : {lipschitz_f, smoothness_f, lipschitz_g, smoothness_g,
                   hessian_lipschitz_g, strong_convexity_g}) {
    if (!std::isfinite(v) || v < 0 || v > 1e12) {
      return absl::InvalidArgumentError(
          "problem constants must be finite, >= 0 and <= 1e12");
    }
  }
  if (!(strong_convexity_g > 0 && lipschitz_g > 0 && smoothness_g > 0)) {
    return absl::InvalidArgumentError(
        "problem constants: mu_g, L0^g and L1^g must be > 0");
  }
  if (strong_convexity_g > smoothness_g) {
    return absl::InvalidArgumentError(
        "problem constants: mu_g must not exceed L1^g");
  }
  return absl::OkStatus();
}

std::string ProblemKindName(ProblemKind kind) {
  switch (kind) {
    case ProblemKind::kQuadratic:
      return "quadratic";
    case ProblemKind::kQuadraticNonconvex:
      return "quadratic_nonconvex";
    case ProblemKind::kLeakExample:
      return "leak_example";
  }
  return "unknown";
}

absl::StatusOr<std::unique_ptr<BilevelProblem>> MakeProblem(
    const ProblemOptions& options, int64_t row_dimension) {
  if (row_dimension < 1 || row_dimension > 100'000) {
    return absl::InvalidArgumentError(
        "bilevel problems support datasets of 1 to 100000 features");
  }
  std::unique_ptr<BilevelProblem> problem;
  switch (options.kind) {
    case ProblemKind::kQuadratic:
    case ProblemKind::kQuadraticNonconvex: {
      if (row_dimension % 2 != 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            "problem ", ProblemKindName(options.kind),
            " reads rows (u_i, v_i) of 2 dy features; the dataset has ",
            row_dimension));
      }
      const int64_t dy = row_dimension / 2;
      const int64_t dx =
          options.outer_dimension > 0 ? options.outer_dimension : dy;
      if (dx > 10'000) {
        return absl::InvalidArgumentError("outer dimension must be <= 10000");
      }
      if (!options.b_matrix.empty() && dx * dy > 1'000'000) {
        return absl::InvalidArgumentError(
            "an explicit b_matrix is limited to dy * dx <= 10^6 entries");
      }
      Eigen::MatrixXd b = Eigen::MatrixXd::Zero(dy, dx);
      if (options.b_matrix.empty()) {
        for (int64_t j = 0; j < std::min(dx, dy); ++j) b(j, j) = 1;
      } else {
        if (static_cast<int64_t>(options.b_matrix.size()) != dx * dy) {
          return absl::InvalidArgumentError(
              absl::StrCat("b_matrix must have dy * dx = ", dy * dx,
                           " entries (row-major)"));
        }
        for (int64_t j = 0; j < dy; ++j) {
          for (int64_t k = 0; k < dx; ++k) {
            const double v = options.b_matrix[j * dx + k];
            if (!std::isfinite(v)) {
              return absl::InvalidArgumentError("b_matrix must be finite");
            }
            b(j, k) = v;
          }
        }
      }
      // The default B has spectral norm 1; an explicit one is checked.
      const double b_norm =
          options.b_matrix.empty()
              ? 1.0
              : Eigen::JacobiSVD<Eigen::MatrixXd>(b).singularValues()(0);
      if (b_norm > 1 + 1e-9) {
        return absl::InvalidArgumentError(absl::StrCat(
            "b_matrix must have spectral norm <= 1 (has ", b_norm, ")"));
      }
      if (!std::isfinite(options.rho_x) || options.rho_x < 0 ||
          options.rho_x > 1e6) {
        return absl::InvalidArgumentError("rho_x must be in [0, 1e6]");
      }
      const bool nonconvex = options.kind == ProblemKind::kQuadraticNonconvex;
      ProblemConstants defaults;
      // ||u_i||, ||v_i|| <= 1: over Y = {B x + u_bar},
      // ||grad_y g_i|| = ||u_bar - u_i|| <= 2.
      defaults.lipschitz_g = 2;
      defaults.smoothness_g = 1 + b_norm * b_norm;
      defaults.hessian_lipschitz_g = 0;
      defaults.strong_convexity_g = 1;
      // Convex: grad_y f_i = y - v_i, bounded by 2 near Y for ||x|| small;
      // nonconvex: |phi'| <= 3 sqrt(3) / 8 per coordinate, phi'' <= 2.
      defaults.lipschitz_f =
          nonconvex ? 0.65 * std::sqrt(static_cast<double>(dy)) : 2;
      defaults.smoothness_f = std::max(nonconvex ? 2.0 : 1.0, options.rho_x);
      const ProblemConstants c = Merge(defaults, options.constants);
      RETURN_IF_ERROR(c.Validate());
      problem = std::make_unique<QuadraticProblem>(std::move(b), options.rho_x,
                                                   nonconvex, c);
      break;
    }
    case ProblemKind::kLeakExample: {
      // The leak regression setting: over Y = B(0, 1).
      ProblemConstants defaults;
      defaults.lipschitz_g = 2;
      defaults.smoothness_g = 1;
      defaults.hessian_lipschitz_g = 0;
      defaults.strong_convexity_g = 1;
      defaults.smoothness_f = 2;
      defaults.lipschitz_f = 2 * std::sqrt(2.0);
      const ProblemConstants c = Merge(defaults, options.constants);
      RETURN_IF_ERROR(c.Validate());
      problem = std::make_unique<LeakExample>(row_dimension, c);
      break;
    }
  }
  if (problem == nullptr) {
    return absl::InvalidArgumentError("unknown bilevel problem");
  }
  return problem;
}

}  // namespace dpopt::optim::bilevel
