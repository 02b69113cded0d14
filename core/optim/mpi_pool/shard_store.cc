#include "core/optim/mpi_pool/shard_store.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/common/status_macros.h"
#include "core/optim/distributed_dda/wire.h"
#include "core/optim/mpi_pool/protocol.h"

namespace dpopt::optim::mpi_pool {
namespace {

absl::Status Errno(absl::string_view what, absl::string_view path) {
  return absl::InternalError(
      absl::StrCat(what, " ", path, ": ", std::strerror(errno)));
}

absl::Status SyncDir(const std::string& dir) {
  const int fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return Errno("open", dir);
  const int rc = fsync(fd);
  close(fd);
  return rc == 0 ? absl::OkStatus() : Errno("fsync", dir);
}

// Overwrites the file with zeros, syncs and unlinks it. false if absent.
absl::StatusOr<bool> ZeroAndUnlink(const std::string& path) {
  const int fd = open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return false;
    return Errno("open", path);
  }
  struct stat st;
  if (fstat(fd, &st) != 0) {
    close(fd);
    return Errno("stat", path);
  }
  const std::vector<char> zeros(1 << 20, 0);
  off_t left = st.st_size;
  while (left > 0) {
    const size_t n = static_cast<size_t>(
        std::min<off_t>(left, static_cast<off_t>(zeros.size())));
    const ssize_t w = write(fd, zeros.data(), n);
    if (w <= 0) {
      close(fd);
      return Errno("overwrite", path);
    }
    left -= w;
  }
  const bool synced = fsync(fd) == 0;
  close(fd);
  if (!synced) return Errno("fsync", path);
  if (unlink(path.c_str()) != 0) return Errno("unlink", path);
  return true;
}

// The rows of a shard file written by distributed_dda::EncodeShard after
// checking its trailing FNV-1a checksum and its dimension field. DATA_LOSS
// if either is wrong.
absl::StatusOr<int64_t> CheckShardFile(const std::string& path,
                                       int64_t dimension) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Errno("open", path);
  std::vector<char> block(1 << 20);
  std::string header, tail;  // the first 40 bytes; the last 8 seen
  uint64_t hash = distributed_dda::kFnv1aEmpty;
  while (in) {
    in.read(block.data(), static_cast<std::streamsize>(block.size()));
    const size_t n = static_cast<size_t>(in.gcount());
    if (n == 0) break;
    const absl::string_view got(block.data(), n);
    if (header.size() < 40) {
      const absl::string_view head = got.substr(0, 40 - header.size());
      header.append(head.data(), head.size());
    }
    // Everything but the last 8 bytes is hashed: keep 8 bytes back.
    std::string joined = tail;
    joined.append(got.data(), got.size());
    const size_t keep = std::min<size_t>(8, joined.size());
    hash = distributed_dda::Fnv1aExtend(
        hash, absl::string_view(joined).substr(0, joined.size() - keep));
    tail = joined.substr(joined.size() - keep);
  }
  auto u64 = [](absl::string_view b) {
    uint64_t v = 0;
    for (int i = 0; i < 8; ++i) {
      v |= static_cast<uint64_t>(static_cast<unsigned char>(b[i])) << (8 * i);
    }
    return v;
  };
  if (header.size() < 40 || tail.size() != 8 || u64(tail) != hash ||
      static_cast<int64_t>(u64(header.substr(8))) != dimension) {
    return absl::DataLossError("the placed shard is malformed");
  }
  const int64_t rows = static_cast<int64_t>(u64(header));
  if (rows < 0) return absl::DataLossError("the placed shard is malformed");
  return rows;
}

}  // namespace

absl::StatusOr<ShardStore> ShardStore::Open(std::string dir) {
  if (mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    return absl::FailedPreconditionError(absl::StrCat(
        "cannot create the shard store ", dir, ": ", std::strerror(errno)));
  }
  struct stat st;
  if (stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return absl::FailedPreconditionError(
        absl::StrCat("the shard store ", dir, " is not a directory"));
  }
  if ((st.st_mode & 077) != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the shard store ", dir, " is open to other users (chmod 700 it)"));
  }
  return ShardStore(std::move(dir));
}

