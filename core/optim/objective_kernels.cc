// The gradient sums of Objective on the batched kernels.
#include "core/optim/objective_kernels.h"

namespace dpopt::optim {

template <typename RowAt>
void Objective::ClippedSum(const Dataset& data, const RowAt& row_at,
                           int64_t count,
                           const Eigen::Ref<const Eigen::VectorXd>& w,
                           ClipNorm norm, double clip,
                           Eigen::Ref<Eigen::VectorXd> out) const {
  const Kernels::Mode mode =
      norm == ClipNorm::kL2 ? Kernels::Mode::kClipL2 : Kernels::Mode::kClipL1;
  const Chunking chunking = ChunkRows(count, dimension_, parameter_size());
  ChunkedVectorSum(
      chunking, GetParallelOptions().threads,
      [&](int64_t chunk, Eigen::Ref<Eigen::VectorXd> acc) {
        Kernels::Rows(*this, data, row_at, chunking.begin(chunk),
                      chunking.end(chunk), w, mode, clip, acc);
      },
      out);
}

void Objective::AddClippedGradientSum(
    const Dataset& data, absl::Span<const int64_t> rows,
    const Eigen::Ref<const Eigen::VectorXd>& w, ClipNorm norm, double clip,
    Eigen::Ref<Eigen::VectorXd> out) const {
  const auto row_at = [rows](int64_t pos) { return rows[pos]; };
  ClippedSum(data, row_at, static_cast<int64_t>(rows.size()), w, norm, clip,
             out);
}

void Objective::AddClippedGradientSum(
    const Dataset& data, const Eigen::Ref<const Eigen::VectorXd>& w,
    ClipNorm norm, double clip, Eigen::Ref<Eigen::VectorXd> out) const {
  const auto row_at = [](int64_t pos) { return pos; };
  ClippedSum(data, row_at, data.rows(), w, norm, clip, out);
}

void Objective::AddGradientSum(const Dataset& data,
                               const Eigen::Ref<const Eigen::VectorXd>& w,
                               double scale,
                               Eigen::Ref<Eigen::VectorXd> out) const {
  const auto row_at = [](int64_t pos) { return pos; };
  const Chunking chunking =
      ChunkRows(data.rows(), dimension_, parameter_size());
  ChunkedVectorSum(
      chunking, GetParallelOptions().threads,
      [&](int64_t chunk, Eigen::Ref<Eigen::VectorXd> acc) {
        Kernels::Rows(*this, data, row_at, chunking.begin(chunk),
                      chunking.end(chunk), w, Kernels::Mode::kScaled, scale,
                      acc);
      },
      out);
}

}  // namespace dpopt::optim
