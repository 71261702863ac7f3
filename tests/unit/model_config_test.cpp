// config.json parsing: the real Qwen2.5, Qwen3 and Llama 3.2 configs, rope scaling
// (linear, llama3, yarn), sliding windows refused,
// head_dim present/absent, eos as int or list, generation_config merging, round trips,
// and every error case (each message names the file and the field).
#include "support/config_compare.h"
#include "support/temp_dir.h"
#include "model/model_config.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "model/synthetic_model.h"
#include "support/expect_error.h"

namespace cpinfer {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

// Qwen/Qwen3-0.6B config.json, verbatim.
const char* kQwen3 = R"({
  "architectures": [
    "Qwen3ForCausalLM"
  ],
  "attention_bias": false,
  "attention_dropout": 0.0,
  "bos_token_id": 151643,
  "eos_token_id": 151645,
  "head_dim": 128,
  "hidden_act": "silu",
  "hidden_size": 1024,
  "initializer_range": 0.02,
  "intermediate_size": 3072,
  "max_position_embeddings": 40960,
  "max_window_layers": 28,
  "model_type": "qwen3",
  "num_attention_heads": 16,
  "num_hidden_layers": 28,
  "num_key_value_heads": 8,
  "rms_norm_eps": 1e-06,
  "rope_scaling": null,
  "rope_theta": 1000000,
  "sliding_window": null,
  "tie_word_embeddings": true,
  "torch_dtype": "bfloat16",
  "transformers_version": "4.51.0",
  "use_cache": true,
  "use_sliding_window": false,
  "vocab_size": 151936
})";

// Qwen/Qwen2.5-0.5B-Instruct config.json, verbatim.
const char* kQwen05 = R"({
  "architectures": [
    "Qwen2ForCausalLM"
  ],
  "attention_dropout": 0.0,
  "bos_token_id": 151643,
  "eos_token_id": 151645,
  "hidden_act": "silu",
  "hidden_size": 896,
  "initializer_range": 0.02,
  "intermediate_size": 4864,
  "max_position_embeddings": 32768,
  "max_window_layers": 21,
  "model_type": "qwen2",
  "num_attention_heads": 14,
  "num_hidden_layers": 24,
  "num_key_value_heads": 2,
  "rms_norm_eps": 1e-06,
  "rope_theta": 1000000.0,
  "sliding_window": 32768,
  "tie_word_embeddings": true,
  "torch_dtype": "bfloat16",
  "transformers_version": "4.43.1",
  "use_cache": true,
  "use_sliding_window": false,
  "vocab_size": 151936
})";

// meta-llama/Llama-3.2-1B-Instruct config.json, verbatim.
const char* kLlama1b = R"({
  "architectures": [
    "LlamaForCausalLM"
  ],
  "attention_bias": false,
  "attention_dropout": 0.0,
  "bos_token_id": 128000,
  "eos_token_id": [
    128001,
    128008,
    128009
  ],
  "head_dim": 64,
  "hidden_act": "silu",
  "hidden_size": 2048,
  "initializer_range": 0.02,
  "intermediate_size": 8192,
  "max_position_embeddings": 131072,
  "mlp_bias": false,
  "model_type": "llama",
  "num_attention_heads": 32,
  "num_hidden_layers": 16,
  "num_key_value_heads": 8,
  "pretraining_tp": 1,
  "rms_norm_eps": 1e-05,
  "rope_scaling": {
    "factor": 32.0,
    "high_freq_factor": 4.0,
    "low_freq_factor": 1.0,
    "original_max_position_embeddings": 8192,
    "rope_type": "llama3"
  },
  "rope_theta": 500000.0,
  "tie_word_embeddings": true,
  "torch_dtype": "bfloat16",
  "transformers_version": "4.45.0.dev0",
  "use_cache": true,
  "vocab_size": 128256
})";

ModelConfig parse_json(const json& j) { return parse_model_config(j.dump(), "test/config.json"); }

// The Qwen config with one field changed (or removed when `value` is discarded).
json qwen_with(const std::string& key, const json& value) {
  json j = json::parse(kQwen05);
  if (value.is_discarded()) j.erase(key);
  else j[key] = value;
  return j;
}
json qwen_without(const std::string& key) { return qwen_with(key, json(json::value_t::discarded)); }

using testing::expect_error;

