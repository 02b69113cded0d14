#include "client/flags.h"

#include <cmath>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace dpopt::client {

std::string ParsedArgs::Get(const std::string& name,
                            const std::string& def) const {
  auto it = values_.find(name);
  return it == values_.end() ? def : it->second;
}

bool ParsedArgs::GetBool(const std::string& name) const {
  auto it = values_.find(name);
  return it != values_.end() && it->second != "false" && it->second != "0";
}

absl::StatusOr<double> ParsedArgs::GetDouble(const std::string& name) const {
  auto it = values_.find(name);
  if (it == values_.end()) {
    return absl::InvalidArgumentError(absl::StrCat("--", name, " is required"));
  }
  double v;
  if (!absl::SimpleAtod(it->second, &v) || !std::isfinite(v)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--", name, " must be a finite number, got '", it->second, "'"));
  }
  return v;
}

absl::StatusOr<double> ParsedArgs::GetDouble(const std::string& name,
                                             double def) const {
  if (!Has(name)) return def;
  return GetDouble(name);
}

absl::StatusOr<int64_t> ParsedArgs::GetInt(const std::string& name) const {
  auto it = values_.find(name);
  if (it == values_.end()) {
    return absl::InvalidArgumentError(absl::StrCat("--", name, " is required"));
  }
  int64_t v;
  if (!absl::SimpleAtoi(it->second, &v)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--", name, " must be an integer, got '", it->second, "'"));
  }
  return v;
}

absl::StatusOr<int64_t> ParsedArgs::GetInt(const std::string& name,
                                           int64_t def) const {
  if (!Has(name)) return def;
  return GetInt(name);
}

}  // namespace dpopt::client
