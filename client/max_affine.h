// `dpopt dataset import|show` for piecewise-affine family's max-affine problems
// (public slopes, private offsets, a polytope P and b_max; Han, Topcu & Pappas
// 2014, eqs. (2)-(4); docs/algorithms/piecewise_affine.md).
#ifndef DPOPT_CLIENT_MAX_AFFINE_H_
#define DPOPT_CLIENT_MAX_AFFINE_H_

#include "absl/status/status.h"
#include "client/flags.h"
#include "dpopt/v1/dpopt.pb.h"

namespace dpopt::client {

// --polytope=FILE (proto3 JSON of dpopt.v1.Polytope: {"lower": [...],
// "upper": [...], optional "hMatrix"/"hVector"}) and --b-max=B: imports the
// CSV as a max-affine problem (feature columns = slopes a_i, label column =
// offsets b_i, relation LINF_OFFSETS). Either flag alone is an error; with
// neither, the header is left unchanged.
absl::Status ApplyMaxAffineFlags(const ParsedArgs& a, v1::ImportHeader* h);

// The public description of a max-affine dataset (nothing if it is not one).
void PrintMaxAffine(const v1::DatasetInfo& d);

}  // namespace dpopt::client

#endif  // DPOPT_CLIENT_MAX_AFFINE_H_