void expect_config_error(const json& j, std::vector<std::string> parts) {
  parts.push_back("test/config.json");
  expect_error([&] { parse_json(j); }, parts);
}

TEST(ModelConfig, ParsesRealQwen25) {
  const ModelConfig c = parse_model_config(kQwen05, "config.json");
  EXPECT_EQ(c.arch, Architecture::Qwen2);
  EXPECT_EQ(c.architecture_name, "Qwen2ForCausalLM");
  EXPECT_EQ(c.model_type, "qwen2");
  EXPECT_EQ(c.hidden_size, 896);
  EXPECT_EQ(c.intermediate_size, 4864);
  EXPECT_EQ(c.num_layers, 24);
  EXPECT_EQ(c.num_q_heads, 14);
  EXPECT_EQ(c.num_kv_heads, 2);
  EXPECT_EQ(c.head_dim, 64);  // absent: 896 / 14
  EXPECT_EQ(c.vocab_size, 151936);
  EXPECT_EQ(c.max_position_embeddings, 32768);
  EXPECT_DOUBLE_EQ(c.rms_norm_eps, 1e-6);
  EXPECT_DOUBLE_EQ(c.rope_theta, 1e6);
  EXPECT_EQ(c.rope_scaling.type, "default");
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_TRUE(c.attention_bias);  // Qwen2 always has q/k/v bias
  EXPECT_FALSE(c.mlp_bias);
  EXPECT_EQ(c.bos_token_id, 151643);
  EXPECT_EQ(c.eos_token_ids, std::vector<int32_t>{151645});
  EXPECT_EQ(c.torch_dtype, "bfloat16");
}

TEST(ModelConfig, ParsesRealLlama32WithLlama3RopeScaling) {
  const ModelConfig c = parse_model_config(kLlama1b, "config.json");
  EXPECT_EQ(c.arch, Architecture::Llama);
  EXPECT_EQ(c.model_type, "llama");
  EXPECT_EQ(c.hidden_size, 2048);
  EXPECT_EQ(c.num_layers, 16);
  EXPECT_EQ(c.num_q_heads, 32);
  EXPECT_EQ(c.num_kv_heads, 8);
  EXPECT_EQ(c.head_dim, 64);
  EXPECT_EQ(c.vocab_size, 128256);
  EXPECT_DOUBLE_EQ(c.rms_norm_eps, 1e-5);
  EXPECT_DOUBLE_EQ(c.rope_theta, 500000.0);
  EXPECT_EQ(c.rope_scaling.type, "llama3");
  EXPECT_DOUBLE_EQ(c.rope_scaling.factor, 32.0);
  EXPECT_DOUBLE_EQ(c.rope_scaling.low_freq_factor, 1.0);
  EXPECT_DOUBLE_EQ(c.rope_scaling.high_freq_factor, 4.0);
  EXPECT_EQ(c.rope_scaling.original_max_position_embeddings, 8192);
  EXPECT_FALSE(c.attention_bias);
  EXPECT_EQ(c.bos_token_id, 128000);
  EXPECT_EQ(c.eos_token_ids, (std::vector<int32_t>{128001, 128008, 128009}));
}

TEST(ModelConfig, RopeScalingVariants) {
  json j = json::parse(kLlama1b);
  j["rope_scaling"] = {{"type", "llama3"}, {"factor", 8}, {"low_freq_factor", 1},
                       {"high_freq_factor", 4}, {"original_max_position_embeddings", 8192}};
  EXPECT_EQ(parse_json(j).rope_scaling.type, "llama3");  // old spelling "type"
  EXPECT_DOUBLE_EQ(parse_json(j).rope_scaling.factor, 8.0);
  j["rope_scaling"] = nullptr;
  EXPECT_EQ(parse_json(j).rope_scaling.type, "default");
  j["rope_scaling"] = {{"rope_type", "default"}};
  EXPECT_EQ(parse_json(j).rope_scaling.type, "default");
  j["rope_scaling"] = {{"type", "linear"}, {"factor", 2.0}};
  EXPECT_EQ(parse_json(j).rope_scaling.type, "linear");
  EXPECT_DOUBLE_EQ(parse_json(j).rope_scaling.factor, 2.0);
  j["rope_scaling"] = {{"rope_type", "dynamic"}, {"factor", 2.0}};
  expect_config_error(j, {"unsupported rope_scaling type 'dynamic'", "yarn", "KV cache"});
  j["rope_scaling"] = {{"rope_type", "longrope"}, {"factor", 2.0}};
  expect_config_error(j, {"unsupported rope_scaling type 'longrope'", "linear, llama3, yarn"});
  j["rope_scaling"] = {{"factor", 2.0}};
  expect_config_error(j, {"rope_scaling", "rope_type"});
  j["rope_scaling"] = "llama3";
  expect_config_error(j, {"'rope_scaling'", "null or an object", "string"});
  j["rope_scaling"] = {{"rope_type", "llama3"}, {"low_freq_factor", 1}};
  expect_config_error(j, {"rope_scaling.factor", "missing"});
  j["rope_scaling"] = {{"rope_type", "llama3"}, {"factor", 8}, {"low_freq_factor", 4},
                       {"high_freq_factor", 4}};
  expect_config_error(j, {"high_freq_factor", "low_freq_factor"});
  j["rope_scaling"] = {{"rope_type", "llama3"}, {"factor", "8"}};
  expect_config_error(j, {"'rope_scaling.factor'", "number", "string"});
  j["rope_scaling"] = {{"rope_type", "linear"}, {"factor", 0}};
  expect_config_error(j, {"'rope_scaling.factor'", "positive"});
}

