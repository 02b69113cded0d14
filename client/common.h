// Shared plumbing of the `dpopt` CLI: global flags, the connection (server
// address, bearer token, TLS), error reporting and output helpers. Each
// command group lives in its own file and registers its commands here.
#ifndef DPOPT_CLIENT_COMMON_H_
#define DPOPT_CLIENT_COMMON_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "client/flags.h"
#include "client/transport_policy.h"
#include "dpopt/v1/dpopt.grpc.pb.h"
#include "google/protobuf/message.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/grpcpp.h"

namespace dpopt::client {

namespace pb = ::dpopt::v1;

inline constexpr char kDefaultServer[] = "127.0.0.1:50051";

struct Globals {
  std::string server;
  bool json = false;
  double timeout_s = 120;
  // Bearer token (from --token-file, $DPOPT_TOKEN or
  // ~/.config/dpopt/token, in that order); empty = none.
  std::string token;
  // The file the token came from (empty: none, or $DPOPT_TOKEN).
  std::string token_file;
  // --insecure: plaintext to a non-loopback address.
  bool insecure = false;
  // --tls: TLS to a loopback address too.
  bool tls = false;
  // TLS: CA to verify the server (default: the system's trusted roots),
  // client certificate and key for mutual TLS.
  std::string tls_ca;
  std::string tls_cert;
  std::string tls_key;
  // Decided from the above by ChooseTransport (client/transport_policy.h).
  Transport transport = Transport::kPlaintext;
};

const std::vector<FlagSpec>& GlobalFlags();
std::vector<FlagSpec> WithGlobals(std::vector<FlagSpec> specs);

struct Command {
  std::string path;  // e.g. "dataset import"
  std::string args;  // positional synopsis
  std::string summary;
  std::vector<FlagSpec> flags;
  std::function<int(const ParsedArgs&, const Globals&)> run;
};

std::string StatusCodeName(grpc::StatusCode code);
// Exit codes: 0 ok, 1 the server refused or failed, 2 usage error,
// 3 server unreachable.
int ReportRpcError(const grpc::Status& s, const Globals& g);
int UsageError(const std::string& msg);
int UsageError(const absl::Status& s);
std::string ToJson(const google::protobuf::Message& m);
std::string ToJsonLine(const google::protobuf::Message& m);

class Client {
 public:
  explicit Client(const Globals& g);
  // A context with the deadline and the bearer token (docs/architecture.md,
  // "Security model").
  std::unique_ptr<grpc::ClientContext> Context(bool deadline = true) const;

  pb::DatasetService::Stub& datasets() { return *datasets_; }
  pb::BudgetService::Stub& budget() { return *budget_; }
  pb::JobService::Stub& jobs() { return *jobs_; }
  pb::AdminService::Stub& admin() { return *admin_; }
  grpc::health::v1::Health::Stub& health() { return *health_; }

 private:
  Globals g_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<pb::DatasetService::Stub> datasets_;
  std::unique_ptr<pb::BudgetService::Stub> budget_;
  std::unique_ptr<pb::JobService::Stub> jobs_;
  std::unique_ptr<pb::AdminService::Stub> admin_;
  std::unique_ptr<grpc::health::v1::Health::Stub> health_;
};

absl::StatusOr<std::string> ReadFile(const std::string& path);
std::string Num(double v);
std::string StateName(pb::JobState s);
bool Terminal(pb::JobState s);
std::string FilterName(pb::BudgetFilter f);
void PrintBudget(const pb::BudgetStatus& b);

// Resolves the token and TLS settings of `g` from the parsed flags and the
// environment. INVALID_ARGUMENT for unreadable files.
absl::Status ResolveCredentials(const ParsedArgs& a, Globals& g);
// Before a command talks to the server (client/transport_policy.h): the
// token file must be private, and plaintext needs a loopback address or
// --insecure. FAILED_PRECONDITION with the fix otherwise.
absl::Status CheckConnectionSecurity(const Globals& g);

// Command groups, one file each (client/<group>.cc).
std::vector<Command> DatasetCommands();
std::vector<Command> BudgetCommands();
std::vector<Command> JobCommands();
std::vector<Command> PrivacyCommands();
std::vector<Command> AdminCommands();

}  // namespace dpopt::client

#endif  // DPOPT_CLIENT_COMMON_H_
