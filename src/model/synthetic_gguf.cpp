#include "model/synthetic_gguf.h"

#include <fmt/format.h>

#include <cstring>
#include <memory>
#include <vector>

#include "core/error.h"
#include "kernels/quantize.h"
#include "model/gguf_model.h"
#include "model/gguf_tokenizer.h"
#include "model/gguf_writer.h"
#include "model/random_fill.h"
#include "model/rope.h"
#include "model/synthetic_model.h"

namespace cpinfer {

namespace {

// llama.cpp's general.file_type (LLAMA_FTYPE_*) for the matrices' type.
uint32_t file_type(const SyntheticGgufOptions& o) {
  if (o.q8_0) return 7;  // MOSTLY_Q8_0
  return o.dtype == DType::F32 ? 0 : o.dtype == DType::F16 ? 1 : 32;  // ALL_F32, MOSTLY_F16, MOSTLY_BF16
}

GgufMetadata model_metadata(const ModelConfig& c, const SyntheticGgufOptions& o) {
  const std::string a = c.model_type;  // "llama" | "qwen2" | "qwen3": GGUF's names too
  const std::string p = a + ".";
  GgufMetadata m;
  m.emplace_back("general.architecture", gguf_string(a));
  m.emplace_back("general.name", gguf_string(o.name));
  m.emplace_back("general.file_type", gguf_u32(file_type(o)));
  m.emplace_back(p + "context_length", gguf_u32(uint32_t(c.max_position_embeddings)));
  m.emplace_back(p + "embedding_length", gguf_u32(uint32_t(c.hidden_size)));
  m.emplace_back(p + "block_count", gguf_u32(uint32_t(c.num_layers)));
  m.emplace_back(p + "feed_forward_length", gguf_u32(uint32_t(c.intermediate_size)));
  m.emplace_back(p + "attention.head_count", gguf_u32(uint32_t(c.num_q_heads)));
  m.emplace_back(p + "attention.head_count_kv", gguf_u32(uint32_t(c.num_kv_heads)));
  m.emplace_back(p + "attention.key_length", gguf_u32(uint32_t(c.head_dim)));
  m.emplace_back(p + "attention.value_length", gguf_u32(uint32_t(c.head_dim)));
  m.emplace_back(p + "rope.dimension_count", gguf_u32(uint32_t(c.head_dim)));
  m.emplace_back(p + "attention.layer_norm_rms_epsilon", gguf_f32(float(c.rms_norm_eps)));
  m.emplace_back(p + "rope.freq_base", gguf_f32(float(c.rope_theta)));
  const RopeScaling& s = c.rope_scaling;
  const RopeScaling def;
  if (s.type == "linear" || s.type == "yarn") {
    m.emplace_back(p + "rope.scaling.type", gguf_string(s.type));
    m.emplace_back(p + "rope.scaling.factor", gguf_f32(float(s.factor)));
  }
  if (s.type == "yarn") {
    CPI_CHECK(s.mscale == 0 && s.mscale_all_dim == 0 && s.truncate, "GGUF has no keys for "
              "yarn's mscale, mscale_all_dim or truncate=false");
    m.emplace_back(p + "rope.scaling.original_context_length",
                   gguf_u32(uint32_t(s.original_max_position_embeddings)));
    if (s.beta_fast != def.beta_fast)
      m.emplace_back(p + "rope.scaling.yarn_beta_fast", gguf_f32(float(s.beta_fast)));
    if (s.beta_slow != def.beta_slow)
      m.emplace_back(p + "rope.scaling.yarn_beta_slow", gguf_f32(float(s.beta_slow)));
    if (s.attention_factor)  // the reader's inverse (model/gguf_model.cpp)
      m.emplace_back(p + "rope.scaling.attn_factor",
                     gguf_f32(float(*s.attention_factor /
                                    yarn_default_attention_factor(s.factor))));
  }
  return m;
}

}  // namespace

void write_synthetic_gguf(const std::string& path, const ModelConfig& c,
                          const SyntheticGgufOptions& o, const nlohmann::json& tokenizer,
                          const std::string& tokenizer_source,
                          const nlohmann::json& tokenizer_config) {
  CPI_CHECK(c.model_type == "llama" || c.model_type == "qwen2" || c.model_type == "qwen3",
            "GGUF output supports llama, qwen2 and qwen3 models, not '{}'", c.model_type);
  CPI_CHECK(!c.mlp_bias, "GGUF output: MLP biases are not supported");
  GgufMetadata meta = model_metadata(c, o);
  for (auto& kv : gguf_tokenizer_metadata(tokenizer, tokenizer_source, c, tokenizer_config))
    meta.push_back(std::move(kv));

  const bool llama = c.arch == Architecture::Llama;
  std::vector<TensorToWrite> tensors;
  if (c.rope_scaling.type == "llama3") {
    // llama.cpp stores Llama 3 scaling as per-pair frequency factors.
    auto factors = std::make_shared<std::vector<float>>(rope_freq_factors(c));
    tensors.push_back({"rope_freqs.weight", DType::F32, {int64_t(factors->size())},
                       [factors](uint8_t* d) { std::memcpy(d, factors->data(), factors->size() * 4); },
                       {}});
  }
  for (const SyntheticTensor& s : synthetic_tensors(c)) {
    const std::string name = gguf_tensor_name(s.name);
    CPI_CHECK(!name.empty(), "tensor '{}' has no GGUF name", s.name);
    const uint64_t key = tensor_key(o.seed, s.name);
    const float mean = s.mean, sd = s.std;
    const DType src = o.dtype;
    const bool matrix = s.shape.size() == 2;
    TensorToWrite t;
    t.name = name;
    t.shape = s.shape;
    // Norms and biases F32 (as llama.cpp writes them), matrices in the dtype or Q8_0.
    t.dtype = !matrix ? DType::F32 : o.q8_0 ? DType::Q8_0 : src;
    const DType dst_type = t.dtype;
    // Elements [b, e) (Hugging Face order) of the tensor at `base`, in dst_type (b, e
    // multiples of 32 for Q8_0: blocks never straddle rows, the rows being whole blocks).
    auto produce = [=](uint8_t* base, int64_t b, int64_t e) {
      if (dst_type == src) return fill_random(base, src, key, mean, sd, b, e);
      std::vector<float> v(size_t(e - b));
      random_values(v.data(), src, key, mean, sd, b, e);
      uint8_t* d = base + dtype_bytes(dst_type, b);
      if (dst_type == DType::F32) std::memcpy(d, v.data(), v.size() * 4);
      else quantize_row_q8_0(v.data(), e - b, d);
    };
    const bool permute = llama && (s.name.ends_with("q_proj.weight") || s.name.ends_with("q_proj.bias") ||
                                   s.name.ends_with("k_proj.weight") || s.name.ends_with("k_proj.bias"));
    if (permute) {
      // Whole tensor: made in Hugging Face order, then rows permuted to GGML's RoPE order.
      const int64_t heads = s.name.find("q_proj") != std::string::npos ? c.num_q_heads : c.num_kv_heads;
      const int64_t rows = s.shape[0], cols = matrix ? s.shape[1] : 1;
      t.fill = [=](uint8_t* d) {
        const int64_t row_bytes = dtype_bytes(dst_type, cols);
        std::vector<uint8_t> hf(size_t(rows * row_bytes));
        produce(hf.data(), 0, rows * cols);
        permute_rope_rows(hf.data(), d, rows, row_bytes, heads, true);
      };
    } else {
      t.fill_range = produce;
    }
    tensors.push_back(std::move(t));
  }
  write_gguf(path, meta, tensors, o.threads);
}

}  // namespace cpinfer