// The default max model length as vLLM derives it from the config.
TEST(ModelConfig, DerivedMaxModelLen) {
  json j = qwen_with("max_position_embeddings", 32768);
  EXPECT_EQ(derived_max_model_len(parse_json(j)), 32768);
  // Qwen2.5's model card: add the yarn block to a 32768-position config for 128k.
  j["rope_scaling"] = {{"factor", 4.0}, {"original_max_position_embeddings", 32768},
                       {"type", "yarn"}};
  EXPECT_EQ(derived_max_model_len(parse_json(j)), 131072);
  // yarn without original_max_position_embeddings: max_position_embeddings x factor.
  j["rope_scaling"] = {{"factor", 2.0}, {"type", "yarn"}};
  EXPECT_EQ(derived_max_model_len(parse_json(j)), 65536);
  j["rope_scaling"] = {{"factor", 2.5}, {"type", "linear"}};
  EXPECT_EQ(derived_max_model_len(parse_json(j)), 81920);
  // llama3 configs carry the scaled length already.
  j = qwen_with("max_position_embeddings", 131072);
  j["rope_scaling"] = {{"rope_type", "llama3"}, {"factor", 8.0}, {"low_freq_factor", 1.0},
                       {"high_freq_factor", 4.0}, {"original_max_position_embeddings", 8192}};
  EXPECT_EQ(derived_max_model_len(parse_json(j)), 131072);
}

