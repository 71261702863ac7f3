// RoPE inverse frequencies and attention factor per rope_scaling type, on the worked
// examples of src/model/rope.cpp (the full forward pass is checked against the float64
// reference in forward_reference_rope_scaling_test).
#include <gtest/gtest.h>

#include <cmath>

#include "model/rope.h"
#include "model/synthetic_model.h"

namespace cpinfer {
namespace {

double plain(const ModelConfig& c, int64_t i) {
  return std::pow(c.rope_theta, -double(2 * i) / double(c.head_dim));
}

// Qwen2.5-7B's YaRN block: dim(32) = 23.6 -> 23, dim(1) = 39.7 -> 40.
TEST(Rope, YarnQwen25_7b) {
  const ModelConfig c = preset_config("qwen2.5-7b-yarn");
  const std::vector<double> inv = rope_inv_freq(c);
  ASSERT_EQ(inv.size(), 64u);
  for (int64_t i = 0; i <= 23; ++i) EXPECT_DOUBLE_EQ(inv[size_t(i)], plain(c, i)) << i;
  for (int64_t i = 40; i < 64; ++i) EXPECT_DOUBLE_EQ(inv[size_t(i)], plain(c, i) / 4) << i;
  const double r = 7.0 / 17.0;  // pair 30 on the ramp from 23 to 40
  EXPECT_NEAR(inv[30] / plain(c, 30), (1 - r) + r / 4, 1e-12);
  EXPECT_NEAR(rope_attention_factor(c), 0.1 * std::log(4.0) + 1, 1e-15);
  EXPECT_NEAR(rope_attention_factor(c), 1.1386294, 1e-7);
}

TEST(Rope, YarnUntruncatedAndAttentionFactors) {
  ModelConfig c = preset_config("qwen2.5-7b-yarn");
  c.rope_scaling.truncate = false;
  const double lo = 128 * std::log(32768 / (2 * M_PI * 32)) / (2 * std::log(1e6));
  const double hi = 128 * std::log(32768 / (2 * M_PI * 1)) / (2 * std::log(1e6));
  EXPECT_NEAR(lo, 23.596, 1e-3);
  EXPECT_NEAR(hi, 39.651, 1e-3);
  const std::vector<double> inv = rope_inv_freq(c);
  EXPECT_DOUBLE_EQ(inv[23], plain(c, 23));  // 23 < lo: not on the ramp yet
  const double r = (24 - lo) / (hi - lo);
  EXPECT_NEAR(inv[24] / plain(c, 24), (1 - r) + r / 4, 1e-12);
  EXPECT_DOUBLE_EQ(inv[40], plain(c, 40) / 4);
  // mscale / mscale_all_dim (DeepSeek): m(4, 0.7) / m(4, 0.9).
  c.rope_scaling.mscale = 0.7;
  c.rope_scaling.mscale_all_dim = 0.9;
  const double l4 = std::log(4.0);
  EXPECT_NEAR(rope_attention_factor(c), (0.07 * l4 + 1) / (0.09 * l4 + 1), 1e-15);
  c.rope_scaling.mscale_all_dim = 0;  // one of them alone: the plain default
  EXPECT_NEAR(rope_attention_factor(c), 0.1 * l4 + 1, 1e-15);
  c.rope_scaling.attention_factor = 1.5;  // given: used as is
  EXPECT_EQ(rope_attention_factor(c), 1.5);
  c.rope_scaling.attention_factor.reset();
  c.rope_scaling.factor = 1.0;  // no scaling: factor 1
  EXPECT_EQ(rope_attention_factor(c), 1.0);
}

TEST(Rope, LinearDefaultAndLlama3) {
  ModelConfig c = preset_config("tiny");
  const std::vector<double> def = rope_inv_freq(c);
  for (int64_t i = 0; i < c.head_dim / 2; ++i) EXPECT_DOUBLE_EQ(def[size_t(i)], plain(c, i));
  EXPECT_EQ(rope_attention_factor(c), 1.0);
  c.rope_scaling.type = "linear";
  c.rope_scaling.factor = 4.0;
  const std::vector<double> lin = rope_inv_freq(c);
  for (int64_t i = 0; i < c.head_dim / 2; ++i) EXPECT_DOUBLE_EQ(lin[size_t(i)], def[size_t(i)] / 4);
  EXPECT_EQ(rope_attention_factor(c), 1.0);
  const ModelConfig l = preset_config("llama-3.2-1b");  // factor 32, 8192, 1 / 4
  const std::vector<double> inv = rope_inv_freq(l);
  EXPECT_DOUBLE_EQ(inv[0], 1.0);  // wavelength 2 pi: kept
  EXPECT_DOUBLE_EQ(inv[31], plain(l, 31) / 32);  // wavelength > 8192: slowed by factor
  EXPECT_EQ(rope_attention_factor(l), 1.0);
}

}  // namespace
}  // namespace cpinfer
