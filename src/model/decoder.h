// The Qwen2 / Llama decoder forward pass on one rank:
//   embed -> per layer [RMSNorm -> q,k,v proj (+bias) -> RoPE -> KV append -> paged
//   attention -> o proj -> residual -> RMSNorm -> gate/up proj -> SiLU*up -> down proj
//   -> residual] -> final RMSNorm -> LM head (only for the rows whose logits are wanted).
#pragma once
#include <memory>
#include <vector>

#include "attention/kv_cache.h"
#include "core/thread_pool.h"
#include "cp/cp_attention.h"
#include "dist/comm.h"
#include "kernels/attention.h"
#include "model/forward_batch.h"
#include "model/model_config.h"
#include "model/weights.h"

namespace cpinfer {

class Decoder {
 public:
  // comm: the TP group's all-reduces (o and down projections) and the LM-head gather run
  // over it; null for a single rank.
  Decoder(const ModelConfig& config, const ModelWeights& weights, KvCache& cache,
          ThreadPool& pool, Comm* comm = nullptr, const CpRanks* cp_ranks = nullptr);

  // logits: [batch.logit_rows.size(), vocab] f32 (full vocab on every TP rank).
  void forward(const ForwardBatch& batch, float* logits);

  const ModelConfig& config() const { return config_; }

 private:
  void reserve(int64_t tokens);
  // Final norm + LM head for `rows` rows of the final hidden state gathered in last_.
  void lm_head(int64_t rows, float* logits);
  // Copies the wanted final hidden rows (residual + last MLP output) into last_.
  void select_final_rows(const ForwardBatch& b, int64_t T);

  const ModelConfig& config_;
  const ModelWeights& w_;
  KvCache& cache_;
  ThreadPool& pool_;
  Comm* comm_;
  std::unique_ptr<CpAttention> cp_attention_;
  int64_t pcp_size_ = 1;
  int tp_size_ = 1;
  std::vector<double> inv_freq_;
  // Workspaces, grown to the largest step seen; the per-layer loop allocates nothing.
  std::vector<float> x_, h_, qkv_, attn_, lse_, gu_, act_, rope_cos_, rope_sin_, last_,
      local_logits_, gathered_, final_send_, final_gathered_;
  int64_t capacity_ = 0;
  AttentionPlan attn_plan_;     // built once per step by forward()
  AttentionWorkspace attn_ws_;  // grown to the largest plan seen
};

}  // namespace cpinfer
