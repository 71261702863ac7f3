#include <CLI/CLI.hpp>

#include "cli/commands.h"
#include "core/error.h"

namespace cpinfer {
// TEMPORARY scaffold, replaced by the real command while the foundation is built.
void register_tokenize(CLI::App& app, CommandAction* action) {
  auto* cmd = app.add_subcommand("tokenize", "(under construction)");
  cmd->callback([action] { *action = [] { fail("tokenize: under construction"); return 1; }; });
}
}  // namespace cpinfer
