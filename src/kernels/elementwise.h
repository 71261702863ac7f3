// Normalisation, activations and RoPE. All f32, row-major.
#pragma once
#include <cstdint>

#include "core/dtype.h"
#include "core/thread_pool.h"

namespace cpinfer {

// y[n, d] = x[n, d] / sqrt(mean(x^2) + eps) * w[d]; w is f32/bf16/f16. y may alias x.
void rms_norm(const float* x, const void* w, DType w_dtype, int64_t n, int64_t d, double eps,
              float* y, ThreadPool& pool);

// Fused residual add + norm: r[n, d] += x[n, d]; y = rms_norm(r). (y may alias x.)
void add_rms_norm(float* r, const float* x, const void* w, DType w_dtype, int64_t n, int64_t d,
                  double eps, float* y, ThreadPool& pool);

// out[n, f] = silu(gu[n, f]) * gu[n, F + f] where gu is [n, 2F] (gate then up), f < F.
void silu_mul(const float* gu, int64_t n, int64_t F, float* out, ThreadPool& pool);

// Rotary tables for one step: cos/sin[n, half] of angle pos[i] * inv_freq[j], computed
// in double precision and multiplied by `scale` (YaRN's attention factor; 1 otherwise).
// inv_freq[half] (half = head_dim / 2) has any rope scaling applied.
void rope_tables(const int32_t* pos, int64_t n, const double* inv_freq, int64_t half,
                 float* cos_out, float* sin_out, double scale = 1.0);

// Rotary embedding, Hugging Face rotate-half convention, in place on x[n, heads, head_dim]
// (row stride `ld` floats between tokens), with the tables from rope_tables:
//   x1 = x[..., :D/2], x2 = x[..., D/2:]; out = [x1*cos - x2*sin, x2*cos + x1*sin]
void rope_apply(float* x, int64_t n, int64_t heads, int64_t head_dim, int64_t ld,
                const float* cos, const float* sin, ThreadPool& pool);

}  // namespace cpinfer
