#include "core/privacy/privacy_filter.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "core/common/status_macros.h"
#include "core/privacy/rdp.h"

namespace dpopt::privacy {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// ---- Fixed point ----
// A Units value is a non-negative int64 count of 1/scale, or kUnitsInf.
using Units = int64_t;
constexpr Units kUnitsInf = std::numeric_limits<int64_t>::max();
constexpr double kEpsScale = 1e12;    // RDP values and epsilons
constexpr double kDeltaScale = 1e18;  // deltas (<= 1, fits in int64)
// Largest finite value we store; anything above saturates to infinity (no
// budget is anywhere near it).
constexpr double kMaxFiniteUnits = 9.0e18;

// Smallest n with n / scale >= x (x >= 0), checked in double arithmetic after
// the multiplication, so decimal values such as 0.5 or 0.1 map to exactly
// 5e11 / 1e11 units. +inf and values beyond the range saturate to kUnitsInf.
Units RoundUp(double x, double scale) {
  if (!(x >= 0)) x = 0;  // never reached for validated inputs
  if (std::isinf(x) || x * scale >= kMaxFiniteUnits) return kUnitsInf;
  double n = std::ceil(x * scale);
  while (n / scale < x) n = std::nextafter(n, kInf);
  if (n >= kMaxFiniteUnits) return kUnitsInf;
  return static_cast<Units>(n);
}

// Largest n with n / scale <= x; negative budgets mean "no room" (-1).
Units RoundDown(double x, double scale) {
  if (std::isnan(x) || x < 0) return -1;
  if (std::isinf(x) || x * scale >= kMaxFiniteUnits) {
    return static_cast<Units>(kMaxFiniteUnits);
  }
  double n = std::floor(x * scale);
  while (n > 0 && n / scale > x) n = std::nextafter(n, 0.0);
  return static_cast<Units>(n);
}

Units SatAdd(Units a, Units b) {
  if (a == kUnitsInf || b == kUnitsInf) return kUnitsInf;
  if (a > kUnitsInf - b) return kUnitsInf;
  return a + b;
}

std::string UnitsToString(Units u) {
  return u == kUnitsInf ? "inf" : absl::StrCat(u);
}

double UnitsToDouble(Units u, double scale) {
  return u == kUnitsInf ? kInf : static_cast<double>(u) / scale;
}

bool ParseUnits(absl::string_view s, Units* out) {
  if (s == "inf") {
    *out = kUnitsInf;
    return true;
  }
  if (s.empty() || s.size() > 19) return false;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
  }
  return absl::SimpleAtoi(s, out) && *out >= 0;
}

constexpr absl::string_view kBlobPrefix = "dpopt.cost.v1";

absl::Status Corrupt(absl::string_view why) {
  return absl::DataLossError(
      absl::StrCat("corrupt privacy ledger cost blob: ", why));
}

bool ContainsKind(const DpEvent& e, DpEvent::Kind kind) {
  if (e.kind() == kind) return true;
  for (const DpEvent& c : e.events()) {
    if (ContainsKind(c, kind)) return true;
  }
  return false;
}

// Sampling analyses hold for one relation only: Poisson subsampling
// (Mironov, Talwar, Zhang 2019) under add/remove, sampling without
// replacement (Wang, Balle, Kasiviswanathan 2019) under replace-one.
absl::Status CheckSamplingRelation(const DpEvent& event, Relation relation) {
  if (relation == Relation::kReplaceOne &&
      ContainsKind(event, DpEvent::Kind::kPoissonSampled)) {
    return absl::FailedPreconditionError(
        "a Poisson-sampled event is analysed under the add/remove relation; "
        "it cannot be declared replace-one");
  }
  if (relation == Relation::kAddRemove &&
      ContainsKind(event, DpEvent::Kind::kSampledWithoutReplacement)) {
    return absl::FailedPreconditionError(
        "a sampled-without-replacement event is analysed under the "
        "replace-one relation; it cannot be declared add/remove");
  }
  return absl::OkStatus();
}

