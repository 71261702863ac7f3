#include "model/gguf_model.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <vector>

#include "core/error.h"
#include "model/rope.h"

namespace cpinfer {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

// Per-layer tensors: Hugging Face suffix after "model.layers.N." <-> GGUF suffix after
// "blk.N.".
struct NamePair { const char* hf; const char* gguf; };
constexpr NamePair kLayerNames[] = {
    {"input_layernorm.weight", "attn_norm.weight"},
    {"self_attn.q_proj.weight", "attn_q.weight"},
    {"self_attn.k_proj.weight", "attn_k.weight"},
    {"self_attn.v_proj.weight", "attn_v.weight"},
    {"self_attn.q_proj.bias", "attn_q.bias"},
    {"self_attn.k_proj.bias", "attn_k.bias"},
    {"self_attn.v_proj.bias", "attn_v.bias"},
    {"self_attn.q_norm.weight", "attn_q_norm.weight"},
    {"self_attn.k_norm.weight", "attn_k_norm.weight"},
    {"self_attn.o_proj.weight", "attn_output.weight"},
    {"post_attention_layernorm.weight", "ffn_norm.weight"},
    {"mlp.gate_proj.weight", "ffn_gate.weight"},
    {"mlp.up_proj.weight", "ffn_up.weight"},
    {"mlp.down_proj.weight", "ffn_down.weight"},
};
constexpr NamePair kModelNames[] = {
    {"model.embed_tokens.weight", "token_embd.weight"},
    {"model.norm.weight", "output_norm.weight"},
    {"lm_head.weight", "output.weight"},
};

// "PREFIX<digits>.REST" -> {layer, REST}; layer -1 when the name does not match.
std::pair<int64_t, std::string> split_layer(const std::string& name, const std::string& prefix) {
  if (name.compare(0, prefix.size(), prefix) != 0) return {-1, ""};
  size_t p = prefix.size(), q = p;
  while (q < name.size() && q - p < 6 && std::isdigit(static_cast<unsigned char>(name[q]))) ++q;
  if (q == p || q >= name.size() || name[q] != '.') return {-1, ""};
  return {std::stoll(name.substr(p, q - p)), name.substr(q + 1)};
}

std::string rename(const std::string& name, bool to_gguf) {
  for (const NamePair& n : kModelNames)
    if (name == (to_gguf ? n.hf : n.gguf)) return to_gguf ? n.gguf : n.hf;
  const auto [layer, rest] = split_layer(name, to_gguf ? "model.layers." : "blk.");
  if (layer < 0) return "";
  for (const NamePair& n : kLayerNames)
    if (rest == (to_gguf ? n.hf : n.gguf))
      return to_gguf ? fmt::format("blk.{}.{}", layer, n.gguf)
                     : fmt::format("model.layers.{}.{}", layer, n.hf);
  return "";
}

// Architectures: general.architecture -> config.json's names.
struct GgufArch { const char* gguf; const char* hf_name; Architecture arch; };
constexpr GgufArch kArchs[] = {
    {"llama", "LlamaForCausalLM", Architecture::Llama},
    {"qwen2", "Qwen2ForCausalLM", Architecture::Qwen2},
    {"qwen3", "Qwen3ForCausalLM", Architecture::Qwen3},
};

// Llama 3 scaling with the standard parameters (low 1, high 4, original context 8192, as
// llama.cpp's converter assumes): a rope_freqs tensor holding its factors (unscaled over
// scaled inverse frequency, rope_freq_factors) is read as rope_scaling type
// "llama3".
RopeScaling llama3_scaling(double factor, int64_t original_ctx) {
  RopeScaling s;
  s.type = "llama3";
  s.factor = factor;
  s.original_max_position_embeddings = original_ctx;
  return s;
}

// Reads rope_freqs.weight ([head_dim / 2] f32) into c.rope_scaling: the llama3 type when the
// factors are exactly (as f32) those of llama3_scaling, else freq_factors as given.
void read_rope_freqs(const GgufFile& g, const TensorInfo& t, ModelConfig& c) {
  const int64_t half = c.head_dim / 2;
  CPI_CHECK(t.dtype == DType::F32 && t.shape == std::vector<int64_t>{half}, "'{}': tensor "
            "'rope_freqs.weight' must be F32 of shape [{}] (head_dim / 2), found {} of {} "
            "elements", g.source, half, dtype_name(t.dtype), t.numel());
  CPI_CHECK(c.rope_scaling.type == "default", "'{}': both rope.scaling.type '{}' and a "
            "rope_freqs tensor; cpinfer supports one of them", g.source, c.rope_scaling.type);
  std::vector<double> factors(static_cast<size_t>(half));
  for (int64_t i = 0; i < half; ++i) {
    float f;
    std::memcpy(&f, t.data + 4 * i, 4);
    CPI_CHECK(std::isfinite(f) && f > 0, "'{}': rope_freqs.weight[{}] is {}; factors must be "
              "positive", g.source, i, f);
    factors[size_t(i)] = f;
  }
  ModelConfig l3 = c;
  l3.rope_scaling = llama3_scaling(factors.back(), 8192);
  const std::vector<float> expect = rope_freq_factors(l3);
  bool same = true;
  for (int64_t i = 0; i < half; ++i) same = same && expect[size_t(i)] == float(factors[size_t(i)]);
  if (same) {
    c.rope_scaling = l3.rope_scaling;
  } else {
    c.rope_scaling.freq_factors = std::move(factors);
  }
}

}  // namespace

