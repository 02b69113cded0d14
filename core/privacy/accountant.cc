#include "core/privacy/accountant.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/common/status_macros.h"
#include "core/privacy/pld.h"
#include "core/privacy/rdp.h"

namespace dpopt::privacy {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// The default grid plus alpha = inf (pure DP), used by ComputeEpsilon /
// ComputeDelta for kRdp.
const std::vector<double>& RdpOrdersWithInfinity() {
  static const std::vector<double>* orders = [] {
    auto* v = new std::vector<double>(DefaultRdpOrders());
    v->push_back(kInf);
    return v;
  }();
  return *orders;
}

absl::Status CheckDelta(double delta) {
  if (!(delta >= 0 && delta <= 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("delta must be in [0, 1], got ", delta));
  }
  return absl::OkStatus();
}

}  // namespace

std::string AccountantName(AccountantKind kind) {
  switch (kind) {
    case AccountantKind::kRdp:
      return "rdp";
    case AccountantKind::kPld:
      return "pld";
  }
  return "unknown";
}

absl::StatusOr<AccountantKind> ParseAccountant(absl::string_view name) {
  if (name == "rdp") return AccountantKind::kRdp;
  if (name == "pld") return AccountantKind::kPld;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown accountant '", name, "' (expected rdp or pld)"));
}

absl::StatusOr<EpsilonResult> ComputeEpsilon(const DpEvent& event, double delta,
                                             AccountantKind kind) {
  RETURN_IF_ERROR(CheckDelta(delta));
  RETURN_IF_ERROR(event.Validate());
  switch (kind) {
    case AccountantKind::kRdp:
      return ComputeEpsilonRdp(event, delta, RdpOrdersWithInfinity());
    case AccountantKind::kPld:
      return ComputeEpsilonPld(event, delta);
  }
  return absl::InvalidArgumentError("unknown accountant");
}

absl::StatusOr<double> ComputeDelta(const DpEvent& event, double epsilon,
                                    AccountantKind kind) {
  if (!(epsilon >= 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("epsilon must be >= 0, got ", epsilon));
  }
  RETURN_IF_ERROR(event.Validate());
  switch (kind) {
    case AccountantKind::kRdp: {
      const auto& orders = RdpOrdersWithInfinity();
      ASSIGN_OR_RETURN(std::vector<double> rdp, ComputeRdp(event, orders));
      ASSIGN_OR_RETURN(DeltaResult r, RdpToDelta(orders, rdp, epsilon));
      return r.delta;
    }
    case AccountantKind::kPld:
      return ComputeDeltaPld(event, epsilon);
  }
  return absl::InvalidArgumentError("unknown accountant");
}

// The error when no noise multiplier fits. The RDP accountant converts at a
// finite grid of orders (the largest is 1024), and that conversion alone
// costs about (ln(1/delta) - ln(alpha)) / (alpha - 1) + ln(1 - 1/alpha) at
// the largest order alpha: when the epsilon at the largest allowed noise is
// within a factor 2 of that floor, the target is out of the RDP accountant's
// reach, and the message says so (and what to do) instead of blaming the
// noise.
namespace {

double LargestFiniteOrder() {
  double largest = 0;
  for (double a : DefaultRdpOrders()) {
    if (std::isfinite(a)) largest = std::max(largest, a);
  }
  return largest;
}

absl::Status NoNoiseReaches(const std::function<DpEvent(double)>& make_event,
                            double epsilon, double delta, AccountantKind kind,
                            double max_noise_multiplier) {
  if (kind == AccountantKind::kRdp && delta > 0) {
    const double alpha = LargestFiniteOrder();
    const double floor = (std::log(1 / delta) - std::log(alpha)) / (alpha - 1) +
                         std::log1p(-1 / alpha);
    absl::StatusOr<EpsilonResult> at_max =
        ComputeEpsilon(make_event(max_noise_multiplier), delta, kind);
    if (at_max.ok() && at_max->epsilon > epsilon &&
        at_max->epsilon <= 2 * floor) {
      return absl::OutOfRangeError(absl::StrCat(
          "the RDP accountant cannot certify epsilon ", epsilon, " at delta ",
          delta, ": its Renyi orders stop at ", alpha,
          ", and the conversion from Renyi DP to (epsilon, delta) at them "
          "costs about (ln(1/delta) - ln(alpha)) / (alpha - 1) = ",
          floor, " by itself, so the smallest epsilon it can certify at delta ",
          delta, " is ", at_max->epsilon, " (at the largest noise multiplier, ",
          max_noise_multiplier,
          "). Use the PLD accountant, which has no such floor (job spec: "
          "\"privacy\": {\"accountant\": \"ACCOUNTANT_PLD\"}; dpopt privacy "
          "commands: --accountant=pld), or a larger epsilon or delta"));
    }
  }
  return absl::OutOfRangeError(
      absl::StrCat("no noise multiplier up to ", max_noise_multiplier,
                   " reaches epsilon ", epsilon, " at delta ", delta));
}

}  // namespace

absl::StatusOr<double> CalibrateNoiseMultiplier(
    const std::function<DpEvent(double)>& make_event, double epsilon,
    double delta, AccountantKind kind, double max_noise_multiplier) {
  if (!(epsilon > 0) || !std::isfinite(epsilon)) {
    return absl::InvalidArgumentError(
        absl::StrCat("target epsilon must be finite and > 0, got ", epsilon));
  }
  RETURN_IF_ERROR(CheckDelta(delta));
  if (!(max_noise_multiplier > 0) || !std::isfinite(max_noise_multiplier)) {
    return absl::InvalidArgumentError("max_noise_multiplier must be > 0");
  }
  // A z whose epsilon cannot be computed within the accountant's limits
  // (OUT_OF_RANGE, e.g. a PLD grid too large for tiny z) counts as "does not
  // fit": only a z that was verified to fit is ever returned.
  auto fits = [&](double z) -> absl::StatusOr<bool> {
    absl::StatusOr<EpsilonResult> r =
        ComputeEpsilon(make_event(z), delta, kind);
    if (!r.ok() && absl::IsOutOfRange(r.status())) return false;
    if (!r.ok()) return r.status();
    return r->epsilon <= epsilon;
  };
  // Bracket: hi meets the target, lo does not (or lo == 0).
  double hi = std::min(1.0, max_noise_multiplier);
  double lo = 0;
  while (true) {
    ASSIGN_OR_RETURN(bool ok, fits(hi));
    if (ok) break;
    if (hi >= max_noise_multiplier) {
      return NoNoiseReaches(make_event, epsilon, delta, kind,
                            max_noise_multiplier);
    }
    lo = hi;
    hi = std::min(2 * hi, max_noise_multiplier);
  }
  if (lo == 0) {
    // Shrink from above to find a failing lower end (or give up at a tiny z).
    lo = hi;
    while (lo > 1e-6) {
      lo /= 2;
      ASSIGN_OR_RETURN(bool ok, fits(lo));
      if (!ok) break;
      hi = lo;
    }
    if (lo <= 1e-6) return hi;
  }
  // Invariant: fits(hi), !fits(lo). Stop at relative precision 1e-6; return
  // hi, so the target is never overshot.
  while (hi - lo > 1e-6 * hi) {
    const double mid = 0.5 * (lo + hi);
    ASSIGN_OR_RETURN(bool ok, fits(mid));
    (ok ? hi : lo) = mid;
  }
  return hi;
}

}  // namespace dpopt::privacy
