// Attention of one layer under context parallelism, run per layer with a CpStep planned
// once per step: PCP K/V all-gather + restore, cache writes of owned tokens, causal
// attention over contiguous K/V (PCP head/tail chunks or whole local prefills), and the
// sharded decode attention with the DCP and PCP LSE combines (context-parallel.md §4-§7).
#pragma once
#include <vector>

#include "attention/kv_cache.h"
#include "core/thread_pool.h"
#include "cp/cp_step.h"
#include "dist/comm.h"
#include "kernels/attention.h"

namespace cpinfer {

class CpAttention {
 public:
  // hq, hkv: this rank's (TP-local) q and KV heads; D: head_dim.
  CpAttention(Comm& comm, const CpRanks& ranks, int64_t hq, int64_t hkv, int64_t head_dim);

  // Once per step, before layer 0: sizes every workspace and plans both attention calls
  // (causal over the contiguous K/V, sharded decode over the cache), so run() allocates
  // nothing and builds no index.
  void plan(const CpStep& step, const KvCache& cache, ThreadPool& pool);

  // Per layer, after plan(step): q, k, v: [T, heads * D] rows of the local tokens after
  // RoPE, row stride ld (views into one fused qkv buffer). o: [T, hq * D] (stride hq * D).
  void run(const CpStep& step, int64_t layer, KvCache& cache, const float* q, const float* k,
           const float* v, int64_t ld, float sm_scale, float* o, ThreadPool& pool);

 private:
  void prefill_attention(const CpStep& step, int64_t layer, KvCache& cache, const float* q,
                         const float* k, const float* v, int64_t ld, float sm_scale, float* o,
                         ThreadPool& pool);
  void decode_attention(const CpStep& step, int64_t layer, KvCache& cache, const float* q,
                        const float* k, const float* v, int64_t ld, float sm_scale, float* o,
                        ThreadPool& pool);

  Comm& comm_;
  const CpStep* planned_ = nullptr;
  AttentionPlan prefill_plan_, decode_plan_;
  AttentionWorkspace prefill_ws_, decode_ws_;
  CpRanks ranks_;
  int64_t hq_, hkv_, D_;
  // Workspaces (grow to the largest step; reused by every layer).
  std::vector<float> send_, gathered_, kbuf_, vbuf_, lse_, qd_, qg_, od_, lsed_, lse_all_,
      scaled_, mine_, s_star_, s_all_, weights_;
};

// The LSE combine of §6 for one group: states[n] = (O_n, s_n) for n in the group, base 2.
// Returns s* = log2(sum_n 2^(s_n)) and the weights 2^(s_n - s*) (0 for empty states; all
// weights 0 and s* = -inf when every state is empty). Exposed for tests.
float lse_combine_weights(const float* s, int64_t n, int64_t stride, float* weights);

}  // namespace cpinfer
