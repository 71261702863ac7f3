// Attention over a paged KV cache, returning the output O and the base-2 LSE
// (context-parallel.md §7) so that partial states can be merged.
//
// This is the straightforward version behind the backend interface; the
// plan/run backend with split-KV and tuned per-ISA tiles replaces its inside.
#pragma once
#include <cstdint>

#include "attention/kv_cache.h"
#include "core/thread_pool.h"

namespace cpinfer {

// A ragged batch: sequence i owns query rows [q_indptr[i], q_indptr[i+1]) and attends to
// its first kv_lens[i] cached tokens, whose pages are
// page_indices[page_indptr[i] .. page_indptr[i+1]) (token j sits in page j / page_size,
// offset j % page_size). Example, page_size 4, kv_len 6, pages {7, 2}: token 5 is page 2,
// offset 1.
struct AttentionBatch {
  int64_t num_seqs = 0;
  const int64_t* q_indptr = nullptr;     // [num_seqs + 1]
  const int64_t* kv_lens = nullptr;      // [num_seqs]
  const int32_t* page_indptr = nullptr;  // [num_seqs + 1]
  const int32_t* page_indices = nullptr;
  // Bottom-right aligned causal mask: row i of a q_len-row block sees KV column j iff
  // j <= i + kv_len - q_len. (q_len 3, kv_len 5: row 0 sees 0..2, row 2 sees 0..4.)
  bool causal = true;
};

// q: [T, Hq, D] f32, row stride ldq floats; kv: Hkv KV heads, Hq % Hkv == 0 and the
// q heads [g*Hq/Hkv, (g+1)*Hq/Hkv) share KV head g.
// o: [T, Hq, D] f32, row stride ldo; lse: [T, Hq] base-2 log-sum-exp of the scaled scores
// (-inf and o = 0 for a row that sees no KV).
void paged_attention(const float* q, int64_t ldq, int64_t num_q_heads, const PagedKv& kv,
                     const AttentionBatch& batch, float sm_scale, float* o, int64_t ldo,
                     float* lse, ThreadPool& pool);

}  // namespace cpinfer
