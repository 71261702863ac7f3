// The model hyper-parameters cpinfer needs, read from a Hugging Face config.json
// (Qwen2ForCausalLM, Qwen3ForCausalLM, LlamaForCausalLM).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace cpinfer {

// Qwen3 is Qwen2 without q/k/v biases (unless attention_bias) and with a per-head RMSNorm
// on q and k (q_norm, k_norm) before RoPE.
enum class Architecture { Qwen2, Llama, Qwen3 };

// config.json's rope_scaling, with Hugging Face's defaults (model/rope.cpp has the math).
struct RopeScaling {
  // "default" (none), "linear", "llama3" or "yarn".
  std::string type = "default";
  double factor = 1.0;
  // llama3
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  // llama3 and yarn (yarn: max_position_embeddings when the field is absent)
  int64_t original_max_position_embeddings = 8192;
  // yarn: the ramp's bounds in rotations, the attention factor (cos/sin are multiplied by
  // it; absent: from factor, mscale and mscale_all_dim) and whether the ramp's bounds are
  // rounded to whole dimensions.
  double beta_fast = 32.0;
  double beta_slow = 1.0;
  std::optional<double> attention_factor;
  double mscale = 0.0;          // 0: absent
  double mscale_all_dim = 0.0;  // 0: absent
  bool truncate = true;
  // A GGUF file's rope_freqs tensor (llama.cpp's form of Llama 3 scaling, when it is not
  // recognised as the standard llama3 parameters): after the type's scaling, inverse
  // frequency i is divided by freq_factors[i]. Empty: none. [head_dim / 2]
  std::vector<double> freq_factors;
};

// The sampling values of generation_config.json (absent: not given). They are the defaults
// of requests that omit them under `--generation-config auto`, as in vLLM.
struct GenerationDefaults {
  std::optional<double> temperature, top_p, repetition_penalty, min_p;
  std::optional<int64_t> top_k;
};

struct ModelConfig {
  Architecture arch = Architecture::Qwen2;
  std::string architecture_name;  // as in config.json, e.g. "Qwen2ForCausalLM"
  std::string model_type;         // "qwen2" | "qwen3" | "llama"
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t num_layers = 0;
  int64_t num_q_heads = 0;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;           // config "head_dim" when present, else hidden / heads
  int64_t vocab_size = 0;
  int64_t max_position_embeddings = 0;
  double rms_norm_eps = 1e-6;
  double rope_theta = 10000.0;
  RopeScaling rope_scaling;
  bool tie_word_embeddings = false;
  bool attention_bias = false;    // q/k/v projection bias (always on for Qwen2)
  bool qk_norm = false;           // per-head RMSNorm of q and k before RoPE (Qwen3)
  bool mlp_bias = false;
  std::vector<int32_t> eos_token_ids;  // from config.json and generation_config.json
  std::optional<int32_t> bos_token_id;
  std::string torch_dtype;        // "bfloat16", "float32", ...
  GenerationDefaults generation;   // from generation_config.json
};

// The longest sequence the model is meant for, as vLLM derives it: max_position_embeddings,
// times rope_scaling.factor for a "linear" scaling, and original_max_position_embeddings
// times factor for "yarn" (a Qwen2.5 config with max_position_embeddings 32768 and yarn
// factor 4 over 32768: 131072). "llama3" configs already give the scaled length. 0 when the
// config has no max_position_embeddings.
int64_t derived_max_model_len(const ModelConfig& c);

// Parses and validates config.json text; `source` names the file in errors.
// Throws Error naming the field and the expected value.
ModelConfig parse_model_config(const std::string& json_text, const std::string& source);
// A GGUF model (a .gguf file, or a directory holding one and no config.json) is read by
// gguf_model_config (model/gguf_model.h). Otherwise reads DIR/config.json and, if present, DIR/generation_config.json (extra eos ids and the
// sampling defaults: temperature, top_p, top_k, repetition_penalty, min_p, range-checked).
ModelConfig load_model_config(const std::string& model_dir);
nlohmann::json model_config_to_json(const ModelConfig& c);

}  // namespace cpinfer
