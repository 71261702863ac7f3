#include <CLI/CLI.hpp>

#include <cstdio>

#include "cli/commands.h"
#include "core/error.h"
#include "dist/launcher.h"
#include "kernels/linear.h"

namespace cpinfer {

namespace {
std::vector<std::string> g_args;
}  // namespace

const std::vector<std::string>& cli_args() { return g_args; }

int cli_main(int argc, char** argv) {
  // vLLM spells the layout flags -tp / -pcp / -dcp, which CLI11 does not accept as
  // single-dash names: rewrite them to their long forms first.
  g_args = normalize_layout_flags(std::vector<std::string>(argv, argv + argc));
  std::vector<char*> ptrs;
  for (auto& s : g_args) ptrs.push_back(s.data());
  CLI::App app{"cpinfer: context-parallel LLM inference on CPUs"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "cpinfer 0.1.0");
  CommandAction action;
  register_make_model(app, &action);
  register_tokenize(app, &action);
  register_generate(app, &action);
  register_serve(app, &action);
  register_bench(app, &action);
  register_plan(app, &action);
  try {
    app.parse(int(ptrs.size()), ptrs.data());
    linear_read_environment();
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
