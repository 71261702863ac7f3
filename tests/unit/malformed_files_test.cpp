// Malformed model files: every bad safetensors file, config.json,
// tokenizer.json and GGUF file below is made from a small valid model directory and loaded the way
// `cpinfer generate` / `serve` load a model (load_model_config, load_model_weights,
// Tokenizer::from_file). Each must give an Error whose message names the problem (checked
// by substrings), never a crash; the valid directory loads before and after.
// The request side of the suite is tests/cli/malformed_requests_test.sh.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "model/gguf.h"
#include "model/gguf_model.h"
#include "model/gguf_tokenizer.h"
#include "model/gguf_writer.h"
#include "model/model_config.h"
#include "model/safetensors.h"
#include "model/synthetic_model.h"
#include "model/weights.h"
#include "support/expect_error.h"
#include "support/temp_dir.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/tokenizer.h"

namespace cpinfer {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using testing::TempDir;

// ---- a small valid model directory ---------------------------------------------------

// Qwen2 shape, small: H 64, 4 q heads / 2 KV heads of 16, FFN 128, vocab 300, 1 layer.
json base_config() {
  return {{"architectures", {"Qwen2ForCausalLM"}},
          {"model_type", "qwen2"},
          {"hidden_size", 64},
          {"intermediate_size", 128},
          {"num_hidden_layers", 1},
          {"num_attention_heads", 4},
          {"num_key_value_heads", 2},
          {"vocab_size", 300},
          {"max_position_embeddings", 256},
          {"rms_norm_eps", 1e-6},
          {"rope_theta", 10000.0},
          {"tie_word_embeddings", false},
          {"eos_token_id", 256},
          {"torch_dtype", "bfloat16"}};
}

// A byte-level BPE tokenizer.json: ids 0..255 the byte symbols, 256 "<|end|>" (added).
json base_tokenizer() {
  json vocab = json::object();
  for (int b = 0; b < 256; ++b) vocab[byte_level::byte_to_symbol(uint8_t(b))] = b;
  vocab["ab"] = 257;
  return {{"version", "1.0"},
          {"added_tokens",
           {{{"id", 256}, {"content", "<|end|>"}, {"special", true}, {"normalized", false}}}},
          {"normalizer", nullptr},
          {"pre_tokenizer",
           {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}}},
          {"post_processor", nullptr},
          {"decoder", {{"type", "ByteLevel"}}},
          {"model",
           {{"type", "BPE"}, {"vocab", vocab}, {"merges", json::array({json::array({"a", "b"})})}}}};
}

// The tensors of base_config in BF16 (value 2^-7 everywhere, norms 1), with hooks to break
// one of them: change its dtype / shape, drop it, or overwrite its bytes after the fill.
struct TensorEdit {
  std::string name;
  std::function<void(TensorToWrite&)> change;          // dtype / shape
  std::function<void(uint8_t*, size_t nbytes)> poke;   // after the fill
  bool drop = false;
};

void write_weights(const std::string& path, const ModelConfig& c,
                   const std::vector<TensorEdit>& edits = {}) {
  std::vector<TensorToWrite> ts;
  for (const SyntheticTensor& s : synthetic_tensors(c)) {
    TensorToWrite t;
    t.name = s.name;
    t.dtype = DType::BF16;
    t.shape = s.shape;
    const TensorEdit* e = nullptr;
    for (const TensorEdit& x : edits)
      if (x.name == s.name) e = &x;
    if (e && e->drop) continue;
    if (e && e->change) e->change(t);
    const DType dt = t.dtype;
    const float value = s.mean != 0 ? s.mean : 0.0078125f;
    size_t numel = 1;
    for (int64_t d : t.shape) numel *= size_t(d);
    std::function<void(uint8_t*, size_t)> poke;
    if (e) poke = e->poke;
    t.fill = [dt, value, numel, poke](uint8_t* dst) {
      for (size_t i = 0; i < numel; ++i) {
        switch (dt) {
          case DType::F32: std::memcpy(dst + 4 * i, &value, 4); break;
          case DType::BF16: { uint16_t b = bf16(value).bits; std::memcpy(dst + 2 * i, &b, 2); break; }
          case DType::F16: { uint16_t b = f16(value).bits; std::memcpy(dst + 2 * i, &b, 2); break; }
          default: std::memset(dst + dtype_size(dt) * i, 0, dtype_size(dt)); break;
        }
      }
      if (poke) poke(dst, numel * dtype_size(dt));
    };
    ts.push_back(std::move(t));
  }
  write_safetensors(path, ts);
}

