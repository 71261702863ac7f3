// `cpinfer` subcommands. Each lives in its own cmd_*.cpp and registers itself on the
// CLI11 app; cli_main parses, runs the chosen one, and turns errors into exit codes.
#pragma once
#include <functional>
#include <string>
#include <vector>

namespace CLI { class App; }

namespace cpinfer {

using CommandAction = std::function<int()>;

// Each adds a subcommand to `app` and sets *action to run it when it is chosen.
void register_make_model(CLI::App& app, CommandAction* action);
void register_tokenize(CLI::App& app, CommandAction* action);
void register_generate(CLI::App& app, CommandAction* action);
void register_serve(CLI::App& app, CommandAction* action);
void register_bench(CLI::App& app, CommandAction* action);  // bench peak | attention | ...
void register_plan(CLI::App& app, CommandAction* action);

int cli_main(int argc, char** argv);
// The process's arguments after normalisation (what a relaunch under mpirun re-uses).
const std::vector<std::string>& cli_args();

}  // namespace cpinfer
