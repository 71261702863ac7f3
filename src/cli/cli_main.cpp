#include <CLI/CLI.hpp>

#include <cstdio>

#include "cli/commands.h"
#include "core/error.h"

namespace cpinfer {

int cli_main(int argc, char** argv) {
  CLI::App app{"cpinfer: context-parallel LLM inference on CPUs"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "cpinfer 0.1.0");
  CommandAction action;
  register_make_model(app, &action);
  register_tokenize(app, &action);
  register_generate(app, &action);
  try {
    app.parse(argc, argv);
    return action ? action() : 1;
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 3;
  }
}

}  // namespace cpinfer