// Qwen2.5's model-card block: the other fields take Hugging Face's defaults.
TEST(ModelConfig, RopeScalingYarn) {
  json j = qwen_with("max_position_embeddings", 131072);
  j["rope_scaling"] = {{"factor", 4.0}, {"original_max_position_embeddings", 32768},
                       {"type", "yarn"}};
  RopeScaling s = parse_json(j).rope_scaling;
  EXPECT_EQ(s.type, "yarn");
  EXPECT_DOUBLE_EQ(s.factor, 4.0);
  EXPECT_EQ(s.original_max_position_embeddings, 32768);
  EXPECT_DOUBLE_EQ(s.beta_fast, 32.0);
  EXPECT_DOUBLE_EQ(s.beta_slow, 1.0);
  EXPECT_FALSE(s.attention_factor.has_value());
  EXPECT_EQ(s.mscale, 0.0);
  EXPECT_EQ(s.mscale_all_dim, 0.0);
  EXPECT_TRUE(s.truncate);
  // Without original_max_position_embeddings: max_position_embeddings.
  j["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 2.0}, {"beta_fast", 16},
                       {"beta_slow", 2}, {"attention_factor", 1.5}, {"mscale", 0.7},
                       {"mscale_all_dim", 0.9}, {"truncate", false}};
  s = parse_json(j).rope_scaling;
  EXPECT_EQ(s.original_max_position_embeddings, 131072);
  EXPECT_DOUBLE_EQ(s.beta_fast, 16.0);
  EXPECT_DOUBLE_EQ(s.beta_slow, 2.0);
  EXPECT_DOUBLE_EQ(s.attention_factor.value_or(0), 1.5);
  EXPECT_DOUBLE_EQ(s.mscale, 0.7);
  EXPECT_DOUBLE_EQ(s.mscale_all_dim, 0.9);
  EXPECT_FALSE(s.truncate);
  // transformers reads "beta_fast or 32": null and 0 mean the default.
  j["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 2.0}, {"beta_fast", nullptr},
                       {"beta_slow", 0}};
  s = parse_json(j).rope_scaling;
  EXPECT_DOUBLE_EQ(s.beta_fast, 32.0);
  EXPECT_DOUBLE_EQ(s.beta_slow, 1.0);
  // Errors name the field.
  auto bad = [&](json rs, std::vector<std::string> parts) {
    json k = j;
    k["rope_scaling"] = std::move(rs);
    expect_config_error(k, std::move(parts));
  };
  bad({{"rope_type", "yarn"}}, {"rope_scaling.factor", "missing"});
  bad({{"rope_type", "yarn"}, {"factor", -2.0}}, {"'rope_scaling.factor'", "positive"});
  bad({{"rope_type", "yarn"}, {"factor", 4}, {"beta_fast", 1}, {"beta_slow", 2}},
      {"rope_scaling.beta_fast (1)", "beta_slow (2)"});
  bad({{"rope_type", "yarn"}, {"factor", 4}, {"beta_slow", -1}},
      {"'rope_scaling.beta_slow'", "positive"});
  bad({{"rope_type", "yarn"}, {"factor", 4}, {"attention_factor", 0}},
      {"'rope_scaling.attention_factor'", "positive"});
  bad({{"rope_type", "yarn"}, {"factor", 4}, {"mscale", -1}, {"mscale_all_dim", 1}},
      {"'rope_scaling.mscale' (-1)", "negative"});
  bad({{"rope_type", "yarn"}, {"factor", 4}, {"truncate", "no"}},
      {"'rope_scaling.truncate'", "boolean"});
  bad({{"rope_type", "yarn"}, {"factor", 4}, {"original_max_position_embeddings", 0}},
      {"'rope_scaling.original_max_position_embeddings'", "positive"});
  bad({{"rope_type", "yarn"}, {"factor", 4}, {"original_max_position_embeddings", 1.5}},
      {"'rope_scaling.original_max_position_embeddings'", "integer"});
}

TEST(ModelConfig, ParsesRealQwen3) {
  const ModelConfig c = parse_model_config(kQwen3, "config.json");
  EXPECT_EQ(c.arch, Architecture::Qwen3);
  EXPECT_EQ(c.architecture_name, "Qwen3ForCausalLM");
  EXPECT_EQ(c.model_type, "qwen3");
  EXPECT_EQ(c.hidden_size, 1024);
  EXPECT_EQ(c.num_q_heads, 16);
  EXPECT_EQ(c.num_kv_heads, 8);
  EXPECT_EQ(c.head_dim, 128);  // 16 x 128 != 1024
  EXPECT_TRUE(c.qk_norm);
  EXPECT_FALSE(c.attention_bias);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_EQ(c.rope_scaling.type, "default");
  EXPECT_EQ(c.max_position_embeddings, 40960);
  json j = json::parse(kQwen3);
  j["attention_bias"] = true;
  EXPECT_TRUE(parse_json(j).attention_bias);
  j.erase("architectures");  // model_type alone
  EXPECT_EQ(parse_json(j).arch, Architecture::Qwen3);
  j["architectures"] = {"Qwen3ForCausalLM"};
  j["model_type"] = "qwen2";
  expect_config_error(j, {"model_type 'qwen2'", "Qwen3ForCausalLM", "'qwen3'"});
  // Qwen2 / Llama have no q/k norm.
  EXPECT_FALSE(parse_model_config(kQwen05, "config.json").qk_norm);
  EXPECT_FALSE(parse_model_config(kLlama1b, "config.json").qk_norm);
}

