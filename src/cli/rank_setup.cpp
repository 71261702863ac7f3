#include "cli/rank_setup.h"

#include <filesystem>

#include "core/cpu_features.h"
#include "core/error.h"
#include "model/gguf.h"

namespace cpinfer {

namespace {
ModelConfig load_checked_config(const std::string& model_dir) {
  CPI_CHECK(std::filesystem::is_directory(model_dir) ||
                (std::filesystem::is_regular_file(model_dir) && has_gguf_extension(model_dir)),
            "model directory '{}' does not exist (make one with `cpinfer make-model`)",
            model_dir);
  return load_model_config(model_dir);
}
}  // namespace

void check_model_layout(const std::string& model_dir, const LayoutSpec& spec) {
  const ModelConfig config = load_checked_config(model_dir);
  validate_layout(spec, config.num_q_heads, config.num_kv_heads);
}

RankModel setup_rank(const std::string& model_dir, const LayoutSpec& spec, Comm& comm) {
  ModelConfig config = load_checked_config(model_dir);
  RankModel m{config, ParallelLayout(spec, config.num_q_heads, config.num_kv_heads, comm.rank())};
  comm.set_layout(m.layout);
  return m;
}

DType resolve_kv_dtype(const std::string& flag, const std::string& model_dtype) {
  if (flag == "auto") return model_dtype == "bfloat16" ? DType::BF16 : DType::F32;
  if (flag == "f32") return DType::F32;
  if (flag == "bf16") return DType::BF16;
  fail("--kv-cache-dtype '{}' is not one of auto, f32, bf16", flag);
}

void add_quantization_flag(CLI::App* cmd, std::string* value) {
  cmd->add_option("--quantization", *value,
                  "Weights at load: none (the checkpoint's dtype) or int8 (Q8_0: per block of "
                  "32 input features, int8 values and one f16 scale; linear layers, LM head and "
                  "embedding)")
      ->capture_default_str()
      ->check(CLI::IsMember({"none", "int8"}));
}

void add_bf16_math_flag(CLI::App* cmd) {
  cmd->add_option_function<std::string>(
         "--bf16-math",
         [](const std::string& v) {
           set_bf16_math(v == "dot" ? Bf16Math::Dot : v == "exact" ? Bf16Math::F32 : Bf16Math::Auto);
         },
         "How bf16 data is multiplied where a kernel can choose (prefill GEMMs over bf16 "
         "weights, attention over a bf16 KV cache): dot (bf16 dot products, "
         "AVX512_BF16; activations rounded to bf16), exact (f32 arithmetic on the stored "
         "values) or auto (dot on CPUs whose bf16 dot unit is the faster one: AMD Zen 4 and "
         "later; exact elsewhere)")
      ->default_str("auto")
      ->check(CLI::IsMember({"auto", "dot", "exact"}));
}

void add_int8_math_flag(CLI::App* cmd) {
  cmd->add_option_function<std::string>(
         "--int8-math",
         [](const std::string& v) {
           set_int8_math(v == "dot" ? Int8Math::Dot : v == "exact" ? Int8Math::F32 : Int8Math::Auto);
         },
         "How activations meet int8 (Q8_0) weights (--quantization int8 or a Q8_0 GGUF file): "
         "dot (activations quantized to int8 per block of 32 with an f32 scale, int8 dot "
         "products: AVX512_VNNI in decode), exact (f32 arithmetic on the stored weights) or "
         "auto (dot on CPUs with AVX512_VNNI; exact elsewhere)")
      ->default_str("auto")
      ->check(CLI::IsMember({"auto", "dot", "exact"}));
}

}  // namespace cpinfer
