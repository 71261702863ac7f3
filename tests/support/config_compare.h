// Field-by-field equality of two model configs that should describe the same model (one
// config.json read twice, or a safetensors model and its GGUF twin): the fields every form
// carries. Callers add the fields only their forms share.
#pragma once
#include <gtest/gtest.h>

#include "model/model_config.h"

namespace cpinfer::testing {

inline void expect_same_model_shape(const ModelConfig& a, const ModelConfig& b) {
  EXPECT_EQ(a.arch, b.arch);
  EXPECT_EQ(a.hidden_size, b.hidden_size);
  EXPECT_EQ(a.intermediate_size, b.intermediate_size);
  EXPECT_EQ(a.num_layers, b.num_layers);
  EXPECT_EQ(a.num_q_heads, b.num_q_heads);
  EXPECT_EQ(a.num_kv_heads, b.num_kv_heads);
  EXPECT_EQ(a.head_dim, b.head_dim);
  EXPECT_EQ(a.vocab_size, b.vocab_size);
  EXPECT_EQ(a.max_position_embeddings, b.max_position_embeddings);
  EXPECT_DOUBLE_EQ(a.rms_norm_eps, b.rms_norm_eps);
  EXPECT_DOUBLE_EQ(a.rope_theta, b.rope_theta);
  EXPECT_EQ(a.rope_scaling.type, b.rope_scaling.type);
  EXPECT_DOUBLE_EQ(a.rope_scaling.factor, b.rope_scaling.factor);
  EXPECT_EQ(a.qk_norm, b.qk_norm);
  EXPECT_EQ(a.tie_word_embeddings, b.tie_word_embeddings);
  EXPECT_EQ(a.attention_bias, b.attention_bias);
  EXPECT_EQ(a.bos_token_id, b.bos_token_id);
  EXPECT_EQ(a.torch_dtype, b.torch_dtype);
}

}  // namespace cpinfer::testing
