#include "server/translation/job_family.h"

#include <cmath>

#include "absl/strings/str_cat.h"

namespace dpopt::server::translation {

absl::Status CheckSteps(int64_t steps, const std::string& field) {
  if (steps < 1 || steps > kMaxSteps) {
    return absl::InvalidArgumentError(absl::StrCat(
        field, " must be between 1 and ", kMaxSteps, ", got ", steps));
  }
  return absl::OkStatus();
}

absl::Status CheckPositive(double v, const std::string& field) {
  if (!std::isfinite(v) || v <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, " must be a finite number > 0"));
  }
  return absl::OkStatus();
}

absl::Status CheckFinite(const std::string& field,
                         std::initializer_list<double> values) {
  for (double v : values) {
    if (!std::isfinite(v)) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, ": every number must be finite"));
    }
  }
  return absl::OkStatus();
}

absl::Status WithField(const std::string& field, const absl::Status& s) {
  if (s.ok()) return s;
  return absl::Status(s.code(), absl::StrCat(field, ": ", s.message()));
}

absl::Status InvalidWithField(const std::string& field, const absl::Status& s) {
  if (s.ok()) return s;
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", s.message()));
}

}  // namespace dpopt::server::translation
