#include "core/privacy/dp_event.h"

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/common/status_macros.h"
#include "nlohmann/json.hpp"

namespace dpopt::privacy {
namespace {

using Json = nlohmann::ordered_json;

// Deeper trees than this are rejected (a corrupt or hostile blob must not be
// able to exhaust the stack).
constexpr int kMaxDepth = 64;
constexpr int64_t kMaxSparseVectorQueries = 1'000'000;
constexpr int64_t kMaxExponentialMechanisms = 1'000'000'000;

bool FiniteNonNegative(double x) { return std::isfinite(x) && x >= 0; }

absl::Status CheckFiniteNonNegative(double x, absl::string_view what) {
  if (!FiniteNonNegative(x)) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " must be finite and >= 0, got ", x));
  }
  return absl::OkStatus();
}

Json ToJsonValue(const DpEvent& e) {
  using K = DpEvent::Kind;
  Json j = Json::object();
  switch (e.kind()) {
    case K::kNoOp:
      j["no_op"] = Json::object();
      break;
    case K::kGaussian:
      j["gaussian"] = {{"noise_multiplier", e.noise_multiplier()}};
      break;
    case K::kLaplace:
      j["laplace"] = {{"noise_multiplier", e.noise_multiplier()}};
      break;
    case K::kDiscreteGaussian:
      j["discrete_gaussian"] = {
          {"noise_multiplier", e.noise_multiplier()},
          {"sigma_in_grid_units", e.sigma_in_grid_units()},
          {"dimension", e.dimension()}};
      break;
    case K::kDiscreteLaplace:
      j["discrete_laplace"] = {{"noise_multiplier", e.noise_multiplier()}};
      break;
    case K::kExponential:
      j["exponential"] = {{"epsilon", e.epsilon()}};
      break;
    case K::kExponentialMechanisms:
      j["exponential_mechanisms"] = {{"epsilon", e.epsilon()},
                                     {"count", e.count()}};
      break;
    case K::kSparseVector:
      j["sparse_vector"] = {{"epsilon", e.epsilon()}};
      break;
    case K::kGaussianSparseVector:
      j["gaussian_sparse_vector"] = {
          {"threshold_noise_multiplier", e.threshold_noise_multiplier()},
          {"query_noise_multiplier", e.query_noise_multiplier()},
          {"max_queries", e.max_queries()}};
      break;
    case K::kEpsilonDelta:
      j["epsilon_delta"] = {{"epsilon", e.epsilon()}, {"delta", e.delta()}};
      break;
    case K::kPoissonSampled:
      j["poisson_sampled"] = {
          {"sampling_probability", e.sampling_probability()},
          {"event", ToJsonValue(e.inner())}};
      break;
    case K::kSampledWithoutReplacement:
      j["sampled_without_replacement"] = {{"source_size", e.source_size()},
                                          {"sample_size", e.sample_size()},
                                          {"event", ToJsonValue(e.inner())}};
      break;
    case K::kSelfComposed:
      j["self_composed"] = {{"count", e.count()},
                            {"event", ToJsonValue(e.inner())}};
      break;
    case K::kComposed: {
      Json arr = Json::array();
      for (const DpEvent& c : e.events()) arr.push_back(ToJsonValue(c));
      j["composed"] = {{"events", std::move(arr)}};
      break;
    }
  }
  return j;
}