// Sliding-window attention is refused wherever a config turns it on; an absent, null or
// context-long window is accepted.
TEST(ModelConfig, SlidingWindow) {
  json l = json::parse(kLlama1b);  // max_position_embeddings 131072
  EXPECT_NO_THROW(parse_json(l));
  l["sliding_window"] = nullptr;
  EXPECT_NO_THROW(parse_json(l));
  l["sliding_window"] = 131072;
  EXPECT_NO_THROW(parse_json(l));
  l["sliding_window"] = 4096;  // Mistral-style
  expect_config_error(l, {"'sliding_window'", "4096", "max_position_embeddings (131072)",
                          "not supported"});
  l["sliding_window"] = "4096";
  expect_config_error(l, {"'sliding_window'", "integer"});
  // Qwen2 / Qwen3 carry a window that only use_sliding_window turns on.
  json q = json::parse(kQwen05);
  q["sliding_window"] = 4096;
  EXPECT_NO_THROW(parse_json(q));
  q["use_sliding_window"] = true;
  expect_config_error(q, {"use_sliding_window", "sliding-window"});
  json q3 = json::parse(kQwen3);
  q3["use_sliding_window"] = true;
  expect_config_error(q3, {"use_sliding_window"});
  // Newer transformers write per-layer types.
  q3["use_sliding_window"] = false;
  q3["layer_types"] = json::array({"full_attention", "full_attention"});
  EXPECT_NO_THROW(parse_json(q3));
  q3["layer_types"][1] = "sliding_attention";
  expect_config_error(q3, {"'layer_types[1]'", "sliding_attention", "full_attention"});
  q3["layer_types"] = "full_attention";
  expect_config_error(q3, {"'layer_types'", "list"});
}

TEST(ModelConfig, RefusedFeatures) {
  expect_config_error(qwen_with("architectures", {"Qwen3MoeForCausalLM"}),
                      {"'Qwen3MoeForCausalLM'", "mixture-of-experts"});
  expect_config_error(qwen_with("architectures", {"MixtralForCausalLM"}),
                      {"'MixtralForCausalLM'", "mixture-of-experts"});
  expect_config_error(qwen_with("partial_rotary_factor", 0.5),
                      {"'partial_rotary_factor'", "0.5", "1.0"});
  EXPECT_NO_THROW(parse_json(qwen_with("partial_rotary_factor", 1.0)));
}

TEST(ModelConfig, HeadDimPresentOrDerived) {
  EXPECT_EQ(parse_json(qwen_without("head_dim")).head_dim, 64);
  EXPECT_EQ(parse_json(qwen_with("head_dim", 128)).head_dim, 128);  // not hidden / heads
  json j = qwen_with("hidden_size", 900);
  expect_config_error(j, {"hidden_size (900)", "num_attention_heads (14)", "head_dim"});
  j["head_dim"] = 64;
  EXPECT_EQ(parse_json(j).head_dim, 64);
  expect_config_error(qwen_with("head_dim", 63), {"head_dim", "even", "63"});
}

TEST(ModelConfig, KvHeadsDefaultAndDivisibility) {
  EXPECT_EQ(parse_json(qwen_without("num_key_value_heads")).num_kv_heads, 14);
  expect_config_error(qwen_with("num_key_value_heads", 3),
                      {"num_attention_heads (14)", "num_key_value_heads (3)"});
}

TEST(ModelConfig, EosIntListAndNull) {
  EXPECT_EQ(parse_json(qwen_with("eos_token_id", 7)).eos_token_ids, std::vector<int32_t>{7});
  EXPECT_EQ(parse_json(qwen_with("eos_token_id", {1, 2})).eos_token_ids,
            (std::vector<int32_t>{1, 2}));
  EXPECT_TRUE(parse_json(qwen_with("eos_token_id", nullptr)).eos_token_ids.empty());
  EXPECT_FALSE(parse_json(qwen_without("bos_token_id")).bos_token_id.has_value());
  expect_config_error(qwen_with("eos_token_id", "2"), {"'eos_token_id'", "integer", "string"});
  expect_config_error(qwen_with("eos_token_id", {1, "x"}), {"eos_token_id[1]", "integer"});
  expect_config_error(qwen_with("eos_token_id", -1), {"eos_token_id", "-1"});
  expect_config_error(qwen_with("eos_token_id", 200000), {"eos_token_id 200000", "vocab_size"});
  expect_config_error(qwen_with("bos_token_id", {1, 2}), {"bos_token_id", "single"});
}