absl::StatusOr<DpEvent> ToReplaceOne(const DpEvent& e, int depth) {
  using K = DpEvent::Kind;
  switch (e.kind()) {
    case K::kNoOp:
      return e;
    case K::kGaussian:
      return DpEvent::Gaussian(e.noise_multiplier() / 2);
    case K::kLaplace:
      return DpEvent::Laplace(e.noise_multiplier() / 2);
    case K::kDiscreteGaussian:
      return DpEvent::DiscreteGaussian(e.noise_multiplier() / 2,
                                       e.sigma_in_grid_units(), e.dimension());
    case K::kDiscreteLaplace:
      return DpEvent::DiscreteLaplace(e.noise_multiplier() / 2);
    case K::kExponential:
      return DpEvent::Exponential(2 * e.epsilon());
    case K::kSparseVector:
      return DpEvent::SparseVector(2 * e.epsilon());
    case K::kExponentialMechanisms:
      // Group privacy of each pure share (its bounded range doubles too).
      return DpEvent::ExponentialMechanisms(2 * e.epsilon(), e.count());
    case K::kGaussianSparseVector:
      // Replace-one queries have at most twice the add/remove sensitivity, and
      // the Zhu-Wang bound holds for any relation given the queries'
      // sensitivity under it: halve both multipliers (as for kGaussian).
      return DpEvent::GaussianSparseVector(e.threshold_noise_multiplier() / 2,
                                           e.query_noise_multiplier() / 2,
                                           e.max_queries());
    case K::kEpsilonDelta:
      return DpEvent::EpsilonDelta(
          2 * e.epsilon(),
          std::min(1.0, (1 + std::exp(e.epsilon())) * e.delta()));
    case K::kPoissonSampled:
    case K::kSampledWithoutReplacement:
      return absl::FailedPreconditionError(
          "no proven conversion of a sampled add/remove event to the "
          "replace-one relation");
    case K::kSelfComposed: {
      ASSIGN_OR_RETURN(DpEvent inner, ToReplaceOne(e.inner(), depth + 1));
      return DpEvent::SelfComposed(e.count(), std::move(inner));
    }
    case K::kComposed: {
      std::vector<DpEvent> events;
      for (const DpEvent& c : e.events()) {
        ASSIGN_OR_RETURN(DpEvent x, ToReplaceOne(c, depth + 1));
        events.push_back(std::move(x));
      }
      return DpEvent::Composed(std::move(events));
    }
  }
  return absl::InvalidArgumentError("unknown DpEvent kind");
}

std::string FormatEps(double x) { return absl::StrFormat("%.6g", x); }

// ---------------------------------------------------------------------------
// RDP filter.
class RdpFilter : public PrivacyFilter {
 public:
  explicit RdpFilter(const BudgetConfig& config) : config_(config) {
    orders_ = DefaultRdpOrders();
    orders_.push_back(kInf);
    delta_per_order_ = config.delta / static_cast<double>(orders_.size());
    budgets_.reserve(orders_.size());
    for (double a : orders_) {
      double b;
      if (std::isinf(a)) {
        b = config.epsilon;
      } else if (delta_per_order_ > 0) {
        // Inverse of BBGHS20 Prop. 12 at (epsilon, delta_a).
        b = config.epsilon - std::log1p(-1 / a) +
            std::log(delta_per_order_ * a) / (a - 1);
      } else {
        b = -1;  // delta = 0: only pure DP (alpha = inf) can be certified.
      }
      // Round down; finite orders lose one more unit for floating-point
      // error in the transcendental functions above. B(inf) = epsilon is
      // exact.
      Units u = RoundDown(b, kEpsScale);
      budgets_.push_back(u > 0 && !std::isinf(a) ? u - 1 : u);
    }
  }

