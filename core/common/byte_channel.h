// ByteChannel: a two-way byte stream with deadline-bounded reads and writes
// (a child process's pipes, or a Unix-domain socket connection).
#ifndef DPOPT_CORE_COMMON_BYTE_CHANNEL_H_
#define DPOPT_CORE_COMMON_BYTE_CHANNEL_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace dpopt {

class ByteChannel {
 public:
  virtual ~ByteChannel() = default;
  // Writes all of `bytes`. UNAVAILABLE if the peer is gone or the deadline
  // passed first.
  virtual absl::Status Write(absl::string_view bytes, absl::Time deadline) = 0;
  // Appends what the peer sent, waiting until at least one byte came.
  // UNAVAILABLE at the end of the stream or at the deadline.
  virtual absl::Status ReadSome(std::string* out, absl::Time deadline) = 0;
  // Ends the channel (and, for a child process, the process group).
  virtual void Close() = 0;
};

// Connects to a Unix-domain stream socket at `path` (its file mode decides
// who may connect). UNAVAILABLE if nothing listens there.
absl::StatusOr<std::unique_ptr<ByteChannel>> ConnectUnixSocket(
    const std::string& path);

// The fd-level loops both channels share (non-blocking fds).
absl::Status WriteAllFd(int* fd, absl::string_view bytes, absl::Time deadline);
absl::Status ReadSomeFd(int* fd, std::string* out, absl::Time deadline);

}  // namespace dpopt

#endif  // DPOPT_CORE_COMMON_BYTE_CHANNEL_H_
