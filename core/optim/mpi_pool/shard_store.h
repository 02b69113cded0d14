// ShardStore: the shards placed on one rank of an MPI worker pool, as files
// on that rank's host: DIR/<dataset id>.shard (the shard's
// distributed_dda::EncodeShard bytes), mode 0600 in a directory of mode 0700,
// the same file modes as the server's database. A placement is written to
// DIR/<dataset id>.partial and renamed into place after an fsync, so a
// crash leaves the old shard or the new one, never a mix. Deletion is secure
// in the sense the server's database is (SQLite's secure_delete): the file's
// bytes are overwritten with zeros and synced before it is unlinked. (On
// copy-on-write or journaling file systems and SSDs the old blocks may
// survive; docs/scale-out.md says so.)
#ifndef DPOPT_CORE_OPTIM_MPI_POOL_SHARD_STORE_H_
#define DPOPT_CORE_OPTIM_MPI_POOL_SHARD_STORE_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/data/dataset.h"

namespace dpopt::optim::mpi_pool {

class ShardStore {
 public:
  // Creates `dir` (mode 0700) if missing; FAILED_PRECONDITION if it exists
  // with group or other permissions, or cannot be created.
  static absl::StatusOr<ShardStore> Open(std::string dir);

  // Starts writing `id` (replacing an unfinished write of it).
  absl::Status BeginWrite(absl::string_view id);
  absl::Status Append(absl::string_view id, absl::string_view bytes);
  // Syncs the written bytes, checks they decode to a shard of `dimension`
  // (DATA_LOSS otherwise; the partial file is deleted), renames it into
  // place and returns its row count.
  absl::StatusOr<int64_t> Commit(absl::string_view id, int64_t dimension);
  // Deletes the partial file of an unfinished write, if any.
  void Abort(absl::string_view id);
  // The stored shard. NOT_FOUND if there is none.
  absl::StatusOr<Dataset> Load(absl::string_view id) const;
  // Overwrites with zeros, syncs and unlinks the shard (and any partial
  // write). Returns whether a shard was there.
  absl::StatusOr<bool> SecureDelete(absl::string_view id);

  const std::string& dir() const { return dir_; }

 private:
  explicit ShardStore(std::string dir) : dir_(std::move(dir)) {}
  std::string ShardPath(absl::string_view id) const;
  std::string PartialPath(absl::string_view id) const;
  std::string dir_;
};

}  // namespace dpopt::optim::mpi_pool

#endif  // DPOPT_CORE_OPTIM_MPI_POOL_SHARD_STORE_H_
