#include "core/noise/vector_mechanisms.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "core/common/status_macros.h"
#include "core/noise/discrete_samplers.h"
#include "core/noise/rounded_gaussian.h"

namespace dpopt::noise {
namespace {

// Noise scale in grid units is about 2^kGridBits (Mironov 2012).
constexpr int kGridBits = 20;
constexpr double kMaxGridUnits = 0x1.0p62;
// Multiplicative margin that covers the rounding of a few floating-point
// operations, so that computed sensitivities and scales are upper bounds.
constexpr double kRoundUp = 1 + 0x1.0p-48;

absl::Status CheckPositiveFinite(double x, const char* name) {
  if (!std::isfinite(x) || !(x > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, " must be positive and finite, got ", x));
  }
  return absl::OkStatus();
}

// The power of two 2^(floor(log2(scale)) - kGridBits).
absl::StatusOr<double> ChooseGrid(double scale) {
  if (!(scale >= 0x1.0p-900 && scale <= 0x1.0p900)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "noise scale ", scale, " is out of range [2^-900, 2^900]"));
  }
  int e = 0;
  std::frexp(scale, &e);  // scale in [2^(e-1), 2^e)
  return std::ldexp(1.0, e - 1 - kGridBits);
}

// Rounds every coordinate to the grid; errors before any noise is drawn.
absl::Status RoundToGrid(Eigen::Ref<const Eigen::VectorXd> v, double grid,
                         std::vector<int64_t>& out) {
  out.resize(v.size());
  for (Eigen::Index i = 0; i < v.size(); ++i) {
    const double units = std::nearbyint(v[i] / grid);  // grid: power of two
    if (!std::isfinite(units) || std::abs(units) > kMaxGridUnits) {
      return absl::InvalidArgumentError(absl::StrCat(
          "coordinate ", i, " is not finite or too large to privatize"));
    }
    out[i] = static_cast<int64_t>(units);
  }
  return absl::OkStatus();
}

template <typename Sampler>
absl::Status AddNoise(Sampler& sampler, double grid, RandomSource& rng,
                      Eigen::Ref<Eigen::VectorXd> v) {
  std::vector<int64_t> units;
  RETURN_IF_ERROR(RoundToGrid(v, grid, units));
  RandomBits bits(rng);
  for (Eigen::Index i = 0; i < v.size(); ++i) {
    // |units| <= 2^62 and |noise| <= 2^62: the sum fits in int64.
    const int64_t noisy = units[i] + sampler.Sample(bits);
    v[i] = static_cast<double>(noisy) * grid;  // Post-processing.
  }
  if (!bits.ok()) {
    v.setConstant(std::numeric_limits<double>::quiet_NaN());
    absl::Status s = rng.status();
    return s.ok() ? absl::InternalError("random source failed") : s;
  }
  return absl::OkStatus();
}

bool IsPowerOfTwo(double g) {
  int e = 0;
  return std::isfinite(g) && g > 0 && std::frexp(g, &e) == 0.5;
}