class ModelDir {
 public:
  ModelDir() : dir_("malformed") {
    config_text = base_config().dump(2);
    tokenizer_text = base_tokenizer().dump();
    write_text("config.json", config_text);
    write_text("tokenizer.json", tokenizer_text);
    write_weights(dir_ / "model.safetensors", parse_model_config(config_text, "config.json"));
  }
  std::string path() const { return dir_.str(); }
  std::string file(const std::string& name) const { return dir_ / name; }
  void write_text(const std::string& name, const std::string& text) const {
    std::ofstream out(dir_ / name, std::ios::binary | std::ios::trunc);
    out.write(text.data(), std::streamsize(text.size()));
  }
  std::string read(const std::string& name) const {
    std::ifstream in(dir_ / name, std::ios::binary);
    std::ostringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
  void restore() const {
    write_text("config.json", config_text);
    write_text("tokenizer.json", tokenizer_text);
    write_weights(dir_ / "model.safetensors", parse_model_config(config_text, "config.json"));
  }
  std::string config_text, tokenizer_text;

 private:
  TempDir dir_;
};

// What `cpinfer generate/serve` load, in their order.
void load_all(const std::string& dir) {
  const ModelConfig c = load_model_config(dir);
  const ModelWeights w = load_model_weights(c, dir, full_shard(c));
  const Tokenizer tok = Tokenizer::from_file(dir + "/tokenizer.json");
  ASSERT_EQ(w.layers.size(), size_t(c.num_layers));
  ASSERT_GT(tok.vocab_size(), 256);
}

// Loads DIR and expects an Error naming every one of `parts`.
void expect_load_error(const ModelDir& m, const std::vector<std::string>& parts) {
  testing::expect_error([&] { load_all(m.path()); }, parts);
}

// ---- the safetensors file: raw surgery on a valid one --------------------------------

struct RawFile {
  uint64_t header_len = 0;
  json header;
  std::string data;
};
RawFile split(const std::string& bytes) {
  RawFile r;
  for (int i = 7; i >= 0; --i) r.header_len = (r.header_len << 8) | uint8_t(bytes[size_t(i)]);
  r.header = json::parse(bytes.substr(8, r.header_len));
  r.data = bytes.substr(8 + r.header_len);
  return r;
}
std::string join(const std::string& header, const std::string& data, uint64_t len) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[size_t(i)] = char(uint8_t(len >> (8 * i)));
  return s + header + data;
}
std::string join(const std::string& header, const std::string& data) {
  return join(header, data, header.size());
}

const char* kQ = "model.layers.0.self_attn.q_proj.weight";
const char* kK = "model.layers.0.self_attn.k_proj.weight";
const char* kDown = "model.layers.0.mlp.down_proj.weight";

class MalformedFiles : public ::testing::Test {
 protected:
  ModelDir m;
  std::string st() const { return m.read("model.safetensors"); }
  void put_st(const std::string& bytes) const { m.write_text("model.safetensors", bytes); }
  // Rewrites the header with fn applied (data unchanged).
  void edit_header(const std::function<void(json&)>& fn) const {
    RawFile r = split(st());
    fn(r.header);
    put_st(join(r.header.dump(), r.data));
  }
  void edit_config(const std::function<void(json&)>& fn) const {
    json c = base_config();
    fn(c);
    m.write_text("config.json", c.dump());
  }
  void edit_tokenizer(const std::function<void(json&)>& fn) const {
    json t = base_tokenizer();
    fn(t);
    m.write_text("tokenizer.json", t.dump());
  }
  void SetUp() override { ASSERT_NO_THROW(load_all(m.path())); }
  // After every case the valid files load again: nothing is left broken or cached.
  void TearDown() override {
    m.restore();
    EXPECT_NO_THROW(load_all(m.path()));
  }
};

TEST_F(MalformedFiles, SafetensorsTruncatedData) {
  const std::string s = st();
  put_st(s.substr(0, s.size() - 1000));
  expect_load_error(m, {"model.safetensors", "past the data area"});
}

TEST_F(MalformedFiles, SafetensorsTruncatedToFewBytes) {
  put_st(st().substr(0, 5));
  expect_load_error(m, {"too short to be a safetensors file", "5 bytes"});
}

TEST_F(MalformedFiles, SafetensorsHeaderLengthPastEnd) {
  const std::string s = st();
  RawFile r = split(s);
  put_st(join(r.header.dump(), r.data, s.size()));
  expect_load_error(m, {"header length", "runs past the end of the file"});
}

TEST_F(MalformedFiles, SafetensorsHeaderLengthAbsurd) {
  RawFile r = split(st());
  put_st(join(r.header.dump(), r.data, uint64_t(1) << 40));
  expect_load_error(m, {"header length 1099511627776 is absurd"});
}

TEST_F(MalformedFiles, SafetensorsHeaderNotJson) {
  RawFile r = split(st());
  std::string h = r.header.dump();
  h[h.size() / 2] = '\x01';
  put_st(join(h, r.data));
  expect_load_error(m, {"the header is not valid JSON"});
}

TEST_F(MalformedFiles, SafetensorsHeaderNotAnObject) {
  put_st(join("[1, 2, 3]", split(st()).data));
  expect_load_error(m, {"the header must be a JSON object", "array"});
}

TEST_F(MalformedFiles, SafetensorsHeaderNestedTooDeep) {
  std::string h = "{\"x\": {\"dtype\": \"F32\", \"shape\": " + std::string(100000, '[') +
                  std::string(100000, ']') + ", \"data_offsets\": [0, 0]}}";
  put_st(join(h, ""));
  expect_load_error(m, {"nested deeper than 128 levels"});
}

TEST_F(MalformedFiles, SafetensorsOffsetsOutOfRange) {
  edit_header([](json& h) { h[kQ]["data_offsets"][1] = 1ull << 40; });
  expect_load_error(m, {kQ, "past the data area"});
}

TEST_F(MalformedFiles, SafetensorsOffsetsNegative) {
  edit_header([](json& h) { h[kQ]["data_offsets"][0] = -8; });
  expect_load_error(m, {kQ, "data_offsets[0] must be a non-negative integer"});
}

TEST_F(MalformedFiles, SafetensorsOffsetsBeginAfterEnd) {
  edit_header([](json& h) {
    auto o = h[kQ]["data_offsets"];
    h[kQ]["data_offsets"] = {o[1], o[0]};
  });
  expect_load_error(m, {kQ, "has begin > end"});
}

