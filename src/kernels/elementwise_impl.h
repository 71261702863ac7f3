// Internal: the per-ISA row kernels behind rms_norm, add_rms_norm, silu_mul and rope_apply.
// elementwise.cpp checks arguments, splits rows across the pool and calls one table
// (elementwise_generic.cpp, elementwise_avx2.cpp, elementwise_avx512.cpp) by active_isa().
#pragma once
#include <cmath>
#include <cstdint>

#include "core/dtype.h"

namespace cpinfer::elementwise_impl {

struct Kernels {
  // sum_i x[i]^2 over x[0:d], accumulated in double.
  double (*sum_squares)(const float* x, int64_t d);
  // r[0:d] += x[0:d] (in f32); returns sum_i r[i]^2 of the updated r, in double.
  double (*add_sum_squares)(float* r, const float* x, int64_t d);
  // y[0:d] = (x[0:d] * s) * w[0:d], w of dtype F32/BF16/F16 widened in registers.
  // y may alias x.
  void (*scale_mul)(const float* x, float s, const void* w, DType w_dtype, int64_t d, float* y);
  // out[0:F] = silu(g[0:F]) * u[0:F], silu(g) = g / (1 + exp(-g)).
  void (*silu_mul)(const float* g, const float* u, int64_t F, float* out);
  // One token of rotate-half RoPE in place: x[heads, head_dim] contiguous, cos/sin[half].
  void (*rope)(float* x, int64_t heads, int64_t head_dim, const float* cos, const float* sin);
};

// The RMSNorm scale 1 / sqrt(sum_sq / d + eps), in double, rounded once to float.
inline float inv_rms(double sum_sq, int64_t d, double eps) {
  return float(1.0 / std::sqrt(sum_sq / double(d) + eps));
}

const Kernels& generic_kernels();
const Kernels& avx2_kernels();
const Kernels& avx512_kernels();
// The table of the active ISA (core/cpu_features.h).
const Kernels& active_kernels();

}  // namespace cpinfer::elementwise_impl
