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

namespace dpopt::server {

// Whether `a` is a bilevel job type, and whether it trains a model of the
// spec's ModelSpec (dp_bilevel* do not: their problem defines the model).
bool IsBilevel(const v1::AlgorithmSpec& a);
bool BilevelUsesModel(const v1::AlgorithmSpec& a);
// Whether the job runs without privacy (dp_bilevel naive mode).
bool BilevelIsNonPrivate(const v1::AlgorithmSpec& a);

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