TEST_F(MalformedFiles, SafetensorsOverlappingOffsets) {
  // k_proj (same size as v_proj) moved onto v_proj's bytes.
  edit_header([](json& h) {
    h[kK]["data_offsets"] = h["model.layers.0.self_attn.v_proj.weight"]["data_offsets"];
  });
  expect_load_error(m, {"overlap", kK});
}

TEST_F(MalformedFiles, SafetensorsOffsetsDoNotMatchShape) {
  edit_header([](json& h) { h[kQ]["shape"] = {64, 32}; });  // half the bytes it spans
  expect_load_error(m, {kQ, "but shape [64, 32] BF16 needs 4096"});
}

TEST_F(MalformedFiles, SafetensorsUnknownDtype) {
  edit_header([](json& h) { h[kQ]["dtype"] = "F8_E4M3"; });
  expect_load_error(m, {kQ, "unknown or unsupported dtype 'F8_E4M3'"});
}

TEST_F(MalformedFiles, SafetensorsNoWeightsFile) {
  fs::remove(m.file("model.safetensors"));
  expect_load_error(m, {"no model.safetensors or model.safetensors.index.json"});
}

TEST_F(MalformedFiles, TensorWithTheWrongDtype) {
  write_weights(m.file("model.safetensors"), parse_model_config(m.config_text, "c"),
                {{kQ, [](TensorToWrite& t) { t.dtype = DType::I32; }, nullptr}});
  expect_load_error(m, {kQ, "has dtype I32, expected F32, BF16 or F16"});
}

TEST_F(MalformedFiles, TensorShapeDoesNotMatchTheConfig) {
  // q_proj with the rows of 2 heads where the config has 4.
  write_weights(m.file("model.safetensors"), parse_model_config(m.config_text, "c"),
                {{kQ, [](TensorToWrite& t) { t.shape = {32, 64}; }, nullptr}});
  expect_load_error(m, {kQ, "has shape [32, 64], expected [64, 64]"});
}

TEST_F(MalformedFiles, TensorMissing) {
  TensorEdit e;
  e.name = kDown;
  e.drop = true;
  write_weights(m.file("model.safetensors"), parse_model_config(m.config_text, "c"), {e});
  expect_load_error(m, {"tensor '" + std::string(kDown) + "' is missing"});
}

// A Qwen3 directory (q_norm / k_norm per layer) whose norm is missing, of the wrong shape
// or holds a NaN.
TEST_F(MalformedFiles, Qwen3HeadNormMissingWrongOrNan) {
  json cfg = base_config();
  cfg["architectures"] = {"Qwen3ForCausalLM"};
  cfg["model_type"] = "qwen3";
  cfg["head_dim"] = 32;  // 4 x 32 = 128 q columns over a hidden size of 64
  m.write_text("config.json", cfg.dump());
  const ModelConfig c = parse_model_config(cfg.dump(), "c");
  write_weights(m.file("model.safetensors"), c);
  EXPECT_NO_THROW(load_all(m.path()));
  const std::string qn = "model.layers.0.self_attn.q_norm.weight";
  const std::string kn = "model.layers.0.self_attn.k_norm.weight";
  TensorEdit drop{qn, nullptr, nullptr, true};
  write_weights(m.file("model.safetensors"), c, {drop});
  expect_load_error(m, {"tensor '" + qn + "' is missing"});
  TensorEdit shape{kn, [](TensorToWrite& t) { t.shape = {64}; }, nullptr};
  write_weights(m.file("model.safetensors"), c, {shape});
  expect_load_error(m, {"'" + kn + "'", "[32]", "[64]"});
  TensorEdit nan{kn, nullptr, [](uint8_t* d, size_t) {
                   const uint16_t bits = 0x7FC0;
                   std::memcpy(d + 2 * 5, &bits, 2);
                 }};
  write_weights(m.file("model.safetensors"), c, {nan});
  expect_load_error(m, {"'" + kn + "'", "non-finite", "element 5"});
}

// NaN / Inf are flagged at load time, naming the tensor, for every dtype and for the
// small tensors (norms, biases) widened to f32 as well as the matrices used in place.
void poke_u16(uint8_t* dst, size_t at, uint16_t bits) { std::memcpy(dst + 2 * at, &bits, 2); }

TEST_F(MalformedFiles, NanInABf16Weight) {
  TensorEdit e{kDown, nullptr, [](uint8_t* d, size_t) { poke_u16(d, 77, 0x7FC0); }};
  write_weights(m.file("model.safetensors"), parse_model_config(m.config_text, "c"), {e});
  expect_load_error(m, {kDown, "non-finite", "nan", "row 0", "column 77", "corrupt"});
}

TEST_F(MalformedFiles, InfInABf16Weight) {
  // Last element of the embedding (row 299, column 63), a negative infinity.
  TensorEdit e{"model.embed_tokens.weight", nullptr,
               [](uint8_t* d, size_t n) { poke_u16(d, n / 2 - 1, 0xFF80); }};
  write_weights(m.file("model.safetensors"), parse_model_config(m.config_text, "c"), {e});
  expect_load_error(m, {"model.embed_tokens.weight", "-inf", "row 299", "column 63"});
}

