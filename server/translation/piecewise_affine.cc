#include "server/translation/piecewise_affine.h"

#include <cmath>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/common/status_macros.h"
#include "core/optim/piecewise_affine/mechanisms.h"
#include "core/optim/piecewise_affine/problem.h"

namespace dpopt::server {
namespace {

namespace s1 = optim::piecewise_affine;
using v1::AlgorithmSpec;

absl::StatusOr<s1::SubgradientOptions> TranslateSubgradient(
    const v1::PaSubgradient& m, const std::string& field) {
  s1::SubgradientOptions o;
  if (m.iterations() != 0) o.iterations = m.iterations();
  o.readout = m.readout() == v1::PA_READOUT_AVERAGE ? s1::Readout::kAverage
                                                    : s1::Readout::kLast;
  o.step_rule = m.step_rule() == v1::PA_STEP_RULE_DECREASING
                    ? s1::StepRule::kDecreasing
                    : s1::StepRule::kConstant;
  if (m.step_scale() != 0) o.step_scale = m.step_scale();
  o.initial_point.assign(m.initial_point().begin(), m.initial_point().end());
  o.project = !m.no_projection();
  o.release_trace = !m.omit_trace();
  absl::Status valid = o.Validate();
  if (!valid.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": ", valid.message()));
  }
  return o;
}

}  // namespace

absl::Status ApplyMaxAffineHeader(const v1::ImportHeader& h,
                                  storage::ImportOptions* options) {
  if (!h.has_max_affine()) {
    if (h.relation() == v1::LINF_OFFSETS) {
      return absl::InvalidArgumentError(
          "relation LINF_OFFSETS belongs to max-affine problems: declare "
          "max_affine (b_max and the polytope)");
    }
    return absl::OkStatus();
  }
  if (h.relation() != v1::NEIGHBOURING_RELATION_UNSPECIFIED &&
      h.relation() != v1::LINF_OFFSETS) {
    return absl::InvalidArgumentError(
        "a max-affine problem has the l-infinity offset relation (offsets "
        "differ by at most b_max in every piece); leave relation unset");
  }
  if (h.format() != v1::DATASET_FORMAT_CSV) {
    return absl::InvalidArgumentError(
        "a max-affine problem is imported from CSV (slope columns and one "
        "offset column)");
  }
  if (h.label_type() != v1::LABEL_TYPE_UNSPECIFIED &&
      h.label_type() != v1::LABEL_TYPE_REAL) {
    return absl::InvalidArgumentError(
        "the offset column of a max-affine problem is real-valued");
  }
  options->relation = std::string(storage::kRelationLinfOffsets);
  options->label_kind = LabelKind::kReal;
  options->num_classes = 0;
  // Placeholder so that the options validate while the file is parsed; the
  // real description replaces it before anything is stored.
  options->problem_json = "{}";
  return absl::OkStatus();
}

absl::StatusOr<std::string> DescribeMaxAffine(const v1::MaxAffineProblem& m,
                                              const storage::ParsedRows& rows) {
  s1::ProblemDeclaration decl;
  decl.b_max = m.b_max();
  const v1::Polytope& p = m.polytope();
  decl.polytope.lower.assign(p.lower().begin(), p.lower().end());
  decl.polytope.upper.assign(p.upper().begin(), p.upper().end());
  decl.polytope.h_matrix.assign(p.h_matrix().begin(), p.h_matrix().end());
  decl.polytope.h_vector.assign(p.h_vector().begin(), p.h_vector().end());
  decl.polytope.rows = p.h_vector_size();
  if (rows.sparse ||
      rows.values.size() != static_cast<size_t>(rows.rows * rows.dimension)) {
    return absl::InvalidArgumentError("a max-affine problem must be dense");
  }
  absl::StatusOr<s1::ProblemInfo> info =
      s1::DescribeProblem(decl, rows.values.data(), rows.rows, rows.dimension);
  if (!info.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_affine: ", info.status().message()));
  }
  // The private offsets' range (told to the importing curator only).
  if (rows.labels.size() != static_cast<size_t>(rows.rows)) {
    return absl::InvalidArgumentError("a max-affine problem needs offsets");
  }
  if (absl::Status s =
          s1::CheckOffsets(rows.labels.data(), rows.rows, decl.b_max);
      !s.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_affine: ", s.message()));
  }
  return info->ToJson();
}

