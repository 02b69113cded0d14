// dpopt CLI: budget, ledger and health.
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/common.h"
#include "client/flags.h"
#include "dpopt/v1/dpopt.grpc.pb.h"
#include "google/protobuf/util/json_util.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/grpcpp.h"

namespace dpopt::client {
namespace {

// ---------------------------------------------------------------- budget

int BudgetShow(const ParsedArgs& a, const Globals& g) {
  if (a.positional().size() != 1) {
    return UsageError("usage: dpopt budget show DATASET");
  }
  Client c(g);
  auto ctx = c.Context();
  pb::GetBudgetRequest req;
  req.set_dataset(a.positional()[0]);
  pb::BudgetStatus b;
  grpc::Status s = c.budget().GetBudget(ctx.get(), req, &b);
  if (!s.ok()) return ReportRpcError(s, g);
  if (g.json) {
    std::cout << ToJson(b) << std::endl;
  } else {
    PrintBudget(b);
  }
  return 0;
}

int Ledger(const ParsedArgs& a, const Globals& g) {
  if (a.positional().size() != 1) {
    return UsageError("usage: dpopt ledger DATASET");
  }
  Client c(g);
  auto ctx = c.Context();
  pb::ListLedgerRequest req;
  req.set_dataset(a.positional()[0]);
  pb::ListLedgerResponse resp;
  grpc::Status s = c.budget().ListLedger(ctx.get(), req, &resp);
  if (!s.ok()) return ReportRpcError(s, g);
  if (g.json) {
    std::cout << ToJson(resp) << std::endl;
    return 0;
  }
  std::cout << absl::StrFormat("%-5s %-26s %-9s %12s %10s  %s\n", "SEQ", "JOB",
                               "PRICED_BY", "EPSILON", "DELTA", "EVENT");
  for (const auto& e : resp.entries()) {
    std::cout << absl::StrFormat(
        "%-5d %-26s %-9s %12s %10s  %s\n", e.sequence(), e.job_id(),
        e.accountant(), Num(e.epsilon()), Num(e.delta()), e.event_json());
  }
  std::cout << "\n";
  PrintBudget(resp.budget());
  return 0;
}

// ---------------------------------------------------------------- health

int Health(const ParsedArgs& a, const Globals& g) {
  Client c(g);
  auto ctx = c.Context();
  grpc::health::v1::HealthCheckRequest req;
  grpc::health::v1::HealthCheckResponse resp;
  grpc::Status s = c.health().Check(ctx.get(), req, &resp);
  if (!s.ok()) return ReportRpcError(s, g);
  const bool serving =
      resp.status() == grpc::health::v1::HealthCheckResponse::SERVING;
  if (g.json) {
    std::cout << "{\"status\":\"" << (serving ? "SERVING" : "NOT_SERVING")
              << "\"}" << std::endl;
  } else {
    std::cout << (serving ? "SERVING" : "NOT_SERVING") << "\n";
  }
  return serving ? 0 : 1;
}

}  // namespace

std::vector<Command> BudgetCommands() {
  return {
      {"budget show",
       "DATASET",
       "total, spent and remaining epsilon of a dataset",
       {},
       BudgetShow},
      {"ledger", "DATASET", "every charge against a dataset", {}, Ledger},
      {"health", "", "check that the server is SERVING (exit 0)", {}, Health},
  };
}

}  // namespace dpopt::client
