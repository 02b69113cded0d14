// dpopt: the analyst's and curator's command-line client.
//
// It talks to dpopt-server over gRPC (stubs generated from proto/). The only
// engine code it links is core/privacy (pure accounting math, no data access)
// for the local `dpopt privacy` commands, which need no server.
#include <vector>

#include "client/cli.h"
#include "client/common.h"

namespace dpopt::client {

// Every command, in the order `dpopt --help` lists them. Each group's
// handlers and flags live in its own file (client/<group>.cc).
std::vector<Command> Commands() {
  std::vector<Command> cmds;
  for (auto group : {DatasetCommands, BudgetCommands, JobCommands,
                     PrivacyCommands, AdminCommands}) {
    for (Command& c : group()) cmds.push_back(std::move(c));
  }
  return cmds;
}

}  // namespace dpopt::client

int main(int argc, char** argv) {
  return dpopt::client::RunCli(argc, argv, dpopt::client::Commands());
}