  absl::StatusOr<PricedCharge> Price(const DpEvent& event,
                                     AccountantKind accountant,
                                     Relation event_relation) const override {
    RETURN_IF_ERROR(event.Validate());
    RETURN_IF_ERROR(CheckSamplingRelation(event, event_relation));
    ASSIGN_OR_RETURN(DpEvent charged, ConvertToRelation(event, event_relation,
                                                        config_.relation));
    ASSIGN_OR_RETURN(std::vector<double> rdp, ComputeRdp(charged, orders_));
    std::vector<std::string> parts;
    parts.reserve(rdp.size());
    for (size_t i = 0; i < rdp.size(); ++i) {
      // Finite orders: computed value, round up and pad one unit for
      // floating-point error. Order inf holds pure-DP epsilons (exact sums
      // and products of the events' epsilons): round up only.
      const Units u = RoundUp(rdp[i], kEpsScale);
      parts.push_back(
          UnitsToString(std::isinf(orders_[i]) || u == 0 ? u : SatAdd(u, 1)));
    }
    PricedCharge out;
    out.cost_blob = absl::StrCat(kBlobPrefix, "|rdp|", rdp.size(), "|",
                                 absl::StrJoin(parts, ","));
    // The displayed epsilon comes from the requested accountant; if it
    // cannot price this event (e.g. PLD and the discrete Gaussian), from RDP,
    // and the charge records "rdp".
    absl::StatusOr<EpsilonResult> display =
        ComputeEpsilon(charged, config_.delta, accountant);
    if (!display.ok() && absl::IsUnimplemented(display.status())) {
      accountant = AccountantKind::kRdp;
      display = ComputeEpsilon(charged, config_.delta, accountant);
    }
    out.accountant = AccountantName(accountant);
    ASSIGN_OR_RETURN(EpsilonResult eps, std::move(display));
    out.epsilon = UnitsToDouble(RoundUp(eps.epsilon, kEpsScale), kEpsScale);
    out.delta = config_.delta;
    return out;
  }

  absl::Status Admit(const std::vector<std::string>& existing,
                     const std::string& next) const override {
    ASSIGN_OR_RETURN(std::vector<Units> spent, Sum(existing));
    ASSIGN_OR_RETURN(std::vector<Units> cost, Parse(next));
    for (size_t i = 0; i < orders_.size(); ++i) {
      const Units total = SatAdd(spent[i], cost[i]);
      if (total != kUnitsInf && budgets_[i] >= 0 && total <= budgets_[i]) {
        return absl::OkStatus();
      }
    }
    ASSIGN_OR_RETURN(BudgetView view, ViewOf(spent));
    return absl::ResourceExhaustedError(absl::StrCat(
        "privacy budget exceeded: remaining epsilon ",
        FormatEps(view.epsilon_remaining), " of ",
        FormatEps(view.epsilon_total), " at delta ",
        FormatEps(view.delta_total),
        " (RDP filter); this charge does not fit at any RDP order"));
  }

  absl::StatusOr<BudgetView> View(
      const std::vector<std::string>& existing) const override {
    ASSIGN_OR_RETURN(std::vector<Units> spent, Sum(existing));
    return ViewOf(spent);
  }

  absl::StatusOr<std::string> Fold(
      const std::vector<std::string>& costs) const override {
    ASSIGN_OR_RETURN(std::vector<Units> sum, Sum(costs));
    std::vector<std::string> parts;
    parts.reserve(sum.size());
    for (Units u : sum) parts.push_back(UnitsToString(u));
    return absl::StrCat(kBlobPrefix, "|rdp|", sum.size(), "|",
                        absl::StrJoin(parts, ","));
  }