TEST_F(MalformedFiles, InfInAnF32Weight) {
  TensorEdit e{kQ, [](TensorToWrite& t) { t.dtype = DType::F32; },
               [](uint8_t* d, size_t) {
                 const float inf = std::numeric_limits<float>::infinity();
                 std::memcpy(d + 4 * (64 * 5 + 3), &inf, 4);
               }};
  write_weights(m.file("model.safetensors"), parse_model_config(m.config_text, "c"), {e});
  expect_load_error(m, {kQ, "inf", "row 5", "column 3"});
}

TEST_F(MalformedFiles, NanInAnF16Weight) {
  TensorEdit e{"lm_head.weight", [](TensorToWrite& t) { t.dtype = DType::F16; },
               [](uint8_t* d, size_t) { poke_u16(d, 64 * 10, 0x7E00); }};
  write_weights(m.file("model.safetensors"), parse_model_config(m.config_text, "c"), {e});
  expect_load_error(m, {"lm_head.weight", "nan", "row 10", "column 0"});
}

TEST_F(MalformedFiles, NanInANormAndInABias) {
  TensorEdit norm{"model.norm.weight", nullptr, [](uint8_t* d, size_t) { poke_u16(d, 9, 0x7FC1); }};
  write_weights(m.file("model.safetensors"), parse_model_config(m.config_text, "c"), {norm});
  expect_load_error(m, {"model.norm.weight", "non-finite", "element 9"});
  TensorEdit bias{"model.layers.0.self_attn.v_proj.bias", nullptr,
                  [](uint8_t* d, size_t) { poke_u16(d, 2, 0x7F80); }};
  write_weights(m.file("model.safetensors"), parse_model_config(m.config_text, "c"), {bias});
  expect_load_error(m, {"model.layers.0.self_attn.v_proj.bias", "inf", "element 2"});
}

// ---- config.json ------------------------------------------------------------------------

TEST_F(MalformedFiles, ConfigNotJson) {
  m.write_text("config.json", "{\"hidden_size\": 64,");
  expect_load_error(m, {"config.json is not valid JSON"});
}

TEST_F(MalformedFiles, ConfigNestedTooDeep) {
  m.write_text("config.json", "{\"hidden_size\": " + std::string(100000, '[') +
                                  std::string(100000, ']') + "}");
  expect_load_error(m, {"config.json is nested deeper than 128 levels"});
}

TEST_F(MalformedFiles, ConfigMissingField) {
  edit_config([](json& c) { c.erase("hidden_size"); });
  expect_load_error(m, {"config.json", "required field 'hidden_size' is missing"});
}

TEST_F(MalformedFiles, ConfigZeroHeads) {
  edit_config([](json& c) { c["num_attention_heads"] = 0; });
  expect_load_error(m, {"field 'num_attention_heads' must be positive, found 0"});
  edit_config([](json& c) { c["num_key_value_heads"] = 0; });
  expect_load_error(m, {"field 'num_key_value_heads' must be positive, found 0"});
}

TEST_F(MalformedFiles, ConfigHeadsNotDividedByKvHeads) {
  edit_config([](json& c) { c["num_key_value_heads"] = 3; });
  expect_load_error(m, {"num_attention_heads (4) must be a multiple of num_key_value_heads (3)"});
}

TEST_F(MalformedFiles, ConfigHiddenNotDividedByHeads) {
  edit_config([](json& c) {
    c["num_attention_heads"] = 6;
    c["num_key_value_heads"] = 2;
  });
  expect_load_error(m, {"hidden_size (64) is not a multiple of num_attention_heads (6)"});
}

TEST_F(MalformedFiles, ConfigOddHeadDim) {
  edit_config([](json& c) { c["head_dim"] = 15; });
  expect_load_error(m, {"head_dim must be even", "15"});
}

TEST_F(MalformedFiles, ConfigNegativeSize) {
  edit_config([](json& c) { c["intermediate_size"] = -128; });
  expect_load_error(m, {"field 'intermediate_size' must be positive, found -128"});
}

TEST_F(MalformedFiles, ConfigHugeSizes) {
  edit_config([](json& c) { c["hidden_size"] = int64_t(1) << 60; });
  expect_load_error(m, {"field 'hidden_size' is 1152921504606846976, larger than cpinfer supports"});
  edit_config([](json& c) { c["num_hidden_layers"] = 1000000000; });
  expect_load_error(m, {"field 'num_hidden_layers' is 1000000000, larger than cpinfer supports"});
  edit_config([](json& c) { c["vocab_size"] = 18446744073709551615ull; });
  expect_load_error(m, {"field 'vocab_size' is too large"});
  // head_dim * heads would overflow 64 bits without the cap.
  edit_config([](json& c) { c["head_dim"] = int64_t(1) << 62; });
  expect_load_error(m, {"field 'head_dim' is 4611686018427387904, larger than cpinfer supports"});
}

TEST_F(MalformedFiles, ConfigWrongTypes) {
  edit_config([](json& c) { c["hidden_size"] = "64"; });
  expect_load_error(m, {"field 'hidden_size' must be an integer, found string \"64\""});
  edit_config([](json& c) { c["num_hidden_layers"] = 1.5; });
  expect_load_error(m, {"field 'num_hidden_layers' must be an integer, found number 1.5"});
  edit_config([](json& c) { c["tie_word_embeddings"] = "yes"; });
  expect_load_error(m, {"field 'tie_word_embeddings' must be a boolean"});
  edit_config([](json& c) { c["rope_theta"] = nullptr; c["rms_norm_eps"] = json::array({1}); });
  expect_load_error(m, {"field 'rms_norm_eps' must be a number, found array"});
}

