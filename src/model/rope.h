// Rotary-embedding inverse frequencies for a model: theta^(-2i/D), scaled as
// config.rope_scaling says (Hugging Face's "linear", "llama3" and "yarn" rope types).
#pragma once
#include <vector>

#include "model/model_config.h"

namespace cpinfer {

// [head_dim / 2] inverse frequencies, in double precision.
std::vector<double> rope_inv_freq(const ModelConfig& config);

// The factor cos and sin are multiplied by (YaRN's "attention factor"; 1 for the other
// types). Applied to both q and k, it scales every attention logit by its square.
double rope_attention_factor(const ModelConfig& config);

// YaRN's default attention factor for a scaling factor: 0.1 * ln(factor) + 1 (1 when
// factor <= 1). GGUF's rope.scaling.attn_factor multiplies it (llama.cpp's rope applies this
// default itself), where config.json's attention_factor replaces it.
double yarn_default_attention_factor(double factor);

}  // namespace cpinfer