TEST(ModelConfig, LlamaOptionalFields) {
  json j = json::parse(kLlama1b);
  j["attention_bias"] = true;
  j["mlp_bias"] = true;
  const ModelConfig c = parse_json(j);
  EXPECT_TRUE(c.attention_bias);
  EXPECT_TRUE(c.mlp_bias);
  j.erase("attention_bias");
  j.erase("head_dim");
  j.erase("rope_scaling");
  j.erase("torch_dtype");
  j["dtype"] = "float32";  // newer transformers
  const ModelConfig d = parse_json(j);
  EXPECT_FALSE(d.attention_bias);
  EXPECT_EQ(d.head_dim, 64);
  EXPECT_EQ(d.rope_scaling.type, "default");
  EXPECT_EQ(d.torch_dtype, "float32");
  j.erase("rms_norm_eps");
  j.erase("rope_theta");
  EXPECT_DOUBLE_EQ(parse_json(j).rms_norm_eps, 1e-6);  // transformers' defaults
  EXPECT_DOUBLE_EQ(parse_json(j).rope_theta, 10000.0);
  j["rope_theta"] = 10000;  // an integer is a fine number
  EXPECT_DOUBLE_EQ(parse_json(j).rope_theta, 10000.0);
}

TEST(ModelConfig, ArchitectureErrors) {
  expect_config_error(qwen_with("architectures", {"MistralForCausalLM"}),
                      {"unsupported architecture 'MistralForCausalLM'", "Qwen2ForCausalLM",
                       "LlamaForCausalLM"});
  expect_config_error(qwen_with("architectures", json::array()), {"'architectures'", "empty"});
  expect_config_error(qwen_with("architectures", "Qwen2ForCausalLM"),
                      {"'architectures'", "list of strings"});
  expect_config_error(qwen_with("model_type", "llama"), {"model_type 'llama'", "Qwen2ForCausalLM"});
  // Without "architectures", model_type decides.
  EXPECT_EQ(parse_json(qwen_without("architectures")).arch, Architecture::Qwen2);
  json j = qwen_without("architectures");
  j["model_type"] = "gemma";
  expect_config_error(j, {"model_type 'gemma'", "qwen2", "llama"});
  j.erase("model_type");
  expect_config_error(j, {"'architectures'", "missing"});
}

TEST(ModelConfig, MissingRequiredFields) {
  for (const char* key : {"hidden_size", "intermediate_size", "num_hidden_layers",
                          "num_attention_heads", "vocab_size", "max_position_embeddings"}) {
    SCOPED_TRACE(key);
    expect_config_error(qwen_without(key), {std::string("'") + key + "'", "missing"});
    expect_config_error(qwen_with(key, nullptr), {std::string("'") + key + "'", "missing"});
  }
}

TEST(ModelConfig, WrongTypes) {
  expect_config_error(qwen_with("hidden_size", "896"),
                      {"'hidden_size'", "must be an integer", "string", "\"896\""});
  expect_config_error(qwen_with("hidden_size", 896.5), {"'hidden_size'", "integer", "number"});
  expect_config_error(qwen_with("num_hidden_layers", true), {"'num_hidden_layers'", "boolean"});
  expect_config_error(qwen_with("tie_word_embeddings", "yes"),
                      {"'tie_word_embeddings'", "must be a boolean", "string"});
  expect_config_error(qwen_with("rms_norm_eps", "1e-6"), {"'rms_norm_eps'", "must be a number"});
  expect_config_error(qwen_with("torch_dtype", 16), {"'torch_dtype'", "must be a string"});
  expect_config_error(qwen_with("architectures", {1}), {"'architectures'", "strings"});
}

TEST(ModelConfig, NonPositiveAndUnsupportedValues) {
  for (const char* key : {"hidden_size", "intermediate_size", "num_hidden_layers",
                          "num_attention_heads", "num_key_value_heads", "vocab_size",
                          "max_position_embeddings", "head_dim"}) {
    SCOPED_TRACE(key);
    expect_config_error(qwen_with(key, 0), {std::string("'") + key + "'", "positive", "0"});
    expect_config_error(qwen_with(key, -4), {std::string("'") + key + "'", "positive", "-4"});
  }
  expect_config_error(qwen_with("rms_norm_eps", 0.0), {"'rms_norm_eps'", "positive"});
  expect_config_error(qwen_with("rope_theta", -1.0), {"'rope_theta'", "positive"});
  expect_config_error(qwen_with("hidden_act", "gelu"), {"hidden_act 'gelu'", "silu"});
  expect_config_error(qwen_with("use_sliding_window", true), {"use_sliding_window"});
}

