#include "model/rope.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace cpinfer {

namespace {

// Llama 3: long wavelengths (low frequencies) are slowed by `factor`, short ones kept,
// and the band between is interpolated smoothly in 1/wavelen.
void scale_llama3(const RopeScaling& s, std::vector<double>& inv) {
  const double old_ctx = double(s.original_max_position_embeddings);
  const double low_wavelen = old_ctx / s.low_freq_factor;
  const double high_wavelen = old_ctx / s.high_freq_factor;
  for (double& f : inv) {
    double wavelen = 2.0 * M_PI / f;
    if (wavelen < high_wavelen) continue;
    if (wavelen > low_wavelen) {
      f /= s.factor;
      continue;
    }
    double smooth = (old_ctx / wavelen - s.low_freq_factor) /
                    (s.high_freq_factor - s.low_freq_factor);
    f = (1.0 - smooth) * f / s.factor + smooth * f;
  }
}

// YaRN ("NTK-by-parts"), with Hugging Face's parameters. Pair i of D / 2 turns
// L / wavelen_i times over the original context L = original_max_position_embeddings;
// solving L * theta^(-2i/D) / (2 pi) = r for i gives the pair that turns r times:
//   dim(r) = D * ln(L / (2 pi r)) / (2 ln theta).
// Pairs below dim(beta_fast) (fast, many turns) keep their frequency, pairs above
// dim(beta_slow) (fewer than one turn) are divided by `factor` as in linear scaling, and
// a linear ramp blends the two between. With truncate the bounds are rounded outwards to
// whole pairs; they are clamped to [0, D - 1].
// Example, Qwen2.5-7B (D 128, theta 1e6, L 32768, factor 4, betas 32 / 1): dim(32) = 23.6,
// dim(1) = 39.7 -> low 23, high 40: pairs 0..23 keep theta^(-2i/D), pairs 40..63 get a
// quarter of it, pair 30 gets (1 - 7/17) + (7/17) / 4 = 0.69 of it.
void scale_yarn(const RopeScaling& s, double theta, int64_t D, std::vector<double>& inv) {
  const double L = double(s.original_max_position_embeddings);
  auto dim_of = [&](double rotations) {
    return double(D) * std::log(L / (2.0 * M_PI * rotations)) / (2.0 * std::log(theta));
  };
  double low = dim_of(s.beta_fast), high = dim_of(s.beta_slow);
  if (s.truncate) {
    low = std::floor(low);
    high = std::ceil(high);
  }
  low = std::max(low, 0.0);
  high = std::min(high, double(D - 1));
  if (low == high) high += 0.001;  // as Hugging Face does, to avoid dividing by zero
  for (size_t i = 0; i < inv.size(); ++i) {
    // ramp 0: keep the frequency (extrapolate); ramp 1: divide it by factor (interpolate).
    const double ramp = std::clamp((double(i) - low) / (high - low), 0.0, 1.0);
    inv[i] = inv[i] * (1.0 - ramp) + inv[i] / s.factor * ramp;
  }
}

// YaRN's m(scale, mscale) = 0.1 * mscale * ln(scale) + 1 for scale > 1, else 1.
double yarn_mscale(double scale, double mscale) {
  return scale <= 1.0 ? 1.0 : 0.1 * mscale * std::log(scale) + 1.0;
}

}  // namespace

std::vector<double> rope_inv_freq(const ModelConfig& c) {
  const int64_t half = c.head_dim / 2;
  std::vector<double> inv(static_cast<size_t>(half));
  for (int64_t i = 0; i < half; ++i)
    inv[size_t(i)] = 1.0 / std::pow(c.rope_theta, double(2 * i) / double(c.head_dim));
  const RopeScaling& s = c.rope_scaling;
  if (s.type == "linear") {
    // Positions divided by factor, which is the same as frequencies divided by it.
    for (double& f : inv) f /= s.factor;
  } else if (s.type == "llama3") {
    scale_llama3(s, inv);
  } else if (s.type == "yarn") {
    scale_yarn(s, c.rope_theta, c.head_dim, inv);
  } else if (s.type != "default") {
    fail("unsupported rope_scaling type '{}' (supported: default, linear, llama3, yarn)",
         s.type);
  }
  if (!s.freq_factors.empty()) {
    CPI_CHECK(int64_t(s.freq_factors.size()) == half, "rope frequency factors: {} values for "
              "head_dim {} (expected {})", s.freq_factors.size(), c.head_dim, half);
    for (int64_t i = 0; i < half; ++i) inv[size_t(i)] /= s.freq_factors[size_t(i)];
  }
  return inv;
}

// YaRN: the given attention_factor; else m(factor, mscale) / m(factor, mscale_all_dim) when
// both are set (DeepSeek's configs), else m(factor, 1). Example: factor 4 -> 0.1 * ln 4 + 1
// = 1.1386, so every attention logit is multiplied by 1.1386^2 = 1.296.
double rope_attention_factor(const ModelConfig& c) {
  const RopeScaling& s = c.rope_scaling;
  if (s.type != "yarn") return 1.0;
  if (s.attention_factor) return *s.attention_factor;
  if (s.mscale != 0.0 && s.mscale_all_dim != 0.0)
    return yarn_mscale(s.factor, s.mscale) / yarn_mscale(s.factor, s.mscale_all_dim);
  return yarn_mscale(s.factor, 1.0);
}

double yarn_default_attention_factor(double factor) { return yarn_mscale(factor, 1.0); }

}  // namespace cpinfer