TEST_F(MalformedFiles, ConfigUnknownArchitectureOrModelType) {
  edit_config([](json& c) { c["architectures"] = {"MistralForCausalLM"}; });
  expect_load_error(m, {"unsupported architecture 'MistralForCausalLM'",
                        "Qwen2ForCausalLM, LlamaForCausalLM"});
  edit_config([](json& c) {
    c.erase("architectures");
    c["model_type"] = "gpt2";
  });
  expect_load_error(m, {"unsupported model_type 'gpt2'"});
  edit_config([](json& c) { c["model_type"] = "llama"; });
  expect_load_error(m, {"model_type 'llama' does not match architecture Qwen2ForCausalLM"});
}

// What cpinfer does not implement is refused at load time, naming the field.
TEST_F(MalformedFiles, ConfigUnsupportedAttentionOrRope) {
  edit_config([](json& c) {
    c["architectures"] = {"LlamaForCausalLM"};
    c["model_type"] = "llama";
    c["sliding_window"] = 128;  // Mistral-style, shorter than max_position_embeddings 256
  });
  expect_load_error(m, {"field 'sliding_window' is 128", "not supported"});
  edit_config([](json& c) { c["use_sliding_window"] = true; });
  expect_load_error(m, {"use_sliding_window=true is not supported"});
  edit_config([](json& c) { c["rope_scaling"] = {{"rope_type", "dynamic"}, {"factor", 2.0}}; });
  expect_load_error(m, {"unsupported rope_scaling type 'dynamic'"});
  edit_config([](json& c) {
    c["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}, {"beta_fast", "32"}};
  });
  expect_load_error(m, {"field 'rope_scaling.beta_fast' must be a number, found string"});
  edit_config([](json& c) { c["architectures"] = {"Qwen2MoeForCausalLM"}; });
  expect_load_error(m, {"unsupported architecture 'Qwen2MoeForCausalLM'", "mixture-of-experts"});
}

TEST_F(MalformedFiles, ConfigEosOutsideTheVocabulary) {
  edit_config([](json& c) { c["eos_token_id"] = {256, 300}; });
  expect_load_error(m, {"eos_token_id 300 is outside the vocabulary (vocab_size 300)"});
}

// ---- tokenizer.json ---------------------------------------------------------------------

TEST_F(MalformedFiles, TokenizerNotJson) {
  m.write_text("tokenizer.json", "{\"model\": ");
  expect_load_error(m, {"tokenizer.json is not valid JSON (at byte"});
}

TEST_F(MalformedFiles, TokenizerNestedTooDeep) {
  m.write_text("tokenizer.json",
               "{\"model\": " + std::string(100000, '[') + std::string(100000, ']') + "}");
  expect_load_error(m, {"tokenizer.json is nested deeper than 128 levels"});
}

TEST_F(MalformedFiles, TokenizerUnknownModelType) {
  edit_tokenizer([](json& t) { t["model"]["type"] = "WordPiece"; });
  expect_load_error(m, {"model.type is \"WordPiece\"; only \"BPE\" is supported"});
  edit_tokenizer([](json& t) { t["model"]["type"] = "Unigram"; });
  expect_load_error(m, {"model.type is \"Unigram\""});
}

TEST_F(MalformedFiles, TokenizerMissingVocabOrModel) {
  edit_tokenizer([](json& t) { t["model"].erase("vocab"); });
  expect_load_error(m, {"tokenizer.json: missing field model.vocab"});
  edit_tokenizer([](json& t) { t.erase("model"); });
  expect_load_error(m, {"tokenizer.json: missing field model"});
}

TEST_F(MalformedFiles, TokenizerMergeWithUnknownToken) {
  edit_tokenizer([](json& t) { t["model"]["merges"].push_back(json::array({"a", "zz"})); });
  expect_load_error(m, {"model.merges[1] refers to token \"zz\", which is not in model.vocab"});
  edit_tokenizer([](json& t) { t["model"]["merges"] = {"a b c"}; });
  expect_load_error(m, {"model.merges[0] = \"a b c\" must be two tokens separated by one space"});
}

TEST_F(MalformedFiles, TokenizerVocabMissingAByte) {
  edit_tokenizer([](json& t) { t["model"]["vocab"].erase(byte_level::byte_to_symbol('q')); });
  expect_load_error(m, {"needs all 256 byte symbols", "0x71"});
}

TEST_F(MalformedFiles, TokenizerHugeOrNegativeIds) {
  // An id of 2^31 - 1 used to size the id tables (tens of GB): refused by value now.
  edit_tokenizer([](json& t) { t["model"]["vocab"]["zz"] = 2147483647; });
  expect_load_error(m, {"model.vocab[\"zz\"] = 2147483647 is out of range"});
  edit_tokenizer([](json& t) { t["added_tokens"][0]["id"] = 2000000000; });
  expect_load_error(m, {"added_tokens[0].id = 2000000000 is out of range"});
  edit_tokenizer([](json& t) { t["model"]["vocab"]["zz"] = -1; });
  expect_load_error(m, {"model.vocab[\"zz\"] = -1 is out of range"});
  edit_tokenizer([](json& t) { t["model"]["vocab"]["zz"] = 5; });
  expect_load_error(m, {"model.vocab: id 5 is used by both"});
}

TEST_F(MalformedFiles, TokenizerPostProcessorIdNotInVocab) {
  edit_tokenizer([](json& t) {
    t["post_processor"] = {
        {"type", "TemplateProcessing"},
        {"single", {{{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}},
                    {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}}},
        {"special_tokens", {{"<s>", {{"id", "<s>"}, {"ids", {5000}}, {"tokens", {"<s>"}}}}}}};
  });
  expect_load_error(m, {"post_processor uses token id 5000, which is not in the vocabulary"});
}

TEST_F(MalformedFiles, TokenizerUnsupportedPipeline) {
  edit_tokenizer([](json& t) { t["decoder"] = {{"type", "WordPiece"}}; });
  expect_load_error(m, {"decoder.type is \"WordPiece\"; only \"ByteLevel\" is supported"});
  edit_tokenizer([](json& t) { t["model"]["vocab"] = json::array(); });
  expect_load_error(m, {"model.vocab must be an object, got array"});
}

// ---- GGUF: a small valid model.gguf (base_config's model, base_tokenizer's tokens) -----

GgufValue gguf_strings(std::vector<std::string> v) {
  GgufValue a;
  a.type = GgufType::ARRAY;
  a.elem = GgufType::STRING;
  a.count = v.size();
  a.strs = std::move(v);
  return a;
}

// The metadata of base_config as llama.cpp names it, minus `drop`, with `edit` applied.
GgufMetadata gguf_metadata(const std::string& drop = "",
                           const std::function<void(GgufMetadata&)>& edit = {}) {
  GgufMetadata m;
  m.emplace_back("general.architecture", gguf_string("qwen2"));
  m.emplace_back("qwen2.context_length", gguf_u32(256));
  m.emplace_back("qwen2.embedding_length", gguf_u32(64));
  m.emplace_back("qwen2.block_count", gguf_u32(1));
  m.emplace_back("qwen2.feed_forward_length", gguf_u32(128));
  m.emplace_back("qwen2.attention.head_count", gguf_u32(4));
  m.emplace_back("qwen2.attention.head_count_kv", gguf_u32(2));
  m.emplace_back("qwen2.attention.layer_norm_rms_epsilon", gguf_f32(1e-6f));
  m.emplace_back("qwen2.rope.freq_base", gguf_f32(10000.0f));
  std::vector<std::string> tokens;
  GgufValue types;
  types.type = GgufType::ARRAY;
  types.elem = GgufType::I32;
  for (int b = 0; b < 256; ++b) tokens.push_back(byte_level::byte_to_symbol(uint8_t(b)));
  tokens.push_back("<|end|>");
  tokens.push_back("ab");
  while (tokens.size() < 300) tokens.push_back(fmt::format("[PAD{}]", tokens.size()));
  for (size_t i = 0; i < tokens.size(); ++i) types.ints.push_back(i == 256 ? 3 : i < 258 ? 1 : 5);
  types.count = types.ints.size();
  m.emplace_back("tokenizer.ggml.model", gguf_string("gpt2"));
  m.emplace_back("tokenizer.ggml.pre", gguf_string("qwen2"));
  m.emplace_back("tokenizer.ggml.tokens", gguf_strings(tokens));
  m.emplace_back("tokenizer.ggml.token_type", types);
  m.emplace_back("tokenizer.ggml.merges", gguf_strings({"a b"}));
  m.emplace_back("tokenizer.ggml.eos_token_id", gguf_u32(256));
  if (edit) edit(m);
  std::erase_if(m, [&](const auto& kv) { return kv.first == drop; });
  return m;
}

void set_key(GgufMetadata& m, const std::string& key, GgufValue v) {
  for (auto& kv : m)
    if (kv.first == key) kv.second = std::move(v);
}

// base_config's tensors under GGUF names, F32 (2^-7, norms 1); `change` may alter one.
void write_gguf_model(const std::string& path, const GgufMetadata& meta,
                      const std::string& changed = "",
                      const std::function<void(TensorToWrite&)>& change = {}) {
  const ModelConfig c = parse_model_config(base_config().dump(), "config.json");
  std::vector<TensorToWrite> ts;
  for (const SyntheticTensor& s : synthetic_tensors(c)) {
    TensorToWrite t;
    t.name = gguf_tensor_name(s.name);
    t.dtype = DType::F32;
    t.shape = s.shape;
    if (t.name == changed && change) change(t);
    const float value = s.mean != 0 ? s.mean : 0.0078125f;
    t.fill_range = [value](uint8_t* dst, int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) std::memcpy(dst + 4 * i, &value, 4);
    };
    ts.push_back(std::move(t));
  }
  write_gguf(path, meta, ts);
}

