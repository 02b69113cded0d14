#include "core/optim/line_search/job_filter.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "absl/strings/str_format.h"
#include "core/common/status_macros.h"
#include "core/privacy/rdp.h"

namespace dpopt::optim::line_search {
namespace {
// Safety margin against floating-point summation error.
constexpr double kMargin = 1e-9;
}  // namespace

std::vector<double> JobPrivacyFilter::LedgerOrders() {
  std::vector<double> orders = privacy::DefaultRdpOrders();
  orders.push_back(std::numeric_limits<double>::infinity());
  return orders;
}

JobPrivacyFilter::JobPrivacyFilter(std::vector<double> orders,
                                   std::vector<double> budget)
    : orders_(std::move(orders)),
      budget_(std::move(budget)),
      spent_(orders_.size(), 0.0) {}

absl::StatusOr<std::unique_ptr<JobPrivacyFilter>> JobPrivacyFilter::Create(
    const privacy::DpEvent& reservation, std::vector<double> orders) {
  ASSIGN_OR_RETURN(std::vector<double> curve,
                   privacy::ComputeRdp(reservation, orders));
  bool any_finite = false;
  for (double& r : curve) {
    if (std::isfinite(r)) {
      any_finite = true;
      r *= 1 - kMargin;
    }
  }
  if (!any_finite) {
    return absl::InvalidArgumentError(
        "the reservation has no finite RDP bound at any order");
  }
  return std::unique_ptr<JobPrivacyFilter>(
      new JobPrivacyFilter(std::move(orders), std::move(curve)));
}

absl::StatusOr<std::vector<double>> JobPrivacyFilter::Price(
    const privacy::DpEvent& event) const {
  const std::string key = event.ToJson();
  auto it = cache_.find(key);
  if (it != cache_.end()) return it->second;
  ASSIGN_OR_RETURN(std::vector<double> c, privacy::ComputeRdp(event, orders_));
  if (event.kind() == privacy::DpEvent::Kind::kPoissonSampled) {
    // Poisson subsampling never increases RDP (joint convexity of
    // e^{(a-1) D_a}): min(amplified, raw) is valid pointwise.
    ASSIGN_OR_RETURN(std::vector<double> raw,
                     privacy::ComputeRdp(event.inner(), orders_));
    for (size_t i = 0; i < c.size(); ++i) c[i] = std::min(c[i], raw[i]);
  }
  if (cache_.size() > 256) cache_.clear();
  cache_.emplace(key, c);
  return c;
}

absl::Status JobPrivacyFilter::CanAfford(
    const std::vector<privacy::DpEvent>& events) const {
  std::vector<double> total = spent_;
  for (const privacy::DpEvent& e : events) {
    ASSIGN_OR_RETURN(std::vector<double> c, Price(e));
    for (size_t i = 0; i < total.size(); ++i) total[i] += c[i];
  }
  for (size_t i = 0; i < total.size(); ++i) {
    // Orders where the reservation is infinite never bind.
    if (std::isinf(budget_[i])) continue;
    if (!(total[i] <= budget_[i])) {
      return absl::ResourceExhaustedError(absl::StrFormat(
          "job-internal privacy filter: the reservation cannot pay for the "
          "next release (order %g: %.6g of %.6g RDP used)",
          orders_[i], spent_[i], budget_[i]));
    }
  }
  return absl::OkStatus();
}

absl::Status JobPrivacyFilter::Charge(const privacy::DpEvent& event) {
  RETURN_IF_ERROR(CanAfford({event}));
  ASSIGN_OR_RETURN(std::vector<double> c, Price(event));
  for (size_t i = 0; i < spent_.size(); ++i) spent_[i] += c[i];
  ++charges_;
  if (!runs_.empty() && runs_.back().first == event) {
    ++runs_.back().second;
  } else {
    runs_.emplace_back(event, 1);
  }
  return absl::OkStatus();
}

privacy::DpEvent JobPrivacyFilter::Spent() const {
  std::vector<privacy::DpEvent> parts;
  for (const auto& [event, count] : runs_) {
    parts.push_back(count == 1 ? event
                               : privacy::DpEvent::SelfComposed(count, event));
  }
  if (parts.empty()) return privacy::DpEvent::NoOp();
  if (parts.size() == 1) return parts.front();
  return privacy::DpEvent::Composed(std::move(parts));
}

}  // namespace dpopt::optim::line_search