TEST(ModelConfig, InvalidJson) {
  expect_error([] { parse_model_config("{\"hidden_size\": 896,\n  \"x\": }", "cfg/config.json"); },
               {"cfg/config.json", "not valid JSON", "line 2", "column"});
  expect_error([] { parse_model_config("", "cfg/config.json"); },
               {"cfg/config.json", "not valid JSON"});
  expect_error([] { parse_model_config("[1, 2]", "cfg/config.json"); },
               {"cfg/config.json", "JSON object", "array"});
}

using TempDir = testing::TempDir;

TEST(ModelConfig, LoadMergesGenerationConfig) {
  TempDir d;
  d.write("config.json", kQwen05);
  EXPECT_EQ(load_model_config(d.path().string()).eos_token_ids, std::vector<int32_t>{151645});
  d.write("generation_config.json",
          R"({"bos_token_id": 151643, "eos_token_id": [151645, 151643], "top_p": 0.8})");
  const ModelConfig c = load_model_config(d.path().string());
  EXPECT_EQ(c.eos_token_ids, (std::vector<int32_t>{151645, 151643}));
  d.write("generation_config.json", R"({"eos_token_id": 7})");
  EXPECT_EQ(load_model_config(d.path().string()).eos_token_ids,
            (std::vector<int32_t>{151645, 7}));
  // bos from generation_config when config.json has none.
  json j = json::parse(kQwen05);
  j.erase("bos_token_id");
  d.write("config.json", j.dump());
  d.write("generation_config.json", R"({"bos_token_id": 5})");
  EXPECT_EQ(load_model_config(d.path().string()).bos_token_id, 5);
  // Its errors name generation_config.json.
  d.write("generation_config.json", R"({"eos_token_id": "x"})");
  expect_error([&] { load_model_config(d.path().string()); },
               {"generation_config.json", "'eos_token_id'"});
  d.write("generation_config.json", "{oops");
  expect_error([&] { load_model_config(d.path().string()); },
               {"generation_config.json", "not valid JSON"});
}

// The sampling fields of generation_config.json: present ones are read, absent ones stay
// unset, out-of-range ones are errors naming the file and the field.
TEST(ModelConfig, LoadReadsGenerationDefaults) {
  TempDir d;
  d.write("config.json", kQwen05);
  EXPECT_FALSE(load_model_config(d.path().string()).generation.temperature);
  d.write("generation_config.json",
          R"({"eos_token_id": 7, "temperature": 0.7, "top_p": 0.8, "top_k": 20,
              "repetition_penalty": 1.05, "do_sample": true})");
  GenerationDefaults g = load_model_config(d.path().string()).generation;
  EXPECT_EQ(g.temperature, 0.7);
  EXPECT_EQ(g.top_p, 0.8);
  EXPECT_EQ(g.top_k, 20);
  EXPECT_EQ(g.repetition_penalty, 1.05);
  EXPECT_FALSE(g.min_p);
  d.write("generation_config.json", R"({"min_p": 0.05})");
  g = load_model_config(d.path().string()).generation;
  EXPECT_EQ(g.min_p, 0.05);
  EXPECT_FALSE(g.temperature);
  for (const char* bad : {R"({"temperature": -1})", R"({"top_p": 0})", R"({"min_p": 1.5})",
                          R"({"repetition_penalty": 0})", R"({"top_k": -2})"}) {
    d.write("generation_config.json", bad);
    const std::string field = json::parse(bad).begin().key();
    expect_error([&] { load_model_config(d.path().string()); },
                 {"generation_config.json", "'" + field + "'"});
  }
}

TEST(ModelConfig, LoadErrorsNameThePath) {
  TempDir d;
  expect_error([&] { load_model_config(d.path().string()); },
               {"config.json", d.path().string()});
  expect_error([&] { load_model_config((d.path() / "nope").string()); },
               {(d.path() / "nope").string(), "not a directory"});
  d.write("config.json", R"({"architectures": ["Qwen2ForCausalLM"]})");
  expect_error([&] { load_model_config(d.path().string()); },
               {(d.path() / "config.json").string(), "'hidden_size'", "missing"});
}