void load_gguf_all(const std::string& path) {
  const ModelConfig c = load_model_config(path);
  const ModelWeights w = load_model_weights(c, path, full_shard(c));
  const std::string file = find_gguf_model(path);
  const Tokenizer tok = Tokenizer::from_json_text(gguf_tokenizer_json(open_gguf(file).gguf), file);
  ASSERT_EQ(w.layers.size(), size_t(c.num_layers));
  ASSERT_EQ(tok.encode("ab<|end|>"), (std::vector<int32_t>{257, 256}));
}

class MalformedGguf : public ::testing::Test {
 protected:
  TempDir dir{"malformed-gguf"};
  std::string path() const { return dir / "model.gguf"; }
  std::string bytes() const {
    std::ifstream in(path(), std::ios::binary);
    std::ostringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
  void put(const std::string& b) const {
    std::ofstream out(path(), std::ios::binary | std::ios::trunc);
    out.write(b.data(), std::streamsize(b.size()));
  }
  template <typename T>
  void patch(size_t at, T v) const {
    std::string b = bytes();
    std::memcpy(b.data() + at, &v, sizeof(T));
    put(b);
  }
  // Byte offset of the tensor entry's fields after its name: n_dims, then ne[n_dims],
  // then the type (u32) and the offset (u64).
  size_t tensor_entry(const std::string& name) const {
    const std::string b = bytes();
    const size_t p = b.find(name);
    EXPECT_NE(p, std::string::npos);
    return p + name.size();
  }
  // Loads it and expects an Error naming the file and every one of `parts`.
  void expect_error(const std::vector<std::string>& parts) const {
    try {
      load_gguf_all(path());
    } catch (const Error& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find(path()), std::string::npos) << "message: " << msg << "\nmissing the file";
      for (const std::string& p : parts)
        EXPECT_NE(msg.find(p), std::string::npos) << "message: " << msg << "\nmissing: " << p;
      return;
    }
    ADD_FAILURE() << "loaded without an Error; expected one mentioning '" << parts.front() << "'";
  }
  void SetUp() override {
    write_gguf_model(path(), gguf_metadata());
    ASSERT_NO_THROW(load_gguf_all(path()));
    ASSERT_NO_THROW(load_gguf_all(dir.str()));  // the directory form
  }
};

