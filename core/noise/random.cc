#include "core/noise/random.h"

#include <errno.h>
#include <openssl/err.h>
#include <openssl/rand.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <unistd.h>

#include <array>
#include <cmath>
#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"

namespace dpopt::noise {

uint32_t RandomSource::no_words_ = 0;  // never written: only counts > 0 are

uint64_t RandomSource::UniformInt(uint64_t n) {
  if (n <= 1) return 0;
  // Lemire (2019), "Fast random integer generation in an interval": the
  // multiply-shift with rejection of the low word below 2^64 mod n is exactly
  // uniform on [0, n).
  uint64_t x = NextUint64();
  unsigned __int128 m = static_cast<unsigned __int128>(x) * n;
  uint64_t low = static_cast<uint64_t>(m);
  if (low < n) {
    const uint64_t threshold = (0 - n) % n;  // 2^64 mod n
    while (low < threshold) {
      if (!status().ok()) return 0;  // A failed source must not spin.
      x = NextUint64();
      m = static_cast<unsigned __int128>(x) * n;
      low = static_cast<uint64_t>(m);
    }
  }
  return static_cast<uint64_t>(m >> 64);
}

double RandomSource::UniformDouble() {
  return static_cast<double>(NextUint64() >> 11) * 0x1.0p-53;
}

bool RandomSource::Bernoulli(double p) {
  if (!(p > 0)) return false;  // Also NaN.
  if (p >= 1) return true;
  // Exact: compares a uniform U in [0, 1), read lazily bit by bit, with the
  // binary expansion of p = mantissa * 2^(exponent - 53). Returns U < p.
  int exponent = 0;
  const double mantissa = std::frexp(p, &exponent);  // p = mantissa*2^exp
  const uint64_t m = static_cast<uint64_t>(std::ldexp(mantissa, 53));
  const int64_t leading_zeros = -static_cast<int64_t>(exponent);  // >= 0
  uint64_t word = 0;
  int bits_left = 0;
  for (int64_t i = 1;; ++i) {
    if (bits_left == 0) {
      word = NextUint64();
      bits_left = 64;
      if (!status().ok()) return false;
    }
    const int u = static_cast<int>(word >> 63);
    word <<= 1;
    --bits_left;
    int digit = 0;
    if (i > leading_zeros) {
      const int64_t j = i - leading_zeros;  // 1..53 are the mantissa bits.
      if (j > 53) return false;             // p's expansion ended: U >= p.
      digit = static_cast<int>((m >> (53 - j)) & 1);
    }
    if (u != digit) return u < digit;
  }
}

namespace {

// Buffered reader of the kernel CSPRNG. Fails closed (sticky status).
class KernelRandom final : public RandomSource {
 public:
  KernelRandom() { SetBuffer(buffer_.data(), &left_); }
  KernelRandom(const KernelRandom&) = delete;
  KernelRandom& operator=(const KernelRandom&) = delete;
  ~KernelRandom() override { explicit_bzero(buffer_.data(), sizeof(buffer_)); }

  absl::Status status() const override { return status_; }

  void Refill() {
    if (!status_.ok()) return;
    char* out = reinterpret_cast<char*>(buffer_.data());
    size_t remaining = sizeof(buffer_);
    while (remaining > 0) {
      const ssize_t got = getrandom(out, remaining, 0);
      if (got < 0) {
        if (errno == EINTR) continue;
        status_ = absl::UnavailableError(absl::StrCat(
            "secure random generator failed (getrandom: ", strerror(errno),
            "); refusing to produce noise"));
        explicit_bzero(buffer_.data(), sizeof(buffer_));
        left_ = 0;
        return;
      }
      out += got;
      remaining -= static_cast<size_t>(got);
    }
    left_ = buffer_.size();
  }

 private:
  uint64_t Underflow() override {
    Refill();
    if (!status_.ok()) return 0;
    return NextUint64();
  }

  // 4 KiB per refill: one syscall per 512 draws.
  std::array<uint64_t, 512> buffer_{};
  uint32_t left_ = 0;
  absl::Status status_;
};

// OpenSSL's private DRBG, read in blocks into a buffer that the kernel wipes
// in a forked child (MADV_WIPEONFORK): the child sees `remaining == 0` and
// refills from the DRBG, which OpenSSL reseeds after a fork. 64 KiB blocks
// (one per 8191 words): per-call overhead of RAND_priv_bytes (locking, the
// reseed check) was a third of the cost with 8 KiB blocks (172 -> 250 M
// words/s measured side by side on the shared machine, BM_SecureWords).
class DrbgRandom final : public RandomSource {
 public:
  // The buffer and its fill level share one mapping (wiped together).
  struct Block {
    uint64_t words[8191];
    uint32_t remaining;  // unread words at the front of `words`
    uint32_t unused;
  };
  static_assert(sizeof(Block) == 65536);

  // nullptr if the mapping cannot be made wipe-on-fork.
  static std::unique_ptr<DrbgRandom> Create() {
    const long page = sysconf(_SC_PAGESIZE);
    const size_t size =
        (sizeof(Block) + static_cast<size_t>(page) - 1) / page * page;
    void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return nullptr;
    if (madvise(p, size, MADV_WIPEONFORK) != 0) {
      munmap(p, size);
      return nullptr;
    }
    (void)madvise(p, size, MADV_DONTDUMP);  // best effort: keep out of cores
    return std::unique_ptr<DrbgRandom>(
        new DrbgRandom(static_cast<Block*>(p), size));
  }
  DrbgRandom(const DrbgRandom&) = delete;
  DrbgRandom& operator=(const DrbgRandom&) = delete;
  ~DrbgRandom() override {
    explicit_bzero(block_, size_);
    munmap(block_, size_);
  }

  absl::Status status() const override { return status_; }

  void Refill() {
    if (!status_.ok()) return;
    constexpr int kBytes = sizeof(block_->words);
    if (RAND_priv_bytes(reinterpret_cast<unsigned char*>(block_->words),
                        kBytes) != 1) {
      const unsigned long err = ERR_get_error();
      char text[256] = "unknown error";
      if (err != 0) ERR_error_string_n(err, text, sizeof(text));
      ERR_clear_error();
      status_ = absl::UnavailableError(absl::StrCat(
          "secure random generator failed (OpenSSL RAND_priv_bytes: ", text,
          "); refusing to produce noise"));
      explicit_bzero(block_, sizeof(Block));  // the count too: stays 0
      return;
    }
    block_->remaining = sizeof(block_->words) / sizeof(uint64_t);
  }

 private:
  DrbgRandom(Block* block, size_t size) : block_(block), size_(size) {
    SetBuffer(block_->words, &block_->remaining);
  }

  // After a failure the count stays 0, so every later draw lands here and
  // returns 0.
  uint64_t Underflow() override {
    Refill();
    if (!status_.ok()) return 0;
    return NextUint64();
  }

  Block* block_;
  size_t size_;
  absl::Status status_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<RandomSource>> NewKernelRandom() {
  auto rng = std::make_unique<KernelRandom>();
  rng->Refill();
  if (!rng->status().ok()) return rng->status();
  return rng;
}

absl::StatusOr<std::unique_ptr<RandomSource>> NewSecureRandom() {
  std::unique_ptr<DrbgRandom> rng = DrbgRandom::Create();
  if (rng == nullptr) return NewKernelRandom();  // no MADV_WIPEONFORK
  rng->Refill();
  if (!rng->status().ok()) return rng->status();
  return rng;
}

}  // namespace dpopt::noise
