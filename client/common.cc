#include "client/common.h"

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/transport_policy.h"
#include "core/common/status_macros.h"
#include "google/protobuf/util/json_util.h"

namespace dpopt::client {

// ---------------------------------------------------------------- plumbing

const std::vector<FlagSpec>& GlobalFlags() {
  static const auto* flags = new std::vector<FlagSpec>{
      {"server", false,
       "server address HOST:PORT (default $DPOPT_SERVER or 127.0.0.1:50051)",
       "HOST:PORT"},
      {"json", true, "print machine-readable JSON on stdout"},
      {"timeout", false, "RPC deadline in seconds (default 120)", "SECONDS"},
      {"token-file", false,
       "file holding the bearer token (default $DPOPT_TOKEN, else "
       "~/.config/dpopt/token)",
       "FILE"},
      {"tls-ca", false,
       "CA certificate (PEM) to verify the server with, instead of the "
       "system's trusted roots",
       "PEM"},
      {"tls", true,
       "use TLS even to a loopback address (TLS is the default for any "
       "other address)"},
      {"tls-cert", false, "client certificate (PEM) for mutual TLS", "PEM"},
      {"tls-key", false, "client private key (PEM) for mutual TLS", "PEM"},
      {"insecure", true,
       "plaintext to a non-loopback server (the token crosses the network "
       "in clear text; without it such connections use TLS)"},
      {"help", true, "show help for the command"},
  };
  return *flags;
}

std::vector<FlagSpec> WithGlobals(std::vector<FlagSpec> specs) {
  for (const auto& g : GlobalFlags()) specs.push_back(g);
  return specs;
}

std::string StatusCodeName(grpc::StatusCode code) {
  switch (code) {
    case grpc::OK:
      return "OK";
    case grpc::CANCELLED:
      return "CANCELLED";
    case grpc::UNKNOWN:
      return "UNKNOWN";
    case grpc::INVALID_ARGUMENT:
      return "INVALID_ARGUMENT";
    case grpc::DEADLINE_EXCEEDED:
      return "DEADLINE_EXCEEDED";
    case grpc::NOT_FOUND:
      return "NOT_FOUND";
    case grpc::ALREADY_EXISTS:
      return "ALREADY_EXISTS";
    case grpc::PERMISSION_DENIED:
      return "PERMISSION_DENIED";
    case grpc::RESOURCE_EXHAUSTED:
      return "RESOURCE_EXHAUSTED";
    case grpc::FAILED_PRECONDITION:
      return "FAILED_PRECONDITION";
    case grpc::ABORTED:
      return "ABORTED";
    case grpc::OUT_OF_RANGE:
      return "OUT_OF_RANGE";
    case grpc::UNIMPLEMENTED:
      return "UNIMPLEMENTED";
    case grpc::INTERNAL:
      return "INTERNAL";
    case grpc::UNAVAILABLE:
      return "UNAVAILABLE";
    case grpc::DATA_LOSS:
      return "DATA_LOSS";
    case grpc::UNAUTHENTICATED:
      return "UNAUTHENTICATED";
    default:
      return "UNKNOWN";
  }
}

// Exit codes: 0 ok, 1 the server refused or failed, 2 usage error,
// 3 server unreachable.
int ReportRpcError(const grpc::Status& s, const Globals& g) {
  if (g.json) {
    std::cout << "{\"error\":{\"code\":\"" << StatusCodeName(s.error_code())
              << "\",\"message\":" << '"';
    for (char c : s.error_message()) {
      if (c == '"' || c == '\\') std::cout << '\\';
      std::cout << c;
    }
    std::cout << "\"}}" << std::endl;
  }
  std::cerr << "error: " << StatusCodeName(s.error_code()) << ": "
            << s.error_message() << std::endl;
  if (s.error_code() == grpc::UNAVAILABLE) {
    std::cerr << "hint: is dpopt-server running at " << g.server
              << "? (set --server or DPOPT_SERVER)" << std::endl;
    return 3;
  }
  return 1;
}

int UsageError(const std::string& msg) {
  std::cerr << "error: " << msg << std::endl;
  return 2;
}

int UsageError(const absl::Status& s) {
  return UsageError(std::string(s.message()));
}

std::string ToJson(const google::protobuf::Message& m) {
  std::string out;
  google::protobuf::util::JsonPrintOptions o;
  o.add_whitespace = true;
  o.preserve_proto_field_names = true;
  (void)google::protobuf::util::MessageToJsonString(m, &out, o);
  return out;
}

std::string ToJsonLine(const google::protobuf::Message& m) {
  std::string out;
  google::protobuf::util::JsonPrintOptions o;
  o.preserve_proto_field_names = true;
  (void)google::protobuf::util::MessageToJsonString(m, &out, o);
  return out;
}

Client::Client(const Globals& g) : g_(g) {
  std::shared_ptr<grpc::ChannelCredentials> creds =
      grpc::InsecureChannelCredentials();
  if (g.transport != Transport::kPlaintext) {
    // Empty roots: gRPC's default, the system's trusted roots.
    grpc::SslCredentialsOptions o;
    if (!g.tls_ca.empty()) o.pem_root_certs = ReadFile(g.tls_ca).value_or("");
    if (!g.tls_cert.empty()) {
      o.pem_cert_chain = ReadFile(g.tls_cert).value_or("");
      o.pem_private_key = ReadFile(g.tls_key).value_or("");
    }
    creds = grpc::SslCredentials(o);
  }
  channel_ = grpc::CreateChannel(g.server, creds);
  datasets_ = pb::DatasetService::NewStub(channel_);
  budget_ = pb::BudgetService::NewStub(channel_);
  jobs_ = pb::JobService::NewStub(channel_);
  admin_ = pb::AdminService::NewStub(channel_);
  health_ = grpc::health::v1::Health::NewStub(channel_);
}

std::unique_ptr<grpc::ClientContext> Client::Context(bool deadline) const {
  auto ctx = std::make_unique<grpc::ClientContext>();
  if (deadline) {
    ctx->set_deadline(
        std::chrono::system_clock::now() +
        std::chrono::milliseconds(static_cast<int64_t>(g_.timeout_s * 1000)));
  }
  if (!g_.token.empty()) {
    ctx->AddMetadata("authorization", absl::StrCat("Bearer ", g_.token));
  }
  return ctx;
}

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open ", path));
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string Num(double v) { return absl::StrFormat("%.6g", v); }

std::string StateName(pb::JobState s) {
  switch (s) {
    case pb::JOB_STATE_QUEUED:
      return "QUEUED";
    case pb::JOB_STATE_RUNNING:
      return "RUNNING";
    case pb::JOB_STATE_SUCCEEDED:
      return "SUCCEEDED";
    case pb::JOB_STATE_FAILED:
      return "FAILED";
    case pb::JOB_STATE_CANCELLED:
      return "CANCELLED";
    case pb::JOB_STATE_PENDING_APPROVAL:
      return "PENDING_APPROVAL";
    case pb::JOB_STATE_REJECTED:
      return "REJECTED";
    default:
      return "UNKNOWN";
  }
}

bool Terminal(pb::JobState s) {
  return s == pb::JOB_STATE_SUCCEEDED || s == pb::JOB_STATE_FAILED ||
         s == pb::JOB_STATE_CANCELLED || s == pb::JOB_STATE_REJECTED;
}

std::string FilterName(pb::BudgetFilter f) {
  return f == pb::BUDGET_FILTER_BASIC ? "basic composition" : "RDP filter";
}

void PrintBudget(const pb::BudgetStatus& b) {
  std::cout << absl::StrFormat(
      "budget of %s\n  total      epsilon = %s at delta = %s\n"
      "  spent      epsilon = %s\n  remaining  epsilon = %s\n"
      "  charges    %d\n  accounting %s\n",
      b.dataset(), Num(b.epsilon_total()), Num(b.delta_total()),
      Num(b.epsilon_spent()), Num(b.epsilon_remaining()), b.charges(),
      b.accounting().empty() ? FilterName(b.filter()) : b.accounting());
}

absl::Status ResolveCredentials(const ParsedArgs& a, Globals& g) {
  auto trim = [](std::string s) {
    return std::string(absl::StripAsciiWhitespace(s));
  };
  if (a.Has("token-file")) {
    absl::StatusOr<std::string> t = ReadFile(a.Get("token-file"));
    if (!t.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--token-file: ", t.status().message()));
    }
    g.token = trim(*t);
    g.token_file = a.Get("token-file");
  } else if (const char* env = std::getenv("DPOPT_TOKEN");
             env != nullptr && *env != '\0') {
    g.token = trim(env);
  } else if (const char* home = std::getenv("HOME"); home != nullptr) {
    const std::string path = absl::StrCat(home, "/.config/dpopt/token");
    absl::StatusOr<std::string> t = ReadFile(path);
    if (t.ok()) {
      g.token = trim(*t);
      g.token_file = path;
    }
  }
  g.insecure = a.GetBool("insecure");
  g.tls_ca = a.Get("tls-ca");
  g.tls_cert = a.Get("tls-cert");
  g.tls_key = a.Get("tls-key");
  g.tls = a.GetBool("tls");
  if (g.tls_cert.empty() != g.tls_key.empty()) {
    return absl::InvalidArgumentError(
        "--tls-cert and --tls-key must be given together");
  }

  for (const std::string* f : {&g.tls_ca, &g.tls_cert, &g.tls_key}) {
    if (!f->empty() && !ReadFile(*f).ok()) {
      return absl::InvalidArgumentError(absl::StrCat("cannot read ", *f));
    }
  }
  TransportRequest t;
  t.server = g.server;
  t.has_tls_ca = !g.tls_ca.empty();
  t.tls = g.tls;
  t.insecure = g.insecure;
  ASSIGN_OR_RETURN(g.transport, ChooseTransport(t));
  return absl::OkStatus();
}

absl::Status CheckConnectionSecurity(const Globals& g) {
  if (!g.token_file.empty()) RETURN_IF_ERROR(CheckTokenFile(g.token_file));
  return absl::OkStatus();
}

}  // namespace dpopt::client