// Checks shared by AddGaussianNoise and AddLaplaceNoise.
absl::Status CheckVectorAndGrid(int64_t size, int64_t dimension, double grid) {
  if (size != dimension) {
    return absl::InvalidArgumentError(absl::StrCat(
        "vector has dimension ", size, ", plan expects ", dimension));
  }
  if (!IsPowerOfTwo(grid)) {
    return absl::InvalidArgumentError("plan grid is not a power of two");
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<GaussianPlan> PlanGaussian(double l2_sensitivity,
                                          double noise_multiplier,
                                          int64_t dimension) {
  RETURN_IF_ERROR(CheckPositiveFinite(l2_sensitivity, "l2_sensitivity"));
  RETURN_IF_ERROR(CheckPositiveFinite(noise_multiplier, "noise_multiplier"));
  if (dimension <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("dimension must be positive, got ", dimension));
  }
  GaussianPlan plan;
  plan.l2_sensitivity = l2_sensitivity;
  plan.noise_multiplier = noise_multiplier;
  plan.dimension = dimension;
  ASSIGN_OR_RETURN(plan.grid, ChooseGrid(noise_multiplier * l2_sensitivity));
  // Nearest-point rounding moves each coordinate by <= g/2, so neighbours
  // move apart by <= g*sqrt(d) in L2 norm.
  plan.effective_sensitivity =
      (l2_sensitivity + plan.grid * std::sqrt(static_cast<double>(dimension))) *
      kRoundUp;
  const double sigma_units =
      noise_multiplier * plan.effective_sensitivity * kRoundUp / plan.grid;
  ASSIGN_OR_RETURN(const RoundedGaussianSampler sampler,
                   RoundedGaussianSampler::Create(sigma_units));
  plan.sigma_in_grid_units = sampler.tau();  // >= sigma_units, exact.
  plan.sigma = plan.sigma_in_grid_units * plan.grid;
  return plan;
}

absl::Status AddGaussianNoise(const GaussianPlan& plan, RandomSource& rng,
                              Eigen::Ref<Eigen::VectorXd> v) {
  RETURN_IF_ERROR(CheckVectorAndGrid(v.size(), plan.dimension, plan.grid));
  ASSIGN_OR_RETURN(RoundedGaussianSampler sampler,
                   RoundedGaussianSampler::Create(plan.sigma_in_grid_units));
  if (sampler.tau() != plan.sigma_in_grid_units) {
    return absl::InvalidArgumentError(
        "plan sigma_in_grid_units is not an exact sampler scale; use "
        "PlanGaussian");
  }
  return AddNoise(sampler, plan.grid, rng, v);
}

absl::StatusOr<LaplacePlan> PlanLaplace(double l1_sensitivity,
                                        double scale_multiplier,
                                        int64_t dimension) {
  RETURN_IF_ERROR(CheckPositiveFinite(l1_sensitivity, "l1_sensitivity"));
  RETURN_IF_ERROR(CheckPositiveFinite(scale_multiplier, "scale_multiplier"));
  if (dimension <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("dimension must be positive, got ", dimension));
  }
  LaplacePlan plan;
  plan.l1_sensitivity = l1_sensitivity;
  plan.scale_multiplier = scale_multiplier;
  plan.dimension = dimension;
  ASSIGN_OR_RETURN(plan.grid, ChooseGrid(scale_multiplier * l1_sensitivity));
  // Each coordinate moves by <= g/2: neighbours move apart by <= g*d in L1.
  plan.effective_sensitivity =
      (l1_sensitivity + plan.grid * static_cast<double>(dimension)) * kRoundUp;
  const double scale_units =
      scale_multiplier * plan.effective_sensitivity * kRoundUp / plan.grid;
  ASSIGN_OR_RETURN(const DiscreteLaplaceSampler sampler,
                   DiscreteLaplaceSampler::Create(scale_units));
  plan.scale_in_grid_units = sampler.scale();
  plan.scale = plan.scale_in_grid_units * plan.grid;
  return plan;
}

absl::Status AddLaplaceNoise(const LaplacePlan& plan, RandomSource& rng,
                             Eigen::Ref<Eigen::VectorXd> v) {
  RETURN_IF_ERROR(CheckVectorAndGrid(v.size(), plan.dimension, plan.grid));
  ASSIGN_OR_RETURN(DiscreteLaplaceSampler sampler,
                   DiscreteLaplaceSampler::Create(plan.scale_in_grid_units));
  if (sampler.scale() != plan.scale_in_grid_units) {
    return absl::InvalidArgumentError(
        "plan scale_in_grid_units is not an exact sampler scale; use "
        "PlanLaplace");
  }
  return AddNoise(sampler, plan.grid, rng, v);
}

}  // namespace dpopt::noise
