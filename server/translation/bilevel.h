// Translation of bilevel family's AlgorithmSpec messages (fields 30-39) into
// core/optim/bilevel options. Called from the thin switch in
// spec_translation.cc. Every error is INVALID_ARGUMENT with a message that
// names the offending field.
#ifndef DPOPT_SERVER_TRANSLATION_BILEVEL_H_
#define DPOPT_SERVER_TRANSLATION_BILEVEL_H_

#include <string>

#include "absl/status/statusor.h"
#include "core/optim/bilevel/dp_bilevel.h"
#include "core/optim/bilevel/dp_tune.h"
#include "core/optim/bilevel/grid_search.h"
#include "dpopt/v1/job_spec.pb.h"
#include "server/translation/job_family.h"

namespace dpopt::server {

// dp_bilevel, dp_bilevel_minibatch, dp_tune_regularization, dp_grid_search.
// dp_bilevel* solve a server-side catalogue problem (no ModelSpec; they
// release the outer variable); dp_bilevel with `naive` runs without privacy.
const JobFamily& BilevelFamily();

// dp_bilevel / dp_bilevel_minibatch (0 = default, see job_spec.proto).
absl::StatusOr<optim::bilevel::DpBilevelOptions> TranslateDpBilevel(
    const v1::DpBilevel& m, bool minibatch, const std::string& field);

// dp_tune_regularization and dp_grid_search with the job's (translated)
// model.
absl::StatusOr<optim::bilevel::DpTuneOptions> TranslateDpTune(
    const v1::DpTuneRegularization& m, const optim::ModelConfig& model,
    const std::string& field);
absl::StatusOr<optim::bilevel::DpGridSearchOptions> TranslateDpGridSearch(
    const v1::DpGridSearch& m, const optim::ModelConfig& model,
    const std::string& field);

}  // namespace dpopt::server

#endif  // DPOPT_SERVER_TRANSLATION_BILEVEL_H_
