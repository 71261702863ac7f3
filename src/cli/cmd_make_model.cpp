#include <CLI/CLI.hpp>

#include "cli/commands.h"
#include "core/error.h"

namespace cpinfer {
// TEMPORARY scaffold, replaced by the real command while the foundation is built.
void register_make_model(CLI::App& app, CommandAction* action) {
  auto* cmd = app.add_subcommand("make-model", "(under construction)");
  cmd->callback([action] { *action = [] { fail("make-model: under construction"); return 1; }; });
}
}  // namespace cpinfer