std::vector<float> rope_freq_factors(const ModelConfig& c) {
  ModelConfig plain = c;
  plain.rope_scaling = RopeScaling{};
  const std::vector<double> base = rope_inv_freq(plain), scaled = rope_inv_freq(c);
  std::vector<float> out(base.size());
  for (size_t i = 0; i < base.size(); ++i) out[i] = float(base[i] / scaled[i]);
  return out;
}

std::string gguf_tensor_name(const std::string& hf_name) { return rename(hf_name, true); }
std::string hf_tensor_name(const std::string& gguf_name) { return rename(gguf_name, false); }

void permute_rope_rows(const uint8_t* src, uint8_t* dst, int64_t rows, int64_t row_bytes,
                       int64_t n_heads, bool to_gguf) {
  CPI_ASSERT(n_heads > 0 && rows % n_heads == 0 && (rows / n_heads) % 2 == 0);
  const int64_t D = rows / n_heads, half = D / 2;
  for (int64_t h = 0; h < n_heads; ++h)
    for (int64_t i = 0; i < 2; ++i)
      for (int64_t j = 0; j < half; ++j) {
        const int64_t hf = h * D + i * half + j, gg = h * D + 2 * j + i;
        const int64_t from = to_gguf ? hf : gg, to = to_gguf ? gg : hf;
        std::memcpy(dst + to * row_bytes, src + from * row_bytes, size_t(row_bytes));
      }
}

std::string find_gguf_model(const std::string& path) {
  const fs::path p(path);
  if (fs::is_regular_file(p)) return has_gguf_extension(path) ? path : "";
  if (!fs::is_directory(p) || fs::exists(p / "config.json")) return "";
  std::vector<std::string> found;
  for (const auto& e : fs::directory_iterator(p))
    if (e.is_regular_file() && has_gguf_extension(e.path().string())) found.push_back(e.path().string());
  std::sort(found.begin(), found.end());
  if (found.empty()) return "";
  CPI_CHECK(found.size() == 1, "'{}' holds {} .gguf files and no config.json: pass the one to "
            "use as the model path ({})", path, found.size(), fmt::join(found, ", "));
  return found[0];
}

