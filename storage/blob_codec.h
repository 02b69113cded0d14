// Internal to storage/: packing of numeric arrays into BLOBs (native
// little-endian layout) and the wall clock used for timestamps.
#ifndef DPOPT_STORAGE_BLOB_CODEC_H_
#define DPOPT_STORAGE_BLOB_CODEC_H_

#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace dpopt::storage::internal {

static_assert(sizeof(double) == 8, "storage assumes 64-bit IEEE doubles");
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "storage blobs are little-endian; big-endian hosts are not supported"
#endif

template <typename T>
absl::string_view AsBytes(const T* data, size_t count) {
  static_assert(std::is_trivially_copyable_v<T>);
  return absl::string_view(reinterpret_cast<const char*>(data),
                           count * sizeof(T));
}

template <typename T>
std::string PackVector(const std::vector<T>& v) {
  return std::string(AsBytes(v.data(), v.size()));
}

// Decodes a blob holding exactly a whole number of T. Returns false if the
// size is not a multiple of sizeof(T).
template <typename T>
bool UnpackVector(absl::string_view bytes, std::vector<T>* out) {
  static_assert(std::is_trivially_copyable_v<T>);
  if (bytes.size() % sizeof(T) != 0) return false;
  out->resize(bytes.size() / sizeof(T));
  if (!bytes.empty()) std::memcpy(out->data(), bytes.data(), bytes.size());
  return true;
}

inline int64_t NowMicros() { return absl::ToUnixMicros(absl::Now()); }

}  // namespace dpopt::storage::internal

#endif  // DPOPT_STORAGE_BLOB_CODEC_H_
