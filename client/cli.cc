#include "client/cli.h"

#include <cstdlib>
#include <deque>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace dpopt::client {
namespace {

constexpr char kDescription[] =
    "dpopt: client of dpopt-server, a differentially private optimization "
    "service.";
constexpr char kFooter[] =
    "The bearer token is read from --token-file, $DPOPT_TOKEN or "
    "~/.config/dpopt/token.\nExit codes: 0 ok, 1 refused or failed by the "
    "server, 2 usage error, 3 server unreachable.";

// Values of one App's flags as CLI11 stores them.
struct FlagValues {
  std::map<std::string, std::string> text;
  std::map<std::string, bool> boolean;
  std::map<std::string, CLI::Option*> options;
  std::vector<std::string> positional;

  void Add(CLI::App& app, const FlagSpec& f) {
    if (f.name == "help") return;  // CLI11's own -h/--help
    const std::string flag = "--" + f.name;
    if (f.boolean) {
      options[f.name] = app.add_flag(flag, boolean[f.name], f.help);
    } else {
      options[f.name] =
          app.add_option(flag, text[f.name], f.help)->type_name(f.value_name);
    }
  }
  // Copies the flags that were given into `out` (existing entries win:
  // a flag after the command overrides the same flag before it).
  void CopyTo(ParsedArgs& out) const {
    for (const auto& [name, opt] : options) {
      if (opt->count() == 0 || out.values_.count(name) > 0) continue;
      auto b = boolean.find(name);
      out.values_[name] =
          b != boolean.end() ? (b->second ? "true" : "false") : text.at(name);
    }
  }
};

// The innermost subcommand that was selected (for error help).
const CLI::App* Deepest(const CLI::App& app) {
  for (const CLI::App* sub : app.get_subcommands()) return Deepest(*sub);
  return &app;
}

// "dpopt job submit" for the App of "submit".
std::string PathOf(const CLI::App& app) {
  const CLI::App* parent = app.get_parent();
  return parent == nullptr ? "dpopt"
                           : absl::StrCat(PathOf(*parent), " ", app.get_name());
}

}  // namespace

int RunCli(int argc, char** argv, const std::vector<Command>& commands) {
  CLI::App app(kDescription, "dpopt");
  app.footer(kFooter);
  app.require_subcommand(1);
  app.set_version_flag("--version", "dpopt 0.1.0");
  FlagValues root_values;
  for (const FlagSpec& f : GlobalFlags()) root_values.Add(app, f);

  std::map<std::string, CLI::App*> groups;  // "dataset" -> its App
  std::deque<FlagValues> values;            // stable addresses for CLI11
  const Command* selected = nullptr;
  FlagValues* selected_values = nullptr;
  for (const Command& c : commands) {
    std::vector<std::string> words = absl::StrSplit(c.path, ' ');
    CLI::App* parent = &app;
    std::string prefix;
    for (size_t i = 0; i + 1 < words.size(); ++i) {
      prefix = prefix.empty() ? words[i] : absl::StrCat(prefix, " ", words[i]);
      auto it = groups.find(prefix);
      if (it == groups.end()) {
        CLI::App* g = parent->add_subcommand(words[i]);
        g->require_subcommand(1);
        it = groups.emplace(prefix, g).first;
      }
      parent = it->second;
    }
    CLI::App* leaf = parent->add_subcommand(words.back(), c.summary);
    FlagValues& v = values.emplace_back();
    if (!c.args.empty()) {
      leaf->add_option("args", v.positional, "arguments: " + c.args)
          ->type_name(c.args)
          ->expected(0, -1);
    } else {
      leaf->allow_extras(false);
    }
    for (const FlagSpec& f : WithGlobals(c.flags)) v.Add(*leaf, f);
    leaf->callback([&selected, &selected_values, &c, &v] {
      selected = &c;
      selected_values = &v;
    });
  }

  for (auto& [prefix, g] : groups) {
    std::vector<std::string> names;
    for (const CLI::App* sub : g->get_subcommands({})) {
      names.push_back(sub->get_name());
    }
    g->description(
        absl::StrCat(prefix, " commands: ", absl::StrJoin(names, ", ")));
  }
  if (argc <= 1) {
    std::cerr << app.help();
    return 2;
  }
  // An unknown first word: say so (CLI11 would only say a command is
  // required).
  for (int i = 1; i < argc; ++i) {
    const std::string word = argv[i];
    if (word.rfind("-", 0) == 0) {
      // Skip a global flag's separate value ("--server HOST").
      if (word.find('=') == std::string::npos && word != "--json" &&
          word != "-h" && word != "--help" && word != "--version") {
        ++i;
      }
      continue;
    }
    bool known = false;
    for (const CLI::App* sub : app.get_subcommands({})) {
      known |= sub->check_name(word);
    }
    if (!known) {
      std::cerr << "error: unknown command '" << word
                << "'. Run 'dpopt --help'.\n";
      return 2;
    }
    break;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    const CLI::App* where = Deepest(app);
    std::cerr << "error: " << e.what() << "\n";
    if (!where->get_subcommands({}).empty() &&
        where->get_subcommands().empty()) {
      std::cerr << "\n" << where->help();  // a group without its command
    } else {
      std::cerr << "Run '" << PathOf(*where) << " --help' for usage.\n";
    }
    return 2;
  }
  if (selected == nullptr) {  // cannot happen with require_subcommand
    std::cerr << app.help();
    return 2;
  }
  ParsedArgs parsed;
  parsed.positional_ = selected_values->positional;
  selected_values->CopyTo(parsed);
  root_values.CopyTo(parsed);

  Globals g;
  const char* env = std::getenv("DPOPT_SERVER");
  g.server =
      parsed.Get("server", env != nullptr && *env ? env : kDefaultServer);
  g.json = parsed.GetBool("json");
  auto timeout = parsed.GetDouble("timeout", 120.0);
  if (!timeout.ok() || *timeout <= 0) {
    return UsageError("--timeout must be a positive number of seconds");
  }
  g.timeout_s = *timeout;
  if (absl::Status creds = ResolveCredentials(parsed, g); !creds.ok()) {
    return UsageError(creds);
  }
  // `dpopt privacy ...` computes locally and opens no connection.
  if (!absl::StartsWith(selected->path, "privacy")) {
    if (absl::Status safe = CheckConnectionSecurity(g); !safe.ok()) {
      std::cerr << "dpopt: " << safe.message() << std::endl;
      return 2;
    }
  }
  return selected->run(parsed, g);
}

}  // namespace dpopt::client
