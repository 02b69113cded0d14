#include "core/optim/piecewise_affine/problem.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/common/status_macros.h"
#include "core/optim/piecewise_affine/lp.h"
#include "nlohmann/json.hpp"

namespace dpopt::optim::piecewise_affine {
namespace {

using Json = nlohmann::ordered_json;

absl::Status CheckVector(const std::vector<double>& v, size_t size,
                         const std::string& field) {
  if (v.size() != size) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, " must have ", size, " entries, got ", v.size()));
  }
  for (double x : v) {
    if (!std::isfinite(x) || std::abs(x) > kMaxCoefficient) {
      return absl::InvalidArgumentError(absl::StrCat(
          field,
          ": every entry must be finite with magnitude <= ", kMaxCoefficient));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status Polytope::Validate(int64_t dimension) const {
  if (dimension < 1 || dimension > kMaxDimension) {
    return absl::InvalidArgumentError(
        absl::StrCat("the decision variable must have 1 to ", kMaxDimension,
                     " coordinates, got ", dimension));
  }
  RETURN_IF_ERROR(CheckVector(lower, dimension, "polytope.lower"));
  RETURN_IF_ERROR(CheckVector(upper, dimension, "polytope.upper"));
  for (int64_t j = 0; j < dimension; ++j) {
    if (!(lower[j] < upper[j])) {
      return absl::InvalidArgumentError(
          absl::StrCat("polytope: lower[", j, "] must be < upper[", j,
                       "] (P needs a non-empty interior)"));
    }
  }
  if (rows < 0 || rows > kMaxConstraintRows) {
    return absl::InvalidArgumentError(
        absl::StrCat("polytope: at most ", kMaxConstraintRows, " half-spaces"));
  }
  RETURN_IF_ERROR(CheckVector(h_matrix, rows * dimension, "polytope.h_matrix"));
  RETURN_IF_ERROR(CheckVector(h_vector, rows, "polytope.h_vector"));
  return absl::OkStatus();
}

bool Polytope::Contains(const Eigen::VectorXd& x, double tol) const {
  const int64_t d = dimension();
  if (x.size() != d) return false;
  for (int64_t j = 0; j < d; ++j) {
    if (!(x[j] >= lower[j] - tol && x[j] <= upper[j] + tol)) return false;
  }
  for (int64_t k = 0; k < rows; ++k) {
    double s = 0;
    for (int64_t j = 0; j < d; ++j) s += h_matrix[k * d + j] * x[j];
    if (!(s <= h_vector[k] + tol)) return false;
  }
  return true;
}

std::string ProblemInfo::ToJson() const {
  Json j;
  j["b_max"] = b_max;
  j["pieces"] = pieces;
  j["dimension"] = dimension;
  j["lower"] = polytope.lower;
  j["upper"] = polytope.upper;
  j["h_rows"] = polytope.rows;
  j["h_matrix"] = polytope.h_matrix;
  j["h_vector"] = polytope.h_vector;
  j["slope_norm_bound"] = slope_norm_bound;
  j["bbox_lower"] = bbox_lower;
  j["bbox_upper"] = bbox_upper;
  j["diameter"] = diameter;
  j["center"] = center;
  j["chebyshev_radius"] = chebyshev_radius;
  return j.dump();
}

absl::StatusOr<ProblemInfo> ProblemInfo::FromJson(const std::string& json) {
  Json j = Json::parse(json, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return absl::InvalidArgumentError("max-affine description is not JSON");
  }
  ProblemInfo info;
  try {
    info.b_max = j.at("b_max").get<double>();
    info.pieces = j.at("pieces").get<int64_t>();
    info.dimension = j.at("dimension").get<int64_t>();
    info.polytope.lower = j.at("lower").get<std::vector<double>>();
    info.polytope.upper = j.at("upper").get<std::vector<double>>();
    info.polytope.rows = j.at("h_rows").get<int64_t>();
    info.polytope.h_matrix = j.at("h_matrix").get<std::vector<double>>();
    info.polytope.h_vector = j.at("h_vector").get<std::vector<double>>();
    info.slope_norm_bound = j.at("slope_norm_bound").get<double>();
    info.bbox_lower = j.at("bbox_lower").get<std::vector<double>>();
    info.bbox_upper = j.at("bbox_upper").get<std::vector<double>>();
    info.diameter = j.at("diameter").get<double>();
    info.center = j.at("center").get<std::vector<double>>();
    info.chebyshev_radius = j.at("chebyshev_radius").get<double>();
  } catch (const Json::exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat("malformed max-affine description: ", e.what()));
  }
  RETURN_IF_ERROR(info.Validate());
  return info;
}

absl::Status ProblemInfo::Validate() const {
  if (!(b_max >= kMinBMax && b_max <= kMaxBMax)) {
    return absl::InvalidArgumentError(
        absl::StrCat("b_max must be in [", kMinBMax, ", ", kMaxBMax, "]"));
  }
  if (pieces < 1 || pieces > kMaxPieces) {
    return absl::InvalidArgumentError(
        absl::StrCat("a max-affine problem has 1 to ", kMaxPieces, " pieces"));
  }
  RETURN_IF_ERROR(polytope.Validate(dimension));
  RETURN_IF_ERROR(CheckVector(bbox_lower, dimension, "bbox_lower"));
  RETURN_IF_ERROR(CheckVector(bbox_upper, dimension, "bbox_upper"));
  RETURN_IF_ERROR(CheckVector(center, dimension, "center"));
  if (!std::isfinite(slope_norm_bound) || slope_norm_bound < 0 ||
      !std::isfinite(diameter) || !(diameter > 0) ||
      !std::isfinite(chebyshev_radius) || !(chebyshev_radius > 0)) {
    return absl::InvalidArgumentError(
        "max-affine description: G, R and the interior radius must be finite "
        "(R, radius > 0)");
  }
  return absl::OkStatus();
}

Eigen::VectorXd ProblemInfo::Center() const {
  return Eigen::Map<const Eigen::VectorXd>(
      center.data(), static_cast<Eigen::Index>(dimension));
}

absl::StatusOr<ProblemInfo> DescribeProblem(const ProblemDeclaration& decl,
                                            const double* slopes, int64_t m,
                                            int64_t d) {
  ProblemInfo info;
  info.b_max = decl.b_max;
  info.polytope = decl.polytope;
  info.pieces = m;
  info.dimension = d;
  if (!(decl.b_max >= kMinBMax && decl.b_max <= kMaxBMax)) {
    return absl::InvalidArgumentError(
        absl::StrCat("b_max must be a number in [", kMinBMax, ", ", kMaxBMax,
                     "] (the public bound on how far any offset may move)"));
  }
  if (m < 1 || m > kMaxPieces) {
    return absl::InvalidArgumentError(
        absl::StrCat("a max-affine problem has 1 to ", kMaxPieces,
                     " pieces (rows), got ", m));
  }
  RETURN_IF_ERROR(decl.polytope.Validate(d));
  if (m * d > 10000000) {
    return absl::InvalidArgumentError(
        "a max-affine problem may have at most 1e7 slope entries");
  }
  double g = 0;
  for (int64_t i = 0; i < m; ++i) {
    double norm2 = 0;
    for (int64_t j = 0; j < d; ++j) {
      const double a = slopes[i * d + j];
      if (!std::isfinite(a) || std::abs(a) > kMaxCoefficient) {
        return absl::InvalidArgumentError(
            absl::StrCat("slope row ", i + 1,
                         ": every slope must be finite with magnitude "
                         "<= ",
                         kMaxCoefficient, " (slopes are public data)"));
      }
      norm2 += a * a;
    }
    g = std::max(g, std::sqrt(norm2));
  }
  info.slope_norm_bound = g;
  const Polytope& p = decl.polytope;
  if (p.is_box()) {
    info.bbox_lower = p.lower;
    info.bbox_upper = p.upper;
    info.center.resize(d);
    info.chebyshev_radius = std::numeric_limits<double>::infinity();
    for (int64_t j = 0; j < d; ++j) {
      info.center[j] = p.lower[j] + (p.upper[j] - p.lower[j]) / 2;
      info.chebyshev_radius =
          std::min(info.chebyshev_radius, (p.upper[j] - p.lower[j]) / 2);
    }
  } else {
    absl::StatusOr<Ball> ball = ChebyshevCenter(p);
    if (!ball.ok() || !(ball->radius > 1e-12)) {
      return absl::InvalidArgumentError(
          "the polytope has an empty interior (or the LP solver could not "
          "find an interior point)");
    }
    info.center.assign(ball->center.data(), ball->center.data() + d);
    info.chebyshev_radius = ball->radius;
    RETURN_IF_ERROR(BoundingBox(p, &info.bbox_lower, &info.bbox_upper));
  }
  double r2 = 0;
  for (int64_t j = 0; j < d; ++j) {
    const double w = info.bbox_upper[j] - info.bbox_lower[j];
    r2 += w * w;
  }
  info.diameter = std::sqrt(r2);
  RETURN_IF_ERROR(info.Validate());
  return info;
}

absl::Status CheckData(const Dataset& data, const ProblemInfo& info) {
  if (data.is_sparse() || data.rows() != info.pieces ||
      data.dimension() != info.dimension ||
      data.dense().rows() != info.pieces ||
      data.dense().cols() != info.dimension) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the dataset is not the stored max-affine problem (", info.pieces,
        " dense rows of dimension ", info.dimension, " expected)"));
  }
  // Every imported dataset passed CheckOffsets; a failure here is a defect
  // (the message carries no offset value).
  const double limit = kMaxOffsetRatio * info.b_max;
  for (int64_t i = 0; i < data.rows(); ++i) {
    if (!(std::abs(data.label(i)) <= limit)) {
      return absl::InvalidArgumentError(
          "the dataset's offsets are outside the range checked at import");
    }
  }
  return absl::OkStatus();
}