TEST_F(MalformedGguf, BadMagic) {
  patch<uint32_t>(0, 0x46554746);
  expect_error({"is not a GGUF file", "expected \"GGUF\""});
}

TEST_F(MalformedGguf, BadVersion) {
  patch<uint32_t>(4, 2);
  expect_error({"GGUF version 2 is not supported"});
  patch<uint32_t>(4, 0x03000000);  // a big-endian file
  expect_error({"version 50331648 is not supported", "big-endian"});
}

TEST_F(MalformedGguf, TruncatedHeader) {
  put(bytes().substr(0, 12));
  expect_error({"too short to be a GGUF file", "12 bytes"});
  write_gguf_model(path(), gguf_metadata());
  put(bytes().substr(0, 60));
  expect_error({"the header claims 15 metadata entries, more than the 36 bytes left can hold"});
  write_gguf_model(path(), gguf_metadata());
  put(bytes().substr(0, tensor_entry("blk.0.attn_q.weight") + 2));
  expect_error({"truncated at byte", "n_dims of tensor 'blk.0.attn_q.weight'"});
}

TEST_F(MalformedGguf, TensorDataOutsideTheFile) {
  const std::string b = bytes();
  put(b.substr(0, b.size() - 1000));
  expect_error({"lies outside the file"});
  write_gguf_model(path(), gguf_metadata());
  const size_t e = tensor_entry("blk.0.attn_q.weight");
  patch<uint64_t>(e + 4 + 16 + 4, uint64_t(1) << 40);  // its offset (aligned, far away)
  expect_error({"tensor 'blk.0.attn_q.weight'", "lies outside the file"});
}

TEST_F(MalformedGguf, UnknownTensorType) {
  const size_t e = tensor_entry("blk.0.attn_q.weight");
  patch<uint32_t>(e + 4 + 16, 12);
  expect_error({"tensor 'blk.0.attn_q.weight' has type Q4_K, which cpinfer does not read"});
  patch<uint32_t>(e + 4 + 16, 99);
  expect_error({"has type type 99"});
}

TEST_F(MalformedGguf, TooManyDimensions) {
  patch<uint32_t>(tensor_entry("blk.0.attn_q.weight"), 5);
  expect_error({"tensor 'blk.0.attn_q.weight' has 5 dimensions (allowed: 1 to 4)"});
}

TEST_F(MalformedGguf, AbsurdCountsAndLengths) {
  // Each of these would allocate terabytes if believed.
  patch<uint64_t>(8, uint64_t(1) << 60);
  expect_error({"claims 1152921504606846976 tensors"});
  write_gguf_model(path(), gguf_metadata());
  patch<uint64_t>(16, uint64_t(1) << 61);
  expect_error({"claims 2305843009213693952 metadata entries"});
  write_gguf_model(path(), gguf_metadata());
  patch<uint64_t>(24, uint64_t(1) << 62);  // the first key's length
  expect_error({"the key of metadata entry 0", "claims 4611686018427387904 bytes"});
  write_gguf_model(path(), gguf_metadata());
  const std::string b = bytes();
  const size_t tokens = b.find("tokenizer.ggml.tokens") + 21;  // then u32 ARRAY, u32 STRING, u64 n
  patch<uint64_t>(tokens + 8, uint64_t(1) << 58);
  expect_error({"array 'tokenizer.ggml.tokens' claims 288230376151711744 elements"});
  write_gguf_model(path(), gguf_metadata());
  patch<uint64_t>(tokens + 16, uint64_t(1) << 50);  // the first token's length
  expect_error({"element 0 of 'tokenizer.ggml.tokens'", "claims 1125899906842624 bytes"});
  write_gguf_model(path(), gguf_metadata());
  const size_t e = tensor_entry("blk.0.attn_q.weight");
  patch<uint64_t>(e + 4, uint64_t(1) << 49);  // ne[0]
  expect_error({"tensor 'blk.0.attn_q.weight'", "are absurd"});
}

