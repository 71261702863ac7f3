// GGUF models against their safetensors twins (make_model writes both from one seed): the
// same config, bit-identical logits (the GGUF reader gives the engine the very same weight
// bytes, llama's q/k rows un-permuted, norms widened from F32 instead of bf16 but holding
// the bf16 values), the same token ids for the same texts, and Q8_0 files equal to
// --quantization int8 on the safetensors form. Presets: tiny (qwen2, biases) in bf16, f16
// and f32, a small llama with Llama 3 rope scaling (the q/k permutation and rope_freqs), a
// small qwen3 (q/k norms), and tiny with YaRN scaling, with and without an attention factor
// (config.json's attention_factor is GGUF's attn_factor times YaRN's default factor).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/thread_pool.h"
#include "engine/model_runner.h"
#include "model/gguf.h"
#include "model/gguf_model.h"
#include "model/gguf_tokenizer.h"
#include "model/rope.h"
#include "model/synthetic_model.h"
#include "support/config_compare.h"
#include "support/nan_max.h"
#include "support/test_models.h"
#include "tokenizer/tokenizer.h"

namespace cpinfer {
namespace {

struct Case {
  const char* name;
  ModelConfig config;
  DType dtype = DType::BF16;
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

std::vector<Case> cases() {
  ModelConfig tiny = preset_config("tiny");
  tiny.num_layers = 2;
  tiny.hidden_size = 128;
  tiny.intermediate_size = 256;
  ModelConfig yarn = tiny;
  yarn.rope_scaling.type = "yarn";
  yarn.rope_scaling.factor = 4.0;
  yarn.rope_scaling.original_max_position_embeddings = 64;
  ModelConfig yarn_attn = yarn;
  // 1.25 times the default: written as attn_factor 1.25 (exact in f32), so the twin's
  // config, and its logits, come back exactly.
  yarn_attn.rope_scaling.attention_factor = 1.25 * yarn_default_attention_factor(4.0);
  return {{"tiny", tiny},
          {"tiny_f16", tiny, DType::F16},
          {"tiny_f32", tiny, DType::F32},
          {"llama", testing::small_config("llama-3.2-1b")},
          {"qwen3", testing::small_config("qwen3-0.6b")},
          {"yarn", yarn},
          {"yarn_attention_factor", yarn_attn}};
}

// Prefill of the prompt (logits of every row), then 3 decode steps.
std::vector<float> run(const std::string& model, WeightQuantization q) {
  RunnerOptions ro;
  ro.max_cache_tokens = 256;
  ro.quantization = q;
  ModelRunner runner(model, ro, global_pool());
  const std::vector<int32_t> prompt = {9707, 11, 1879, 0, 42, 100, 7, 3000, 128, 5};
  SequenceState seq;
  std::vector<float> got = runner.step({SequenceStep{&seq, prompt.data(), int64_t(prompt.size()), true}});
  for (int32_t t : {17, 23, 99}) {
    const auto& d = runner.step({SequenceStep{&seq, &t, 1, false}});
    got.insert(got.end(), d.begin(), d.end());
  }
  return got;
}

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  double m = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i)
    testing::keep_max(m, double(std::abs(a[i] - b[i])));
  return m;
}

class GgufTwin : public ::testing::TestWithParam<Case> {};

TEST_P(GgufTwin, ConfigLogitsAndTokens) {
  const Case& k = GetParam();
  const std::string st = testing::test_model_config(std::string("gguf-twin-") + k.name, k.config, k.dtype);
  const std::string gg = testing::test_model_config(std::string("gguf-twin-") + k.name, k.config,
                                                    k.dtype, 1, "gguf");
  const std::string file = gg + "/model.gguf";
  EXPECT_EQ(find_gguf_model(gg), file);
  EXPECT_EQ(find_gguf_model(file), file);
  EXPECT_EQ(find_gguf_model(st), "");

  const ModelConfig a = load_model_config(st), b = load_model_config(file);
  testing::expect_same_model_shape(a, b);
  EXPECT_TRUE(b.rope_scaling.freq_factors.empty());  // recognised as llama3 when scaled
  EXPECT_EQ(a.rope_scaling.original_max_position_embeddings,
            b.rope_scaling.original_max_position_embeddings);
  EXPECT_EQ(a.rope_scaling.attention_factor, b.rope_scaling.attention_factor);
  EXPECT_EQ(rope_attention_factor(a), rope_attention_factor(b));
  auto sorted = [](std::vector<int32_t> v) { std::sort(v.begin(), v.end()); return v; };
  EXPECT_EQ(sorted(a.eos_token_ids), sorted(b.eos_token_ids));

  // Logits: exactly equal (the same weight bytes, the same kernels).
  EXPECT_EQ(max_abs_diff(run(st, WeightQuantization::None), run(gg, WeightQuantization::None)), 0.0);

  // Tokenizer: the same ids, specials and texts.
  const Tokenizer ta = Tokenizer::from_file(st + "/tokenizer.json");
  const Tokenizer tb = Tokenizer::from_json_text(gguf_tokenizer_json(open_gguf(file).gguf), file);
  EXPECT_EQ(ta.vocab_size(), tb.vocab_size());
  for (const char* text :
       {"Hello, world! 12345 numbers", "  leading spaces\n\n\ttabs and newlines\r\n",
        "<|im_start|>user\nWhat's 2+2?<|im_end|>\n<|im_start|>assistant\n",
        "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nhi<|eot_id|>",
        "naïve café — 東京 😀 Ünïcödé", "don't I'LL we've", "<think>x</think><tool_call>"}) {
    EXPECT_EQ(ta.encode(text), tb.encode(text)) << text;
    EXPECT_EQ(ta.encode(text, true), tb.encode(text, true)) << text;
    EXPECT_EQ(ta.decode(ta.encode(text)), tb.decode(tb.encode(text))) << text;
  }
  for (int32_t id = 0; id < ta.vocab_size(); id += 97) {
    EXPECT_EQ(ta.token_bytes(id), tb.token_bytes(id)) << id;
    EXPECT_EQ(ta.is_special(id), tb.is_special(id)) << id;
  }
  for (int32_t id = int32_t(ta.vocab_size()) - 300; id < ta.vocab_size(); ++id)
    EXPECT_EQ(ta.is_special(id), tb.is_special(id)) << id;
  const auto chat = gguf_chat_template(open_gguf(file).gguf);
  ASSERT_TRUE(chat.has_value());
  const char* marker = a.arch == Architecture::Llama ? "start_header_id" : "im_start";
  EXPECT_NE(chat->source.find(marker), std::string::npos);
}

TEST_P(GgufTwin, Q8_0EqualsInt8AtLoad) {
  const Case& k = GetParam();
  const std::string st = testing::test_model_config(std::string("gguf-twin-") + k.name, k.config, k.dtype);
  const std::string q8 = testing::test_model_config(std::string("gguf-twin-") + k.name, k.config,
                                                    k.dtype, 1, "gguf", true);
  const MappedGguf m = open_gguf(q8 + "/model.gguf");
  EXPECT_EQ(m.gguf.find_tensor("blk.0.attn_q.weight")->dtype, DType::Q8_0);
  EXPECT_EQ(m.gguf.find_tensor("blk.0.attn_norm.weight")->dtype, DType::F32);
  const std::vector<float> want = run(st, WeightQuantization::Int8);
  EXPECT_EQ(max_abs_diff(want, run(q8, WeightQuantization::None)), 0.0);
  EXPECT_EQ(max_abs_diff(want, run(q8, WeightQuantization::Int8)), 0.0);  // nothing to redo
}

INSTANTIATE_TEST_SUITE_P(Presets, GgufTwin, ::testing::ValuesIn(cases()),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(Gguf, RopePermutationWorkedExample) {
  // One head of D = 4, rows of one byte: HF [a0 a1 b0 b1] -> GGUF [a0 b0 a1 b1].
  const std::vector<uint8_t> hf = {10, 11, 20, 21}, want = {10, 20, 11, 21};
  std::vector<uint8_t> gg(4), back(4);
  permute_rope_rows(hf.data(), gg.data(), 4, 1, 1, true);
  EXPECT_EQ(gg, want);
  permute_rope_rows(gg.data(), back.data(), 4, 1, 1, false);
  EXPECT_EQ(back, hf);
  // Two heads of D = 8, rows of 3 bytes: a round trip is the identity, and it is not a no-op.
  std::vector<uint8_t> x(48), y(48), z(48);
  for (size_t i = 0; i < x.size(); ++i) x[i] = uint8_t(i);
  permute_rope_rows(x.data(), y.data(), 16, 3, 2, true);
  permute_rope_rows(y.data(), z.data(), 16, 3, 2, false);
  EXPECT_NE(x, y);
  EXPECT_EQ(x, z);
}

TEST(Gguf, TensorNames) {
  EXPECT_EQ(gguf_tensor_name("model.layers.12.self_attn.q_proj.weight"), "blk.12.attn_q.weight");
  EXPECT_EQ(gguf_tensor_name("model.layers.0.mlp.down_proj.weight"), "blk.0.ffn_down.weight");
  EXPECT_EQ(gguf_tensor_name("model.embed_tokens.weight"), "token_embd.weight");
  EXPECT_EQ(gguf_tensor_name("lm_head.weight"), "output.weight");
  EXPECT_EQ(hf_tensor_name("blk.3.attn_k_norm.weight"), "model.layers.3.self_attn.k_norm.weight");
  EXPECT_EQ(hf_tensor_name("blk.3.ffn_norm.weight"), "model.layers.3.post_attention_layernorm.weight");
  EXPECT_EQ(hf_tensor_name("output_norm.weight"), "model.norm.weight");
  EXPECT_EQ(hf_tensor_name("rope_freqs.weight"), "");
  EXPECT_EQ(hf_tensor_name("blk.x.attn_q.weight"), "");
}

}  // namespace
}  // namespace cpinfer