absl::StatusOr<v1::MaxAffineInfo> MaxAffineInfoOf(const std::string& json) {
  absl::StatusOr<s1::ProblemInfo> info = s1::ProblemInfo::FromJson(json);
  if (!info.ok()) {
    return absl::DataLossError(absl::StrCat(
        "stored max-affine description is corrupt: ", info.status().message()));
  }
  v1::MaxAffineInfo out;
  out.set_b_max(info->b_max);
  v1::Polytope* p = out.mutable_polytope();
  for (double v : info->polytope.lower) p->add_lower(v);
  for (double v : info->polytope.upper) p->add_upper(v);
  for (double v : info->polytope.h_matrix) p->add_h_matrix(v);
  for (double v : info->polytope.h_vector) p->add_h_vector(v);
  out.set_pieces(info->pieces);
  out.set_dimension(info->dimension);
  out.set_slope_norm_bound(info->slope_norm_bound);
  for (double v : info->bbox_lower) out.add_bbox_lower(v);
  for (double v : info->bbox_upper) out.add_bbox_upper(v);
  out.set_diameter(info->diameter);
  for (double v : info->center) out.add_center(v);
  out.set_chebyshev_radius(info->chebyshev_radius);
  return out;
}

namespace {

JobTypeTraits PiecewiseAffineTraits(const AlgorithmSpec& a) {
  JobTypeTraits t;
  t.trains_model = false;
  t.output_name = "max_affine_decision";
  t.dataset_kind = DatasetKind::kMaxAffine;
  t.non_private = a.algorithm_case() == AlgorithmSpec::kPaSolve;
  return t;
}

absl::StatusOr<std::unique_ptr<optim::Algorithm>> TranslatePiecewiseAffine(
    const TranslationInput& in) {
  const AlgorithmSpec& a = in.spec.algorithm();
  switch (a.algorithm_case()) {
    case AlgorithmSpec::kPaPerturbProblem: {
      s1::PerturbProblemOptions o;
      o.release_offsets = !a.pa_perturb_problem().omit_offsets();
      return s1::NewPerturbProblem(o);
    }
    case AlgorithmSpec::kPaPerturbSolution: {
      s1::PerturbSolutionOptions o;
      o.noise = a.pa_perturb_solution().noise() == v1::PA_SOLUTION_NOISE_TIGHT
                    ? s1::SolutionNoise::kTight
                    : s1::SolutionNoise::kPaper;
      o.project = !a.pa_perturb_solution().raw();
      return s1::NewPerturbSolution(o);
    }
    case AlgorithmSpec::kPaExponential: {
      s1::ExponentialOptions o;
      const double cap = a.pa_exponential().max_expected_proposals();
      if (cap != 0) o.max_expected_proposals = cap;
      absl::Status valid = o.Validate();
      if (!valid.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat("algorithm.pa_exponential: ", valid.message()));
      }
      return s1::NewExponential(o);
    }
    case AlgorithmSpec::kPaSubgradient: {
      ASSIGN_OR_RETURN(
          s1::SubgradientOptions o,
          TranslateSubgradient(a.pa_subgradient(), "algorithm.pa_subgradient"));
      return s1::NewSubgradient(o);
    }
    case AlgorithmSpec::kPaSolve: {
      s1::BaselineOptions o;
      if (a.pa_solve().method() == v1::PA_SOLVE_SUBGRADIENT) {
        o.method = s1::BaselineMethod::kSubgradient;
        ASSIGN_OR_RETURN(o.subgradient, TranslateSubgradient(
                                            a.pa_solve().subgradient(),
                                            "algorithm.pa_solve.subgradient"));
      }
      return s1::NewBaseline(o);
    }
    default:
      return absl::InvalidArgumentError("not a piecewise-affine algorithm");
  }
}

}  // namespace

const JobFamily& PiecewiseAffineFamily() {
  static const JobFamily* family = new JobFamily{
      "piecewise_affine",
      {AlgorithmSpec::kPaPerturbProblem, AlgorithmSpec::kPaPerturbSolution,
       AlgorithmSpec::kPaExponential, AlgorithmSpec::kPaSubgradient,
       AlgorithmSpec::kPaSolve},
      &PiecewiseAffineTraits,
      &TranslatePiecewiseAffine};
  return *family;
}

}  // namespace dpopt::server
