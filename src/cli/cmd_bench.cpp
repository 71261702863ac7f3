// `cpinfer bench`: a parent subcommand whose children each live in their own bench_*.cpp and
// register themselves here. To add `bench X`, write bench_X.cpp exposing
// register_bench_X(CLI::App& bench, CommandAction* action), declare it below and call it.
#include <CLI/CLI.hpp>

#include "cli/commands.h"

namespace cpinfer {

// Children of `bench` (each in src/cli/bench_<name>.cpp).
void register_bench_peak(CLI::App& bench, CommandAction* action);
void register_bench_attention(CLI::App& bench, CommandAction* action);
void register_bench_latency(CLI::App& bench, CommandAction* action);
void register_bench_serve(CLI::App& bench, CommandAction* action);

void register_bench(CLI::App& app, CommandAction* action) {
  auto* bench = app.add_subcommand("bench", "Benchmarks (one JSON line each with --json)");
  bench->require_subcommand(1);
  register_bench_peak(*bench, action);
  register_bench_attention(*bench, action);
  register_bench_latency(*bench, action);
  register_bench_serve(*bench, action);
}

}  // namespace cpinfer
