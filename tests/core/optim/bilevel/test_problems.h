// Test data for the bilevel unit tests: family Q rows (u_i, v_i) in the
// unit ball and Example 3.1 rows (r_leak_test.cc).
#ifndef DPOPT_TESTS_CORE_OPTIM_BILEVEL_TEST_PROBLEMS_H_
#define DPOPT_TESTS_CORE_OPTIM_BILEVEL_TEST_PROBLEMS_H_

#include <cmath>
#include <cstdint>
#include <random>

#include "Eigen/Dense"
#include "core/data/dataset.h"

namespace dpopt::optim::bilevel::testing {

// A uniform point of the unit ball in R^d.
inline Eigen::VectorXd UnitBallPoint(std::mt19937_64& gen, int64_t d) {
  std::normal_distribution<double> normal(0, 1);
  std::uniform_real_distribution<double> unif(0, 1);
  Eigen::VectorXd v(d);
  for (int64_t j = 0; j < d; ++j) v[j] = normal(gen);
  return v * (std::pow(unif(gen), 1.0 / d) / v.norm());
}

// Rows (u_i, v_i), each in the unit ball of R^dy; real labels (unused).
inline Dataset QuadraticData(int64_t n, int64_t dy, uint64_t seed) {
  std::mt19937_64 gen(seed);
  Eigen::MatrixXd x(n, 2 * dy);
  for (int64_t i = 0; i < n; ++i) {
    x.row(i).head(dy) = UnitBallPoint(gen, dy).transpose();
    x.row(i).tail(dy) = UnitBallPoint(gen, dy).transpose();
  }
  return Dataset::Dense(std::move(x), Eigen::VectorXd::Zero(n),
                        LabelKind::kReal);
}

// Example 3.1 (R-LEAK): xi_i uniform in the unit ball, xi_n = `last`.
inline Dataset LeakData(int64_t n, const Eigen::VectorXd& last, uint64_t seed) {
  std::mt19937_64 gen(seed);
  const int64_t d = last.size();
  Eigen::MatrixXd x(n, d);
  for (int64_t i = 0; i + 1 < n; ++i) {
    x.row(i) = UnitBallPoint(gen, d).transpose();
  }
  x.row(n - 1) = last.transpose();
  return Dataset::Dense(std::move(x), Eigen::VectorXd::Zero(n),
                        LabelKind::kReal);
}

// Column means of a dense dataset (test oracle only).
inline Eigen::VectorXd ColumnMean(const Dataset& data, int64_t begin,
                                  int64_t size) {
  return data.dense().middleCols(begin, size).colwise().mean().transpose();
}

}  // namespace dpopt::optim::bilevel::testing

#endif  // DPOPT_TESTS_CORE_OPTIM_BILEVEL_TEST_PROBLEMS_H_
