// Per-dataset privacy filter: decides whether a new charge fits the dataset's
// budget given all earlier charges, valid under fully adaptive composition.
//
// Costs are stored as opaque, serialized fixed-point strings ("cost blobs")
// so that storage/ can persist them without knowing their structure, and so
// that sums are exact integer sums (charges round up, budgets round down).
//
// Guarantee (see core/privacy/README.md):
//
// * FilterKind::kRdp (default): one fully adaptive RDP filter per order alpha
//   of DefaultRdpOrders() plus alpha = inf (Feldman & Zrnic 2021, Thm. 3.1;
//   Lecuyer 2021). delta is split evenly over the K orders, delta_a =
//   delta / K, and order a gets the RDP budget
//     B(a) = epsilon - log1p(-1/a) + log(delta_a * a) / (a - 1)   (a finite),
//     B(inf) = epsilon,
//   the largest RDP level that the improved conversion (Balle et al. 2020,
//   Prop. 12) turns into (epsilon, delta_a)-DP. A charge is admitted iff SOME
//   order still has room after it (PrivateKube's rule, Luo et al. 2021): the
//   orders whose budget is exceeded are simply dead. At any stopping time at
//   least one order has stayed within its budget throughout, so by a union
//   bound over the orders the whole (fully adaptive) interaction is
//   (epsilon, sum_a delta_a) = (epsilon, delta)-DP.
//   An event is always charged its RDP curve (ComputeRdp), whatever
//   accountant the caller chose: the accountant only affects calibration and
//   the displayed stand-alone epsilon of the charge. Events RDP cannot price
//   (EpsilonDelta with delta > 0, ...) get UNIMPLEMENTED; use kBasic for them.
// * FilterKind::kBasic: basic composition of (epsilon_i, delta_i), which is
//   valid under fully adaptive composition (Rogers, Roth, Ullman, Vadhan 2016,
//   Thm. 3.6). A charge is priced at delta_i = 0 if the event is pure DP,
//   EpsilonDelta events at their own (epsilon, delta), and every other event
//   at delta_i = BudgetConfig::basic_delta_per_charge (default delta / 10)
//   with epsilon_i from the chosen accountant.
//
// Fixed point: RDP values and epsilons are stored in units of 1e-12, deltas
// in units of 1e-18, as int64 sums (saturating to "inf"). Costs round up,
// budgets round down. Values computed with transcendental functions (RDP at
// finite orders, accountant epsilons) get one extra unit and their budgets
// one unit less, against floating-point error; exact epsilons (pure DP at
// order inf, EpsilonDelta, exponential, sparse vector) round up to the unit
// only, so 0.5 + 0.5 fills a budget of 1 exactly, under both filters.
//
// Relations (docs/architecture.md, invariant "one neighbouring relation per
// dataset"): an event analysed under the dataset's relation is charged as is.
// An add/remove event charged to a replace-one dataset is converted by group
// privacy with group size 2 (ConvertToRelation); a replace-one event on an
// add/remove dataset, or a sampled add/remove event on a replace-one dataset,
// is refused with FAILED_PRECONDITION.
#ifndef DPOPT_CORE_PRIVACY_PRIVACY_FILTER_H_
#define DPOPT_CORE_PRIVACY_PRIVACY_FILTER_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/privacy/accountant.h"
#include "core/privacy/dp_event.h"

namespace dpopt::privacy {

enum class FilterKind { kRdp, kBasic };
// kLinfOffsets: piecewise-affine family's relation (Han, Topcu & Pappas 2014,
// eq. (4)) on max-affine problems: public slopes, private offsets b, Adj(b, b')
// iff max_i |b_i - b'_i| <= b_max (a public, curator-declared radius). Events
// analysed under it (pure epsilon-DP mechanisms) are charged only to datasets
// declared with it, and no other relation converts to or from it.
enum class Relation { kAddRemove, kReplaceOne, kLinfOffsets };

struct BudgetConfig {
  double epsilon = 0;
  double delta = 0;
  FilterKind filter = FilterKind::kRdp;
  Relation relation = Relation::kAddRemove;
  // kBasic only: delta charged to an approximate-DP event that is not an
  // EpsilonDelta event; 0 means delta / 10.
  double basic_delta_per_charge = 0;
  // epsilon >= 0 finite, 0 <= delta < 1, basic_delta_per_charge in [0, delta].
  absl::Status Validate() const;
};

struct PricedCharge {
  std::string cost_blob;   // what the ledger stores
  std::string accountant;  // which accountant priced it ("rdp", "pld", ...)
  // Stand-alone (epsilon, delta) of the charge at the dataset's delta
  // (rounded up), for display.
  double epsilon = 0;
  double delta = 0;
};

struct BudgetView {
  double epsilon_total = 0;
  double delta_total = 0;
  double epsilon_spent = 0;      // at delta_total, under the filter
  double epsilon_remaining = 0;  // at delta_total, under the filter; >= 0
  std::string accounting;        // human-readable description
};

class PrivacyFilter {
 public:
  virtual ~PrivacyFilter() = default;
  static absl::StatusOr<std::unique_ptr<PrivacyFilter>> Create(
      const BudgetConfig& config);

  // Prices `event`, analysed under `event_relation`, for this dataset.
  // Errors: INVALID_ARGUMENT for invalid events; FAILED_PRECONDITION if the
  // relation does not match the dataset's and no proven conversion applies.
  virtual absl::StatusOr<PricedCharge> Price(const DpEvent& event,
                                             AccountantKind accountant,
                                             Relation event_relation) const = 0;

  // OK if `next` fits after `existing`; RESOURCE_EXHAUSTED (message says how
  // much epsilon is left) otherwise; DATA_LOSS if a stored blob is corrupt.
  virtual absl::Status Admit(const std::vector<std::string>& existing,
                             const std::string& next) const = 0;

  virtual absl::StatusOr<BudgetView> View(
      const std::vector<std::string>& existing) const = 0;

  // One cost blob, in the same format, holding the exact sum of `costs`
  // (the fixed-point sum Admit and View compute; saturating, so the sum of
  // non-negative units is associative): Admit({Fold(c)}, next) ==
  // Admit(c, next) and View({Fold(c)}) == View(c) for every c. Lets the
  // ledger keep a running total per dataset instead of re-reading every
  // charge (storage/ledger.h). Fold({}) is the zero cost. DATA_LOSS if a
  // blob is corrupt or of the other filter kind.
  virtual absl::StatusOr<std::string> Fold(
      const std::vector<std::string>& costs) const = 0;
};

// "add_remove" / "replace_one" / "linf_offsets".
std::string RelationName(Relation relation);
absl::StatusOr<Relation> ParseRelation(absl::string_view name);

// Rewrites `event`, analysed under `from`, into an event valid under `to`.
// Identity when from == to. add/remove -> replace-one uses group privacy
// for a group of size 2 (a replace is a remove plus an add): noise
// multipliers of (discrete) Gaussian and Laplace mechanisms are halved
// (sensitivity doubles by the triangle inequality), pure epsilons double, and
// EpsilonDelta(eps, delta) becomes (2 eps, (1 + e^eps) delta) (Dwork & Roth
// 2014, Thm. 2.2 / Vadhan 2017, Lemma 2.2). Sampling wrappers, replace-one
// -> add/remove, and any conversion to or from kLinfOffsets have no proven
// conversion here: FAILED_PRECONDITION.
absl::StatusOr<DpEvent> ConvertToRelation(const DpEvent& event, Relation from,
                                          Relation to);

}  // namespace dpopt::privacy

#endif  // DPOPT_CORE_PRIVACY_PRIVACY_FILTER_H_
