// dpopt CLI: local privacy accounting (no server; links core/privacy only).
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
#include "core/privacy/accountant.h"
#include "core/privacy/dp_event.h"
#include "dpopt/v1/dpopt.grpc.pb.h"
#include "google/protobuf/util/json_util.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/grpcpp.h"

namespace dpopt::client {
namespace {

// ---------------------------------------------------------------- privacy

absl::StatusOr<privacy::AccountantKind> AccountantFlag(const ParsedArgs& a) {
  return privacy::ParseAccountant(a.Get("accountant", "rdp"));
}

privacy::DpEvent DpSgdEventFor(double z, double q, int64_t steps) {
  privacy::DpEvent step = privacy::DpEvent::Gaussian(z);
  if (q < 1.0) step = privacy::DpEvent::PoissonSampled(q, step);
  return privacy::DpEvent::SelfComposed(steps, step);
}

struct SgdParams {
  double q;
  int64_t steps;
  double delta;
};

absl::StatusOr<SgdParams> ReadSgdParams(const ParsedArgs& a) {
  SgdParams p;
  auto q = a.GetDouble("sampling-rate", 1.0);
  if (!q.ok()) return q.status();
  auto t = a.GetInt("steps");
  if (!t.ok()) return t.status();
  auto d = a.GetDouble("delta");
  if (!d.ok()) return d.status();
  if (!(*q > 0 && *q <= 1)) {
    return absl::InvalidArgumentError("--sampling-rate must be in (0, 1]");
  }
  if (*t < 1) return absl::InvalidArgumentError("--steps must be >= 1");
  if (!(*d > 0 && *d < 1)) {
    return absl::InvalidArgumentError("--delta must be in (0, 1)");
  }
  p.q = *q;
  p.steps = *t;
  p.delta = *d;
  return p;
}

int PrivacyEpsilon(const ParsedArgs& a, const Globals& g) {
  auto p = ReadSgdParams(a);
  if (!p.ok()) return UsageError(p.status());
  auto z = a.GetDouble("noise-multiplier");
  if (!z.ok()) return UsageError(z.status());
  if (!(*z > 0)) return UsageError("--noise-multiplier must be > 0");
  auto kind = AccountantFlag(a);
  if (!kind.ok()) return UsageError(kind.status());
  auto r = privacy::ComputeEpsilon(DpSgdEventFor(*z, p->q, p->steps), p->delta,
                                   *kind);
  if (!r.ok()) return UsageError(r.status());
  if (g.json) {
    std::cout << absl::StrFormat(
        "{\"epsilon\": %.10g, \"delta\": %.10g, \"optimal_order\": %.10g, "
        "\"accountant\": \"%s\"}\n",
        r->epsilon, p->delta, r->optimal_order, privacy::AccountantName(*kind));
  } else {
    std::cout << absl::StrFormat("epsilon = %.10g at delta = %g (%s",
                                 r->epsilon, p->delta,
                                 privacy::AccountantName(*kind));
    if (*kind == privacy::AccountantKind::kRdp) {
      std::cout << absl::StrFormat(", optimal order %g", r->optimal_order);
    }
    std::cout << ")\n";
  }
  return 0;
}

int PrivacyCalibrate(const ParsedArgs& a, const Globals& g) {
  auto p = ReadSgdParams(a);
  if (!p.ok()) return UsageError(p.status());
  auto eps = a.GetDouble("epsilon");
  if (!eps.ok()) return UsageError(eps.status());
  auto kind = AccountantFlag(a);
  if (!kind.ok()) return UsageError(kind.status());
  const SgdParams params = *p;
  auto z = privacy::CalibrateNoiseMultiplier(
      [&params](double z) { return DpSgdEventFor(z, params.q, params.steps); },
      *eps, p->delta, *kind);
  if (!z.ok()) return UsageError(z.status());
  auto r = privacy::ComputeEpsilon(DpSgdEventFor(*z, p->q, p->steps), p->delta,
                                   *kind);
  if (!r.ok()) return UsageError(r.status());
  if (g.json) {
    std::cout << absl::StrFormat(
        "{\"noise_multiplier\": %.10g, \"epsilon\": %.10g, \"delta\": %.10g, "
        "\"optimal_order\": %.10g, \"accountant\": \"%s\"}\n",
        *z, r->epsilon, p->delta, r->optimal_order,
        privacy::AccountantName(*kind));
  } else {
    std::cout << absl::StrFormat(
        "noise multiplier = %.10g gives epsilon = %.10g <= %g at delta = %g "
        "(%s)\n",
        *z, r->epsilon, *eps, p->delta, privacy::AccountantName(*kind));
  }
  return 0;
}

}  // namespace

std::vector<Command> PrivacyCommands() {
  const std::vector<FlagSpec> sgd = {
      {"sampling-rate", false, "Poisson sampling rate q (default 1)", "Q"},
      {"steps", false, "number of steps T", "T"},
      {"delta", false, "target delta", "D"},
      {"accountant", false, "rdp (default) or pld", "NAME"},
  };
  auto with = [](std::vector<FlagSpec> base, std::vector<FlagSpec> more) {
    base.insert(base.end(), more.begin(), more.end());
    return base;
  };
  return {
      {"privacy epsilon", "",
       "epsilon of DP-SGD (local, no server): noise multiplier, q, steps",
       with(sgd, {{"noise-multiplier", false, "noise multiplier sigma", "S"}}),
       PrivacyEpsilon},
      {"privacy calibrate", "",
       "smallest noise multiplier meeting (epsilon, delta) (local)",
       with(sgd, {{"epsilon", false, "target epsilon", "E"}}),
       PrivacyCalibrate},
  };
}

}  // namespace dpopt::client
