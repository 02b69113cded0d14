// Test instances for piecewise-affine family (max-affine problems): a_ij,
// b_i ~ N(0, 1) from a fixed seed, on the cube [-c, c]^d (the setting of
// Han, Topcu & Pappas 2014, Sec. 5).
#ifndef DPOPT_TESTS_CORE_OPTIM_PIECEWISE_AFFINE_TEST_PROBLEMS_H_
#define DPOPT_TESTS_CORE_OPTIM_PIECEWISE_AFFINE_TEST_PROBLEMS_H_

#include <cstdint>
#include <random>
#include <vector>

#include "Eigen/Dense"
#include "core/data/dataset.h"
#include "core/optim/algorithm.h"
#include "core/optim/piecewise_affine/problem.h"

namespace dpopt::optim::piecewise_affine::testing {

struct Instance {
  Dataset data;
  ProblemInfo info;
  Eigen::MatrixXd a;
  Eigen::VectorXd b;
};

inline Polytope Cube(int64_t d, double c) {
  Polytope p;
  p.lower.assign(d, -c);
  p.upper.assign(d, c);
  return p;
}

inline Instance MakeInstance(const Eigen::MatrixXd& a, const Eigen::VectorXd& b,
                             const Polytope& p, double b_max = 1.0) {
  Instance in;
  in.a = a;
  in.b = b;
  in.data = Dataset::Dense(a, b, LabelKind::kReal);
  ProblemDeclaration decl;
  decl.b_max = b_max;
  decl.polytope = p;
  // Row-major slopes, as the importer hands them over.
  std::vector<double> slopes(a.rows() * a.cols());
  for (int64_t i = 0; i < a.rows(); ++i) {
    for (int64_t j = 0; j < a.cols(); ++j) slopes[i * a.cols() + j] = a(i, j);
  }
  auto info = DescribeProblem(decl, slopes.data(), a.rows(), a.cols());
  if (!info.ok()) std::abort();
  in.info = *info;
  return in;
}

inline Instance GaussianInstance(int64_t m, int64_t d, double c, uint64_t seed,
                                 double b_max = 1.0) {
  std::mt19937_64 gen(seed);
  std::normal_distribution<double> n01(0, 1);
  Eigen::MatrixXd a(m, d);
  Eigen::VectorXd b(m);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < d; ++j) a(i, j) = n01(gen);
    b[i] = n01(gen);
  }
  return MakeInstance(a, b, Cube(d, c), b_max);
}

inline PublicDatasetInfo PublicInfo(const Instance& in) {
  PublicDatasetInfo info;
  info.rows = in.info.pieces;
  info.dimension = in.info.dimension;
  info.label_kind = LabelKind::kReal;
  info.relation = privacy::Relation::kLinfOffsets;
  info.problem_json = in.info.ToJson();
  return info;
}

inline PrivacyTarget Pure(double epsilon) {
  PrivacyTarget t;
  t.epsilon = epsilon;
  return t;
}

}  // namespace dpopt::optim::piecewise_affine::testing

#endif  // DPOPT_TESTS_CORE_OPTIM_PIECEWISE_AFFINE_TEST_PROBLEMS_H_
