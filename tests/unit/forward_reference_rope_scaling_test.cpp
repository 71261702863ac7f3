// rope_scaling (linear, llama3, yarn with its options) on one rank against the float64
// reference model, at positions past original_max_position_embeddings: a small Qwen2 model
// whose config.json is rewritten per case (the weights are shared through symlinks).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "model/model_config.h"
#include "model/rope.h"
#include "model/synthetic_model.h"
#include "support/reference_compare.h"
#include "support/test_models.h"

namespace cpinfer {
namespace {

namespace fs = std::filesystem;
constexpr double kTol = 1e-4;  // engine logits within 1e-4 of float64 (f32 weights)

ModelConfig small_qwen2() {
  ModelConfig c = testing::small_config("tiny");
  c.head_dim = 64;
  c.rope_theta = 10000.0;
  return c;
}

// A model directory with small_qwen2's weights and `c`'s config.json.
std::string with_config(const ModelConfig& c, const std::string& tag) {
  static const std::string base = testing::test_model_config("qwen2-rope", small_qwen2(),
                                                             DType::F32);
  const fs::path dir = testing::make_temp_dir("rope-" + tag);
  for (const char* f : {"model.safetensors", "tokenizer.json", "tokenizer_config.json",
                        "generation_config.json"})
    fs::create_symlink(fs::path(base) / f, dir / f);
  std::ofstream(dir / "config.json") << model_config_to_json(c).dump(2);
  return dir.string();
}

struct RopeCase {
  std::string name;
  RopeScaling scaling;
  double theta = 10000.0;
  int64_t head_dim = 64;
};

RopeScaling yarn(double factor, int64_t original_max) {
  RopeScaling s;
  s.type = "yarn";
  s.factor = factor;
  s.original_max_position_embeddings = original_max;
  return s;
}

std::vector<RopeCase> cases() {
  std::vector<RopeCase> v;
  // Defaults (betas 32 / 1, attention factor 0.1 ln 4 + 1): ramp over pairs 0..9 of 32.
  v.push_back({"yarn_defaults", yarn(4.0, 64)});
  // Untruncated ramp between its own betas, DeepSeek's mscale ratio.
  RopeScaling s = yarn(8.0, 48);
  s.beta_fast = 16;
  s.beta_slow = 2;
  s.mscale = 0.8;
  s.mscale_all_dim = 0.5;
  s.truncate = false;
  v.push_back({"yarn_mscale_untruncated", s});
  s = yarn(2.0, 32);
  s.attention_factor = 1.25;
  v.push_back({"yarn_attention_factor", s});
  // Qwen2.5-7B's block (make-model's qwen2.5-7b-yarn) with its theta and head_dim.
  const ModelConfig q7 = preset_config("qwen2.5-7b-yarn");
  v.push_back({"qwen2_5_7b_yarn_block", q7.rope_scaling, q7.rope_theta, q7.head_dim});
  s = RopeScaling{};
  s.type = "linear";
  s.factor = 3.0;
  v.push_back({"linear", s});
  s = RopeScaling{"llama3", 8.0, 1.0, 4.0, 64};
  v.push_back({"llama3", s});
  return v;
}

class RopeScalingReference : public ::testing::TestWithParam<RopeCase> {
 protected:
  void SetUp() override {
    ModelConfig c = small_qwen2();
    c.rope_scaling = GetParam().scaling;
    c.rope_theta = GetParam().theta;
    c.head_dim = GetParam().head_dim;
    dir_ = GetParam().head_dim == 64
               ? with_config(c, GetParam().name)
               : testing::test_model_config("qwen2-rope-" + GetParam().name, c, DType::F32);
    // The config read back is the case's (the config.json path users take).
    const ModelConfig back = load_model_config(dir_);
    EXPECT_EQ(back.rope_scaling.type, c.rope_scaling.type);
    EXPECT_EQ(rope_inv_freq(back), rope_inv_freq(c));
    EXPECT_EQ(rope_attention_factor(back), rope_attention_factor(c));
  }
  void TearDown() override {
    if (GetParam().head_dim == 64) fs::remove_all(dir_);
  }
  std::string dir_;
};

// One prefill of 200 tokens: rows before, at and well past original_max (32..64).
TEST_P(RopeScalingReference, PrefillPastOriginalContext) {
  const double d = testing::prefill_vs_reference(dir_, 200, {0, 31, 63, 64, 130, 199}, 5);
  EXPECT_LE(d, kTol);
  std::printf("%s prefill: max |engine - reference| = %.3g\n", GetParam().name.c_str(), d);
}

// Chunks attending to cached keys written at other positions, then decode steps.
TEST_P(RopeScalingReference, ChunkedPrefillThenDecode) {
  const double d = testing::chunked_decode_vs_reference(dir_, 150, 40, 4, 6);
  EXPECT_LE(d, kTol);
  std::printf("%s chunked + decode: max |engine - reference| = %.3g\n", GetParam().name.c_str(),
              d);
}

INSTANTIATE_TEST_SUITE_P(Types, RopeScalingReference, ::testing::ValuesIn(cases()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace cpinfer