// Field readers: strict (exact key set, exact types).
absl::Status CheckKeys(const Json& obj, std::vector<std::string> keys,
                       absl::string_view where) {
  if (!obj.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat("DpEvent JSON: '", where, "' must be an object"));
  }
  for (auto it = obj.begin(); it != obj.end(); ++it) {
    bool known = false;
    for (const auto& k : keys) known = known || (k == it.key());
    if (!known) {
      return absl::InvalidArgumentError(absl::StrCat(
          "DpEvent JSON: unknown field '", it.key(), "' in '", where, "'"));
    }
  }
  for (const auto& k : keys) {
    if (!obj.contains(k)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "DpEvent JSON: missing field '", k, "' in '", where, "'"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<double> GetDouble(const Json& obj, const std::string& key) {
  const Json& v = obj.at(key);
  if (!v.is_number()) {
    return absl::InvalidArgumentError(
        absl::StrCat("DpEvent JSON: '", key, "' must be a number"));
  }
  return v.get<double>();
}

absl::StatusOr<int64_t> GetInt(const Json& obj, const std::string& key) {
  const Json& v = obj.at(key);
  if (!v.is_number_integer()) {
    return absl::InvalidArgumentError(
        absl::StrCat("DpEvent JSON: '", key, "' must be an integer"));
  }
  if (v.is_number_unsigned() &&
      v.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) {
    return absl::InvalidArgumentError(
        absl::StrCat("DpEvent JSON: '", key, "' is out of range"));
  }
  return v.get<int64_t>();
}

absl::StatusOr<DpEvent> FromJsonValue(const Json& j, int depth) {
  if (depth > kMaxDepth) {
    return absl::InvalidArgumentError("DpEvent JSON: nesting too deep");
  }
  if (!j.is_object() || j.size() != 1) {
    return absl::InvalidArgumentError(
        "DpEvent JSON: an event is an object with exactly one key");
  }
  const std::string& tag = j.begin().key();
  const Json& body = j.begin().value();
  if (tag == "no_op") {
    RETURN_IF_ERROR(CheckKeys(body, {}, tag));
    return DpEvent::NoOp();
  }
  if (tag == "gaussian" || tag == "laplace" || tag == "discrete_laplace") {
    RETURN_IF_ERROR(CheckKeys(body, {"noise_multiplier"}, tag));
    ASSIGN_OR_RETURN(double z, GetDouble(body, "noise_multiplier"));
    if (tag == "gaussian") return DpEvent::Gaussian(z);
    if (tag == "laplace") return DpEvent::Laplace(z);
    return DpEvent::DiscreteLaplace(z);
  }
  if (tag == "discrete_gaussian") {
    RETURN_IF_ERROR(CheckKeys(
        body, {"noise_multiplier", "sigma_in_grid_units", "dimension"}, tag));
    ASSIGN_OR_RETURN(double z, GetDouble(body, "noise_multiplier"));
    ASSIGN_OR_RETURN(double s, GetDouble(body, "sigma_in_grid_units"));
    ASSIGN_OR_RETURN(int64_t d, GetInt(body, "dimension"));
    return DpEvent::DiscreteGaussian(z, s, d);
  }
  if (tag == "exponential" || tag == "sparse_vector") {
    RETURN_IF_ERROR(CheckKeys(body, {"epsilon"}, tag));
    ASSIGN_OR_RETURN(double eps, GetDouble(body, "epsilon"));
    return tag == "exponential" ? DpEvent::Exponential(eps)
                                : DpEvent::SparseVector(eps);
  }
  if (tag == "exponential_mechanisms") {
    RETURN_IF_ERROR(CheckKeys(body, {"epsilon", "count"}, tag));
    ASSIGN_OR_RETURN(double eps, GetDouble(body, "epsilon"));
    ASSIGN_OR_RETURN(int64_t k, GetInt(body, "count"));
    return DpEvent::ExponentialMechanisms(eps, k);
  }
  if (tag == "gaussian_sparse_vector") {
    RETURN_IF_ERROR(CheckKeys(
        body,
        {"threshold_noise_multiplier", "query_noise_multiplier", "max_queries"},
        tag));
    ASSIGN_OR_RETURN(double zt, GetDouble(body, "threshold_noise_multiplier"));
    ASSIGN_OR_RETURN(double zq, GetDouble(body, "query_noise_multiplier"));
    ASSIGN_OR_RETURN(int64_t k, GetInt(body, "max_queries"));
    return DpEvent::GaussianSparseVector(zt, zq, k);
  }
  if (tag == "epsilon_delta") {
    RETURN_IF_ERROR(CheckKeys(body, {"epsilon", "delta"}, tag));
    ASSIGN_OR_RETURN(double eps, GetDouble(body, "epsilon"));
    ASSIGN_OR_RETURN(double delta, GetDouble(body, "delta"));
    return DpEvent::EpsilonDelta(eps, delta);
  }
  if (tag == "poisson_sampled") {
    RETURN_IF_ERROR(CheckKeys(body, {"sampling_probability", "event"}, tag));
    ASSIGN_OR_RETURN(double q, GetDouble(body, "sampling_probability"));
    ASSIGN_OR_RETURN(DpEvent inner, FromJsonValue(body.at("event"), depth + 1));
    return DpEvent::PoissonSampled(q, std::move(inner));
  }
  if (tag == "sampled_without_replacement") {
    RETURN_IF_ERROR(
        CheckKeys(body, {"source_size", "sample_size", "event"}, tag));
    ASSIGN_OR_RETURN(int64_t n, GetInt(body, "source_size"));
    ASSIGN_OR_RETURN(int64_t m, GetInt(body, "sample_size"));
    ASSIGN_OR_RETURN(DpEvent inner, FromJsonValue(body.at("event"), depth + 1));
    return DpEvent::SampledWithoutReplacement(n, m, std::move(inner));
  }
  if (tag == "self_composed") {
    RETURN_IF_ERROR(CheckKeys(body, {"count", "event"}, tag));
    ASSIGN_OR_RETURN(int64_t k, GetInt(body, "count"));
    ASSIGN_OR_RETURN(DpEvent inner, FromJsonValue(body.at("event"), depth + 1));
    return DpEvent::SelfComposed(k, std::move(inner));
  }
  if (tag == "composed") {
    RETURN_IF_ERROR(CheckKeys(body, {"events"}, tag));
    const Json& arr = body.at("events");
    if (!arr.is_array()) {
      return absl::InvalidArgumentError(
          "DpEvent JSON: 'events' must be an array");
    }
    std::vector<DpEvent> events;
    events.reserve(arr.size());
    for (const Json& c : arr) {
      ASSIGN_OR_RETURN(DpEvent e, FromJsonValue(c, depth + 1));
      events.push_back(std::move(e));
    }
    return DpEvent::Composed(std::move(events));
  }
  return absl::InvalidArgumentError(
      absl::StrCat("DpEvent JSON: unknown event type '", tag, "'"));
}

absl::Status ValidateImpl(const DpEvent& e, int depth) {
  using K = DpEvent::Kind;
  if (depth > kMaxDepth) {
    return absl::InvalidArgumentError("DpEvent: nesting too deep");
  }
  switch (e.kind()) {
    case K::kNoOp:
      return absl::OkStatus();
    case K::kGaussian:
    case K::kLaplace:
    case K::kDiscreteLaplace:
      return CheckFiniteNonNegative(e.noise_multiplier(), "noise_multiplier");
    case K::kDiscreteGaussian:
      RETURN_IF_ERROR(
          CheckFiniteNonNegative(e.noise_multiplier(), "noise_multiplier"));
      if (!(std::isfinite(e.sigma_in_grid_units()) &&
            e.sigma_in_grid_units() > 0)) {
        return absl::InvalidArgumentError(
            "discrete Gaussian: sigma_in_grid_units must be finite and > 0");
      }
      if (e.dimension() < 1) {
        return absl::InvalidArgumentError(
            "discrete Gaussian: dimension must be >= 1");
      }
      return absl::OkStatus();
    case K::kExponential:
    case K::kSparseVector:
      return CheckFiniteNonNegative(e.epsilon(), "epsilon");
    case K::kExponentialMechanisms:
      RETURN_IF_ERROR(CheckFiniteNonNegative(e.epsilon(), "epsilon"));
      if (e.count() < 1 || e.count() > kMaxExponentialMechanisms) {
        return absl::InvalidArgumentError(
            absl::StrCat("exponential_mechanisms: count must be in [1, ",
                         kMaxExponentialMechanisms, "], got ", e.count()));
      }
      return absl::OkStatus();
    case K::kGaussianSparseVector:
      for (double z :
           {e.threshold_noise_multiplier(), e.query_noise_multiplier()}) {
        if (!(std::isfinite(z) && z > 0)) {
          return absl::InvalidArgumentError(absl::StrCat(
              "Gaussian sparse vector: noise multipliers must be finite and "
              "> 0, got ",
              z));
        }
      }
      if (e.max_queries() < 1 || e.max_queries() > kMaxSparseVectorQueries) {
        return absl::InvalidArgumentError(
            absl::StrCat("Gaussian sparse vector: max_queries must be in [1, ",
                         kMaxSparseVectorQueries, "], got ", e.max_queries()));
      }
      return absl::OkStatus();
    case K::kEpsilonDelta:
      RETURN_IF_ERROR(CheckFiniteNonNegative(e.epsilon(), "epsilon"));
      if (!(e.delta() >= 0 && e.delta() <= 1)) {
        return absl::InvalidArgumentError(
            absl::StrCat("delta must be in [0, 1], got ", e.delta()));
      }
      return absl::OkStatus();
    case K::kPoissonSampled:
      if (!(e.sampling_probability() >= 0 && e.sampling_probability() <= 1)) {
        return absl::InvalidArgumentError(
            absl::StrCat("sampling_probability must be in [0, 1], got ",
                         e.sampling_probability()));
      }
      return ValidateImpl(e.inner(), depth + 1);
    case K::kSampledWithoutReplacement:
      if (e.source_size() < 1 || e.sample_size() < 0 ||
          e.sample_size() > e.source_size()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "sampled without replacement: need 0 <= sample_size <= "
            "source_size and source_size >= 1, got ",
            e.sample_size(), " of ", e.source_size()));
      }
      return ValidateImpl(e.inner(), depth + 1);
    case K::kSelfComposed:
      if (e.count() < 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("self_composed: count must be >= 0, got ", e.count()));
      }
      return ValidateImpl(e.inner(), depth + 1);
    case K::kComposed:
      for (const DpEvent& c : e.events()) {
        RETURN_IF_ERROR(ValidateImpl(c, depth + 1));
      }
      return absl::OkStatus();
  }
  return absl::InvalidArgumentError("DpEvent: unknown kind");
}

}  // namespace

