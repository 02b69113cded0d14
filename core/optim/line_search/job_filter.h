// Job-internal privacy filter of the line-search algorithms
// (docs/architecture.md, invariant "the reservation is the guarantee": an
// adaptive algorithm runs its own privacy filter inside its reservation).
// Chen & Lee 2022 (Sec. 4.3, Thm 4) compose adaptively chosen accesses
// without one; a Renyi filter is what makes that sound.
//
// The server charges the ledger with the job's RESERVATION event R (from
// Calibrate()) before the job touches data. The ledger prices R by its RDP
// curve R(alpha) at the ledger's orders (privacy::DefaultRdpOrders() plus
// alpha = inf; see core/privacy/privacy_filter.h). Inside the job, the number
// of line searches and CHEB gradient draws, and their budgets, depend on
// released values; every data access is charged here first, priced by
// privacy::ComputeRdp of its exact DpEvent at the same orders (for a
// PoissonSampled event, the pointwise min of the amplified and the raw inner
// curve: subsampling never increases RDP).
//
// Rule (an ALL-orders Renyi filter): a charge c is admitted iff
//   spent(alpha) + c(alpha) <= R(alpha) (1 - 1e-9)   for EVERY order alpha.
// So for each fixed order the job is a Renyi-filtered adaptive composition
// with budget R(alpha) (Feldman & Zrnic 2021, Thm 3.1): the whole job is
// (alpha, R(alpha))-RDP at every ledger order, which is exactly what the
// ledger was charged, and it composes with the ledger's own filter like any
// fixed mechanism with curve R. (A per-order "some order alive" rule inside
// the job would NOT compose with the ledger's accounting, which is why the
// job does not use it; the price is stopping at the first exhausted order.)
// Refusal is RESOURCE_EXHAUSTED with no state change; the caller then does
// not touch data or draw randomness.
#ifndef DPOPT_CORE_OPTIM_LINE_SEARCH_JOB_FILTER_H_
#define DPOPT_CORE_OPTIM_LINE_SEARCH_JOB_FILTER_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/optim/release_budget.h"
#include "core/privacy/dp_event.h"

namespace dpopt::optim::line_search {

class JobPrivacyFilter final : public ReleaseBudget {
 public:
  // The ledger's orders: privacy::DefaultRdpOrders() plus +inf.
  static std::vector<double> LedgerOrders();

  // Errors: INVALID_ARGUMENT if the reservation is invalid or has no finite
  // RDP bound at any order; the accountant's error (e.g. UNIMPLEMENTED) if
  // it cannot be priced.
  static absl::StatusOr<std::unique_ptr<JobPrivacyFilter>> Create(
      const privacy::DpEvent& reservation,
      std::vector<double> orders = LedgerOrders());

  // Admits `event` under the all-orders rule above and records it.
  // RESOURCE_EXHAUSTED (nothing recorded) if some order would overflow;
  // the accountant's error if it cannot be priced.
  absl::Status Charge(const privacy::DpEvent& event) override;

  // OK if all of `events`, charged in sequence, would be admitted now
  // (used to check "gradient + one line search" before a gradient). Same
  // errors as Charge, without recording anything.
  absl::Status CanAfford(const std::vector<privacy::DpEvent>& events) const;

  // Composition of the charged events, consecutive repeats folded into
  // SelfComposed. NoOp if nothing was charged.
  privacy::DpEvent Spent() const override;

  const std::vector<double>& orders() const { return orders_; }
  const std::vector<double>& reservation_curve() const { return budget_; }
  const std::vector<double>& spent_curve() const { return spent_; }
  int64_t charges() const { return charges_; }

 private:
  JobPrivacyFilter(std::vector<double> orders, std::vector<double> budget);
  absl::StatusOr<std::vector<double>> Price(
      const privacy::DpEvent& event) const;

  std::vector<double> orders_;
  std::vector<double> budget_;  // R(alpha) (1 - 1e-9)
  std::vector<double> spent_;
  int64_t charges_ = 0;
  // Consecutive runs of identical events, in charge order.
  std::vector<std::pair<privacy::DpEvent, int64_t>> runs_;
  mutable std::map<std::string, std::vector<double>> cache_;
};

}  // namespace dpopt::optim::line_search

#endif  // DPOPT_CORE_OPTIM_LINE_SEARCH_JOB_FILTER_H_
