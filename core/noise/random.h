// Sources of randomness for differentially private mechanisms.
//
// Contract: every noise draw in the server comes from NewSecureRandom(). It
// is OpenSSL 3's private DRBG (RAND_priv_bytes: NIST SP 800-90A CTR_DRBG with
// AES-256, seeded from the kernel's getrandom(2), reseeded by OpenSSL every
// 2^16 requests or 7 minutes and after fork), read in 64 KiB blocks into a
// per-instance buffer. The buffer lives in its own pages marked
// MADV_WIPEONFORK, so a forked child never replays the parent's buffered
// words: it finds the buffer empty and refills from the (reseeded) DRBG. If
// the kernel cannot wipe on fork, NewSecureRandom() falls back to reading
// getrandom(2) directly (NewKernelRandom()). The source fails closed: if
// bytes cannot be produced it enters a sticky error state, `status()`
// reports it and every later draw must be treated as unusable by the caller
// (mechanisms check `status()` after drawing and return the error; a job
// then FAILS rather than publish weak noise). Clients can never seed it.
//
// The exact samplers (discrete_samplers.h, rounded_gaussian.h,
// skip_sampling.h) are exact given independent uniform 64-bit words; a DRBG
// is computationally indistinguishable from that, exactly as the kernel's
// own ChaCha20-based generator is.
//
// Deterministic generators for tests live in core/noise/testing/ (target
// dpopt_noise_testing), are labelled "not differentially private", and are
// not linked into the server binary.
#ifndef DPOPT_CORE_NOISE_RANDOM_H_
#define DPOPT_CORE_NOISE_RANDOM_H_

#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace dpopt::noise {

class RandomSource {
 public:
  virtual ~RandomSource() = default;

  // 64 uniformly random bits. After a failure returns 0 and status() is
  // non-OK. Inline: a buffering source's words are taken from its buffer
  // (each zeroed as it is taken: used randomness does not linger in memory);
  // Underflow() runs only when the buffer is empty, or on every call for a
  // source without one. No virtual call per word: samplers draw words one at
  // a time, and the call was a third of the cost of a word.
  uint64_t NextUint64() {
    uint32_t left = *left_;
    if (left == 0) [[unlikely]] {
      return Underflow();
    }
    *left_ = --left;
    uint64_t& slot = words_[left];
    const uint64_t value = slot;
    slot = 0;
    return value;
  }
  // OK unless the source has failed (sticky).
  virtual absl::Status status() const = 0;

  // Uniform integer in [0, n). REQUIRES: n > 0. Unbiased (rejection).
  uint64_t UniformInt(uint64_t n);
  // Uniform double in [0, 1) with 53 random bits.
  double UniformDouble();
  // Bernoulli(p) for a double p in [0, 1].
  bool Bernoulli(double p);

 protected:
  RandomSource() = default;
  // Copies (of unbuffered test sources) start without a buffer.
  RandomSource(const RandomSource&) {}
  RandomSource& operator=(const RandomSource&) { return *this; }

  // The next word when the buffer is empty. A buffering source refills its
  // buffer and returns NextUint64(); after a failure it leaves the count at 0
  // and returns 0. A source without a buffer returns its next word.
  virtual uint64_t Underflow() = 0;

  // Serve words[*left - 1], ..., words[0] inline, then call Underflow(),
  // which refills the words and sets *left again. Both must outlive the
  // source. The count is a uint32_t (not a uint64_t like the words) so the
  // compiler knows that zeroing a word does not change it. The secure source
  // keeps the count in its wipe-on-fork pages: a forked child reads 0 and
  // refills instead of replaying the parent's words.
  void SetBuffer(uint64_t* words, uint32_t* left) {
    words_ = words;
    left_ = left;
  }

 private:
  static uint32_t no_words_;  // the count of a source without a buffer: 0
  uint64_t* words_ = nullptr;
  uint32_t* left_ = &no_words_;
};

// The secure generator (see above). Not thread-safe: use one per
// thread/job. Errors: UNAVAILABLE if no secure bytes can be produced.
absl::StatusOr<std::unique_ptr<RandomSource>> NewSecureRandom();

// The kernel CSPRNG read directly (getrandom(2), 4 KiB per system call):
// slower; the fallback of NewSecureRandom() and a benchmark baseline.
absl::StatusOr<std::unique_ptr<RandomSource>> NewKernelRandom();

}  // namespace dpopt::noise

#endif  // DPOPT_CORE_NOISE_RANDOM_H_
