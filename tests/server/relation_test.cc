// Every family checks the neighbouring relation it supports itself (not
// only the job manager's dataset-kind check): each job type, built from its
// example by the server's translation, is calibrated against every dataset
// kind (examples declared add/remove, examples declared replace-one, a
// max-affine problem under the l-infinity offset relation). A calibration
// is never made for a relation its family does not analyse.
#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "core/optim/piecewise_affine/problem.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "server/spec_translation.h"

namespace dpopt::server {
namespace {

std::string Read(const std::string& relative) {
  const char* root = std::getenv("DPOPT_SOURCE_DIR");
  std::ifstream in(std::string(root != nullptr ? root : ".") + "/" + relative);
  EXPECT_TRUE(in.good()) << relative;
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The public description of the bundled max-affine example (20 pieces in 5
// dimensions, P = [-1, 1]^5, b_max 1).
std::string MaxAffineJson() {
  std::istringstream csv(Read("examples/data/max_affine.csv"));
  std::string line;
  std::getline(csv, line);  // header
  std::vector<double> slopes;
  int64_t m = 0;
  while (std::getline(csv, line)) {
    if (line.empty()) continue;
    std::istringstream row(line);
    std::string cell;
    for (int j = 0; j < 5 && std::getline(row, cell, ','); ++j) {
      slopes.push_back(std::stod(cell));
    }
    ++m;
  }
  optim::piecewise_affine::ProblemDeclaration decl;
  decl.b_max = 1;
  decl.polytope.lower.assign(5, -1);
  decl.polytope.upper.assign(5, 1);
  auto info =
      optim::piecewise_affine::DescribeProblem(decl, slopes.data(), m, 5);
  EXPECT_TRUE(info.ok()) << info.status();
  return info.ok() ? info->ToJson() : "";
}

// The example's dataset (examples/README.md) as public metadata.
optim::PublicDatasetInfo InfoFor(const std::string& dataset,
                                 const std::string& max_affine_json) {
  optim::PublicDatasetInfo info;
  if (dataset == "adult") {
    info.rows = 32561;
    info.dimension = 123;
    info.label_kind = LabelKind::kBinary;
  } else if (dataset == "quadratic-q") {
    info.rows = 2000;
    info.dimension = 4;
    info.label_kind = LabelKind::kReal;
  } else {
    info.rows = 20;
    info.dimension = 5;
    info.label_kind = LabelKind::kReal;
    info.problem_json = max_affine_json;
  }
  return info;
}

TEST(RelationTest, EveryFamilyRefusesRelationsItDoesNotAnalyse) {
  const std::string max_affine_json = MaxAffineJson();
  const google::protobuf::OneofDescriptor* oneof =
      v1::AlgorithmSpec::descriptor()->FindOneofByName("algorithm");
  ASSERT_GT(oneof->field_count(), 0);
  int accepted = 0;
  int private_types = 0;
  for (int f = 0; f < oneof->field_count(); ++f) {
    const std::string type = oneof->field(f)->name();
    SCOPED_TRACE(type);
    v1::JobSpec spec;
    ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(
                    Read("examples/" + type + ".json"), &spec)
                    .ok());
    absl::StatusOr<TranslatedJob> job = TranslateJobSpec(spec, false, 2);
    if (!job.ok()) job = TranslateJobSpec(spec, true, 2);  // public-only types
    ASSERT_TRUE(job.ok()) << job.status();
    // Non-private job types (public datasets only) have no privacy analysis
    // and so no relation.
    if (job->target.non_private) continue;
    ++private_types;
    const bool max_affine_family =
        job->traits.dataset_kind == DatasetKind::kMaxAffine;
    for (privacy::Relation relation :
         {privacy::Relation::kAddRemove, privacy::Relation::kReplaceOne,
          privacy::Relation::kLinfOffsets}) {
      SCOPED_TRACE(static_cast<int>(relation));
      // Every dataset kind: the family's own kind and the other one.
      for (const std::string& dataset :
           {spec.dataset(),
            std::string(max_affine_family ? "adult" : "max-affine")}) {
        optim::PublicDatasetInfo info = InfoFor(dataset, max_affine_json);
        info.relation = relation;
        absl::StatusOr<optim::Calibration> c =
            job->algorithm->Calibrate(info, job->target);
        const bool supported =
            max_affine_family ? relation == privacy::Relation::kLinfOffsets
                              : relation != privacy::Relation::kLinfOffsets;
        if (!supported) {
          EXPECT_FALSE(c.ok()) << dataset
                               << ": calibrated for a relation "
                                  "the family does not analyse";
          if (!c.ok()) {
            EXPECT_TRUE(absl::IsInvalidArgument(c.status()) ||
                        absl::IsFailedPrecondition(c.status()))
                << c.status();
          }
          continue;
        }
        if (!c.ok())
          continue;  // e.g. the wrong dataset kind, or a
                     // sampling mode the relation does not allow
        ++accepted;
        EXPECT_NE(c->relation == privacy::Relation::kLinfOffsets,
                  !max_affine_family)
            << dataset;
      }
    }
  }
  // Each private example calibrates at least on its own dataset.
  EXPECT_GE(accepted, private_types);
  EXPECT_GE(private_types, 20);
}

}  // namespace
}  // namespace dpopt::server
