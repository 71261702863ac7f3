// Internal: the per-ISA kernels behind attention.h. attention.cpp resolves a plan's task
// into a FlashTask (plain pointers and strides) and calls flash_task of the active ISA
// (attention_{generic,avx2,avx512}.cpp, each including attention_flash.inc with its own
// vector types). The straightforward kernel (attention_reference.inc) is compiled the same
// way.
#pragma once
#include "kernels/attention.h"

namespace cpinfer::attention_impl {

// KV tokens per tile of the flash kernel (the softmax and P.V granularity).
constexpr int64_t kTileN = 128;
// Target lanes per task: query rows x group heads (the M of S = Q K^T).
constexpr int64_t kTargetM = 128;
// A sequence with q_len * group <= kDecodeLanes is decode-shaped: one task over all its KV
// heads (see plan_attention).
constexpr int64_t kDecodeLanes = 8;
// Largest M a task may have (plan_attention uses one row per task when the group alone is
// larger than kTargetM).
constexpr int64_t kMaxM = 128;
// head_dim is padded to a multiple of this inside the kernel (the P.V vector width).
constexpr int64_t kDimAlign = 16;

// 2^f for f in [-0.5, 0.5]: 1 + f * P(f), P of degree 5 (Cephes exp2f coefficients, highest
// first); relative error < 2e-7 in f32 arithmetic (attention_test checks it against exp2).
constexpr float kExp2Poly[6] = {1.535336188319500e-4f, 1.339887440266574e-3f,
                                9.618437357674640e-3f, 5.550332471162809e-2f,
                                2.402264791363012e-1f, 6.931472028550421e-1f};

inline int64_t round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

// Scratch floats of the decode kernels for hkv KV heads of head_dim d (per
// head: Q up to 8d, O 8d, 4 x 8 state; shared: lim, S [kTileN + 16][8], Pp, 4 x (kTileN + 16) row
// pointers).
inline int64_t decode_scratch_floats(int64_t hkv, int64_t d) {
  return hkv * (16 * d + 32) + 8 + 8 * (kTileN + 16) + 4 * (kTileN + 16) + 8 * (kTileN + 16) + 64;
}

// Scratch floats one thread needs for tasks of at most m lanes and head_dim d:
// Qs [Dp][Mp], S [kTileN + 16][Mp], Ks [kTileN + 16][Dp], Vs [kTileN][Dp], O [Mp][Dp], four
// vectors of Mp, 4 x (kTileN + 16) row pointers; Mp <= round_up(m, 64). The bf16-dot prefill
// kernel (attention_prefill_bf16dot_avx512.cpp) needs up to (kTileN / 2 + 8) * Mp + Mp more
// for its bf16 weight pairs and a fifth vector; the last two terms cover it.
inline int64_t flash_scratch_floats(int64_t m, int64_t d) {
  const int64_t mp = round_up(m, 64), dp = round_up(d, kDimAlign);
  return dp * mp + (kTileN + 16) * mp + (2 * kTileN + 16) * dp + mp * dp + 4 * mp +
         8 * (kTileN + 16) + 64 + (kTileN / 2 + 8) * mp + mp;
}

// One task with every index resolved.
//   Query lane m (m in [0, M), M = rows * group) is row r = m / group and q head g = m % group
//   of the task's KV head: its q vector is q + r * ldq + g * D. Example, group 8: lane 19 is
//   row 2, head 3.
//   KV token j (kv0 <= j < kv1) of the task: paged (pages != nullptr): slot
//   pages[j / page_size] * page_size + j % page_size, at k + slot * k_row + head_off (v:
//   v_row); ragged: slot j. Example, page_size 16, pages {5, 9}, Hkv 2, D 64, head 1:
//   token 20 is k + (9 * 16 + 4) * 128 + 64.
//   Causal: lane m sees token j iff j <= r + diag (diag = task row offset + kv_len - q_len).
//   Output: lane m writes o + r * ldo + g * D (D floats) and lse[r * ld_lse + g].
struct FlashTask {
  const float* q = nullptr;
  int64_t ldq = 0;
  int64_t rows = 0, group = 0, head_dim = 0;
  // KV heads of the task: head h's q block is q + h * group * D, its K/V columns
  // head_off + h * D, its outputs o + h * group * D and lse + h * group.
  int64_t num_heads = 1;
  const void* k = nullptr;
  const void* v = nullptr;
  DType kv_dtype = DType::F32;
  const int32_t* pages = nullptr;  // null: ragged
  int64_t page_size = 1, k_row = 0, v_row = 0, head_off = 0;
  int64_t kv0 = 0, kv1 = 0;
  bool causal = false;
  int64_t diag = 0;
  float scale_log2 = 0.f;  // sm_scale * log2(e), folded into Q once
  bool bf16_dot = false;   // bf16 cache: bf16 dot products allowed (decode and prefill)
  float* o = nullptr;
  int64_t ldo = 0;
  float* lse = nullptr;
  int64_t ld_lse = 0;
  float* scratch = nullptr;  // flash_scratch_floats(rows * group, head_dim), 64-byte aligned
};

// The straightforward kernel: query rows [row_begin, row_end) of sequence `seq` for KV head
// `kv_head`.
using ReferenceTileFn = void (*)(const float* q, int64_t ldq, int64_t num_q_heads,
                                 const PagedKv& kv, const AttentionBatch& batch, float sm_scale,
                                 float* o, int64_t ldo, float* lse, int64_t seq, int64_t kv_head,
                                 int64_t row_begin, int64_t row_end);
using FlashTaskFn = void (*)(const FlashTask& t);

#define CPI_DECLARE_ATTENTION(ns)                                                          \
  namespace ns {                                                                           \
  void reference_tile(const float* q, int64_t ldq, int64_t num_q_heads, const PagedKv& kv, \
                      const AttentionBatch& batch, float sm_scale, float* o, int64_t ldo,  \
                      float* lse, int64_t seq, int64_t kv_head, int64_t row_begin,         \
                      int64_t row_end);                                                    \
  void flash_task(const FlashTask& t);                                                     \
  void exp2_n(const float* x, int64_t n, float* y); /* the kernel's exp2, x <= 0 */       \
  }
CPI_DECLARE_ATTENTION(generic)
CPI_DECLARE_ATTENTION(avx2)
CPI_DECLARE_ATTENTION(avx512)
#undef CPI_DECLARE_ATTENTION

namespace avx512 {
// Decode-shaped tasks (rows * group <= 8, head_dim a multiple of 32, f32 or bf16 cache):
// runs the task and returns true, or returns false (attention_decode_avx512.cpp).
bool decode_task(const FlashTask& t);
// Tasks over a bf16 cache with t.bf16_dot on an AVX512_BF16 CPU, head_dim a multiple of 32:
// runs the task with bf16 dot products and returns true, or returns false
// (attention_prefill_bf16dot_avx512.cpp).
bool prefill_bf16dot_task(const FlashTask& t);
}  // namespace avx512

namespace avx2 {
// Decode-shaped tasks (rows * group <= 8, head_dim a multiple of 16, f32 or bf16 cache):
// runs the task and returns true, or returns false (attention_decode_avx2.cpp).
bool decode_task(const FlashTask& t);
// Tasks of more than 8 lanes with head_dim a multiple of 8 (f32 or bf16 cache): runs the task
// and returns true, or returns false (attention_prefill_avx2.cpp).
bool prefill_task(const FlashTask& t);
}  // namespace avx2

}  // namespace cpinfer::attention_impl
