#include "server/synthetic_dataset.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/common/status_macros.h"
#include "core/optim/piecewise_affine/problem.h"

namespace dpopt::server {
namespace {

// Probability that a label is replaced by a uniformly drawn one.
constexpr double kLabelFlip = 0.1;
// Standard deviation of the noise on real labels.
constexpr double kRealLabelNoise = 0.1;

// N(0, 1) by Box-Muller (synthetic values, not privacy noise).
double Normal(noise::RandomSource& rng) {
  const double u1 = 1.0 - rng.UniformDouble();  // (0, 1]
  const double u2 = rng.UniformDouble();
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
}

double Uniform(noise::RandomSource& rng, double lo, double hi) {
  return lo + (hi - lo) * rng.UniformDouble();
}

absl::Status CheckSchema(const SyntheticSchema& s) {
  if (s.rows <= 0 || s.dimension <= 0 ||
      s.dimension > storage::ImportOptions::kMaxDimension) {
    return absl::InvalidArgumentError("synthetic dataset: bad shape");
  }
  if (s.bounds.has_feature_bounds() &&
      (static_cast<int64_t>(s.bounds.lower.size()) != s.dimension ||
       s.bounds.upper.size() != s.bounds.lower.size())) {
    return absl::InvalidArgumentError("synthetic dataset: bad feature bounds");
  }
  if (s.label_kind == LabelKind::kMulticlass && s.num_classes < 2) {
    return absl::InvalidArgumentError("synthetic dataset: bad class count");
  }
  return absl::OkStatus();
}

}  // namespace

SyntheticSchema SyntheticSchema::Of(const storage::DatasetRecord& r) {
  SyntheticSchema s;
  s.rows = r.rows;
  s.dimension = r.dimension;
  s.sparse = r.sparse;
  s.label_kind = r.label_kind;
  s.num_classes = r.num_classes;
  s.bounds = r.bounds;
  s.problem_json = r.problem_json;
  return s;
}

int64_t SyntheticDataset::SparseRowNonzeros(int64_t d) {
  const auto k = static_cast<int64_t>(std::ceil(std::sqrt(double(d))));
  return std::clamp<int64_t>(k, 1, d);
}

absl::StatusOr<Dataset> SyntheticDataset::Generate(const SyntheticSchema& s,
                                                   noise::RandomSource& rng) {
  RETURN_IF_ERROR(CheckSchema(s));
  if (!s.problem_json.empty()) {
    return absl::InvalidArgumentError(
        "synthetic dataset: a max-affine problem needs its public slopes");
  }
  const int64_t n = s.rows;
  const int64_t d = s.dimension;
  const int64_t k = s.sparse ? SparseRowNonzeros(d) : d;
  const int outputs =
      s.label_kind == LabelKind::kMulticlass ? s.num_classes : 1;
  // The teacher: one N(0, I) vector per output.
  Eigen::MatrixXd teacher(outputs, d);
  for (int c = 0; c < outputs; ++c) {
    for (int64_t j = 0; j < d; ++j) teacher(c, j) = Normal(rng);
  }
  const double scale = 1.0 / std::sqrt(static_cast<double>(k));
  const std::optional<double> norm_bound = s.bounds.row_norm_bound;

  SparseRows sparse;
  Eigen::MatrixXd dense;
  if (s.sparse) {
    sparse.resize(n, d);
    sparse.resizeNonZeros(n * k);
    sparse.outerIndexPtr()[0] = 0;
  } else {
    dense.resize(n, d);
  }
  Eigen::VectorXd labels(n);
  std::vector<int64_t> cols(k);
  std::vector<char> taken(s.sparse ? d : 0, 0);
  Eigen::VectorXd vals(k);
  Eigen::VectorXd scores(outputs);
  for (int64_t i = 0; i < n; ++i) {
    // Columns: all of them (dense), or k distinct ones drawn uniformly
    // (Floyd's algorithm), sorted.
    if (s.sparse) {
      int64_t m = 0;
      for (int64_t j = d - k; j < d; ++j) {
        const auto t = static_cast<int64_t>(rng.UniformInt(j + 1));
        const int64_t pick = taken[t] ? j : t;
        taken[pick] = 1;
        cols[m++] = pick;
      }
      for (int64_t c : cols) taken[c] = 0;
      std::sort(cols.begin(), cols.end());
    } else {
      for (int64_t j = 0; j < d; ++j) cols[j] = j;
    }
    for (int64_t m = 0; m < k; ++m) {
      const int64_t j = cols[m];
      vals[m] = s.bounds.has_feature_bounds()
                    ? Uniform(rng, s.bounds.lower[j], s.bounds.upper[j])
                    : scale * Normal(rng);
    }
    if (norm_bound.has_value()) {
      const double norm = vals.norm();
      // Strictly inside: the bound is checked exactly at import.
      const double limit = *norm_bound * (1 - 1e-12);
      if (norm > limit && norm > 0) vals *= limit / norm;
    }
    scores.setZero();
    for (int64_t m = 0; m < k; ++m) {
      scores += teacher.col(cols[m]) * vals[m];
    }
    double label = 0;
    switch (s.label_kind) {
      case LabelKind::kBinary:
        label = scores[0] >= 0 ? 1.0 : -1.0;
        if (rng.Bernoulli(kLabelFlip)) label = rng.Bernoulli(0.5) ? 1.0 : -1.0;
        break;
      case LabelKind::kMulticlass: {
        Eigen::Index best = 0;
        scores.maxCoeff(&best);
        label = static_cast<double>(best);
        if (rng.Bernoulli(kLabelFlip)) {
          label = static_cast<double>(rng.UniformInt(s.num_classes));
        }
        break;
      }
      case LabelKind::kReal:
        label = scores[0] + kRealLabelNoise * Normal(rng);
        break;
    }
    labels[i] = label;
    if (s.sparse) {
      const int64_t base = i * k;
      for (int64_t m = 0; m < k; ++m) {
        sparse.innerIndexPtr()[base + m] = cols[m];
        sparse.valuePtr()[base + m] = vals[m];
      }
      sparse.outerIndexPtr()[i + 1] = base + k;
    } else {
      dense.row(i) = vals.transpose();
    }
  }
  RETURN_IF_ERROR(rng.status());
  Dataset data = s.sparse
                     ? Dataset::Sparse(std::move(sparse), std::move(labels),
                                       s.label_kind, s.num_classes)
                     : Dataset::Dense(std::move(dense), std::move(labels),
                                      s.label_kind, s.num_classes);
  RETURN_IF_ERROR(data.Validate());
  return data;
}

absl::Status CheckDummyFits(const storage::DatasetRecord& dataset,
                            const storage::DatasetRecord& dummy,
                            bool check_pieces) {
  const auto refuse = [&](absl::string_view what) {
    return absl::FailedPreconditionError(
        absl::StrCat("dummy dataset ", dummy.name, " does not fit dataset ",
                     dataset.name, ": ", what));
  };
  if (!dummy.is_public) return refuse("a dummy must be public");
  if (dataset.is_public) return refuse("only private datasets have dummies");
  // A CSV dummy's dimension is inferred from its file: known (and checked)
  // once parsed, and again at every dry run.
  if ((check_pieces || dummy.dimension != 0) &&
      dummy.dimension != dataset.dimension) {
    return refuse(absl::StrCat("dimension ", dummy.dimension, " instead of ",
                               dataset.dimension));
  }
  if (dummy.label_kind != dataset.label_kind ||
      (dataset.label_kind == LabelKind::kMulticlass &&
       dummy.num_classes != dataset.num_classes)) {
    return refuse("its labels are of another type (or class count)");
  }
  if (dummy.problem_json.empty() != dataset.problem_json.empty()) {
    return refuse(dataset.problem_json.empty()
                      ? "it is a max-affine problem, the dataset is not"
                      : "the dataset is a max-affine problem, it is not");
  }
  if (check_pieces && !dataset.problem_json.empty() &&
      dummy.rows != dataset.rows) {
    return refuse(
        absl::StrCat(dummy.rows, " pieces instead of ", dataset.rows));
  }
  // A dry run is calibrated and bounded (work, trace) on the dataset's
  // public row count: its dummy may not have more rows.
  if (check_pieces && dummy.rows > dataset.rows) {
    return refuse(absl::StrCat(dummy.rows, " rows, more than the dataset's ",
                               dataset.rows));
  }
  return absl::OkStatus();
}

absl::StatusOr<Dataset> SyntheticDataset::GenerateMaxAffine(
    const SyntheticSchema& s, Eigen::MatrixXd slopes,
    noise::RandomSource& rng) {
  namespace pa = optim::piecewise_affine;
  RETURN_IF_ERROR(CheckSchema(s));
  ASSIGN_OR_RETURN(pa::ProblemInfo info,
                   pa::ProblemInfo::FromJson(s.problem_json));
  if (slopes.rows() != s.rows || slopes.cols() != s.dimension ||
      info.pieces != s.rows || info.dimension != s.dimension) {
    return absl::InvalidArgumentError(
        "synthetic dataset: the slopes do not match the problem");
  }
  const double cap = pa::kMaxOffsetRatio * info.b_max;
  const double spread = std::min(
      cap,
      std::max(info.b_max, info.slope_norm_bound * pa::MaxPointNorm(info)));
  Eigen::VectorXd offsets(s.rows);
  for (int64_t i = 0; i < s.rows; ++i) {
    offsets[i] = Uniform(rng, -spread, spread);
  }
  RETURN_IF_ERROR(rng.status());
  Dataset data = Dataset::Dense(std::move(slopes), std::move(offsets),
                                LabelKind::kReal, 0);
  RETURN_IF_ERROR(data.Validate());
  RETURN_IF_ERROR(pa::CheckData(data, info));
  return data;
}

}  // namespace dpopt::server
