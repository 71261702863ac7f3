#include "model/rope.h"

#include <cmath>

#include "core/error.h"

namespace cpinfer {

std::vector<double> rope_inv_freq(const ModelConfig& c) {
  const int64_t half = c.head_dim / 2;
  std::vector<double> inv(static_cast<size_t>(half));
  for (int64_t i = 0; i < half; ++i)
    inv[size_t(i)] = 1.0 / std::pow(c.rope_theta, double(2 * i) / double(c.head_dim));
  const RopeScaling& s = c.rope_scaling;
  if (s.type == "default") return inv;
  CPI_CHECK(s.type == "llama3", "unsupported rope_scaling type '{}'", s.type);
  // Llama 3: long wavelengths (low frequencies) are slowed by `factor`, short ones kept,
  // and the band between is interpolated smoothly in 1/wavelen.
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
  return inv;
}

}  // namespace cpinfer