std::string ShardStore::ShardPath(absl::string_view id) const {
  return absl::StrCat(dir_, "/", id, ".shard");
}

std::string ShardStore::PartialPath(absl::string_view id) const {
  return absl::StrCat(dir_, "/", id, ".partial");
}

absl::Status ShardStore::BeginWrite(absl::string_view id) {
  RETURN_IF_ERROR(CheckDatasetId(id));
  const std::string path = PartialPath(id);
  ASSIGN_OR_RETURN(bool existed, ZeroAndUnlink(path));
  (void)existed;
  const int fd =
      open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return Errno("create", path);
  close(fd);
  return absl::OkStatus();
}

absl::Status ShardStore::Append(absl::string_view id, absl::string_view bytes) {
  RETURN_IF_ERROR(CheckDatasetId(id));
  const std::string path = PartialPath(id);
  const int fd = open(path.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
  if (fd < 0) return Errno("open", path);
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t w = write(fd, bytes.data() + done, bytes.size() - done);
    if (w <= 0) {
      close(fd);
      return Errno("write", path);
    }
    done += static_cast<size_t>(w);
  }
  close(fd);
  return absl::OkStatus();
}

absl::StatusOr<int64_t> ShardStore::Commit(absl::string_view id,
                                           int64_t dimension) {
  RETURN_IF_ERROR(CheckDatasetId(id));
  const std::string partial = PartialPath(id);
  {
    const int fd = open(partial.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return Errno("open", partial);
    const bool synced = fsync(fd) == 0;
    close(fd);
    if (!synced) return Errno("fsync", partial);
  }
  // Integrity without decoding the shard (which would hold it twice in
  // memory): its checksum, streamed, and its shape fields. Load() decodes
  // and checks the rest when a job opens it.
  absl::StatusOr<int64_t> rows = CheckShardFile(partial, dimension);
  if (!rows.ok()) {
    Abort(id);
    return rows.status();
  }
  const std::string path = ShardPath(id);
  // The old shard (if any) is overwritten before the new one replaces it.
  ASSIGN_OR_RETURN(bool existed, ZeroAndUnlink(path));
  (void)existed;
  if (rename(partial.c_str(), path.c_str()) != 0) {
    return Errno("rename", partial);
  }
  RETURN_IF_ERROR(SyncDir(dir_));
  return *rows;
}

void ShardStore::Abort(absl::string_view id) {
  if (!CheckDatasetId(id).ok()) return;
  (void)ZeroAndUnlink(PartialPath(id));
}

absl::StatusOr<Dataset> ShardStore::Load(absl::string_view id) const {
  RETURN_IF_ERROR(CheckDatasetId(id));
  const std::string path = ShardPath(id);
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) {
      return absl::NotFoundError(
          absl::StrCat("dataset ", id, " is not placed on this rank"));
    }
    return Errno("open", path);
  }
  struct stat st;
  if (fstat(fd, &st) != 0 || st.st_size <= 0) {
    close(fd);
    return absl::DataLossError("a stored shard is malformed");
  }
  // Decoded from a read-only mapping: the shard is in memory once (as the
  // dataset), not also as a copy of the file.
  void* map = mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ,
                   MAP_PRIVATE, fd, 0);
  close(fd);
  if (map == MAP_FAILED) return Errno("mmap", path);
  madvise(map, static_cast<size_t>(st.st_size), MADV_SEQUENTIAL);
  absl::StatusOr<Dataset> shard =
      distributed_dda::DecodeShard(absl::string_view(
          static_cast<const char*>(map), static_cast<size_t>(st.st_size)));
  munmap(map, static_cast<size_t>(st.st_size));
  if (!shard.ok()) return absl::DataLossError("a stored shard is malformed");
  return shard;
}

absl::StatusOr<bool> ShardStore::SecureDelete(absl::string_view id) {
  RETURN_IF_ERROR(CheckDatasetId(id));
  (void)ZeroAndUnlink(PartialPath(id));
  ASSIGN_OR_RETURN(bool existed, ZeroAndUnlink(ShardPath(id)));
  RETURN_IF_ERROR(SyncDir(dir_));
  return existed;
}

}  // namespace dpopt::optim::mpi_pool
