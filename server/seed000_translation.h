// Translation of seed 000's AlgorithmSpec messages (fields 30-39) into
// core/optim/seed000 options. Called from the thin switch in
// spec_translation.cc. Every error is INVALID_ARGUMENT with a message that
// names the offending field.
#ifndef DPOPT_SERVER_SEED000_TRANSLATION_H_
#define DPOPT_SERVER_SEED000_TRANSLATION_H_

#include <string>

#include "absl/status/statusor.h"
#include "core/optim/seed000/dp_bilevel.h"
#include "core/optim/seed000/dp_tune.h"
#include "core/optim/seed000/grid_search.h"
#include "dpopt/v1/job_spec.pb.h"

namespace dpopt::server {

// Whether `a` is a seed-000 job type, and whether it trains a model of the
// spec's ModelSpec (dp_bilevel* do not: their problem defines the model).
bool IsSeed000(const v1::AlgorithmSpec& a);
bool Seed000UsesModel(const v1::AlgorithmSpec& a);
// Whether the job runs without privacy (dp_bilevel naive mode).
bool Seed000IsNonPrivate(const v1::AlgorithmSpec& a);

// dp_bilevel / dp_bilevel_minibatch (0 = default, see job_spec.proto).
absl::StatusOr<optim::seed000::DpBilevelOptions> TranslateDpBilevel(
    const v1::DpBilevel& m, bool minibatch, const std::string& field);

// dp_tune_regularization and dp_grid_search with the job's (translated)
// model.
absl::StatusOr<optim::seed000::DpTuneOptions> TranslateDpTune(
    const v1::DpTuneRegularization& m, const optim::ModelConfig& model,
    const std::string& field);
absl::StatusOr<optim::seed000::DpGridSearchOptions> TranslateDpGridSearch(
    const v1::DpGridSearch& m, const optim::ModelConfig& model,
    const std::string& field);

}  // namespace dpopt::server

#endif  // DPOPT_SERVER_SEED000_TRANSLATION_H_
