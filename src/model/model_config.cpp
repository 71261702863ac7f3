#include "model/model_config.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/file_text.h"
#include "core/json_parse.h"
#include "model/gguf_model.h"

namespace cpinfer {

namespace {

using json = nlohmann::json;

// The architectures cpinfer runs: the config.json name, its model_type, the enum.
struct KnownArchitecture {
  const char* name;
  const char* model_type;
  Architecture arch;
};
constexpr KnownArchitecture kArchitectures[] = {
    {"Qwen2ForCausalLM", "qwen2", Architecture::Qwen2},
    {"Qwen3ForCausalLM", "qwen3", Architecture::Qwen3},
    {"LlamaForCausalLM", "llama", Architecture::Llama},
};
constexpr const char* kSupportedArchitectures =
    "Qwen2ForCausalLM, LlamaForCausalLM, Qwen3ForCausalLM";

std::string type_name(const json& v) {
  if (v.is_number_integer()) return "integer";
  if (v.is_number_float()) return "number";
  return v.type_name();  // "null", "boolean", "string", "array", "object"
}

// Typed access to config fields; every error names the file, the field, what was found
// and what was expected.
class Fields {
 public:
  Fields(const json& root, std::string source) : root_(root), source_(std::move(source)) {}

  bool has(const char* key) const { return root_.contains(key) && !root_.at(key).is_null(); }

  const json& required(const char* key) const {
    CPI_CHECK(has(key), "{}: required field '{}' is missing", source_, key);
    return root_.at(key);
  }

  int64_t integer(const char* key) const { return as_integer(required(key), key); }
  int64_t integer(const char* key, int64_t def) const {
    return has(key) ? as_integer(root_.at(key), key) : def;
  }
  int64_t positive(const char* key) const {
    int64_t v = integer(key);
    CPI_CHECK(v > 0, "{}: field '{}' must be positive, found {}", source_, key, v);
    return v;
  }
  double number(const char* key, double def) const {
    return has(key) ? as_number(root_.at(key), key) : def;
  }
  bool boolean(const char* key, bool def) const {
    if (!has(key)) return def;
    const json& v = root_.at(key);
    CPI_CHECK(v.is_boolean(), "{}: field '{}' must be a boolean, found {} {}", source_, key,
              type_name(v), json_excerpt(v));
    return v.get<bool>();
  }
  std::string string(const char* key, const std::string& def) const {
    if (!has(key)) return def;
    const json& v = root_.at(key);
    CPI_CHECK(v.is_string(), "{}: field '{}' must be a string, found {} {}", source_, key,
              type_name(v), json_excerpt(v));
    return v.get<std::string>();
  }

  int64_t as_integer(const json& v, const std::string& key) const {
    CPI_CHECK(v.is_number_integer(), "{}: field '{}' must be an integer, found {} {}", source_,
              key, type_name(v), json_excerpt(v));
    if (v.is_number_unsigned()) {
      CPI_CHECK(v.get<uint64_t>() <= uint64_t(INT64_MAX), "{}: field '{}' is too large: {}",
                source_, key, json_excerpt(v));
    }
    return v.get<int64_t>();
  }
  double as_number(const json& v, const std::string& key) const {
    CPI_CHECK(v.is_number(), "{}: field '{}' must be a number, found {} {}", source_, key,
              type_name(v), json_excerpt(v));
    return v.get<double>();
  }
  // A token id field: an integer or a list of integers, each in [0, 2^31).
  std::vector<int32_t> token_ids(const char* key) const {
    std::vector<int32_t> out;
    if (!has(key)) return out;
    const json& v = root_.at(key);
    auto one = [&](const json& x, const std::string& what) {
      int64_t id = as_integer(x, what);
      CPI_CHECK(id >= 0 && id <= INT32_MAX, "{}: field '{}' holds token id {}, expected an id "
                "in [0, {}]", source_, what, id, INT32_MAX);
      out.push_back(int32_t(id));
    };
    if (v.is_array()) {
      for (size_t i = 0; i < v.size(); ++i) one(v[i], fmt::format("{}[{}]", key, i));
    } else {
      CPI_CHECK(v.is_number_integer(), "{}: field '{}' must be an integer or a list of "
                "integers, found {} {}", source_, key, type_name(v), json_excerpt(v));
      one(v, key);
    }
    return out;
  }