 private:
  absl::StatusOr<std::vector<Units>> Parse(const std::string& blob) const {
    std::vector<absl::string_view> fields = absl::StrSplit(blob, '|');
    if (fields.size() != 4 || fields[0] != kBlobPrefix) {
      return Corrupt("bad header");
    }
    if (fields[1] != "rdp") {
      return Corrupt(absl::StrCat("expected an rdp cost, got '", fields[1],
                                  "' (filter kind mismatch)"));
    }
    if (fields[2] != absl::StrCat(orders_.size())) {
      return Corrupt("wrong number of RDP orders");
    }
    std::vector<absl::string_view> values = absl::StrSplit(fields[3], ',');
    if (values.size() != orders_.size()) return Corrupt("wrong value count");
    std::vector<Units> out(values.size());
    for (size_t i = 0; i < values.size(); ++i) {
      if (!ParseUnits(values[i], &out[i])) return Corrupt("bad value");
    }
    return out;
  }

  absl::StatusOr<std::vector<Units>> Sum(
      const std::vector<std::string>& blobs) const {
    std::vector<Units> sum(orders_.size(), 0);
    for (const std::string& b : blobs) {
      ASSIGN_OR_RETURN(std::vector<Units> c, Parse(b));
      for (size_t i = 0; i < sum.size(); ++i) sum[i] = SatAdd(sum[i], c[i]);
    }
    return sum;
  }

  // epsilon certified so far: the best order still within its budget,
  // converted at delta_a (rounded up); the total if none is.
  absl::StatusOr<BudgetView> ViewOf(const std::vector<Units>& spent) const {
    BudgetView v;
    v.epsilon_total = config_.epsilon;
    v.delta_total = config_.delta;
    double best = kInf;
    for (size_t i = 0; i < orders_.size(); ++i) {
      if (spent[i] == kUnitsInf || budgets_[i] < 0 || spent[i] > budgets_[i]) {
        continue;
      }
      const double a = orders_[i];
      const double r = UnitsToDouble(spent[i], kEpsScale);
      const double eps = std::isinf(a)
                             ? r
                             : r + std::log1p(-1 / a) -
                                   std::log(delta_per_order_ * a) / (a - 1);
      best = std::min(best, std::max(0.0, eps));
    }
    const double spent_eps = std::min(config_.epsilon, best);
    v.epsilon_spent = UnitsToDouble(RoundUp(spent_eps, kEpsScale), kEpsScale);
    v.epsilon_spent = std::min(v.epsilon_spent, config_.epsilon);
    v.epsilon_remaining = std::max(
        0.0,
        UnitsToDouble(RoundDown(config_.epsilon - v.epsilon_spent, kEpsScale),
                      kEpsScale));
    if (v.epsilon_spent >= config_.epsilon) v.epsilon_remaining = 0;
    v.accounting =
        absl::StrCat("RDP filter (Feldman-Zrnic 2021) over ", orders_.size(),
                     " orders (1.1..1024 and inf), delta split evenly (",
                     FormatEps(delta_per_order_), " per order), ",
                     RelationName(config_.relation), " relation");
    return v;
  }

  BudgetConfig config_;
  std::vector<double> orders_;
  double delta_per_order_ = 0;
  std::vector<Units> budgets_;  // per order; -1 = no room at all
};

// ---------------------------------------------------------------------------
// Basic composition filter.
class BasicFilter : public PrivacyFilter {
 public:
  explicit BasicFilter(const BudgetConfig& config) : config_(config) {
    eps_budget_ = RoundDown(config.epsilon, kEpsScale);
    delta_budget_ = RoundDown(config.delta, kDeltaScale);
    charge_delta_ = config.basic_delta_per_charge > 0
                        ? config.basic_delta_per_charge
                        : config.delta / 10;
  }

