// Qwen3 dense (per-head RMSNorm of q and k before RoPE, no q/k/v biases, head_dim not
// hidden / heads) on one rank against the float64 reference model, on the qwen3-0.6b
// preset's config in small shapes with f32 weights.
#include <gtest/gtest.h>

#include "model/model_config.h"
#include "model/safetensors.h"
#include "model/synthetic_model.h"
#include "support/reference_compare.h"
#include "support/test_models.h"

namespace cpinfer {
namespace {

constexpr double kTol = 1e-4;  // engine logits within 1e-4 of float64 (f32 weights)

// 8 q heads x 64 = 512 q columns over a hidden size of 256; 2 KV heads.
std::string small_qwen3() {
  ModelConfig c = preset_config("qwen3-0.6b");
  c.hidden_size = 256;
  c.intermediate_size = 512;
  c.num_layers = 2;
  c.num_q_heads = 8;
  c.num_kv_heads = 2;
  c.head_dim = 64;
  return testing::test_model_config("qwen3-small", c, DType::F32);
}

TEST(ForwardReferenceQwen3, ConfigAndTensors) {
  const std::string dir = small_qwen3();
  const ModelConfig c = load_model_config(dir);
  EXPECT_EQ(c.arch, Architecture::Qwen3);
  EXPECT_EQ(c.model_type, "qwen3");
  EXPECT_TRUE(c.qk_norm);
  EXPECT_FALSE(c.attention_bias);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_EQ(c.head_dim, 64);
  const SafetensorsStore st = SafetensorsStore::open(dir);
  EXPECT_EQ(st.get("model.layers.1.self_attn.q_norm.weight").shape, (std::vector<int64_t>{64}));
  EXPECT_EQ(st.get("model.layers.1.self_attn.k_norm.weight").shape, (std::vector<int64_t>{64}));
  for (const std::string& n : st.names()) EXPECT_EQ(n.find("bias"), std::string::npos) << n;
}

TEST(ForwardReferenceQwen3, Prefill) {
  const double d = testing::prefill_vs_reference(small_qwen3(), 300, {0, 1, 150, 299}, 3);
  EXPECT_LE(d, kTol);
  std::printf("qwen3 prefill: max |engine - reference| = %.3g\n", d);
}

TEST(ForwardReferenceQwen3, ChunkedPrefillThenDecode) {
  const double d = testing::chunked_decode_vs_reference(small_qwen3(), 200, 48, 6, 4);
  EXPECT_LE(d, kTol);
  std::printf("qwen3 chunked prefill + decode: max |engine - reference| = %.3g\n", d);
}

}  // namespace
}  // namespace cpinfer
