// Test helpers that look at the processes of this machine through /proc: how
// many have a command line containing a marker (the MPI tests give each job a
// unique worker argument), and a bounded wait until none is left (a killed
// process disappears from /proc only once the kernel has torn it down, which
// takes a moment on a loaded machine).
#ifndef DPOPT_TESTS_COMMON_PROCESSES_H_
#define DPOPT_TESTS_COMMON_PROCESSES_H_

#include <dirent.h>

#include <fstream>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace dpopt::testing {

// Live processes (zombies have an empty command line) whose command line
// contains `marker`.
inline int CountProcesses(const std::string& marker) {
  int count = 0;
  DIR* d = opendir("/proc");
  if (d == nullptr) return 0;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    std::ifstream in(absl::StrCat("/proc/", e->d_name, "/cmdline"));
    std::stringstream buf;
    buf << in.rdbuf();
    std::string cmd = buf.str();
    for (char& c : cmd) {
      if (c == '\0') c = ' ';
    }
    if (cmd.find(marker) != std::string::npos) ++count;
  }
  closedir(d);
  return count;
}

// Polls until no process matches `marker` or `limit` passes; returns the
// last count (0 on success).
inline int WaitUntilNoProcesses(const std::string& marker,
                                absl::Duration limit = absl::Seconds(20)) {
  const absl::Time end = absl::Now() + limit;
  int n = CountProcesses(marker);
  while (n > 0 && absl::Now() < end) {
    absl::SleepFor(absl::Milliseconds(50));
    n = CountProcesses(marker);
  }
  return n;
}

// Polls until at least `count` processes match `marker` or `limit` passes;
// returns the last count.
inline int WaitForProcesses(const std::string& marker, int count,
                            absl::Duration limit) {
  const absl::Time end = absl::Now() + limit;
  int n = CountProcesses(marker);
  while (n < count && absl::Now() < end) {
    absl::SleepFor(absl::Milliseconds(50));
    n = CountProcesses(marker);
  }
  return n;
}

}  // namespace dpopt::testing

#endif  // DPOPT_TESTS_COMMON_PROCESSES_H_