absl::Status CheckOffsets(const double* offsets, int64_t m, double b_max) {
  const double limit = kMaxOffsetRatio * b_max;
  for (int64_t i = 0; i < m; ++i) {
    if (!(std::abs(offsets[i]) <= limit)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "offset of row ", i + 1,
          ": every offset must be finite with |b_i| <= 2^27 b_max = ", limit,
          " (the range the mechanisms represent exactly; rescale the "
          "problem or declare a larger b_max)"));
    }
  }
  return absl::OkStatus();
}

double MaxPointNorm(const ProblemInfo& info) {
  double s = 0;
  for (size_t j = 0; j < info.bbox_lower.size(); ++j) {
    const double v =
        std::max(std::abs(info.bbox_lower[j]), std::abs(info.bbox_upper[j]));
    s += v * v;
  }
  return std::sqrt(s);
}

absl::Status CheckScoreRange(const ProblemInfo& info) {
  const double gx = info.slope_norm_bound * MaxPointNorm(info);
  if (!(gx <= kMaxScoreRangeRatio * info.b_max)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "the public score range G X = %.6g (G = %.6g the largest slope "
        "norm, X = %.6g the largest norm of a point of P) exceeds 2^27 "
        "b_max = %.6g, beyond what the private mechanisms represent "
        "exactly; rescale the problem or declare a larger b_max",
        gx, info.slope_norm_bound, MaxPointNorm(info),
        kMaxScoreRangeRatio * info.b_max));
  }
  return absl::OkStatus();
}

