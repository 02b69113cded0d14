// Command-line parsing of the `dpopt` CLI with CLI11 (Debian libcli11-dev):
// the command table (client/common.h `Command`) becomes a tree of CLI11
// subcommands ("dataset import" = group "dataset", command "import"), each
// with its flags and positional arguments, so CLI11 does the parsing,
// validation of unknown flags and missing values, and every level's --help
// (the root lists the groups, a group lists its commands, a command lists
// its flags). Global flags are accepted before or after the command.
#ifndef DPOPT_CLIENT_CLI_H_
#define DPOPT_CLIENT_CLI_H_

#include <vector>

#include "client/common.h"

namespace dpopt::client {

// Parses argv, resolves the connection settings and runs the selected
// command. Exit codes: those of the command; 0 for --help/--version; 2 for
// usage errors (with the relevant help on stderr).
int RunCli(int argc, char** argv, const std::vector<Command>& commands);

}  // namespace dpopt::client

#endif  // DPOPT_CLIENT_CLI_H_
