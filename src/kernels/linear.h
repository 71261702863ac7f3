// Linear layers: y[M, N] = x[M, K] · W[N, K]^T (+ bias[N]).
// W is the Hugging Face nn.Linear weight, row-major [out_features=N, in_features=K],
// kept in the file's dtype (f32, bf16 or f16), or quantized to Q8_0 at load
// (kernels/quantize.h), and widened to f32 in registers: x and y stay f32. Two exceptions:
// linear layers over bf16 weights may use bf16 dot products with x rounded to bf16, and
// those over Q8_0 weights int8 dot products with x quantized per 32-element block (the
// process-wide bf16 and int8 math below).
#pragma once
#include <cstdint>
#include <string_view>

#include "core/cpu_features.h"
#include "core/dtype.h"
#include "core/thread_pool.h"

namespace cpinfer {

struct WeightView {
  const void* data = nullptr;  // [rows, cols] row-major, row stride `ld` elements
  DType dtype = DType::F32;
  int64_t rows = 0;            // N (output features)
  int64_t cols = 0;            // K (input features)
  int64_t ld = 0;              // elements between rows (== cols when contiguous; Q8_0: a
                               // multiple of 32, as cols)
};

// x: [M, K] f32, row stride ldx; y: [M, N] f32, row stride ldy; bias: [N] f32 or null.
// y must not overlap x or W. Uses the active ISA (core/cpu_features.h) and every thread of
// `pool`: a GEMV that streams W once for small M (decode), a packed, blocked GEMM otherwise
// (prefill). Throws Error on a bad dtype or shape (ld < cols, ldx < K, ldy < N, ...).
void linear(const float* x, int64_t M, int64_t ldx, const WeightView& w, const float* bias,
            float* y, int64_t ldy, ThreadPool& pool);

// The prefill GEMM (M beyond the decode kernels' range) over bf16 weights follows the
// process-wide bf16 math (core/cpu_features.h): Dot rounds x to bf16 and uses vdpbf16ps
// (AVX512_BF16 with the AVX-512 kernels active; elsewhere the f32 GEMM runs), F32 widens
// the weights and uses f32 FMAs (exact on the stored weights), Auto (the default) is Dot
// where bf16_dot_preferred(). Decode-sized M always runs the f32 kernels. Example: on
// Zen 4, a 2048-token prefill of a bf16 model runs its linear layers as bf16 dot products.
// Whether a prefill-sized GEMM over weights of `dt` runs on bf16 dot products now (the
// setting above, the active ISA and the CPU): what `bench latency` names as its mfu unit.
bool linear_uses_bf16_dot(DType dt);
// Whether linear layers over weights of `dt` quantize their activations to int8 now
// (Int8Math in core/cpu_features.h): Q8_0 weights and int8_dot_chosen(). Then every kernel
// computes with the quantized activations (the VNNI GEMV for decode where the CPU has it,
// the others in f32 on the same values), whatever the number of rows.
bool linear_uses_int8_dot(DType dt);
// The arithmetic unit the prefill-sized GEMM over weights of `dt` runs on now, named as
// `bench peak` names it: "bf16_dot" (bf16 weights, linear_uses_bf16_dot), "int8_vnni512"
// (Q8_0 weights under int8 dot math where the int8-dot GEMM runs: AVX512_VNNI with the
// AVX-512 kernels active) or "fp32_fma" (every other case: the kernels widen to f32).
std::string_view linear_prefill_unit(DType dt);
// Reads the linear kernels' environment overrides now (CPINFER_GEMV_PREFETCH=0|1: the
// GEMV's software prefetch, for A/B runs; the default is a per-CPU rule), so that a bad value
// is an error before any work starts rather than in a worker thread.
void linear_read_environment();

// Row gather for embeddings: out[i, :] = table[ids[i], :] widened to f32.
// table: [rows, cols]; ids: [n]; out: [n, cols] contiguous. ids must be in [0, rows)
// (checked, throws Error).
void embedding_lookup(const WeightView& table, const int32_t* ids, int64_t n, float* out,
                      ThreadPool& pool);

}  // namespace cpinfer
