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

// The gate/up projections of a SwiGLU MLP over output features [c0, c1) and all M rows:
// act[m, c] = silu(x[m] . gate[c]) * (x[m] . up[c]) (act: [M, F], F = gate.rows), with
// gu [M, 2F] (gate sums at column c, up sums at F + c) as the kernel's scratch.
using GateUpFn = void (*)(const float* x, int64_t ldx, const WeightView& gate,
                          const WeightView& up, float* gu, float* act, int64_t M, int64_t c0,
                          int64_t c1);

// dst[0:n] = src[0:n] widened from `dtype` (F32, BF16 or F16) to f32.
using WidenFn = void (*)(const void* src, DType dtype, int64_t n, float* dst);

// Row stride, in bf16 elements, of x rows packed for the bf16-dot skinny tiles: K rounded
// up to whole 32-element (512-bit) steps. Example: K 896 -> 896, K 333 -> 352.
constexpr int64_t bf16_row_stride(int64_t K) { return (K + 31) / 32 * 32; }

// dst[m * bf16_row_stride(K) + k] = bf16(x[m * ldx + k]) (round to nearest even) for k < K,
// 0 for K <= k < bf16_row_stride(K); m < M. dst: [M, bf16_row_stride(K)] bf16 bits.
using PackRowsBf16Fn = void (*)(const float* x, int64_t M, int64_t ldx, int64_t K,
                                uint16_t* dst);

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
  // From how many x rows the skinny tiles beat the GEMV over bf16 weights (Auto path; below
  // it the GEMV): skinny_min_rows_bf16_for().
  int64_t skinny_min_rows_bf16 = 5;
  // Decode batches with bf16 dot products (vdpbf16ps): the skinny tiles' contract, except
  // that x is not f32 but rows packed by pack_rows_bf16, passed as a float pointer whose
  // row stride ldx counts floats (bf16_row_stride(K) / 2). Null where the ISA has none.
  GemvFn skinny_bf16 = nullptr;
  PackRowsBf16Fn pack_rows_bf16 = nullptr;
  // The GEMM path of linear_gate_up_silu fused into one pass (silu in the tile's epilogue);
  // null where the ISA has none (then gate_up_silu_unfused).
  GateUpFn gate_up_silu = nullptr;
};

// GateUpFn by k.gemm over the gate rows and the up rows into gu, then silu_mul.
void gate_up_silu_unfused(const Kernels& k, const float* x, int64_t ldx, const WeightView& gate,
                          const WeightView& up, float* gu, float* act, int64_t M, int64_t c0,
                          int64_t c1);

// The skinny/GEMM crossover for this CPU, measured with bench/linear_bench (best GFLOP/s,
// bf16 Qwen2.5-0.5B shapes, 2 threads). AMD Zen 4 (one 512-bit FMA per cycle): skinny ahead
// up to M = 256 with AVX-512 and AVX2 (M = 256: skinny 209-217, GEMM 180-202). Intel Xeon
// (Sapphire Rapids class, two FMA ports): the packed GEMM feeds both ports and is ahead
// from M = 32 with AVX-512 (M = 32: GEMM 195-196 vs skinny 144-201; M = 128: 256-270 vs
// 177-213) and from M = 64 with AVX2 (M = 64: 124-131 vs 110-117; M = 32: even). A fixed
// CPUID rule, not a timing, so every rank of a job takes the same paths.
int64_t skinny_max_rows_for(bool avx512);

// The GEMV/skinny crossover over bf16 weights with f32 math (exact bf16 math, or a CPU
// without bf16 dot products), measured with bench/linear_bench (GFLOP/s, GEMV / skinny, bf16
// Qwen2.5-0.5B shapes). AVX2's pair tiles (one load and one integer op per 8 weights): from
// 4 rows (AMD Zen 3, 1 and 2 threads: 1.06-1.28x the GEMV on every shape at 4; 2 a tie).
// AVX-512 on AMD Zen 4 (one 512-bit FMA a cycle: the GEMV's widening and its FMA per row
// and 16 weights bind before the reads do): from 2 rows (2 threads, qkv / o / gate_up /
// down / LM head: M = 2 44/70, 41/62, 49/60, 36/64, 57/64; M = 4 101/126, 100/125,
// 98/122, 48/119, 102/125; one thread alike, but the LM head at M = 2, 47/42). AVX-512
// elsewhere (two FMA ports on Intel's cores and on Zen 5): from 5 rows.
int64_t skinny_min_rows_bf16_for(bool avx512);

// Whether the GEMV prefetches W two rows ahead in software (linear_driver.h) for weights of
// `dt`. Yes for Q8_0 everywhere and for the other types on Intel cores (Xeon: bf16 8.8-9.6
// -> 12.4-12.8 GB/s on one thread). No for F32 / BF16 / F16 on AMD Zen 4 (family 25 with
// AVX-512), where the hardware prefetchers stream W faster alone (bench/linear_bench, M = 1,
// one thread, mean GB/s: bf16 gate/up 11.3 -> 21.7, LM head 11.5 -> 23.9; f32 LM head 24.1
// -> 28.4; Q8_0 loses without it: down 12.8 -> 10.1). Other AMD cores (Zen 3, Zen 5) keep
// it: not measured without. CPINFER_GEMV_PREFETCH=0 or 1 overrides it (for A/B runs).
bool gemv_prefetch_for(DType dt);
// The same for the int8-dot GEMV over Q8_0 weights (gemv_int8_dot), which widens nothing and
// streams like the bf16 GEMV: no prefetch on AMD Zen 4 (bench/linear_bench, M = 1, one
// thread, mean GB/s: gate/up 17.1 -> 21.1, down 15.6 -> 19.2, LM head 17.9 -> 19.5), yes
// elsewhere (not measured without). CPINFER_GEMV_PREFETCH overrides it as well.
bool gemv_int8_dot_prefetch();
// Whether the skinny tiles prefetch the next group's W rows into L2 only (prefetcht1)
// instead of L1 (prefetcht0). Yes on AMD Zen 4 (bench/linear_bench, bf16 dot tiles, one
// thread, GFLOP/s: M = 8 gate/up 86-90 -> 136, LM head 88-90 -> 138; M = 16 142-146 ->
// 168; M = 64 unchanged; no prefetch at all is worse than either: 63 at M = 8); no
// elsewhere (prefetcht0 measured on the Xeon; prefetcht1 not measured there).
bool skinny_prefetch_to_l2();

