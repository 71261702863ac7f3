// Per-ISA entry points of the straightforward attention kernel (attention_kernel.inc
// compiled once per ISA).
#pragma once
#include "kernels/attention.h"

namespace cpinfer::attention_impl {

// Computes query rows [row_begin, row_end) of sequence `seq` for KV head `kv_head`.
using TileFn = void (*)(const float* q, int64_t ldq, int64_t num_q_heads, const PagedKv& kv,
                        const AttentionBatch& batch, float sm_scale, float* o, int64_t ldo,
                        float* lse, int64_t seq, int64_t kv_head, int64_t row_begin,
                        int64_t row_end);

#define CPI_DECLARE_ATTENTION_TILE(ns)                                                         \
  namespace ns {                                                                               \
  void attention_tile(const float* q, int64_t ldq, int64_t num_q_heads, const PagedKv& kv,     \
                      const AttentionBatch& batch, float sm_scale, float* o, int64_t ldo,      \
                      float* lse, int64_t seq, int64_t kv_head, int64_t row_begin,             \
                      int64_t row_end);                                                        \
  }
CPI_DECLARE_ATTENTION_TILE(generic)
CPI_DECLARE_ATTENTION_TILE(avx2)
CPI_DECLARE_ATTENTION_TILE(avx512)
#undef CPI_DECLARE_ATTENTION_TILE

}  // namespace cpinfer::attention_impl