double Evaluate(const Dataset& data, const Eigen::VectorXd& b,
                const Eigen::VectorXd& x) {
  double best = -std::numeric_limits<double>::infinity();
  for (int64_t i = 0; i < data.rows(); ++i) {
    const double v = data.RowDot(i, x) + b[i];
    if (!std::isnan(v)) best = std::max(best, v);
  }
  return best;
}

Eigen::VectorXd ProjectOntoPolytope(const ProblemInfo& info,
                                    const Eigen::VectorXd& x) {
  const Polytope& p = info.polytope;
  const int64_t d = info.dimension;
  auto clip = [&](const Eigen::VectorXd& v) {
    Eigen::VectorXd out = v;
    for (int64_t j = 0; j < d; ++j) {
      out[j] = std::clamp(std::isnan(v[j]) ? info.center[j] : v[j], p.lower[j],
                          p.upper[j]);
    }
    return out;
  };
  if (p.is_box()) return clip(x);
  // Dykstra's algorithm over the box and the half-spaces (one correction
  // vector per set), a bounded number of sweeps.
  const int64_t sets = p.rows + 1;
  std::vector<Eigen::VectorXd> inc(sets, Eigen::VectorXd::Zero(d));
  Eigen::VectorXd y = x;
  for (int64_t j = 0; j < d; ++j) {
    if (!std::isfinite(y[j])) y[j] = info.center[j];
  }
  const int64_t work = std::max<int64_t>(1, sets * d);
  const int64_t sweeps = std::clamp<int64_t>(100000000 / work, 1, 10000);
  for (int64_t s = 0; s < sweeps; ++s) {
    double change = 0;
    {
      const Eigen::VectorXd z = y + inc[0];
      const Eigen::VectorXd next = clip(z);
      inc[0] = z - next;
      change = std::max(change, (next - y).lpNorm<Eigen::Infinity>());
      y = next;
    }
    for (int64_t k = 0; k < p.rows; ++k) {
      Eigen::Map<const Eigen::VectorXd> h(p.h_matrix.data() + k * d, d);
      const Eigen::VectorXd z = y + inc[k + 1];
      const double excess = h.dot(z) - p.h_vector[k];
      const double hh = h.squaredNorm();
      Eigen::VectorXd next = z;
      if (excess > 0 && hh > 0) next -= (excess / hh) * h;
      inc[k + 1] = z - next;
      change = std::max(change, (next - y).lpNorm<Eigen::Infinity>());
      y = next;
    }
    if (change < 1e-12) break;
  }
  y = clip(y);
  if (p.Contains(y, 0)) return y;
  // Pull towards the interior centre until every half-space holds.
  const Eigen::VectorXd c = info.Center();
  double theta = 1;
  for (int64_t k = 0; k < p.rows; ++k) {
    Eigen::Map<const Eigen::VectorXd> h(p.h_matrix.data() + k * d, d);
    const double at_c = h.dot(c);
    const double rise = h.dot(y - c);
    const double slack = p.h_vector[k] - at_c;  // > 0: c is interior
    if (rise > 0 && at_c + rise > p.h_vector[k]) {
      theta = std::min(theta, slack / rise);
    }
  }
  theta = std::max(0.0, theta * (1 - 1e-9));
  return clip(c + theta * (y - c));
}

}  // namespace dpopt::optim::piecewise_affine
