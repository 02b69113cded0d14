// `dpopt principal|token|grant|audit|whoami`: access control.
// Curators manage principals, tokens and grants and read the audit log;
// `whoami` works for everyone.
#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"
#include "client/common.h"

namespace dpopt::client {
namespace {

std::string RoleName(pb::Role r) {
  return r == pb::ROLE_CURATOR ? "curator" : "analyst";
}

std::string Time(const google::protobuf::Timestamp& t) {
  if (t.seconds() == 0 && t.nanos() == 0) return "-";
  return absl::FormatTime("%Y-%m-%d %H:%M:%S",
                          absl::FromUnixSeconds(t.seconds()),
                          absl::UTCTimeZone());
}

int PrintCreatedToken(const pb::CreatedToken& t, const Globals& g) {
  if (g.json) {
    std::cout << ToJson(t) << std::endl;
    return 0;
  }
  std::cout << "principal " << t.principal().name() << " ("
            << RoleName(t.principal().role()) << ")\n"
            << "token id  " << t.info().id() << "\n"
            << "expires   " << Time(t.info().expires_at()) << "\n\n"
            << t.token() << "\n\n"
            << "This token is shown once and is not stored by the server. "
               "Hand it over securely; the holder sets DPOPT_TOKEN or "
               "--token-file.\n";
  return 0;
}

int WhoAmI(const ParsedArgs& a, const Globals& g) {
  Client c(g);
  auto ctx = c.Context();
  pb::Principal p;
  grpc::Status s = c.admin().WhoAmI(ctx.get(), pb::WhoAmIRequest(), &p);
  if (!s.ok()) return ReportRpcError(s, g);
  if (g.json) {
    std::cout << ToJson(p) << std::endl;
  } else {
    std::cout << p.name() << " (" << RoleName(p.role()) << ")\n";
  }
  return 0;
}

// --ttl (seconds, > 0) or --no-expiry, or neither (the server's default
// lifetime); 0 is how the request says "default", so --ttl=0 would not
// mean "never" as it once did: it is refused with a pointer to --no-expiry.
absl::StatusOr<int64_t> TokenLifetime(const ParsedArgs& a) {
  if (!a.Has("ttl")) return 0;
  auto ttl = a.GetInt("ttl", 0);
  if (!ttl.ok() || *ttl < 0) {
    return absl::InvalidArgumentError("--ttl must be a number of seconds > 0");
  }
  if (*ttl == 0) {
    return absl::InvalidArgumentError(
        "--ttl=0 no longer means \"never expires\": leave --ttl out for the "
        "server's default lifetime, or pass --no-expiry (curator tokens, or "
        "servers without a maximum lifetime)");
  }
  if (a.GetBool("no-expiry")) {
    return absl::InvalidArgumentError("give --ttl or --no-expiry, not both");
  }
  return *ttl;
}

int PrincipalCreate(const ParsedArgs& a, const Globals& g) {
  if (a.positional().size() != 1) {
    return UsageError("usage: dpopt principal create NAME [--role=analyst]");
  }
  const std::string role = a.Get("role", "analyst");
  if (role != "analyst" && role != "curator") {
    return UsageError("--role must be analyst or curator");
  }
  auto ttl = TokenLifetime(a);
  if (!ttl.ok()) return UsageError(std::string(ttl.status().message()));
  Client c(g);
  auto ctx = c.Context();
  pb::CreatePrincipalRequest req;
  req.set_name(a.positional()[0]);
  req.set_role(role == "curator" ? pb::ROLE_CURATOR : pb::ROLE_ANALYST);
  req.set_token_ttl_seconds(*ttl);
  req.set_token_no_expiry(a.GetBool("no-expiry"));
  pb::CreatedToken out;
  grpc::Status s = c.admin().CreatePrincipal(ctx.get(), req, &out);
  if (!s.ok()) return ReportRpcError(s, g);
  return PrintCreatedToken(out, g);
}

int PrincipalList(const ParsedArgs& a, const Globals& g) {
  Client c(g);
  auto ctx = c.Context();
  pb::ListPrincipalsResponse out;
  grpc::Status s =
      c.admin().ListPrincipals(ctx.get(), pb::ListPrincipalsRequest(), &out);
  if (!s.ok()) return ReportRpcError(s, g);
  if (g.json) {
    std::cout << ToJson(out) << std::endl;
    return 0;
  }
  std::cout << absl::StrFormat("%-24s %-8s %-20s %s\n", "NAME", "ROLE",
                               "CREATED", "STATE");
  for (const auto& p : out.principals()) {
    std::cout << absl::StrFormat("%-24s %-8s %-20s %s\n", p.name(),
                                 RoleName(p.role()), Time(p.created_at()),
                                 p.revoked() ? "revoked" : "active");
  }
  return 0;
}

// "8", or "server" when the principal has no limit of its own.
std::string OwnLimit(bool has, int value) {
  if (!has) return "server";
  return value == 0 ? std::string("none") : std::to_string(value);
}

int PrincipalLimits(const ParsedArgs& a, const Globals& g) {
  if (a.positional().size() != 1) {
    return UsageError(
        "usage: dpopt principal limits NAME [--max-jobs=N] "
        "[--max-estimates-per-second=N] [--max-watches=N]");
  }
  pb::SetPrincipalLimitsRequest req;
  req.set_name(a.positional()[0]);
  struct Field {
    const char* flag;
    void (pb::PrincipalLimits::*set)(int32_t);
  };
  for (const Field& f :
       {Field{"max-jobs", &pb::PrincipalLimits::set_max_active_jobs},
        Field{"max-estimates-per-second",
              &pb::PrincipalLimits::set_max_estimates_per_second},
        Field{"max-watches", &pb::PrincipalLimits::set_max_watch_streams}}) {
    if (!a.Has(f.flag)) continue;
    auto v = a.GetInt(f.flag);
    if (!v.ok() || *v < 0 || *v > 1000000) {
      return UsageError(absl::StrCat(
          "--", f.flag, " must be in [0, 1000000] (0 = no limit)"));
    }
    (req.mutable_limits()->*f.set)(static_cast<int32_t>(*v));
  }
  Client c(g);
  auto ctx = c.Context();
  pb::Principal out;
  grpc::Status s = c.admin().SetPrincipalLimits(ctx.get(), req, &out);
  if (!s.ok()) return ReportRpcError(s, g);
  if (g.json) {
    std::cout << ToJson(out) << std::endl;
    return 0;
  }
  const pb::PrincipalLimits& l = out.limits();
  std::cout << out.name() << "'s own limits (\"server\": the server's flag; "
            << "\"none\": no limit): jobs "
            << OwnLimit(l.has_max_active_jobs(), l.max_active_jobs())
            << ", estimates/s "
            << OwnLimit(l.has_max_estimates_per_second(),
                        l.max_estimates_per_second())
            << ", watches "
            << OwnLimit(l.has_max_watch_streams(), l.max_watch_streams())
            << "\n";
  return 0;
}

int PrincipalRevoke(const ParsedArgs& a, const Globals& g) {
  if (a.positional().size() != 1) {
    return UsageError("usage: dpopt principal revoke NAME");
  }
  Client c(g);
  auto ctx = c.Context();
  pb::RevokePrincipalRequest req;
  req.set_name(a.positional()[0]);
  pb::Principal out;
  grpc::Status s = c.admin().RevokePrincipal(ctx.get(), req, &out);
  if (!s.ok()) return ReportRpcError(s, g);
  if (g.json) {
    std::cout << ToJson(out) << std::endl;
  } else {
    std::cout << "revoked " << out.name()
              << " and all its tokens (effective immediately)\n";
  }
  return 0;
}

int TokenCreate(const ParsedArgs& a, const Globals& g) {
  if (a.positional().size() != 1) {
    return UsageError("usage: dpopt token create PRINCIPAL [--ttl=SECONDS]");
  }
  auto ttl = TokenLifetime(a);
  if (!ttl.ok()) return UsageError(std::string(ttl.status().message()));
  Client c(g);
  auto ctx = c.Context();
  pb::CreateTokenRequest req;
  req.set_principal(a.positional()[0]);
  req.set_ttl_seconds(*ttl);
  req.set_no_expiry(a.GetBool("no-expiry"));
  req.set_label(a.Get("label"));
  pb::CreatedToken out;
  grpc::Status s = c.admin().CreateToken(ctx.get(), req, &out);
  if (!s.ok()) return ReportRpcError(s, g);
  return PrintCreatedToken(out, g);
}

int TokenRevoke(const ParsedArgs& a, const Globals& g) {
  if (a.positional().size() != 1) {
    return UsageError("usage: dpopt token revoke TOKEN_ID");
  }
  Client c(g);
  auto ctx = c.Context();
  pb::RevokeTokenRequest req;
  req.set_id(a.positional()[0]);
  pb::TokenInfo out;
  grpc::Status s = c.admin().RevokeToken(ctx.get(), req, &out);
  if (!s.ok()) return ReportRpcError(s, g);
  if (g.json) {
    std::cout << ToJson(out) << std::endl;
  } else {
    std::cout << "revoked token " << out.id() << " of " << out.principal()
              << " (effective immediately)\n";
  }
  return 0;
}

int TokenList(const ParsedArgs& a, const Globals& g) {
  Client c(g);
  auto ctx = c.Context();
  pb::ListTokensRequest req;
  if (!a.positional().empty()) req.set_principal(a.positional()[0]);
  pb::ListTokensResponse out;
  grpc::Status s = c.admin().ListTokens(ctx.get(), req, &out);
  if (!s.ok()) return ReportRpcError(s, g);
  if (g.json) {
    std::cout << ToJson(out) << std::endl;
    return 0;
  }
  std::cout << absl::StrFormat("%-18s %-20s %-20s %-20s %s\n", "ID",
                               "PRINCIPAL", "CREATED", "EXPIRES", "STATE");
  for (const auto& t : out.tokens()) {
    std::cout << absl::StrFormat("%-18s %-20s %-20s %-20s %s\n", t.id(),
                                 t.principal(), Time(t.created_at()),
                                 Time(t.expires_at()),
                                 t.revoked() ? "revoked" : "active");
  }
  return 0;
}

// "3600", "3600s", "90m", "12h", "7d": seconds; -1 if malformed.
int64_t DurationSeconds(const std::string& text) {
  if (text.empty()) return -1;
  int64_t unit = 1;
  std::string digits = text;
  switch (text.back()) {
    case 's':
      digits.pop_back();
      break;
    case 'm':
      unit = 60;
      digits.pop_back();
      break;
    case 'h':
      unit = 3600;
      digits.pop_back();
      break;
    case 'd':
      unit = 86400;
      digits.pop_back();
      break;
    default:
      break;
  }
  int64_t n = 0;
  if (!absl::SimpleAtoi(digits, &n) || n < 0 || n > (int64_t{1} << 40)) {
    return -1;
  }
  return n * unit;
}

int GrantAdd(const ParsedArgs& a, const Globals& g) {
  if (a.positional().size() != 2) {
    return UsageError(
        "usage: dpopt grant add PRINCIPAL DATASET [--epsilon-cap=E] "
        "[--approval-above=E] [--approval-timeout=7d]");
  }
  auto cap = a.GetDouble("epsilon-cap", 0);
  if (!cap.ok() || *cap < 0) return UsageError("--epsilon-cap must be >= 0");
  auto above = a.GetDouble("approval-above", 0);
  if (!above.ok() || *above < 0) {
    return UsageError("--approval-above must be an epsilon >= 0");
  }
  int64_t timeout = 0;
  if (a.Has("approval-timeout")) {
    timeout = DurationSeconds(a.Get("approval-timeout"));
    if (timeout < 0) {
      return UsageError(
          "--approval-timeout takes seconds or a duration such as 12h or 7d");
    }
  }
  Client c(g);
  auto ctx = c.Context();
  pb::GrantDatasetRequest req;
  req.set_principal(a.positional()[0]);
  req.set_dataset(a.positional()[1]);
  req.set_epsilon_cap(*cap);
  req.set_approval_above_epsilon(*above);
  req.set_approval_timeout_seconds(timeout);
  pb::Grant out;
  grpc::Status s = c.admin().GrantDataset(ctx.get(), req, &out);
  if (!s.ok()) return ReportRpcError(s, g);
  if (g.json) {
    std::cout << ToJson(out) << std::endl;
  } else {
    std::cout << out.principal() << " may now use " << out.dataset()
              << (out.epsilon_cap() > 0
                      ? absl::StrFormat(" (capped at epsilon %s)",
                                        Num(out.epsilon_cap()))
                      : std::string(" (no per-analyst cap)"))
              << "\n";
    if (out.approval_above_epsilon() > 0) {
      std::cout << absl::StrFormat(
          "  jobs costing more than epsilon %s wait for a curator's approval "
          "(at most %d s)\n",
          Num(out.approval_above_epsilon()), out.approval_timeout_seconds());
    }
  }
  return 0;
}

int GrantRevoke(const ParsedArgs& a, const Globals& g) {
  if (a.positional().size() != 2) {
    return UsageError("usage: dpopt grant revoke PRINCIPAL DATASET");
  }
  Client c(g);
  auto ctx = c.Context();
  pb::RevokeGrantRequest req;
  req.set_principal(a.positional()[0]);
  req.set_dataset(a.positional()[1]);
  pb::Grant out;
  grpc::Status s = c.admin().RevokeGrant(ctx.get(), req, &out);
  if (!s.ok()) return ReportRpcError(s, g);
  if (g.json) {
    std::cout << ToJson(out) << std::endl;
  } else {
    std::cout << "revoked " << out.principal() << "'s access to "
              << out.dataset() << " (its past charges stay in the ledger)\n";
  }
  return 0;
}

int GrantList(const ParsedArgs& a, const Globals& g) {
  Client c(g);
  auto ctx = c.Context();
  pb::ListGrantsRequest req;
  req.set_principal(a.Get("principal"));
  req.set_dataset(a.Get("dataset"));
  pb::ListGrantsResponse out;
  grpc::Status s = c.admin().ListGrants(ctx.get(), req, &out);
  if (!s.ok()) return ReportRpcError(s, g);
  if (g.json) {
    std::cout << ToJson(out) << std::endl;
    return 0;
  }
  std::cout << absl::StrFormat("%-20s %-24s %12s %15s  %s\n", "PRINCIPAL",
                               "DATASET", "EPSILON_CAP", "APPROVAL_ABOVE",
                               "CREATED");
  for (const auto& gr : out.grants()) {
    std::cout << absl::StrFormat(
        "%-20s %-24s %12s %15s  %s\n", gr.principal(), gr.dataset(),
        gr.epsilon_cap() > 0 ? Num(gr.epsilon_cap()) : "-",
        gr.approval_above_epsilon() > 0 ? Num(gr.approval_above_epsilon())
                                        : "-",
        Time(gr.created_at()));
  }
  return 0;
}

int DatasetDelete(const ParsedArgs& a, const Globals& g) {
  if (a.positional().size() != 1) {
    return UsageError("usage: dpopt dataset delete NAME --yes");
  }
  if (!a.GetBool("yes")) {
    return UsageError(
        "deleting erases the dataset's rows for good (its ledger is kept); "
        "repeat with --yes");
  }
  Client c(g);
  auto ctx = c.Context(/*deadline=*/false);
  pb::DeleteDatasetRequest req;
  req.set_name(a.positional()[0]);
  pb::DeleteDatasetResponse out;
  grpc::Status s = c.datasets().DeleteDataset(ctx.get(), req, &out);
  if (!s.ok()) return ReportRpcError(s, g);
  if (g.json) {
    std::cout << ToJson(out) << std::endl;
  } else {
    std::cout << "deleted " << out.name() << ": " << out.cancelled_jobs()
              << " queued/running job(s) cancelled (they stay charged), "
              << out.blocks_deleted()
              << " row block(s) erased with secure delete"
              << (out.wal_truncation_pending()
                      ? "; the WAL could not be truncated yet (a reader was "
                        "using it) and may still hold copies of erased pages: "
                        "the server retries until it is truncated"
                      : " and the WAL truncated")
              << ". Its ledger and audit history are kept; the name stays "
                 "reserved.\n";
    if (out.pool_shards_deleted_size() > 0) {
      std::cout << "worker pool shards:\n";
      for (const pb::RankShard& shard : out.pool_shards_deleted()) {
        std::cout << "  rank " << shard.rank() << "  " << shard.host() << "  "
                  << (shard.rows() > 0 ? "deleted (overwritten, then removed)"
                                       : "had no shard")
                  << "\n";
      }
    }
  }
  return 0;
}

int Audit(const ParsedArgs& a, const Globals& g) {
  auto limit = a.GetInt("limit", 100);
  if (!limit.ok() || *limit < 1) return UsageError("--limit must be >= 1");
  Client c(g);
  auto ctx = c.Context();
  pb::ListAuditRequest req;
  req.set_dataset(a.Get("dataset"));
  req.set_principal(a.Get("principal"));
  req.set_limit(*limit);
  pb::ListAuditResponse out;
  grpc::Status s = c.admin().ListAudit(ctx.get(), req, &out);
  if (!s.ok()) return ReportRpcError(s, g);
  if (g.json) {
    std::cout << ToJson(out) << std::endl;
    return 0;
  }
  std::cout << absl::StrFormat("%-6s %-20s %-14s %-30s %-16s %-26s %s\n", "SEQ",
                               "TIME", "PRINCIPAL", "METHOD", "DATASET",
                               "JOB/TARGET", "OUTCOME");
  for (const auto& e : out.entries()) {
    std::cout << absl::StrFormat(
        "%-6d %-20s %-14s %-30s %-16s %-26s %s%s\n", e.sequence(), Time(e.at()),
        e.principal().empty() ? "(none)" : e.principal(), e.method(),
        e.dataset().empty() ? "-" : e.dataset(),
        !e.job_id().empty() ? e.job_id()
                            : (e.target().empty() ? "-" : e.target()),
        StatusCodeName(static_cast<grpc::StatusCode>(e.code())),
        e.detail().empty() ? "" : absl::StrCat(" (", e.detail(), ")"));
  }
  return 0;
}

}  // namespace

std::vector<Command> AdminCommands() {
  const FlagSpec ttl{"ttl", false,
                     "token lifetime in seconds (default: the server's, "
                     "dpopt-server --max-token-ttl-days, 90 days unless "
                     "changed)",
                     "SECONDS"};
  const FlagSpec no_expiry{"no-expiry", true,
                           "the token never expires (curator tokens; analyst "
                           "tokens only on a server without a maximum "
                           "lifetime)"};
  return {
      {"whoami", "", "the principal and role of your token", {}, WhoAmI},
      {"principal create",
       "NAME",
       "create a principal and its first token, shown once (curator)",
       {{"role", false, "analyst (default) or curator", "ROLE"},
        ttl,
        no_expiry},
       PrincipalCreate},
      {"principal list", "", "list principals (curator)", {}, PrincipalList},
      {"principal limits",
       "NAME",
       "set a principal's own resource limits, replacing the server's flags "
       "for it; a limit left out falls back to the server's (curator)",
       {{"max-jobs", false,
         "jobs queued or running (server: --max-jobs-per-principal); 0 = no "
         "limit",
         "N"},
        {"max-estimates-per-second", false,
         "EstimateJob calls per second (server: --max-estimates-per-second)",
         "N"},
        {"max-watches", false,
         "open WatchJob streams (server: --max-watches-per-principal)", "N"}},
       PrincipalLimits},
      {"principal revoke",
       "NAME",
       "revoke a principal and all its tokens, effective immediately "
       "(curator)",
       {},
       PrincipalRevoke},
      {"token create",
       "PRINCIPAL",
       "issue another token for a principal, shown once (curator)",
       {ttl,
        no_expiry,
        {"label", false, "a note to recognise the token by", "TEXT"}},
       TokenCreate},
      {"token revoke",
       "TOKEN_ID",
       "revoke one token (curator)",
       {},
       TokenRevoke},
      {"token list",
       "[PRINCIPAL]",
       "list tokens, never secrets (curator)",
       {},
       TokenList},
      {"dataset delete",
       "NAME",
       "erase a dataset's rows for good, keeping its ledger (curator); also "
       "its worker-pool shards (refused while the pool is unavailable)",
       {{"yes", true, "confirm the deletion"}},
       DatasetDelete},
      {"grant add",
       "PRINCIPAL DATASET",
       "let an analyst use a dataset, optionally capping its total epsilon "
       "there (curator; again to change the cap)",
       {{"epsilon-cap", false, "cap on the analyst's epsilon (0 = no cap)",
         "E"},
        {"approval-above", false,
         "jobs costing more epsilon than E wait for a curator's approval "
         "(0 = never)",
         "E"},
        {"approval-timeout", false,
         "how long such a job may wait before it expires (default 7d; "
         "seconds, or with s/m/h/d)",
         "T"}},
       GrantAdd},
      {"grant revoke",
       "PRINCIPAL DATASET",
       "withdraw a grant (curator)",
       {},
       GrantRevoke},
      {"grant list",
       "",
       "list grants (curator)",
       {{"principal", false, "only this principal", "NAME"},
        {"dataset", false, "only this dataset", "NAME"}},
       GrantList},
      {"audit",
       "",
       "the audit log, newest first (curator)",
       {{"dataset", false, "only this dataset", "NAME"},
        {"principal", false, "only this principal", "NAME"},
        {"limit", false, "entries to show (default 100)", "N"}},
       Audit},
  };
}

}  // namespace dpopt::client
