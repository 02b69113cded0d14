// ChildProcess: a program started in its own process group with pipes to
// its standard input and output (its standard error is the caller's: the
// server's log). Writes and reads take deadlines, so a hung child never
// blocks its caller past them; the destructor ends the whole group.
#ifndef DPOPT_CORE_COMMON_CHILD_PROCESS_H_
#define DPOPT_CORE_COMMON_CHILD_PROCESS_H_

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "core/common/byte_channel.h"

namespace dpopt {

// Ends the process group led by `pid`: SIGTERM, then SIGKILL after 3 s (and
// to stragglers once the leader has exited); reaps `pid` and returns its wait
// status.
int TerminateProcessGroup(pid_t pid);

class ChildProcess final : public ByteChannel {
 public:
  // Starts argv[0] (looked up in PATH) with the caller's environment plus
  // `extra_env` ("NAME=value"). UNAVAILABLE if it cannot be started.
  static absl::StatusOr<std::unique_ptr<ChildProcess>> Spawn(
      const std::vector<std::string>& argv,
      const std::vector<std::string>& extra_env);
  ~ChildProcess() override;  // Terminate()
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  // Writes all of `bytes` to the child's standard input. UNAVAILABLE if the
  // child stopped reading (exited) or the deadline passed first.
  absl::Status Write(absl::string_view bytes, absl::Time deadline) override;
  // Appends what the child wrote to its standard output, waiting until at
  // least one byte came or the deadline passed. UNAVAILABLE at the end of
  // its output (it exited) or at the deadline.
  absl::Status ReadSome(std::string* out, absl::Time deadline) override;
  // Ends the process group: SIGTERM, SIGKILL after 3 s; reaps the child.
  // Returns its wait status (idempotent; later calls return the first).
  int Terminate();
  void Close() override { Terminate(); }
  pid_t pid() const { return pid_; }

 private:
  ChildProcess(pid_t pid, int in, int out) : pid_(pid), in_(in), out_(out) {}
  pid_t pid_;
  int in_;
  int out_;
  bool reaped_ = false;
  int status_ = 0;
};

}  // namespace dpopt

#endif  // DPOPT_CORE_COMMON_CHILD_PROCESS_H_
