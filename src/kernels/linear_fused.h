// Linear layers that read the same input, run as one pass over the thread pool: the
// q / k / v projections, and gate / up with SiLU-and-multiply applied to each task's
// columns while they are still in cache (no separate pass over the [M, 2F] activations).
// Same kernels, same per-element arithmetic as linear(): results are identical to calling
// linear() per part.
#pragma once
#include <cstdint>
#include <span>

#include "kernels/linear.h"

namespace cpinfer {

// One output of a fused linear: y[M, w.rows] (row stride ldy) = x · w^T (+ bias).
struct LinearPart {
  WeightView w;
  const float* bias = nullptr;  // [w.rows] or null
  float* y = nullptr;
  int64_t ldy = 0;
  bool rope = false;  // apply the RotaryEpilogue to this part's heads (w.rows % head_dim == 0)
  // With `rope`: RMSNorm each head over its head_dim values with this weight [head_dim]
  // before rotating it (Qwen3's q_norm / k_norm), eps from the epilogue. Null: no norm.
  const float* head_norm = nullptr;
};

// RoPE applied by each task to the heads it has just computed, while they are in cache
// (what rope_apply(y, M, w.rows / head_dim, head_dim, ldy, cos, sin) does afterwards, with
// the same kernel: bitwise the same result). cos, sin: [M, head_dim / 2] from rope_tables.
struct RotaryEpilogue {
  const float* cos = nullptr;
  const float* sin = nullptr;
  int64_t head_dim = 0;
  double norm_eps = 1e-6;  // the per-head RMSNorm's epsilon (parts with head_norm)
};

// Every part over the same x[M, K] (all parts have K columns). The output rows of all parts
// are split into tasks together, so small parts (k, v: 2 heads) do not each pay for a pool
// round of their own. Throws Error like linear() for bad shapes, or when K differs.
// Allocates nothing. With `rope`, tasks own whole heads (units of head_dim rows) and rotate
// the parts marked `rope` in their epilogue.
void linear_fused(const float* x, int64_t M, int64_t ldx, std::span<const LinearPart> parts,
                  ThreadPool& pool, const RotaryEpilogue* rope = nullptr);

// gate, up: [F, K]. gu: [M, 2F] scratch (gate columns, then up columns, per row, as
// silu_mul's input; its contents afterwards are unspecified: the fused bf16-dot kernel
// keeps the last K block in registers); act[M, F] = silu(x · gate^T) * (x · up^T), bit for
// bit linear() of each then silu_mul. Each task computes a block of columns of both and
// then their product.
void linear_gate_up_silu(const float* x, int64_t M, int64_t ldx, const WeightView& gate,
                         const WeightView& up, float* gu, float* act, ThreadPool& pool);

}  // namespace cpinfer
