// The decoder's weights as views into the mmapped safetensors (large matrices stay
// in the file's dtype; norms and biases, being small, are widened to f32 once).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "kernels/linear.h"
#include "model/model_config.h"
#include "model/safetensors.h"

namespace cpinfer {

struct LayerWeights {
  WeightView q, k, v, o;       // [Hq*D, H], [Hkv*D, H], [Hkv*D, H], [H, Hq*D]
  WeightView gate, up, down;   // [I, H], [I, H], [H, I]
  std::vector<float> q_bias, k_bias, v_bias;  // empty when the model has none
  std::vector<float> input_norm, post_attention_norm;  // [H]
};

struct ModelWeights {
  std::shared_ptr<SafetensorsStore> store;  // keeps the mapping alive
  WeightView embed;                          // [V, H]
  WeightView lm_head;                        // [V, H] (the embedding when tied)
  std::vector<LayerWeights> layers;
  std::vector<float> final_norm;             // [H]
};

// Checks every tensor's presence, dtype and shape against the config (errors name the
// tensor, the file, the expected and found shape) and builds the views.
ModelWeights load_model_weights(const ModelConfig& config, const std::string& model_dir);

}  // namespace cpinfer
