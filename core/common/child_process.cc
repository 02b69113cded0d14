#include "core/common/child_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

extern char** environ;

namespace dpopt {
namespace {

void CloseFd(int* fd) {
  if (*fd >= 0) close(*fd);
  *fd = -1;
}

}  // namespace

absl::StatusOr<std::unique_ptr<ChildProcess>> ChildProcess::Spawn(
    const std::vector<std::string>& argv_strings,
    const std::vector<std::string>& extra_env) {
  if (argv_strings.empty()) return absl::InvalidArgumentError("empty argv");
  std::vector<std::string> args = argv_strings;
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<std::string> env_strings;
  for (char** e = environ; *e != nullptr; ++e) env_strings.emplace_back(*e);
  for (const auto& e : extra_env) env_strings.push_back(e);
  std::vector<char*> envp;
  for (auto& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);

  int in[2], out[2];
  if (pipe2(in, O_CLOEXEC) != 0) {
    return absl::UnavailableError(absl::StrCat("pipe2: ", strerror(errno)));
  }
  if (pipe2(out, O_CLOEXEC) != 0) {
    close(in[0]);
    close(in[1]);
    return absl::UnavailableError(absl::StrCat("pipe2: ", strerror(errno)));
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, in[0], 0);
  posix_spawn_file_actions_adddup2(&actions, out[1], 1);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&attr, 0);
  pid_t pid = -1;
  const int rc =
      posix_spawnp(&pid, argv[0], &actions, &attr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  close(in[0]);
  close(out[1]);
  if (rc != 0) {
    close(in[1]);
    close(out[0]);
    return absl::UnavailableError(
        absl::StrCat("could not start ", argv_strings[0], ": ", strerror(rc)));
  }
  fcntl(in[1], F_SETFL, O_NONBLOCK);
  fcntl(out[0], F_SETFL, O_NONBLOCK);
  return std::unique_ptr<ChildProcess>(new ChildProcess(pid, in[1], out[0]));
}

ChildProcess::~ChildProcess() { Terminate(); }

absl::Status ChildProcess::Write(absl::string_view bytes, absl::Time deadline) {
  return WriteAllFd(&in_, bytes, deadline);
}

absl::Status ChildProcess::ReadSome(std::string* out, absl::Time deadline) {
  return ReadSomeFd(&out_, out, deadline);
}

int TerminateProcessGroup(pid_t pid) {
  int status = 0;
  kill(-pid, SIGTERM);
  const absl::Time limit = absl::Now() + absl::Seconds(3);
  while (absl::Now() < limit) {
    if (waitpid(pid, &status, WNOHANG) == pid) {
      kill(-pid, SIGKILL);  // stragglers in the group
      return status;
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
  kill(-pid, SIGKILL);
  waitpid(pid, &status, 0);
  return status;
}

int ChildProcess::Terminate() {
  CloseFd(&in_);
  CloseFd(&out_);
  if (reaped_) return status_;
  reaped_ = true;
  status_ = TerminateProcessGroup(pid_);
  return status_;
}

}  // namespace dpopt
