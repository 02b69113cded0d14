// libFuzzer target: DP event JSON (the ledger's stored form) and its
// pricing by the RDP accountant. A parsed event must round-trip
// through ToJson, and pricing must give a non-negative epsilon or a clear
// error, never a crash or NaN.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "absl/strings/string_view.h"
#include "core/privacy/accountant.h"
#include "core/privacy/dp_event.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 4096) return 0;  // bounded: deep nesting is refused anyway
  const absl::string_view json(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<dpopt::privacy::DpEvent> event =
      dpopt::privacy::DpEvent::FromJson(json);
  if (!event.ok()) return 0;
  absl::StatusOr<dpopt::privacy::DpEvent> again =
      dpopt::privacy::DpEvent::FromJson(event->ToJson());
  if (!again.ok() || !(*again == *event)) std::abort();
  absl::StatusOr<dpopt::privacy::EpsilonResult> eps =
      dpopt::privacy::ComputeEpsilon(*event, 1e-6,
                                     dpopt::privacy::AccountantKind::kRdp);
  if (eps.ok() && (std::isnan(eps->epsilon) || eps->epsilon < 0)) {
    std::abort();
  }
  return 0;
}