  const std::string& source() const { return source_; }

 private:
  const json& root_;
  std::string source_;
};

json parse_json_object(const std::string& text, const std::string& source) {
  json root = parse_json_text(text, source, "; not a config file?");
  CPI_CHECK(root.is_object(), "{}: expected a JSON object at the top level, found {}", source,
            type_name(root));
  return root;
}

std::string read_file(const std::string& path) {
  std::string text;
  CPI_CHECK(read_whole_file(path, &text), "cannot open '{}': {}", path, std::strerror(errno));
  return text;
}

// Picks the architecture from "architectures" (first supported entry), else from
// "model_type".
void parse_architecture(const json& root, const Fields& f, ModelConfig& c) {
  std::string model_type = f.string("model_type", "");
  std::vector<std::string> names;
  if (f.has("architectures")) {
    const json& a = root.at("architectures");
    CPI_CHECK(a.is_array(), "{}: field 'architectures' must be a list of strings, found {} {}",
              f.source(), type_name(a), json_excerpt(a));
    for (const json& x : a) {
      CPI_CHECK(x.is_string(), "{}: field 'architectures' must be a list of strings, found "
                "an element {} {}", f.source(), type_name(x), json_excerpt(x));
      names.push_back(x.get<std::string>());
    }
    CPI_CHECK(!names.empty(), "{}: field 'architectures' is empty (supported: {})", f.source(),
              kSupportedArchitectures);
  } else {
    CPI_CHECK(!model_type.empty(), "{}: required field 'architectures' is missing (and there "
              "is no 'model_type' to fall back on)", f.source());
    for (const KnownArchitecture& k : kArchitectures)
      if (model_type == k.model_type) names.push_back(k.name);
    CPI_CHECK(!names.empty(), "{}: unsupported model_type '{}' (supported: qwen2, qwen3, llama)",
              f.source(), model_type);
  }
  for (const std::string& n : names) {
    for (const KnownArchitecture& k : kArchitectures) {
      if (n != k.name) continue;
      c.arch = k.arch;
      c.architecture_name = n;
      c.model_type = k.model_type;
      CPI_CHECK(model_type.empty() || model_type == c.model_type,
                "{}: model_type '{}' does not match architecture {} (expected '{}')", f.source(),
                model_type, n, c.model_type);
      return;
    }
  }
  std::string found =
      names.size() == 1 ? "'" + names[0] + "'" : json_excerpt(root.at("architectures"));
  const bool moe = std::any_of(names.begin(), names.end(), [](const std::string& n) {
    return n.find("Moe") != std::string::npos || n.find("MoE") != std::string::npos ||
           n.find("Mixtral") != std::string::npos;
  });
  fail("{}: unsupported architecture {} (supported: {}){}", f.source(), found,
       kSupportedArchitectures, moe ? "; mixture-of-experts models are not supported" : "");
}

void parse_rope_scaling(const json& root, const Fields& f, ModelConfig& c) {
  c.rope_scaling = RopeScaling{};
  if (!f.has("rope_scaling")) return;
  const json& rs = root.at("rope_scaling");
  CPI_CHECK(rs.is_object(), "{}: field 'rope_scaling' must be null or an object, found {} {}",
            f.source(), type_name(rs), json_excerpt(rs));
  // Field names in messages are "rope_scaling.<key>".
  Fields r(rs, f.source());
  auto key = [](const char* k) { return std::string("rope_scaling.") + k; };
  auto number = [&](const char* k, double def) {
    return r.has(k) ? r.as_number(rs.at(k), key(k)) : def;
  };
  auto positive = [&](const char* k, double def) {
    const double v = number(k, def);
    CPI_CHECK(v > 0, "{}: field '{}' must be positive, found {}", f.source(), key(k), v);
    return v;
  };
  std::string type = r.has("rope_type") ? r.string("rope_type", "") : r.string("type", "");
  CPI_CHECK(!type.empty(), "{}: field 'rope_scaling' has no 'rope_type' (or 'type')",
            f.source());
  if (type == "default") return;
  CPI_CHECK(type == "llama3" || type == "yarn" || type == "linear",
            "{}: unsupported rope_scaling type '{}' (supported: default, linear, llama3, yarn){}",
            f.source(), type, type == "dynamic" ? "; dynamic NTK scaling changes the angles of "
            "every position as the sequence grows, which keys already in the KV cache cannot "
            "follow" : "");
  RopeScaling& s = c.rope_scaling;
  s.type = type;
  CPI_CHECK(r.has("factor"), "{}: field 'rope_scaling.factor' is missing", f.source());
  s.factor = positive("factor", 1.0);
  if (type == "linear") return;
  if (type == "llama3") {
    s.low_freq_factor = positive("low_freq_factor", s.low_freq_factor);
    s.high_freq_factor = number("high_freq_factor", s.high_freq_factor);
    CPI_CHECK(s.high_freq_factor > s.low_freq_factor, "{}: rope_scaling.high_freq_factor ({}) "
              "must be greater than low_freq_factor ({})", f.source(), s.high_freq_factor,
              s.low_freq_factor);
  } else {
    // yarn: Hugging Face reads "beta_fast or 32", so 0 or null means the default too.
    s.beta_fast = number("beta_fast", 0.0) == 0.0 ? 32.0 : positive("beta_fast", 32.0);
    s.beta_slow = number("beta_slow", 0.0) == 0.0 ? 1.0 : positive("beta_slow", 1.0);
    CPI_CHECK(s.beta_fast > s.beta_slow, "{}: rope_scaling.beta_fast ({}) must be greater than "
              "beta_slow ({})", f.source(), s.beta_fast, s.beta_slow);
    if (r.has("attention_factor")) s.attention_factor = positive("attention_factor", 1.0);
    s.mscale = number("mscale", 0.0);
    s.mscale_all_dim = number("mscale_all_dim", 0.0);
    CPI_CHECK(s.mscale >= 0 && s.mscale_all_dim >= 0, "{}: fields 'rope_scaling.mscale' ({}) "
              "and 'rope_scaling.mscale_all_dim' ({}) must not be negative", f.source(),
              s.mscale, s.mscale_all_dim);
    if (r.has("truncate")) {
      const json& v = rs.at("truncate");
      CPI_CHECK(v.is_boolean(), "{}: field 'rope_scaling.truncate' must be a boolean, found {} "
                "{}", f.source(), type_name(v), json_excerpt(v));
      s.truncate = v.get<bool>();
    }
  }
  const int64_t def_orig = type == "yarn" ? c.max_position_embeddings
                                          : s.original_max_position_embeddings;
  s.original_max_position_embeddings =
      r.has("original_max_position_embeddings")
          ? r.as_integer(rs.at("original_max_position_embeddings"),
                         key("original_max_position_embeddings"))
          : def_orig;
  CPI_CHECK(s.original_max_position_embeddings > 0, "{}: field "
            "'rope_scaling.original_max_position_embeddings' must be positive, found {}",
            f.source(), s.original_max_position_embeddings);
}

// Sliding-window attention is not implemented: refuse every way a config turns it on.
// Qwen2/Qwen3 use it only when use_sliding_window is true (their 'sliding_window' is then
// ignored, as transformers does); a Llama-family config (Mistral-style) uses 'sliding_window'
// itself when it is set and shorter than the context.
void check_no_sliding_window(const json& root, const Fields& f, const ModelConfig& c) {
  CPI_CHECK(!f.boolean("use_sliding_window", false), "{}: use_sliding_window=true is not "
            "supported (expected false): cpinfer has no sliding-window attention", f.source());
  if (c.arch == Architecture::Llama && f.has("sliding_window")) {
    const int64_t w = f.integer("sliding_window");
    CPI_CHECK(w >= c.max_position_embeddings, "{}: field 'sliding_window' is {}, shorter than "
              "max_position_embeddings ({}): sliding-window attention is not supported (expected "
              "null)", f.source(), w, c.max_position_embeddings);
  }
  if (f.has("layer_types")) {
    const json& lt = root.at("layer_types");
    CPI_CHECK(lt.is_array(), "{}: field 'layer_types' must be a list of strings, found {} {}",
              f.source(), type_name(lt), json_excerpt(lt));
    for (size_t i = 0; i < lt.size(); ++i)
      CPI_CHECK(lt[i].is_string() && lt[i].get<std::string>() == "full_attention",
                "{}: field 'layer_types[{}]' is {}; only \"full_attention\" layers are supported "
                "(no sliding-window attention)", f.source(), i, json_excerpt(lt[i]));
  }
}

void append_unique(std::vector<int32_t>& to, const std::vector<int32_t>& from) {
  for (int32_t id : from)
    if (std::find(to.begin(), to.end(), id) == to.end()) to.push_back(id);
}

// The sampling fields of generation_config.json, with the ranges requests must keep.
GenerationDefaults parse_generation_defaults(const Fields& g) {
  GenerationDefaults d;
  auto number = [&](const char* key, bool ok(double), const char* allowed) {
    std::optional<double> v;
    if (!g.has(key)) return v;
    v = g.number(key, 0);
    CPI_CHECK(ok(*v), "{}: field '{}' is {}: it must be {}", g.source(), key, *v, allowed);
    return v;
  };
  d.temperature = number("temperature", [](double v) { return v >= 0; }, ">= 0");
  d.top_p = number("top_p", [](double v) { return v > 0 && v <= 1; }, "in (0, 1]");
  d.repetition_penalty =
      number("repetition_penalty", [](double v) { return v > 0; }, "> 0 (1: off)");
  d.min_p = number("min_p", [](double v) { return v >= 0 && v <= 1; }, "in [0, 1]");
  if (g.has("top_k")) {
    d.top_k = g.integer("top_k", 0);
    CPI_CHECK(*d.top_k >= -1, "{}: field 'top_k' is {}: it must be -1 or 0 (off) or >= 1",
              g.source(), *d.top_k);
  }
  return d;
}

}  // namespace

int64_t derived_max_model_len(const ModelConfig& c) {
  if (c.max_position_embeddings <= 0) return 0;
  const RopeScaling& r = c.rope_scaling;
  double len = double(c.max_position_embeddings);
  if (r.type == "yarn") len = double(r.original_max_position_embeddings) * r.factor;
  else if (r.type == "linear") len *= r.factor;
  return int64_t(std::min(len, double(int64_t(1) << 40)));
}

ModelConfig parse_model_config(const std::string& json_text, const std::string& source) {
  const json root = parse_json_object(json_text, source);
  const Fields f(root, source);
  ModelConfig c;
  parse_architecture(root, f, c);

  c.hidden_size = f.positive("hidden_size");
  c.intermediate_size = f.positive("intermediate_size");
  c.num_layers = f.positive("num_hidden_layers");
  c.num_q_heads = f.positive("num_attention_heads");
  c.num_kv_heads = f.has("num_key_value_heads") ? f.positive("num_key_value_heads")
                                                : c.num_q_heads;
  CPI_CHECK(c.num_q_heads % c.num_kv_heads == 0, "{}: num_attention_heads ({}) must be a "
            "multiple of num_key_value_heads ({})", source, c.num_q_heads, c.num_kv_heads);
  if (f.has("head_dim")) {
    c.head_dim = f.positive("head_dim");
  } else {
    CPI_CHECK(c.hidden_size % c.num_q_heads == 0, "{}: hidden_size ({}) is not a multiple of "
              "num_attention_heads ({}) and there is no 'head_dim'", source, c.hidden_size,
              c.num_q_heads);
    c.head_dim = c.hidden_size / c.num_q_heads;
  }
  CPI_CHECK(c.head_dim % 2 == 0, "{}: head_dim must be even (RoPE rotates pairs), found {}",
            source, c.head_dim);
  c.vocab_size = f.positive("vocab_size");
  c.max_position_embeddings = f.positive("max_position_embeddings");
  // Upper bounds far above any real model, so that products of sizes (q rows = heads *
  // head_dim, KV bytes, ...) cannot overflow 64 bits and an absurd value is named here.
  auto at_most = [&](const char* key, int64_t v, int64_t limit) {
    CPI_CHECK(v <= limit, "{}: field '{}' is {}, larger than cpinfer supports (at most {})",
              source, key, v, limit);
  };
  at_most("hidden_size", c.hidden_size, int64_t(1) << 20);
  at_most("intermediate_size", c.intermediate_size, int64_t(1) << 22);
  at_most("num_hidden_layers", c.num_layers, 4096);
  at_most("num_attention_heads", c.num_q_heads, 4096);
  at_most("num_key_value_heads", c.num_kv_heads, 4096);
  at_most("head_dim", c.head_dim, 4096);
  at_most("vocab_size", c.vocab_size, int64_t(1) << 24);
  at_most("max_position_embeddings", c.max_position_embeddings, int64_t(1) << 30);

  c.rms_norm_eps = f.number("rms_norm_eps", 1e-6);
  CPI_CHECK(c.rms_norm_eps > 0, "{}: field 'rms_norm_eps' must be positive, found {}", source,
            c.rms_norm_eps);
  c.rope_theta = f.number("rope_theta", 10000.0);
  CPI_CHECK(c.rope_theta > 0, "{}: field 'rope_theta' must be positive, found {}", source,
            c.rope_theta);
  parse_rope_scaling(root, f, c);

  std::string act = f.string("hidden_act", "silu");
  CPI_CHECK(act == "silu", "{}: unsupported hidden_act '{}' (supported: silu)", source, act);
  check_no_sliding_window(root, f, c);
  const double rotary = f.number("partial_rotary_factor", 1.0);
  CPI_CHECK(rotary == 1.0, "{}: field 'partial_rotary_factor' is {}; only 1.0 (RoPE over the "
            "whole head) is supported", source, rotary);

  c.tie_word_embeddings = f.boolean("tie_word_embeddings", false);
  // Qwen2 always has q/k/v biases and no 'attention_bias' field; Llama and Qwen3 make it
  // optional (Qwen3's configs say false).
  c.attention_bias = c.arch == Architecture::Qwen2 ? true : f.boolean("attention_bias", false);
  c.qk_norm = c.arch == Architecture::Qwen3;
  c.mlp_bias = f.boolean("mlp_bias", false);

  std::vector<int32_t> bos = f.token_ids("bos_token_id");
  CPI_CHECK(bos.size() <= 1, "{}: field 'bos_token_id' must be a single integer, found a list "
            "of {}", source, bos.size());
  if (!bos.empty()) c.bos_token_id = bos[0];
  c.eos_token_ids = f.token_ids("eos_token_id");
  auto check_id = [&](int32_t id, const char* field) {
    CPI_CHECK(id < c.vocab_size, "{}: {} {} is outside the vocabulary (vocab_size {})", source,
              field, id, c.vocab_size);
  };
  if (c.bos_token_id) check_id(*c.bos_token_id, "bos_token_id");
  for (int32_t id : c.eos_token_ids) check_id(id, "eos_token_id");

  // Newer transformers write "dtype" instead of "torch_dtype".
  c.torch_dtype = f.has("torch_dtype") ? f.string("torch_dtype", "") : f.string("dtype", "");
  return c;
}

ModelConfig load_model_config(const std::string& model_dir) {
  namespace fs = std::filesystem;
  if (const std::string gguf = find_gguf_model(model_dir); !gguf.empty())
    return gguf_model_config(open_gguf(gguf).gguf);
  const fs::path dir(model_dir);
  CPI_CHECK(fs::is_directory(dir), "model directory '{}' does not exist or is not a directory",
            model_dir);
  const fs::path cfg_path = dir / "config.json";
  CPI_CHECK(fs::is_regular_file(cfg_path), "no config.json in model directory '{}'", model_dir);
  ModelConfig c = parse_model_config(read_file(cfg_path.string()), cfg_path.string());

  // generation_config.json often carries more eos ids (e.g. Qwen2.5's <|endoftext|>).
  const fs::path gen_path = dir / "generation_config.json";
  if (fs::is_regular_file(gen_path)) {
    const std::string src = gen_path.string();
    const json gen = parse_json_object(read_file(src), src);
    const Fields g(gen, src);
    std::vector<int32_t> eos = g.token_ids("eos_token_id");
    for (int32_t id : eos) {
      CPI_CHECK(id < c.vocab_size, "{}: eos_token_id {} is outside the vocabulary (vocab_size "
                "{})", src, id, c.vocab_size);
    }
    append_unique(c.eos_token_ids, eos);
    if (!c.bos_token_id) {
      std::vector<int32_t> bos = g.token_ids("bos_token_id");
      if (!bos.empty() && bos[0] < c.vocab_size) c.bos_token_id = bos[0];
    }
    c.generation = parse_generation_defaults(g);
  }
  return c;
}

namespace {

const KnownArchitecture& known(Architecture a) {
  for (const KnownArchitecture& k : kArchitectures)
    if (k.arch == a) return k;
  fail("unknown architecture enum value {}", int(a));
}

// rope_scaling as the real configs write it: Llama 3.1/3.2's keys for llama3, Qwen2.5's
// model-card block for yarn (plus any field that differs from its default).
json rope_scaling_to_json(const RopeScaling& s) {
  if (s.type == "default") return nullptr;
  if (s.type == "linear") return {{"rope_type", "linear"}, {"factor", s.factor}};
  if (s.type == "llama3")
    return {{"rope_type", "llama3"},
            {"factor", s.factor},
            {"low_freq_factor", s.low_freq_factor},
            {"high_freq_factor", s.high_freq_factor},
            {"original_max_position_embeddings", s.original_max_position_embeddings}};
  CPI_CHECK(s.type == "yarn", "rope_scaling type '{}' cannot be written", s.type);
  json j = {{"type", "yarn"},
            {"factor", s.factor},
            {"original_max_position_embeddings", s.original_max_position_embeddings}};
  const RopeScaling def;
  if (s.beta_fast != def.beta_fast) j["beta_fast"] = s.beta_fast;
  if (s.beta_slow != def.beta_slow) j["beta_slow"] = s.beta_slow;
  if (s.attention_factor) j["attention_factor"] = *s.attention_factor;
  if (s.mscale != 0.0) j["mscale"] = s.mscale;
  if (s.mscale_all_dim != 0.0) j["mscale_all_dim"] = s.mscale_all_dim;
  if (!s.truncate) j["truncate"] = false;
  return j;
}

}  // namespace

// The keys of the real Qwen2.5 / Qwen3 / Llama 3.2 config.json files, sorted like
// transformers writes them, so transformers can load the directory.
nlohmann::json model_config_to_json(const ModelConfig& c) {
  json j;
  const KnownArchitecture& arch = known(c.arch);
  j["architectures"] = json::array({arch.name});
  j["model_type"] = arch.model_type;
  j["attention_dropout"] = 0.0;
  if (c.bos_token_id) j["bos_token_id"] = *c.bos_token_id;
  if (c.eos_token_ids.size() == 1) j["eos_token_id"] = c.eos_token_ids[0];
  else if (!c.eos_token_ids.empty()) j["eos_token_id"] = c.eos_token_ids;
  j["hidden_act"] = "silu";
  j["hidden_size"] = c.hidden_size;
  j["initializer_range"] = 0.02;
  j["intermediate_size"] = c.intermediate_size;
  j["max_position_embeddings"] = c.max_position_embeddings;
  j["num_attention_heads"] = c.num_q_heads;
  j["num_hidden_layers"] = c.num_layers;
  j["num_key_value_heads"] = c.num_kv_heads;
  j["rms_norm_eps"] = c.rms_norm_eps;
  j["rope_theta"] = c.rope_theta;
  j["tie_word_embeddings"] = c.tie_word_embeddings;
  j["torch_dtype"] = c.torch_dtype.empty() ? "float32" : c.torch_dtype;
  j["transformers_version"] = "4.45.0";
  j["use_cache"] = true;
  j["vocab_size"] = c.vocab_size;
  j["rope_scaling"] = rope_scaling_to_json(c.rope_scaling);
  const bool derived_head_dim = c.head_dim * c.num_q_heads == c.hidden_size;
  if (c.arch == Architecture::Qwen2) {
    // Qwen2 has no head_dim field in older transformers; write it only when it differs.
    if (!derived_head_dim) j["head_dim"] = c.head_dim;
    j["max_window_layers"] = c.num_layers;
    j["sliding_window"] = c.max_position_embeddings;
    j["use_sliding_window"] = false;
  } else if (c.arch == Architecture::Qwen3) {
    j["head_dim"] = c.head_dim;
    j["attention_bias"] = c.attention_bias;
    j["max_window_layers"] = c.num_layers;
    j["sliding_window"] = nullptr;
    j["use_sliding_window"] = false;
  } else {
    j["head_dim"] = c.head_dim;
    j["attention_bias"] = c.attention_bias;
    j["mlp_bias"] = c.mlp_bias;
    j["pretraining_tp"] = 1;
  }
  return j;
}

}  // namespace cpinfer
