// Rotary-embedding inverse frequencies for a model: theta^(-2i/D), with Llama 3's
// wavelength-dependent scaling when config.rope_scaling.type == "llama3".
#pragma once
#include <vector>

#include "model/model_config.h"

namespace cpinfer {

// [head_dim / 2] inverse frequencies, in double precision.
std::vector<double> rope_inv_freq(const ModelConfig& config);

}  // namespace cpinfer