// Which kernel linear() runs: chosen by shape (Auto), or forced, for tests that must cover
// every path at every M. Process-wide; tests set it and restore Auto. Skinny falls back to
// Gemv on an ISA without a skinny kernel; GemmBf16Dot and SkinnyBf16Dot (the kernels of
// linear_bf16dot_avx512.cpp) fall back to Gemm and Skinny unless the weights are BF16, the
// active ISA is AVX-512 and the CPU has AVX512_BF16 (bf16_dot_gemm_available).
// GemvInt8Dot and GemmInt8Dot (linear_int8dot_avx512.cpp) fall back to Gemv and Gemm unless
// the weights are Q8_0, the active ISA is AVX-512 and the CPU has AVX512_VNNI
// (int8_dot_available).
enum class Path { Auto, Gemv, Gemm, Skinny, GemmBf16Dot, SkinnyBf16Dot, GemvInt8Dot, GemmInt8Dot };
void force_path(Path p);
// The path linear() takes with kernels `k` for M rows of x with K columns and weights of
// `dt` (honours force_path; never Auto; Skinny becomes Gemv for Q8_0 weights).
Path choose_path(const Kernels& k, int64_t M, int64_t K, DType dt);
// Whether GemmBf16Dot and SkinnyBf16Dot can run on weights of `dt` with the active ISA.
bool bf16_dot_gemm_available(DType dt);
// Whether GemvInt8Dot and GemmInt8Dot can run on weights of `dt` with the active ISA.
bool int8_dot_available(DType dt);
// Whether path p is a packed GEMM (Gemm, GemmBf16Dot or GemmInt8Dot).
constexpr bool is_gemm(Path p) {
  return p == Path::Gemm || p == Path::GemmBf16Dot || p == Path::GemmInt8Dot;
}
// Whether path p reads x as rows quantized by q8_act_rows (GemvInt8Dot, GemmInt8Dot).
constexpr bool reads_int8_rows(Path p) { return p == Path::GemvInt8Dot || p == Path::GemmInt8Dot; }
// The kernel table that runs path p (a choose_path result) of table k: the bf16-dot table
// for GemmBf16Dot and SkinnyBf16Dot, the int8-dot table for GemmInt8Dot, k otherwise.
const Kernels& kernels_for_path(const Kernels& k, Path p);
// x as the kernel of `path` must see it. Under bf16 dot math for weights of `dt`
// (linear_uses_bf16_dot) the dot GEMM multiplies x rounded to bf16; so that a row's result
// does not depend on how many rows share its call (a chunked prefill, a batch of decodes,
// another parallel layout: they pick other paths), the other paths of an Auto choice get x
// rounded to bf16 too, copied into this thread's scratch (slot 3; ldx becomes K). Forced
// paths (tests) and every other case: x itself. SkinnyBf16Dot, forced or not: x packed by
// pack_rows_bf16 into the same scratch (ldx becomes bf16_row_stride(K) / 2 floats).
// Likewise under int8 dot math for Q8_0 weights (linear_uses_int8_dot): GemvInt8Dot and
// GemmInt8Dot, forced or not, get x quantized by q8_act_rows (ldx becomes
// q8_act_row_floats(K)), the other paths of an Auto choice get the same values as f32
// (q8_act_fake_rows; ldx becomes K).
// Rows are quantized on the threads of `pool` (prefill-sized M).
const float* rows_for_path(const float* x, int64_t M, int64_t& ldx, int64_t K, DType dt,
                           Path path, ThreadPool& pool);
// The row-range kernel (same signature as gemv) of a Gemv, Skinny, SkinnyBf16Dot or
// GemvInt8Dot path of table k (for SkinnyBf16Dot: the table kernels_for_path returns;
// GemvInt8Dot: gemv_int8_dot, whatever k).
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
// avx512_kernels() with the bf16-dot GEMM; only where bf16_dot_supported().
const Kernels& avx512_bf16_dot_kernels();
// avx512_kernels() with the int8-dot GEMM (x packed by q8_act_rows, Q8_0 weights only);
// only where int8_dot_supported().
const Kernels& avx512_int8_dot_kernels();
// The GEMV over Q8_0 weights on int8 dot products, x packed by q8_act_rows (row stride
// ldx floats); otherwise gemv's contract. Only where int8_dot_available(Q8_0).
void gemv_int8_dot(const float* x, int64_t M, int64_t ldx, const WeightView& w,
                   const float* bias, float* y, int64_t ldy, int64_t n0, int64_t n1);

// A 64-byte aligned buffer of at least `floats` floats, owned by the calling thread and
// reused across calls (grown, never shrunk). `slot` picks one of four independent buffers
// (0: packed W panels, 1: packed x tiles, 2: Q8_0 rows dequantized before packing, 3: x
// rounded to bf16 or packed by rows_for_path).
float* thread_scratch(int slot, size_t floats);

}  // namespace cpinfer::linear_impl
