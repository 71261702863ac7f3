// Merging attention states (O, LSE) with base-2 LSEs (context-parallel.md §7): split-KV
// chunks, DCP shards, PCP ranks and cached-context merges all use these.
//
//   merge(a, b): m = max(s_a, s_b), w_a = 2^(s_a - m), w_b = 2^(s_b - m),
//                O = (w_a O_a + w_b O_b) / (w_a + w_b), s = m + log2(w_a + w_b).
//   An empty state (s = -inf; its O is ignored) is the neutral element; merging only empty
//   states gives the empty state (O = 0, s = -inf). Never NaN.
//
// Layout: states are rows of [tokens, heads, head_dim] with the heads of a token contiguous
// (head h of token t at o + t * ld_o + h * head_dim) and lse[t * ld_lse + h]. The outputs
// may alias any input (each element is read before it is written).
#pragma once
#include <cstdint>

#include "core/thread_pool.h"

namespace cpinfer {

// The weight math of every merge: given n base-2 LSEs s_i (lse[i * stride]), returns
// s* = log2(sum_i 2^(s_i)) and writes weights[i] = 2^(s_i - s*) (so sum_i weights[i] = 1
// and the merged O is sum_i weights[i] * O_i). Empty states (s_i = -inf) get weight 0;
// when every state is empty (or n == 0) all weights are 0 and s* = -inf, never NaN.
// Computed in double: a single non-empty state gets weight exactly 1. n <= kMaxMergeStates.
constexpr int64_t kMaxMergeStates = 1024;
float merge_weights(int64_t n, const float* lse, int64_t stride, float* weights);

// One output row from n states: o_i = o_parts[i] (head_dim floats), lse_i = lse_parts[i].
// o: [head_dim]; *lse: the merged LSE.
void merge_states_row(int64_t n, int64_t head_dim, const float* const* o_parts,
                      const float* lse_parts, float* o, float* lse);

// o: [tokens, heads, head_dim] (row stride ld_o) = merge(a, b) row by row.
// o_a, o_b: [tokens, heads, head_dim] (ld_oa, ld_ob); lse_a, lse_b, lse: [tokens, heads]
// (ld_la, ld_lb, ld_l).
void merge_state(int64_t tokens, int64_t heads, int64_t head_dim, const float* o_a,
                 int64_t ld_oa, const float* lse_a, int64_t ld_la, const float* o_b,
                 int64_t ld_ob, const float* lse_b, int64_t ld_lb, float* o, int64_t ld_o,
                 float* lse, int64_t ld_l, ThreadPool* pool = nullptr);

// n-ary: state i of token t, head h is o_parts + i * part_o + t * ld_op + h * head_dim and
// lse_parts[i * part_l + t * ld_lp + h]. Example, DCP after an all-gather of [ranks, T, H, D]:
// part_o = T * H * D, ld_op = H * D, part_l = T * H, ld_lp = H.
// o: [tokens, heads, head_dim] (ld_o); lse: [tokens, heads] (ld_l).
void merge_states(int64_t n, int64_t tokens, int64_t heads, int64_t head_dim,
                  const float* o_parts, int64_t part_o, int64_t ld_op, const float* lse_parts,
                  int64_t part_l, int64_t ld_lp, float* o, int64_t ld_o, float* lse,
                  int64_t ld_l, ThreadPool* pool = nullptr);

}  // namespace cpinfer
