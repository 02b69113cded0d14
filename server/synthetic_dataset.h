// Synthetic datasets for dry runs (JobSpec.dry_run; docs/user-guide.md, "Dry
// runs"). A dry run runs the job exactly as submitted on rows drawn here from
// a dataset's PUBLIC schema only, so it charges nothing and reads no private
// row (docs/privacy.md). What is drawn from what:
//
//  * shape: `rows` x `dimension` rows, sparse (CSR) when the dataset is
//    stored sparse, dense otherwise;
//  * sparsity pattern: a sparse row stores SparseRowNonzeros(dimension) =
//    min(d, ceil(sqrt(d))) entries at distinct columns drawn uniformly (the
//    private dataset's nonzero count is a statistic of its rows, not public
//    metadata, so it is not used);
//  * values: uniform in [lower_j, upper_j] where per-feature bounds are
//    declared, else N(0, 1/k) with k the stored entries of a row (so a row's
//    norm is about 1); rows above a declared row-norm bound are scaled down
//    to it;
//  * labels: from a random "teacher" drawn with the rows (w ~ N(0, I) per
//    output): binary sign(<w, x>), multiclass argmax_k <w_k, x>, each
//    replaced by a uniform label with probability 0.1; real <w, x> +
//    N(0, 0.01);
//  * max-affine problems: the PUBLIC slopes as stored (read without the
//    offsets: storage::DatasetStore::LoadPublicSlopes) and offsets uniform
//    in [-s, s], s = max(b_max, G X) (G the slope norm bound, X the largest
//    norm of a point of P's bounding box), capped at the range the
//    mechanisms represent (2^27 b_max).
//
// Every draw comes from the RandomSource passed in: the server's secure
// generator, or a seeded one in tests.
#ifndef DPOPT_SERVER_SYNTHETIC_DATASET_H_
#define DPOPT_SERVER_SYNTHETIC_DATASET_H_

#include <cstdint>
#include <string>

#include "Eigen/Dense"
#include "absl/status/statusor.h"
#include "core/data/dataset.h"
#include "core/noise/random.h"
#include "storage/dataset_import.h"
#include "storage/dataset_store.h"

namespace dpopt::server {

// The public metadata a synthetic dataset is drawn from: nothing else of the
// dataset record reaches the generator.
struct SyntheticSchema {
  int64_t rows = 0;
  int64_t dimension = 0;
  bool sparse = false;
  LabelKind label_kind = LabelKind::kBinary;
  int num_classes = 2;
  storage::DeclaredBounds bounds;
  // Max-affine problems: the public description (ProblemInfo JSON).
  std::string problem_json;

  static SyntheticSchema Of(const storage::DatasetRecord& record);
};

class SyntheticDataset {
 public:
  // Stored entries of one synthetic sparse row of dimension d.
  static int64_t SparseRowNonzeros(int64_t d);

  // An ordinary dataset (problem_json empty). INVALID_ARGUMENT for a
  // malformed schema; UNAVAILABLE if the generator fails.
  static absl::StatusOr<Dataset> Generate(const SyntheticSchema& schema,
                                          noise::RandomSource& rng);

  // A max-affine problem: `public_slopes` (m x d, the dataset's public
  // features) with synthetic offsets. INVALID_ARGUMENT if the slopes do not
  // match the schema or the description is malformed.
  static absl::StatusOr<Dataset> GenerateMaxAffine(
      const SyntheticSchema& schema, Eigen::MatrixXd public_slopes,
      noise::RandomSource& rng);
};

// Whether the public dummy `dummy` may stand in for the private `dataset` in
// dry runs: public, and the same dimension, label kind (and class count) and
// kind (max-affine or not); when `check_pieces` (the dummy's file is parsed:
// at every dry run), also the same number of pieces for max-affine problems
// and no more rows than the dataset (a dry run is bounded on the dataset's
// row count). Before parsing, a dimension of 0 (inferred from a CSV file) is
// not compared. FAILED_PRECONDITION naming the difference otherwise.
absl::Status CheckDummyFits(const storage::DatasetRecord& dataset,
                            const storage::DatasetRecord& dummy,
                            bool check_pieces = true);

}  // namespace dpopt::server

#endif  // DPOPT_SERVER_SYNTHETIC_DATASET_H_
