// Small datasets and a LIBSVM reader for optimizer tests.
#ifndef DPOPT_TESTS_CORE_OPTIM_TEST_DATA_H_
#define DPOPT_TESTS_CORE_OPTIM_TEST_DATA_H_

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "Eigen/Dense"
#include "Eigen/SparseCore"
#include "absl/status/statusor.h"
#include "core/data/dataset.h"

namespace dpopt::optim::testing {

// Path of a file in the source tree (tests run with DPOPT_SOURCE_DIR set).
inline std::string SourcePath(const std::string& relative) {
  const char* root = std::getenv("DPOPT_SOURCE_DIR");
  return std::string(root != nullptr ? root : ".") + "/" + relative;
}

// Minimal LIBSVM reader for tests: "label idx:val ..." with 1-based indices;
// labels 0/1 map to -1/+1.
inline absl::StatusOr<Dataset> ReadLibsvm(const std::string& path,
                                          int64_t dimension) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError("cannot open " + path);
  std::vector<Eigen::Triplet<double, int64_t>> triplets;
  std::vector<double> labels;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    std::istringstream ls(line);
    double y;
    ls >> y;
    const int64_t row = static_cast<int64_t>(labels.size());
    labels.push_back(y > 0 ? 1.0 : -1.0);
    std::string tok;
    while (ls >> tok) {
      const size_t colon = tok.find(':');
      const int64_t idx = std::stoll(tok.substr(0, colon)) - 1;
      const double v = std::stod(tok.substr(colon + 1));
      if (idx < 0 || idx >= dimension) {
        return absl::InvalidArgumentError("index out of range");
      }
      triplets.emplace_back(row, idx, v);
    }
  }
  SparseRows x(static_cast<int64_t>(labels.size()), dimension);
  x.setFromTriplets(triplets.begin(), triplets.end());
  Eigen::VectorXd y = Eigen::Map<Eigen::VectorXd>(labels.data(), labels.size());
  return Dataset::Sparse(std::move(x), std::move(y), LabelKind::kBinary);
}

}  // namespace dpopt::optim::testing

#endif  // DPOPT_TESTS_CORE_OPTIM_TEST_DATA_H_