  absl::StatusOr<PricedCharge> Price(const DpEvent& event,
                                     AccountantKind accountant,
                                     Relation event_relation) const override {
    RETURN_IF_ERROR(event.Validate());
    RETURN_IF_ERROR(CheckSamplingRelation(event, event_relation));
    ASSIGN_OR_RETURN(DpEvent charged, ConvertToRelation(event, event_relation,
                                                        config_.relation));
    double eps, delta;
    bool exact = false;
    if (charged.kind() == DpEvent::Kind::kEpsilonDelta) {
      eps = charged.epsilon();
      delta = charged.delta();
      exact = true;
    } else if (charged.kind() == DpEvent::Kind::kExponential ||
               charged.kind() == DpEvent::Kind::kExponentialMechanisms ||
               charged.kind() == DpEvent::Kind::kSparseVector) {
      eps = charged.epsilon();
      delta = 0;
      exact = true;
    } else {
      // Pure DP if some accountant certifies a finite epsilon at delta = 0.
      absl::StatusOr<EpsilonResult> pure =
          ComputeEpsilon(charged, 0, AccountantKind::kRdp);
      if (pure.ok() && std::isfinite(pure->epsilon)) {
        eps = pure->epsilon;
        delta = 0;
      } else {
        delta = charge_delta_;
        ASSIGN_OR_RETURN(EpsilonResult r,
                         ComputeEpsilon(charged, delta, accountant));
        eps = r.epsilon;
      }
    }
    // Exact user-given values round up to the unit; computed ones get one
    // extra unit for floating-point error.
    const Units eu = (exact || eps == 0) ? RoundUp(eps, kEpsScale)
                                         : SatAdd(RoundUp(eps, kEpsScale), 1);
    const Units du = RoundUp(delta, kDeltaScale);
    PricedCharge out;
    out.cost_blob = absl::StrCat(kBlobPrefix, "|basic|", UnitsToString(eu), "|",
                                 UnitsToString(du));
    out.accountant = AccountantName(accountant);
    out.epsilon = UnitsToDouble(eu, kEpsScale);
    out.delta = UnitsToDouble(du, kDeltaScale);
    return out;
  }

  absl::Status Admit(const std::vector<std::string>& existing,
                     const std::string& next) const override {
    ASSIGN_OR_RETURN(auto spent, Sum(existing));
    ASSIGN_OR_RETURN(auto cost, Parse(next));
    const Units e = SatAdd(spent.first, cost.first);
    const Units d = SatAdd(spent.second, cost.second);
    if (e != kUnitsInf && d != kUnitsInf && e <= eps_budget_ &&
        d <= delta_budget_) {
      return absl::OkStatus();
    }
    return absl::ResourceExhaustedError(absl::StrCat(
        "privacy budget exceeded: remaining epsilon ",
        FormatEps(RemainingEps(spent.first)), " of ",
        FormatEps(config_.epsilon), ", remaining delta ",
        FormatEps(RemainingDelta(spent.second)), " of ",
        FormatEps(config_.delta),
        " (basic composition); this charge needs "
        "epsilon ",
        FormatEps(UnitsToDouble(cost.first, kEpsScale)), ", delta ",
        FormatEps(UnitsToDouble(cost.second, kDeltaScale))));
  }

  absl::StatusOr<BudgetView> View(
      const std::vector<std::string>& existing) const override {
    ASSIGN_OR_RETURN(auto spent, Sum(existing));
    BudgetView v;
    v.epsilon_total = config_.epsilon;
    v.delta_total = config_.delta;
    v.epsilon_spent = UnitsToDouble(spent.first, kEpsScale);
    v.epsilon_remaining = RemainingEps(spent.first);
    v.accounting =
        absl::StrCat("basic composition of (epsilon, delta); delta spent ",
                     FormatEps(UnitsToDouble(spent.second, kDeltaScale)), ", ",
                     RelationName(config_.relation), " relation");
    return v;
  }

  absl::StatusOr<std::string> Fold(
      const std::vector<std::string>& costs) const override {
    ASSIGN_OR_RETURN(auto sum, Sum(costs));
    return absl::StrCat(kBlobPrefix, "|basic|", UnitsToString(sum.first), "|",
                        UnitsToString(sum.second));
  }

 private:
  double RemainingEps(Units spent) const {
    if (spent == kUnitsInf || spent >= eps_budget_) return 0;
    return UnitsToDouble(eps_budget_ - spent, kEpsScale);
  }
  double RemainingDelta(Units spent) const {
    if (spent == kUnitsInf || spent >= delta_budget_) return 0;
    return UnitsToDouble(delta_budget_ - spent, kDeltaScale);
  }

