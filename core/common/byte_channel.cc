#include "core/common/byte_channel.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace dpopt {
namespace {

void CloseFd(int* fd) {
  if (*fd >= 0) close(*fd);
  *fd = -1;
}

int PollMs(absl::Time deadline) {
  const int64_t left = absl::ToInt64Milliseconds(deadline - absl::Now());
  return static_cast<int>(std::clamp<int64_t>(left + 1, 0, 1000));
}

class SocketChannel final : public ByteChannel {
 public:
  explicit SocketChannel(int fd) : fd_(fd), read_fd_(dup(fd)) {}
  ~SocketChannel() override { Close(); }
  absl::Status Write(absl::string_view bytes, absl::Time deadline) override {
    return WriteAllFd(&fd_, bytes, deadline);
  }
  absl::Status ReadSome(std::string* out, absl::Time deadline) override {
    return ReadSomeFd(&read_fd_, out, deadline);
  }
  void Close() override {
    CloseFd(&fd_);
    CloseFd(&read_fd_);
  }

 private:
  int fd_;       // written (closed by WriteAllFd when the peer is gone)
  int read_fd_;  // read (closed at the end of the stream)
};

}  // namespace

absl::Status WriteAllFd(int* fd, absl::string_view bytes, absl::Time deadline) {
  // SIGPIPE is blocked on this thread while writing: a peer that is gone
  // makes write() fail with EPIPE instead of killing the caller.
  sigset_t pipe_set, old;
  sigemptyset(&pipe_set);
  sigaddset(&pipe_set, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe_set, &old);
  absl::Status status;
  size_t done = 0;
  while (done < bytes.size()) {
    if (*fd < 0) {
      status = absl::UnavailableError("the peer is gone");
      break;
    }
    if (absl::Now() >= deadline) {
      status = absl::UnavailableError("the peer stopped reading");
      break;
    }
    pollfd p = {*fd, POLLOUT, 0};
    if (poll(&p, 1, PollMs(deadline)) <= 0) continue;
    const ssize_t w = write(*fd, bytes.data() + done, bytes.size() - done);
    if (w > 0) {
      done += static_cast<size_t>(w);
    } else if (w < 0 && errno != EAGAIN && errno != EINTR) {
      CloseFd(fd);
    }
  }
  const timespec zero = {0, 0};
  while (sigtimedwait(&pipe_set, nullptr, &zero) > 0) {
  }  // consume a pending SIGPIPE of ours
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  return status;
}

absl::Status ReadSomeFd(int* fd, std::string* out, absl::Time deadline) {
  char buf[65536];
  while (*fd >= 0) {
    if (absl::Now() >= deadline) {
      return absl::UnavailableError("no reply in time");
    }
    pollfd p = {*fd, POLLIN, 0};
    if (poll(&p, 1, PollMs(deadline)) <= 0) continue;
    const ssize_t r = read(*fd, buf, sizeof buf);
    if (r > 0) {
      out->append(buf, static_cast<size_t>(r));
      return absl::OkStatus();
    }
    if (r == 0 || (errno != EAGAIN && errno != EINTR)) CloseFd(fd);
  }
  return absl::UnavailableError("the peer closed the connection");
}

absl::StatusOr<std::unique_ptr<ByteChannel>> ConnectUnixSocket(
    const std::string& path) {
  sockaddr_un addr = {};
  addr.sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof addr.sun_path) {
    return absl::InvalidArgumentError("bad Unix socket path");
  }
  std::memcpy(addr.sun_path, path.data(), path.size());
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    return absl::UnavailableError(absl::StrCat("socket: ", strerror(errno)));
  }
  if (connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0) {
    const int e = errno;
    close(fd);
    return absl::UnavailableError(
        absl::StrCat("cannot connect to ", path, ": ", strerror(e)));
  }
  fcntl(fd, F_SETFL, O_NONBLOCK);
  auto channel = std::make_unique<SocketChannel>(fd);
  return std::unique_ptr<ByteChannel>(std::move(channel));
}

}  // namespace dpopt
