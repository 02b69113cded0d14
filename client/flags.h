// The flags a `dpopt` command declares (FlagSpec) and the parsed values its
// handler reads (ParsedArgs, with typed getters). Parsing itself is CLI11's
// (client/cli.h).
#ifndef DPOPT_CLIENT_FLAGS_H_
#define DPOPT_CLIENT_FLAGS_H_

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace dpopt::client {

struct FlagSpec {
  std::string name;  // without leading dashes
  bool boolean = false;
  std::string help;
  std::string value_name = "VALUE";
};

class ParsedArgs {
 public:
  const std::vector<std::string>& positional() const { return positional_; }
  bool Has(const std::string& name) const { return values_.count(name) > 0; }
  std::string Get(const std::string& name, const std::string& def = "") const;
  bool GetBool(const std::string& name) const;
  absl::StatusOr<double> GetDouble(const std::string& name) const;
  absl::StatusOr<double> GetDouble(const std::string& name, double def) const;
  absl::StatusOr<int64_t> GetInt(const std::string& name, int64_t def) const;
  absl::StatusOr<int64_t> GetInt(const std::string& name) const;

  std::vector<std::string> positional_;
  std::map<std::string, std::string> values_;
};

}  // namespace dpopt::client

#endif  // DPOPT_CLIENT_FLAGS_H_