  absl::StatusOr<std::pair<Units, Units>> Parse(const std::string& blob) const {
    std::vector<absl::string_view> f = absl::StrSplit(blob, '|');
    if (f.size() != 4 || f[0] != kBlobPrefix) return Corrupt("bad header");
    if (f[1] != "basic") {
      return Corrupt(absl::StrCat("expected a basic cost, got '", f[1],
                                  "' (filter kind mismatch)"));
    }
    std::pair<Units, Units> out;
    if (!ParseUnits(f[2], &out.first) || !ParseUnits(f[3], &out.second)) {
      return Corrupt("bad value");
    }
    return out;
  }

  absl::StatusOr<std::pair<Units, Units>> Sum(
      const std::vector<std::string>& blobs) const {
    std::pair<Units, Units> s{0, 0};
    for (const std::string& b : blobs) {
      ASSIGN_OR_RETURN(auto c, Parse(b));
      s.first = SatAdd(s.first, c.first);
      s.second = SatAdd(s.second, c.second);
    }
    return s;
  }

  BudgetConfig config_;
  Units eps_budget_ = 0, delta_budget_ = 0;
  double charge_delta_ = 0;
};

}  // namespace

absl::Status BudgetConfig::Validate() const {
  if (!std::isfinite(epsilon) || epsilon < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("epsilon budget must be finite and >= 0, got ", epsilon));
  }
  if (!(delta >= 0 && delta < 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("delta budget must be in [0, 1), got ", delta));
  }
  if (!(basic_delta_per_charge >= 0 && basic_delta_per_charge <= delta)) {
    return absl::InvalidArgumentError(
        "basic_delta_per_charge must be in [0, delta]");
  }
  if (filter != FilterKind::kRdp && filter != FilterKind::kBasic) {
    return absl::InvalidArgumentError("unknown filter kind");
  }
  if (relation != Relation::kAddRemove && relation != Relation::kReplaceOne &&
      relation != Relation::kLinfOffsets) {
    return absl::InvalidArgumentError("unknown relation");
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<PrivacyFilter>> PrivacyFilter::Create(
    const BudgetConfig& config) {
  RETURN_IF_ERROR(config.Validate());
  if (config.filter == FilterKind::kBasic) {
    return std::unique_ptr<PrivacyFilter>(new BasicFilter(config));
  }
  return std::unique_ptr<PrivacyFilter>(new RdpFilter(config));
}

std::string RelationName(Relation relation) {
  switch (relation) {
    case Relation::kReplaceOne:
      return "replace_one";
    case Relation::kLinfOffsets:
      return "linf_offsets";
    case Relation::kAddRemove:
      break;
  }
  return "add_remove";
}

absl::StatusOr<Relation> ParseRelation(absl::string_view name) {
  if (name == "add_remove") return Relation::kAddRemove;
  if (name == "replace_one") return Relation::kReplaceOne;
  if (name == "linf_offsets") return Relation::kLinfOffsets;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown relation '", name,
                   "' (expected add_remove, replace_one or linf_offsets)"));
}

absl::StatusOr<DpEvent> ConvertToRelation(const DpEvent& event, Relation from,
                                          Relation to) {
  RETURN_IF_ERROR(event.Validate());
  if (from == to) return event;
  if (from == Relation::kLinfOffsets || to == Relation::kLinfOffsets) {
    return absl::FailedPreconditionError(absl::StrCat(
        "an event analysed under the ", RelationName(from),
        " relation cannot be charged to a dataset whose relation is ",
        RelationName(to),
        " (no proven conversion; piecewise-affine family's l-infinity "
        "offset relation is never mixed with the others)"));
  }
  if (from == Relation::kReplaceOne) {
    return absl::FailedPreconditionError(
        "an event analysed under replace-one cannot be charged to an "
        "add/remove dataset (no proven conversion)");
  }
  return ToReplaceOne(event, 0);
}

}  // namespace dpopt::privacy
