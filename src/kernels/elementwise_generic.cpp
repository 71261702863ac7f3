// Portable elementwise row kernels (baseline x86-64; the loops vectorise with SSE2).
#include <cmath>

#include "kernels/elementwise_impl.h"
#include "kernels/elementwise_loops.h"

namespace cpinfer::elementwise_impl {

namespace {

double sum_squares(const float* x, int64_t d) {
  double acc[4] = {0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 4 <= d; i += 4)
    for (int j = 0; j < 4; ++j) acc[j] += double(x[i + j]) * double(x[i + j]);
  for (; i < d; ++i) acc[0] += double(x[i]) * double(x[i]);
  return (acc[0] + acc[1]) + (acc[2] + acc[3]);
}

double add_sum_squares(float* r, const float* x, int64_t d) {
  for (int64_t i = 0; i < d; ++i) r[i] += x[i];
  return sum_squares(r, d);
}

inline float half_to_float(uint16_t h) {
  uint32_t em = h & 0x7fffu;
  float f = bits_to_float(em << 13) * 0x1p112f;
  uint32_t bits = float_to_bits(f) | (em >= 0x7c00u ? 0x7f800000u : 0u);
  return bits_to_float(bits | (uint32_t(h & 0x8000u) << 16));
}

void scale_mul(const float* x, float s, const void* w, DType w_dtype, int64_t d, float* y) {
  if (w_dtype == DType::F32) {
    const auto* wf = static_cast<const float*>(w);
    for (int64_t i = 0; i < d; ++i) y[i] = (x[i] * s) * wf[i];
  } else if (w_dtype == DType::BF16) {
    const auto* wb = static_cast<const uint16_t*>(w);
    for (int64_t i = 0; i < d; ++i) y[i] = (x[i] * s) * bits_to_float(uint32_t(wb[i]) << 16);
  } else {
    const auto* wh = static_cast<const uint16_t*>(w);
    for (int64_t i = 0; i < d; ++i) y[i] = (x[i] * s) * half_to_float(wh[i]);
  }
}

void silu_mul(const float* g, const float* u, int64_t F, float* out) {
  for (int64_t i = 0; i < F; ++i) out[i] = g[i] / (1.0f + std::exp(-g[i])) * u[i];
}

void rope(float* x, int64_t heads, int64_t head_dim, const float* cos, const float* sin) {
  rope_plain(x, heads, head_dim, cos, sin);
}

}  // namespace

const Kernels& generic_kernels() {
  static const Kernels k{sum_squares, add_sum_squares, scale_mul, silu_mul, rope};
  return k;
}

}  // namespace cpinfer::elementwise_impl
