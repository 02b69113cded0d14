#include "core/optim/distributed_dda/mpi_launcher.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/common/child_process.h"
#include "core/common/status_macros.h"
#include "core/noise/random.h"
#include "core/optim/distributed_dda/wire.h"

extern char** environ;

namespace dpopt::optim::distributed_dda {
namespace {

struct Pipe {
  int read = -1, write = -1;
};

void CloseFd(int* fd) {
  if (*fd >= 0) close(*fd);
  *fd = -1;
}

absl::StatusOr<Pipe> MakePipe() {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    return absl::UnavailableError(
        absl::StrCat("pipe2 failed: ", std::strerror(errno)));
  }
  return Pipe{fds[0], fds[1]};
}

// Writes without raising SIGPIPE in the server if the reader is gone.
ssize_t WriteNoSigpipe(int fd, const char* data, size_t n) {
  sigset_t pipe_set, old;
  sigemptyset(&pipe_set);
  sigaddset(&pipe_set, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe_set, &old);
  const ssize_t w = write(fd, data, n);
  if (w < 0 && errno == EPIPE) {
    const timespec zero = {0, 0};
    sigtimedwait(&pipe_set, nullptr, &zero);  // consume our pending SIGPIPE
  }
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  return w;
}

}  // namespace

absl::Status CheckProductionWorker(const MpiSettings& settings) {
  RETURN_IF_ERROR(settings.Validate());
  if (settings.allows_testing_worker()) return absl::OkStatus();
  std::string worker = settings.worker;
  std::string flag = "--identify";
  char* argv[] = {worker.data(), flag.data(), nullptr};
  ASSIGN_OR_RETURN(Pipe out, MakePipe());
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out.write, 1);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&attr, 0);
  pid_t pid = -1;
  const int rc =
      posix_spawn(&pid, worker.c_str(), &actions, &attr, argv, environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  CloseFd(&out.write);
  if (rc != 0) {
    CloseFd(&out.read);
    return absl::FailedPreconditionError(
        absl::StrCat("the dp_dda worker ", worker,
                     " could not be started: ", std::strerror(rc)));
  }
  std::string output;
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  char buf[256];
  while (output.size() < 4096) {
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) break;
    pollfd fd = {out.read, POLLIN, 0};
    if (poll(&fd, 1, static_cast<int>(absl::ToInt64Milliseconds(left)) + 1) <=
        0) {
      continue;
    }
    const ssize_t r = read(out.read, buf, sizeof buf);
    if (r <= 0) break;
    output.append(buf, static_cast<size_t>(r));
  }
  CloseFd(&out.read);
  int status = 0;
  pid_t reaped = 0;
  while ((reaped = waitpid(pid, &status, WNOHANG)) == 0 &&
         absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(5));
  }
  if (reaped != pid)
    status = TerminateProcessGroup(pid);  // did not exit in time
  const bool exited_ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
  if (!exited_ok || output != absl::StrCat(kProductionWorkerIdentity, "\n")) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the dp_dda worker ", worker,
        " is not the production dpopt-dda-worker (it must print \"",
        kProductionWorkerIdentity,
        "\" for --identify); a test-only worker is never accepted"));
  }
  return absl::OkStatus();
}