ModelConfig gguf_model_config(const GgufFile& g) {
  const std::string arch = g.get_string("general.architecture");
  const GgufArch* a = nullptr;
  for (const GgufArch& k : kArchs)
    if (arch == k.gguf) a = &k;
  CPI_CHECK(a, "'{}': general.architecture is '{}', which cpinfer does not run (supported: "
            "llama, qwen2, qwen3)", g.source, arch);
  const std::string p = arch + ".";
  const TensorInfo* embd = g.find_tensor("token_embd.weight");
  CPI_CHECK(embd && embd->shape.size() == 2, "'{}': tensor 'token_embd.weight' is missing or "
            "not a matrix", g.source);

  // The metadata under config.json's names, so that parse_model_config validates it exactly
  // as it does a config.json (sizes, limits, ids, rope scaling).
  json j;
  j["architectures"] = {a->hf_name};
  j["model_type"] = a->gguf;
  j["hidden_size"] = g.get_int(p + "embedding_length");
  j["intermediate_size"] = g.get_int(p + "feed_forward_length");
  j["num_hidden_layers"] = g.get_int(p + "block_count");
  j["num_attention_heads"] = g.get_int(p + "attention.head_count");
  if (auto kv = g.get_int_opt(p + "attention.head_count_kv")) j["num_key_value_heads"] = *kv;
  if (auto d = g.get_int_opt(p + "attention.key_length")) j["head_dim"] = *d;
  j["vocab_size"] = embd->shape[0];
  j["max_position_embeddings"] = g.get_int(p + "context_length");
  j["rms_norm_eps"] = g.get_number(p + "attention.layer_norm_rms_epsilon");
  if (auto t = g.get_number_opt(p + "rope.freq_base")) j["rope_theta"] = *t;
  const std::string scaling = g.get_string_opt(p + "rope.scaling.type").value_or("none");
  if (scaling != "none") {
    json rs = {{"rope_type", scaling}};
    if (auto f = g.get_number_opt(p + "rope.scaling.factor")) rs["factor"] = *f;
    if (auto o = g.get_int_opt(p + "rope.scaling.original_context_length"))
      rs["original_max_position_embeddings"] = *o;
    if (auto b = g.get_number_opt(p + "rope.scaling.yarn_beta_fast")) rs["beta_fast"] = *b;
    if (auto b = g.get_number_opt(p + "rope.scaling.yarn_beta_slow")) rs["beta_slow"] = *b;
    // llama.cpp multiplies YaRN's default attention factor by this one; config.json's
    // attention_factor is the product. Example: factor 4, attn_factor 1.25 -> 1.25 *
    // (0.1 ln 4 + 1) = 1.4233.
    const auto attn = g.get_number_opt(p + "rope.scaling.attn_factor");
    CPI_CHECK(!attn || *attn == 1.0 || scaling == "yarn", "'{}': {}rope.scaling.attn_factor is "
              "{} with rope scaling '{}'; an attention factor is supported with yarn only",
              g.source, p, *attn, scaling);
    if (attn && scaling == "yarn" && rs.contains("factor"))
      rs["attention_factor"] = *attn * yarn_default_attention_factor(rs["factor"].get<double>());
    j["rope_scaling"] = rs;
  }
  j["tie_word_embeddings"] = g.find_tensor("output.weight") == nullptr;
  if (a->arch != Architecture::Qwen2)
    j["attention_bias"] = g.find_tensor("blk.0.attn_q.bias") != nullptr;
  if (auto b = g.get_int_opt("tokenizer.ggml.bos_token_id")) j["bos_token_id"] = *b;
  json eos = json::array();
  for (const char* k : {"tokenizer.ggml.eos_token_id", "tokenizer.ggml.eom_token_id",
                        "tokenizer.ggml.eot_token_id"})
    if (auto id = g.get_int_opt(k); id && std::find(eos.begin(), eos.end(), *id) == eos.end())
      eos.push_back(*id);
  if (!eos.empty()) j["eos_token_id"] = eos;
  // Strings from the file may hold invalid UTF-8 (a rope scaling type, say): replaced by
  // U+FFFD here, they reach parse_model_config, which names the value it refuses.
  const std::string config_text = j.dump(-1, ' ', false, json::error_handler_t::replace);
  ModelConfig c = parse_model_config(config_text, fmt::format("'{}' (its metadata as config.json "
                                                              "fields)", g.source));
  if (auto n = g.get_int_opt(p + "rope.dimension_count"))
    CPI_CHECK(*n == c.head_dim, "'{}': {}rope.dimension_count is {}, but the head size is {}; "
              "only RoPE over the whole head is supported", g.source, p, *n, c.head_dim);
  if (const TensorInfo* rf = g.find_tensor("rope_freqs.weight")) read_rope_freqs(g, *rf, c);
  // The weights' dtype decides the KV cache's under --kv-cache-dtype auto (as torch_dtype
  // does); a Q8_0 file does not say what it was made from, so it gets f32.
  c.torch_dtype = embd->dtype == DType::BF16 ? "bfloat16"
                  : embd->dtype == DType::F16 ? "float16" : "float32";
  return c;
}

SafetensorsStore gguf_weight_store(const MappedGguf& m, const ModelConfig& c) {
  const GgufFile& g = m.gguf;
  struct Owned {
    std::shared_ptr<MappedFile> file;
    std::vector<std::vector<uint8_t>> buffers;
  };
  auto owned = std::make_shared<Owned>();
  owned->file = m.file;
  std::vector<TensorInfo> out;
  for (const TensorInfo& t : g.tensors) {
    const std::string hf = hf_tensor_name(t.name);
    if (hf.empty()) continue;
    TensorInfo r = t;
    r.name = hf;
    const bool q = hf.ends_with("q_proj.weight") || hf.ends_with("q_proj.bias");
    const bool k = hf.ends_with("k_proj.weight") || hf.ends_with("k_proj.bias");
    if (c.arch == Architecture::Llama && (q || k)) {
      const int64_t heads = q ? c.num_q_heads : c.num_kv_heads;
      const int64_t rows = t.shape[0];
      CPI_CHECK(t.shape.size() <= 2 && rows == heads * c.head_dim, "tensor '{}' in {} has "
                "shape [{}], expected {} rows ({} heads of {})", t.name, t.file,
                fmt::join(t.shape, ", "), heads * c.head_dim, heads, c.head_dim);
      std::vector<uint8_t>& buf = owned->buffers.emplace_back(t.nbytes);
      permute_rope_rows(t.data, buf.data(), rows, int64_t(t.nbytes) / rows, heads, false);
      r.data = buf.data();
      r.mapped = false;
    }
    out.push_back(std::move(r));
  }
  return SafetensorsStore::from_tensors(g.source, std::move(out), owned);
}

}  // namespace cpinfer
