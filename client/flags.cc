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

absl::StatusOr<ParsedArgs> ParseArgs(const std::vector<std::string>& args,
                                     const std::vector<FlagSpec>& specs) {
  ParsedArgs out;
  bool only_positional = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (only_positional || !absl::StartsWith(a, "--") || a == "-") {
      out.positional_.push_back(a);
      continue;
    }
    if (a == "--") {
      only_positional = true;
      continue;
    }
    std::string name = a.substr(2);
    std::string value;
    bool has_value = false;
    if (auto eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
      has_value = true;
    }
    const FlagSpec* spec = nullptr;
    for (const auto& s : specs) {
      if (s.name == name) spec = &s;
    }
    if (spec == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown flag --", name, " (see --help)"));
    }
    if (spec->boolean) {
      out.values_[name] = has_value ? value : "true";
      continue;
    }
    if (!has_value) {
      if (i + 1 >= args.size()) {
        return absl::InvalidArgumentError(
            absl::StrCat("flag --", name, " needs a value"));
      }
      value = args[++i];
    }
    out.values_[name] = value;
  }
  return out;
}

}  // namespace dpopt::client