TEST_F(MalformedGguf, MissingOrWrongKeys) {
  write_gguf_model(path(), gguf_metadata("qwen2.embedding_length"));
  expect_error({"required metadata key 'qwen2.embedding_length' is missing"});
  write_gguf_model(path(), gguf_metadata("general.architecture"));
  expect_error({"required metadata key 'general.architecture' is missing"});
  write_gguf_model(path(), gguf_metadata("", [](GgufMetadata& m) {
    set_key(m, "general.architecture", gguf_string("gemma"));
  }));
  expect_error({"general.architecture is 'gemma'", "supported: llama, qwen2, qwen3"});
  write_gguf_model(path(), gguf_metadata("", [](GgufMetadata& m) {
    set_key(m, "qwen2.block_count", gguf_string("one"));
  }));
  expect_error({"metadata key 'qwen2.block_count' must be an integer, found string"});
  write_gguf_model(path(), gguf_metadata("", [](GgufMetadata& m) {
    set_key(m, "qwen2.attention.head_count", gguf_u32(0));
  }));
  expect_error({"num_attention_heads' must be positive"});
  write_gguf_model(path(), gguf_metadata("", [](GgufMetadata& m) {
    m.emplace_back("general.alignment", gguf_u32(3));
  }));
  expect_error({"general.alignment must be a power of two"});
}

// rope.scaling.attn_factor multiplies YaRN's default attention factor in llama.cpp, so
// config.json's attention_factor is their product; with another scaling type it is refused.
TEST_F(MalformedGguf, RopeScalingAttnFactor) {
  auto yarn = [](float attn) {
    return [attn](GgufMetadata& m) {
      m.emplace_back("qwen2.rope.scaling.type", gguf_string("yarn"));
      m.emplace_back("qwen2.rope.scaling.factor", gguf_f32(4.0f));
      m.emplace_back("qwen2.rope.scaling.original_context_length", gguf_u32(64));
      m.emplace_back("qwen2.rope.scaling.attn_factor", gguf_f32(attn));
    };
  };
  write_gguf_model(path(), gguf_metadata("", yarn(1.25f)));
  const ModelConfig c = load_model_config(path());
  EXPECT_EQ(c.rope_scaling.type, "yarn");
  ASSERT_TRUE(c.rope_scaling.attention_factor.has_value());
  EXPECT_NEAR(*c.rope_scaling.attention_factor, 1.25 * (0.1 * std::log(4.0) + 1.0), 1e-12);
  EXPECT_NEAR(*c.rope_scaling.attention_factor, 1.4233, 1e-4);  // the reader's worked example
  write_gguf_model(path(), gguf_metadata("", yarn(0.0f)));
  expect_error({"rope_scaling.attention_factor' must be positive, found 0"});
  write_gguf_model(path(), gguf_metadata("", [](GgufMetadata& m) {
    m.emplace_back("qwen2.rope.scaling.type", gguf_string("linear"));
    m.emplace_back("qwen2.rope.scaling.factor", gguf_f32(2.0f));
    m.emplace_back("qwen2.rope.scaling.attn_factor", gguf_f32(2.0f));
  }));
  expect_error({"qwen2.rope.scaling.attn_factor is 2 with rope scaling 'linear'",
                "yarn only"});
}

TEST_F(MalformedGguf, UnsupportedTokenizer) {
  write_gguf_model(path(), gguf_metadata("", [](GgufMetadata& m) {
    set_key(m, "tokenizer.ggml.model", gguf_string("llama"));
  }));
  expect_error({"tokenizer.ggml.model is 'llama'", "SentencePiece"});
  write_gguf_model(path(), gguf_metadata("", [](GgufMetadata& m) {
    set_key(m, "tokenizer.ggml.pre", gguf_string("deepseek-llm"));
  }));
  expect_error({"tokenizer.ggml.pre is 'deepseek-llm'; supported: qwen2, llama-bpe"});
  write_gguf_model(path(), gguf_metadata("", [](GgufMetadata& m) {
    set_key(m, "tokenizer.ggml.merges", gguf_strings({"a"}));
  }));
  expect_error({"model.merges[0]"});
}

TEST_F(MalformedGguf, WrongShapedTensor) {
  write_gguf_model(path(), gguf_metadata(), "blk.0.attn_q.weight",
                   [](TensorToWrite& t) { t.shape = {32, 64}; });
  expect_error({"tensor 'model.layers.0.self_attn.q_proj.weight'", "has shape [32, 64], "
                "expected [64, 64]"});
  write_gguf_model(path(), gguf_metadata(), "token_embd.weight",
                   [](TensorToWrite& t) { t.shape = {300, 64, 1}; });
  expect_error({"token_embd.weight' is missing or not a matrix"});
}

TEST_F(MalformedGguf, MisalignedOffset) {
  const size_t e = tensor_entry("blk.0.attn_k.weight");
  uint64_t off;
  std::memcpy(&off, bytes().data() + e + 4 + 16 + 4, 8);
  patch<uint64_t>(e + 4 + 16 + 4, off + 4);
  expect_error({"tensor 'blk.0.attn_k.weight'", "data offset", "is not a multiple of the "
                "alignment 32"});
}

TEST_F(MalformedGguf, OverlappingTensors) {
  const size_t q = tensor_entry("blk.0.attn_q.weight"), k = tensor_entry("blk.0.attn_k.weight");
  uint64_t off;
  std::memcpy(&off, bytes().data() + q + 4 + 16 + 4, 8);
  patch<uint64_t>(k + 4 + 16 + 4, off);
  expect_error({"overlap"});
}

}  // namespace
}  // namespace cpinfer