DpEvent::DpEvent() = default;

DpEvent DpEvent::NoOp() { return DpEvent(); }

DpEvent DpEvent::Gaussian(double noise_multiplier) {
  DpEvent e;
  e.kind_ = Kind::kGaussian;
  e.noise_multiplier_ = noise_multiplier;
  return e;
}

DpEvent DpEvent::Laplace(double noise_multiplier) {
  DpEvent e;
  e.kind_ = Kind::kLaplace;
  e.noise_multiplier_ = noise_multiplier;
  return e;
}

DpEvent DpEvent::DiscreteGaussian(double noise_multiplier,
                                  double sigma_in_grid_units,
                                  int64_t dimension) {
  DpEvent e;
  e.kind_ = Kind::kDiscreteGaussian;
  e.noise_multiplier_ = noise_multiplier;
  e.sigma_in_grid_units_ = sigma_in_grid_units;
  e.dimension_ = dimension;
  return e;
}

DpEvent DpEvent::DiscreteLaplace(double noise_multiplier) {
  DpEvent e;
  e.kind_ = Kind::kDiscreteLaplace;
  e.noise_multiplier_ = noise_multiplier;
  return e;
}

DpEvent DpEvent::Exponential(double epsilon) {
  DpEvent e;
  e.kind_ = Kind::kExponential;
  e.epsilon_ = epsilon;
  return e;
}

