// make-model's GGUF output: the same synthetic weights and tokenizer as the safetensors
// directory, in one .gguf file as llama.cpp's convert_hf_to_gguf.py lays it out (GGUF
// tensor names, llama's q/k rows permuted, norms in F32, Llama 3 rope scaling as a
// rope_freqs tensor).
#pragma once
#include <string>

#include <nlohmann/json.hpp>

#include "core/dtype.h"
#include "model/model_config.h"

namespace cpinfer {

struct SyntheticGgufOptions {
  DType dtype = DType::BF16;  // the values' dtype (as in the safetensors form)
  bool q8_0 = false;          // matrices stored as Q8_0 (quantized from those values)
  uint64_t seed = 0;
  int threads = 1;
  std::string name;           // general.name
};

// Writes PATH. Every value equals the safetensors form's (same seed): 1-D tensors are F32
// holding the dtype's values, matrices are in the dtype, or Q8_0 quantized from its values
// exactly as --quantization int8 quantizes them at load. tokenizer: the tokenizer.json
// (`tokenizer_source` names it); tokenizer_config: the tokenizer_config.json of the
// safetensors form (chat template, eos token; an empty object for none).
void write_synthetic_gguf(const std::string& path, const ModelConfig& c,
                          const SyntheticGgufOptions& opts, const nlohmann::json& tokenizer,
                          const std::string& tokenizer_source,
                          const nlohmann::json& tokenizer_config);

}  // namespace cpinfer