void expect_same(const ModelConfig& a, const ModelConfig& b) {
  testing::expect_same_model_shape(a, b);
  EXPECT_EQ(a.architecture_name, b.architecture_name);
  EXPECT_EQ(a.model_type, b.model_type);
  EXPECT_DOUBLE_EQ(a.rope_scaling.low_freq_factor, b.rope_scaling.low_freq_factor);
  EXPECT_DOUBLE_EQ(a.rope_scaling.high_freq_factor, b.rope_scaling.high_freq_factor);
  EXPECT_EQ(a.rope_scaling.original_max_position_embeddings,
            b.rope_scaling.original_max_position_embeddings);
  EXPECT_DOUBLE_EQ(a.rope_scaling.beta_fast, b.rope_scaling.beta_fast);
  EXPECT_DOUBLE_EQ(a.rope_scaling.beta_slow, b.rope_scaling.beta_slow);
  EXPECT_EQ(a.rope_scaling.attention_factor, b.rope_scaling.attention_factor);
  EXPECT_DOUBLE_EQ(a.rope_scaling.mscale, b.rope_scaling.mscale);
  EXPECT_DOUBLE_EQ(a.rope_scaling.mscale_all_dim, b.rope_scaling.mscale_all_dim);
  EXPECT_EQ(a.rope_scaling.truncate, b.rope_scaling.truncate);
  EXPECT_EQ(a.mlp_bias, b.mlp_bias);
  EXPECT_EQ(a.eos_token_ids, b.eos_token_ids);
}

TEST(ModelConfig, ToJsonRoundTripsEveryPreset) {
  for (const std::string& p : model_presets()) {
    SCOPED_TRACE(p);
    const ModelConfig c = preset_config(p);
    expect_same(parse_json(model_config_to_json(c)), c);
  }
  for (const char* text : {kQwen05, kQwen3, kLlama1b}) {
    const ModelConfig c = parse_model_config(text, "config.json");
    expect_same(parse_json(model_config_to_json(c)), c);
  }
  ModelConfig odd = preset_config("qwen2.5-0.5b");
  odd.head_dim = 128;  // not hidden / heads: must be written for Qwen2 too
  expect_same(parse_json(model_config_to_json(odd)), odd);
  // Every yarn option and linear scaling survive the trip.
  ModelConfig y = preset_config("qwen2.5-7b-yarn");
  y.rope_scaling.beta_fast = 16;
  y.rope_scaling.beta_slow = 0.5;
  y.rope_scaling.attention_factor = 1.2;
  y.rope_scaling.mscale = 0.7;
  y.rope_scaling.mscale_all_dim = 0.9;
  y.rope_scaling.truncate = false;
  expect_same(parse_json(model_config_to_json(y)), y);
  y.rope_scaling = RopeScaling{};
  y.rope_scaling.type = "linear";
  y.rope_scaling.factor = 2.5;
  expect_same(parse_json(model_config_to_json(y)), y);
}

TEST(ModelConfig, ToJsonHasTheHuggingFaceKeys) {
  // Every key of the real files (bar max_window_layers' value and versions) is there,
  // with the same value.
  for (const char* text : {kQwen05, kQwen3, kLlama1b}) {
    const json real = json::parse(text);
    const json ours = model_config_to_json(parse_model_config(text, "config.json"));
    for (auto it = real.begin(); it != real.end(); ++it) {
      SCOPED_TRACE(it.key());
      ASSERT_TRUE(ours.contains(it.key()));
      if (it.key() == "max_window_layers" || it.key() == "transformers_version") continue;
      EXPECT_EQ(ours[it.key()], it.value());
    }
  }
  const json q = model_config_to_json(preset_config("qwen2.5-0.5b"));
  EXPECT_EQ(q["hidden_act"], "silu");
  EXPECT_EQ(q["use_sliding_window"], false);
  EXPECT_FALSE(q.contains("head_dim"));
  const json l = model_config_to_json(preset_config("llama-3.2-1b"));
  EXPECT_EQ(l["rope_scaling"]["rope_type"], "llama3");
  EXPECT_EQ(l["eos_token_id"], json({128001, 128008, 128009}));
  // Qwen2.5-7B's model card: {"factor": 4.0, "original_max_position_embeddings": 32768,
  // "type": "yarn"}, and no other key.
  const json y = model_config_to_json(preset_config("qwen2.5-7b-yarn"));
  EXPECT_EQ(y["rope_scaling"], json({{"factor", 4.0}, {"original_max_position_embeddings", 32768},
                                     {"type", "yarn"}}));
  EXPECT_EQ(y["max_position_embeddings"], 131072);
  EXPECT_EQ(y["tie_word_embeddings"], false);
}

}  // namespace
}  // namespace cpinfer
