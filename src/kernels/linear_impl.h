// Internal: the per-ISA kernels behind linear() and embedding_lookup(). linear.cpp checks
// arguments, splits the work into tasks for the pool and calls one of these tables
// (linear_generic.cpp, linear_avx2.cpp, linear_avx512.cpp), chosen by active_isa().
#pragma once
#include <cstddef>
#include <cstdint>

#include "kernels/linear.h"

namespace cpinfer::linear_impl {

// Decode path: y[m, n] = x[m, :] · W[n, :] + bias[n] for m in [0, M), n in [n0, n1).
// x: [M, K] (row stride ldx), W: [N, K] (w.ld), y: [M, N] (row stride ldy). Any M is correct;
// linear.cpp uses it where it beats the GEMM (small M). Streams each W row once for all M.
using GemvFn = void (*)(const float* x, int64_t M, int64_t ldx, const WeightView& w,
                        const float* bias, float* y, int64_t ldy, int64_t n0, int64_t n1);

// Prefill path: one task of the blocked GEMM, y[m0:m1, n0:n1] over all of K. Packs panels
// of W (widened to f32) and tiles of x into thread_scratch() and runs the microkernel.
using GemmFn = void (*)(const float* x, int64_t ldx, const WeightView& w, const float* bias,
                        float* y, int64_t ldy, int64_t m0, int64_t m1, int64_t n0, int64_t n1);

// dst[0:n] = src[0:n] widened from `dtype` (F32, BF16 or F16) to f32.
using WidenFn = void (*)(const void* src, DType dtype, int64_t n, float* dst);

struct Kernels {
  GemvFn gemv;
  GemmFn gemm;
  WidenFn widen;
  int mr;  // microkernel rows (x rows per register tile)
  int nr;  // microkernel columns (W rows per packed strip)
  int nc_strips;  // strips per packed W panel (the panel is nc_strips * nr rows x a K block)
  // Decode batches (a few to a few dozen x rows): same contract as gemv, but register tiles
  // of several x rows x several W rows, W widened once per tile and read from memory once.
  // Null where the ISA has none (then gemv or gemm serve those M).
  GemvFn skinny = nullptr;
  // Up to how many x rows the skinny tiles beat the packed GEMM (Auto path; beyond it the
  // GEMM). A property of the core, not only of the ISA: see skinny_max_rows_for().
  int64_t skinny_max_rows = 256;
};

// The skinny/GEMM crossover for this CPU, measured with bench/linear_bench (best GFLOP/s,
// bf16 Qwen2.5-0.5B shapes, 2 threads). AMD Zen 4 (one 512-bit FMA per cycle): skinny ahead
// up to M = 256 with AVX-512 and AVX2 (M = 256: skinny 209-217, GEMM 180-202). Intel Xeon
// (Sapphire Rapids class, two FMA ports): the packed GEMM feeds both ports and is ahead
// from M = 32 with AVX-512 (M = 32: GEMM 195-196 vs skinny 144-201; M = 128: 256-270 vs
// 177-213) and from M = 64 with AVX2 (M = 64: 124-131 vs 110-117; M = 32: even). A fixed
// CPUID rule, not a timing, so every rank of a job takes the same paths.
int64_t skinny_max_rows_for(bool avx512);

// Which kernel linear() runs: chosen by shape (Auto), or forced, for tests that must cover
// every path at every M. Process-wide; tests set it and restore Auto. Skinny falls back to
// Gemv on an ISA without a skinny kernel.
enum class Path { Auto, Gemv, Gemm, Skinny };
void force_path(Path p);
// The path linear() takes with kernels `k` for M rows of x with K columns and weights of
// `dt` (honours force_path; never Auto; Skinny becomes Gemv for Q8_0 weights).
Path choose_path(const Kernels& k, int64_t M, int64_t K, DType dt);
// The row-range kernel (same signature as gemv) of a Gemv or Skinny path.
GemvFn rows_kernel(const Kernels& k, Path p);
// linear()'s argument checks (dtype, shapes, strides, null pointers); throws Error.
void check_args(const float* x, int64_t M, int64_t ldx, const WeightView& w, const float* y,
                int64_t ldy);
// The kernel table of the active ISA.
const Kernels& active_kernels();
// Below this many multiply-adds per task the pool's hand-off costs more than it saves.
constexpr int64_t kMinMacsPerTask = 1 << 16;

const Kernels& generic_kernels();
const Kernels& avx2_kernels();
const Kernels& avx512_kernels();

// A 64-byte aligned buffer of at least `floats` floats, owned by the calling thread and
// reused across calls (grown, never shrunk). `slot` picks one of three independent buffers
// (0: packed W panels, 1: packed x tiles, 2: Q8_0 rows dequantized before packing).
float* thread_scratch(int slot, size_t floats);

}  // namespace cpinfer::linear_impl
