// Per-dataset privacy filter: decides whether a new charge fits the dataset's
// budget given all earlier charges, valid under fully adaptive composition.
//
// Costs are stored as opaque, serialized fixed-point strings ("cost blobs")
// so that storage/ can persist them without knowing their structure, and so
// that sums are exact integer sums (charges round up, budgets round down).
#ifndef DPOPT_CORE_PRIVACY_PRIVACY_FILTER_H_
#define DPOPT_CORE_PRIVACY_PRIVACY_FILTER_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/privacy/accountant.h"
#include "core/privacy/dp_event.h"

namespace dpopt::privacy {

enum class FilterKind { kRdp, kBasic };
enum class Relation { kAddRemove, kReplaceOne };

struct BudgetConfig {
  double epsilon = 0;
  double delta = 0;
  FilterKind filter = FilterKind::kRdp;
  Relation relation = Relation::kAddRemove;
  absl::Status Validate() const;
};

struct PricedCharge {
  std::string cost_blob;  // what the ledger stores
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
};

}  // namespace dpopt::privacy

#endif  // DPOPT_CORE_PRIVACY_PRIVACY_FILTER_H_
