#include "server/translation/line_search.h"

#include "core/common/status_macros.h"
#include "core/optim/line_search/dp_line_search.h"

namespace dpopt::server {
namespace {

namespace ls = optim::line_search;
using v1::AlgorithmSpec;

// DpBacktrackingLineSearch -> options. Fields left at 0 keep the core
// default (ls::DpLineSearchOptions states each default once).
absl::StatusOr<ls::DpLineSearchOptions> TranslateOptions(
    const v1::DpBacktrackingLineSearch& m, ls::Variant variant,
    const TranslationInput& in) {
  ls::DpLineSearchOptions o;
  o.model = in.model;
  o.variant = variant;
  // DP-BLGD is the full-batch variant: its rate is 1 by definition.
  if (variant == ls::Variant::kBlgd) o.sampling_rate = 1;
  auto set = [](double v, double* out) {
    if (v != 0) *out = v;
  };
  set(m.sampling_rate(), &o.sampling_rate);
  set(m.clip_grad(), &o.clip_grad);
  set(m.clip_obj(), &o.clip_obj);
  if (m.planned_iterations() != 0)
    o.planned_iterations = m.planned_iterations();
  o.max_iterations = m.max_iterations();
  set(m.line_search_share(), &o.line_search_share);
  set(m.initial_step(), &o.line_search.initial_step);
  set(m.shrink(), &o.line_search.shrink);
  if (m.max_candidates() != 0) {
    o.line_search.max_candidates = m.max_candidates();
  }
  set(m.armijo(), &o.line_search.armijo);
  set(m.growth(), &o.cheb.growth);
  set(m.clip_decay(), &o.clip_decay);
  o.line_search_noise = m.gaussian_line_search() ? ls::SvtNoiseKind::kGaussian
                                                 : ls::SvtNoiseKind::kLaplace;
  o.reserve_amplified = m.reserve_amplified();
  RETURN_IF_ERROR(translation::CheckFinite(
      in.field, {o.sampling_rate, o.clip_grad, o.clip_obj, o.line_search_share,
                 o.line_search.initial_step, o.line_search.shrink,
                 o.line_search.armijo, o.cheb.growth, o.clip_decay}));
  RETURN_IF_ERROR(translation::InvalidWithField(in.field, o.Validate()));
  return o;
}

JobTypeTraits LineSearchTraits(const AlgorithmSpec&) {
  JobTypeTraits t;
  // The gradients and the line search's loss sums both come from the run's
  // RowSums (core/optim/row_sums.h), which may be on the worker pool.
  t.runs_on_worker_pool = true;
  return t;
}

absl::StatusOr<std::unique_ptr<optim::Algorithm>> TranslateLineSearch(
    const TranslationInput& in) {
  const AlgorithmSpec& a = in.spec.algorithm();
  ls::Variant variant = ls::Variant::kBlsgd;
  const v1::DpBacktrackingLineSearch* m = &a.dp_blsgd();
  if (a.has_dp_blsgd_ac()) {
    variant = ls::Variant::kBlsgdAc;
    m = &a.dp_blsgd_ac();
  } else if (a.has_dp_blgd()) {
    variant = ls::Variant::kBlgd;
    m = &a.dp_blgd();
  }
  ASSIGN_OR_RETURN(ls::DpLineSearchOptions o,
                   TranslateOptions(*m, variant, in));
  return ls::NewDpLineSearch(o);
}

}  // namespace

const JobFamily& LineSearchFamily() {
  static const JobFamily* family =
      new JobFamily{"line_search",
                    {AlgorithmSpec::kDpBlsgd, AlgorithmSpec::kDpBlsgdAc,
                     AlgorithmSpec::kDpBlgd},
                    &LineSearchTraits,
                    &TranslateLineSearch};
  return *family;
}

}  // namespace dpopt::server