DpEvent DpEvent::ExponentialMechanisms(double epsilon, int64_t count) {
  DpEvent e;
  e.kind_ = Kind::kExponentialMechanisms;
  e.epsilon_ = epsilon;
  e.count_ = count;
  return e;
}

DpEvent DpEvent::SparseVector(double epsilon) {
  DpEvent e;
  e.kind_ = Kind::kSparseVector;
  e.epsilon_ = epsilon;
  return e;
}

DpEvent DpEvent::GaussianSparseVector(double threshold_noise_multiplier,
                                      double query_noise_multiplier,
                                      int64_t max_queries) {
  DpEvent e;
  e.kind_ = Kind::kGaussianSparseVector;
  e.threshold_noise_multiplier_ = threshold_noise_multiplier;
  e.query_noise_multiplier_ = query_noise_multiplier;
  e.max_queries_ = max_queries;
  return e;
}

DpEvent DpEvent::EpsilonDelta(double epsilon, double delta) {
  DpEvent e;
  e.kind_ = Kind::kEpsilonDelta;
  e.epsilon_ = epsilon;
  e.delta_ = delta;
  return e;
}

DpEvent DpEvent::PoissonSampled(double sampling_probability, DpEvent inner) {
  DpEvent e;
  e.kind_ = Kind::kPoissonSampled;
  e.sampling_probability_ = sampling_probability;
  e.events_.push_back(std::move(inner));
  return e;
}

DpEvent DpEvent::SampledWithoutReplacement(int64_t source_size,
                                           int64_t sample_size, DpEvent inner) {
  DpEvent e;
  e.kind_ = Kind::kSampledWithoutReplacement;
  e.source_size_ = source_size;
  e.sample_size_ = sample_size;
  e.events_.push_back(std::move(inner));
  return e;
}

DpEvent DpEvent::SelfComposed(int64_t count, DpEvent inner) {
  DpEvent e;
  e.kind_ = Kind::kSelfComposed;
  e.count_ = count;
  e.events_.push_back(std::move(inner));
  return e;
}

DpEvent DpEvent::Composed(std::vector<DpEvent> events) {
  DpEvent e;
  e.kind_ = Kind::kComposed;
  e.events_ = std::move(events);
  return e;
}

absl::Status DpEvent::Validate() const { return ValidateImpl(*this, 0); }

std::string DpEvent::ToJson() const { return ToJsonValue(*this).dump(); }

absl::StatusOr<DpEvent> DpEvent::FromJson(absl::string_view json) {
  Json j = Json::parse(json.begin(), json.end(), /*cb=*/nullptr,
                       /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    return absl::InvalidArgumentError("DpEvent JSON: not valid JSON");
  }
  ASSIGN_OR_RETURN(DpEvent e, FromJsonValue(j, 0));
  RETURN_IF_ERROR(e.Validate());
  return e;
}

bool DpEvent::operator==(const DpEvent& other) const {
  return kind_ == other.kind_ && noise_multiplier_ == other.noise_multiplier_ &&
         sigma_in_grid_units_ == other.sigma_in_grid_units_ &&
         dimension_ == other.dimension_ &&
         threshold_noise_multiplier_ == other.threshold_noise_multiplier_ &&
         query_noise_multiplier_ == other.query_noise_multiplier_ &&
         max_queries_ == other.max_queries_ && epsilon_ == other.epsilon_ &&
         delta_ == other.delta_ &&
         sampling_probability_ == other.sampling_probability_ &&
         source_size_ == other.source_size_ &&
         sample_size_ == other.sample_size_ && count_ == other.count_ &&
         events_ == other.events_;
}

}  // namespace dpopt::privacy
