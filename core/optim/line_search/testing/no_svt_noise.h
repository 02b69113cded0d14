// TEST ONLY. NOT DIFFERENTIALLY PRIVATE.
//
// Sparse-vector noise doubles for known-answer tests of NOISYBTLS (noise off
// = exact Armijo backtracking; one threshold draw per call): zero noise,
// optionally counting the draws. Lives in target
// dpopt_optim_line_search_testing, which the server never links.
#ifndef DPOPT_CORE_OPTIM_LINE_SEARCH_TESTING_NO_SVT_NOISE_H_
#define DPOPT_CORE_OPTIM_LINE_SEARCH_TESTING_NO_SVT_NOISE_H_

#include <cstdint>

#include "core/optim/line_search/svt_line_search.h"

namespace dpopt::optim::line_search::testing {

// Returns 0 for every draw and counts them. NOT DP.
class ZeroSvtNoiseForTesting final : public SvtNoise {
 public:
  absl::StatusOr<int64_t> Threshold(const SvtPlan& plan,
                                    noise::RandomSource& rng) const override {
    ++threshold_draws_;
    return 0;
  }
  absl::StatusOr<int64_t> Query(const SvtPlan& plan,
                                noise::RandomSource& rng) const override {
    ++query_draws_;
    return 0;
  }
  int64_t threshold_draws() const { return threshold_draws_; }
  int64_t query_draws() const { return query_draws_; }

 private:
  mutable int64_t threshold_draws_ = 0;
  mutable int64_t query_draws_ = 0;
};

}  // namespace dpopt::optim::line_search::testing

#endif  // DPOPT_CORE_OPTIM_LINE_SEARCH_TESTING_NO_SVT_NOISE_H_
