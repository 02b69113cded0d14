#include "client/max_affine.h"

#include <iostream>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "client/common.h"
#include "google/protobuf/util/json_util.h"

namespace dpopt::client {

absl::Status ApplyMaxAffineFlags(const ParsedArgs& a, v1::ImportHeader* h) {
  const bool poly = a.Has("polytope");
  const bool bmax = a.Has("b-max");
  if (!poly && !bmax) return absl::OkStatus();
  if (!poly || !bmax) {
    return absl::InvalidArgumentError(
        "a max-affine problem needs both --polytope=FILE and --b-max=B");
  }
  auto text = ReadFile(a.Get("polytope"));
  if (!text.ok()) return text.status();
  v1::Polytope p;
  auto parsed = google::protobuf::util::JsonStringToMessage(*text, &p);
  if (!parsed.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--polytope: not a Polytope in JSON (", a.Get("polytope"),
                     "): ", parsed.message().as_string()));
  }
  auto b = a.GetDouble("b-max");
  if (!b.ok()) return b.status();
  v1::MaxAffineProblem* m = h->mutable_max_affine();
  m->set_b_max(*b);
  *m->mutable_polytope() = p;
  h->set_relation(v1::LINF_OFFSETS);
  h->set_label_type(v1::LABEL_TYPE_REAL);
  return absl::OkStatus();
}

void PrintMaxAffine(const v1::DatasetInfo& d) {
  if (!d.has_max_affine()) return;
  const v1::MaxAffineInfo& m = d.max_affine();
  std::cout << absl::StrFormat(
      "  problem    max-affine: %d pieces, x in R^%d (offsets private, "
      "slopes public)\n"
      "  b_max      %s (every offset may move by this much)\n"
      "  polytope   box [%s] x [%s]%s\n"
      "  G = max|a| %s   R = diam(box) %s   interior radius %s\n",
      m.pieces(), m.dimension(), Num(m.b_max()),
      absl::StrJoin(m.polytope().lower(), ", "),
      absl::StrJoin(m.polytope().upper(), ", "),
      m.polytope().h_vector_size() > 0
          ? absl::StrCat(" and ", m.polytope().h_vector_size(), " half-spaces")
          : "",
      Num(m.slope_norm_bound()), Num(m.diameter()), Num(m.chebyshev_radius()));
}

}  // namespace dpopt::client