absl::StatusOr<EngineResult> RunOnMpi(
    const MpiSettings& settings, int ranks, const JobStreamSource& job_stream,
    const TraceSink& sink, const std::function<bool()>& stop_requested) {
  RETURN_IF_ERROR(settings.Validate());
  // A tag that marks every process of this job (tests look for it).
  ASSIGN_OR_RETURN(auto rng, noise::NewSecureRandom());
  const std::string tag = absl::StrFormat("%016x", rng->NextUint64());
  std::vector<std::string> args = {settings.mpirun, "-np", absl::StrCat(ranks)};
  if (!settings.hostfile.empty()) {
    args.push_back("--hostfile");
    args.push_back(settings.hostfile);
  }
  for (const auto& a : settings.mpirun_args) args.push_back(a);
  args.push_back(settings.worker);
  args.push_back(absl::StrCat("--job-tag=", tag));
  for (const auto& a : settings.worker_args) args.push_back(a);
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<std::string> env_strings;
  for (char** e = environ; *e != nullptr; ++e) env_strings.emplace_back(*e);
  if (geteuid() == 0) {
    env_strings.push_back("OMPI_ALLOW_RUN_AS_ROOT=1");
    env_strings.push_back("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1");
  }
  std::vector<char*> envp;
  for (auto& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);

  ASSIGN_OR_RETURN(Pipe in, MakePipe());
  ASSIGN_OR_RETURN(Pipe out, MakePipe());
  ASSIGN_OR_RETURN(Pipe err, MakePipe());
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, in.read, 0);
  posix_spawn_file_actions_adddup2(&actions, out.write, 1);
  posix_spawn_file_actions_adddup2(&actions, err.write, 2);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&attr, 0);
  pid_t pid = -1;
  const int rc = posix_spawnp(&pid, settings.mpirun.c_str(), &actions, &attr,
                              argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  CloseFd(&in.read);
  CloseFd(&out.write);
  CloseFd(&err.write);
  if (rc != 0) {
    CloseFd(&in.write);
    CloseFd(&out.read);
    CloseFd(&err.read);
    return absl::UnavailableError(absl::StrCat(
        "could not start ", settings.mpirun, ": ", std::strerror(rc)));
  }
  fcntl(in.write, F_SETFL, O_NONBLOCK);

  const absl::Time deadline = absl::Now() + settings.timeout;
  std::string piece;   // the part of the job stream being written
  size_t written = 0;  // bytes of `piece` already written
  FrameParser parser;
  EngineResult result;
  bool done = false, stopped = false, timed_out = false;
  std::string worker_error, stderr_tail;
  absl::Status stream_error;
  char buf[65536];
  while (out.read >= 0 || err.read >= 0) {
    pollfd fds[3];
    int n = 0;
    int out_i = -1, err_i = -1, in_i = -1;
    if (out.read >= 0) {
      fds[n] = {out.read, POLLIN, 0};
      out_i = n++;
    }
    if (err.read >= 0) {
      fds[n] = {err.read, POLLIN, 0};
      err_i = n++;
    }
    if (in.write >= 0) {
      fds[n] = {in.write, POLLOUT, 0};
      in_i = n++;
    }
    if (stop_requested && stop_requested()) {
      stopped = true;
      break;
    }
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) {
      timed_out = true;
      break;
    }
    const int wait_ms = static_cast<int>(
        std::min<int64_t>(50, absl::ToInt64Milliseconds(left) + 1));
    if (poll(fds, n, wait_ms) < 0 && errno != EINTR) break;
    if (in_i >= 0 && (fds[in_i].revents & (POLLOUT | POLLERR | POLLHUP))) {
      bool more = true;
      if (written == piece.size()) {
        written = 0;
        more = job_stream(&piece);
        if (!more) piece.clear();
      }
      if (!more) {
        CloseFd(&in.write);  // the whole stream is out
      } else {
        const ssize_t w = WriteNoSigpipe(in.write, piece.data() + written,
                                         piece.size() - written);
        if (w > 0) written += static_cast<size_t>(w);
        if (w < 0 && errno != EAGAIN && errno != EINTR) {
          CloseFd(&in.write);  // the reader is gone; the exit status tells why
        }
      }
    }
    if (err_i >= 0 && (fds[err_i].revents & (POLLIN | POLLHUP | POLLERR))) {
      const ssize_t r = read(err.read, buf, sizeof buf);
      if (r <= 0) {
        CloseFd(&err.read);
      } else {
        stderr_tail.append(buf, r);
        if (stderr_tail.size() > 4096) {
          stderr_tail.erase(0, stderr_tail.size() - 4096);
        }
      }
    }
    if (out_i >= 0 && (fds[out_i].revents & (POLLIN | POLLHUP | POLLERR))) {
      const ssize_t r = read(out.read, buf, sizeof buf);
      if (r <= 0) {
        CloseFd(&out.read);
        continue;
      }
      parser.Append(absl::string_view(buf, r));
      Frame frame;
      for (;;) {
        absl::StatusOr<bool> got = parser.Next(&frame);
        if (!got.ok()) {
          stream_error = got.status();
          break;
        }
        if (!*got) break;
        if (frame.type == FrameType::kTrace) {
          absl::StatusOr<TraceFrame> t = DecodeTrace(frame.payload);
          if (!t.ok()) {
            stream_error = t.status();
            break;
          }
          result.model = t->average;
          result.steps_done = t->step;
          if (!sink(t->step, t->average, t->theta_norm)) {
            stopped = true;
            break;
          }
        } else if (frame.type == FrameType::kDone) {
          absl::StatusOr<DoneFrame> d = DecodeDone(frame.payload);
          if (!d.ok()) {
            stream_error = d.status();
            break;
          }
          result.model = std::move(d->model);
          result.node_models = std::move(d->node_models);
          result.steps_done = d->steps_done;
          done = true;
        } else {
          absl::StatusOr<WireReader> r = WireReader::Open(frame.payload);
          absl::StatusOr<std::string> msg =
              r.ok() ? r->Str() : absl::StatusOr<std::string>(r.status());
          worker_error = msg.ok() ? *msg : "malformed error frame";
        }
      }
      if (stopped || !stream_error.ok()) break;
    }
  }
  CloseFd(&in.write);
  CloseFd(&out.read);
  CloseFd(&err.read);
  int status = 0;
  const bool must_kill = stopped || timed_out || !stream_error.ok();
  if (must_kill) {
    status = TerminateProcessGroup(pid);
  } else {
    // Both pipes closed: mpirun is exiting. Reap it within the deadline.
    for (;;) {
      const pid_t r = waitpid(pid, &status, WNOHANG);
      if (r == pid) break;
      if (absl::Now() > deadline) {
        timed_out = true;
        status = TerminateProcessGroup(pid);
        break;
      }
      absl::SleepFor(absl::Milliseconds(20));
    }
    kill(-pid, SIGKILL);  // nothing of the job may outlive it
  }
  if (!stderr_tail.empty() && (must_kill || !done || status != 0)) {
    std::fprintf(stderr, "dp_dda mpirun (job tag %s) stderr tail:\n%s\n",
                 tag.c_str(), stderr_tail.c_str());
  }
  if (stopped) {
    result.stopped = true;
    return result;
  }
  if (timed_out) {
    return absl::DeadlineExceededError(absl::StrCat(
        "the MPI job exceeded its deadline of ",
        absl::FormatDuration(settings.timeout), "; its ranks were stopped"));
  }
  if (!stream_error.ok()) return stream_error;
  if (!worker_error.empty()) {
    return absl::InternalError(
        absl::StrCat("the dp_dda worker failed: ", worker_error));
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || !done) {
    return absl::AbortedError(absl::StrCat(
        "an MPI rank of the job failed (mpirun ",
        WIFEXITED(status) ? absl::StrCat("exit status ", WEXITSTATUS(status))
                          : absl::StrCat("signal ", WTERMSIG(status)),
        done ? "" : ", no result", ")"));
  }
  return result;
}

}  // namespace dpopt::optim::distributed_dda
