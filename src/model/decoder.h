// The Qwen2 / Llama decoder forward pass on one rank:
//   embed -> per layer [RMSNorm -> q,k,v proj (+bias) -> RoPE -> KV append -> paged
//   attention -> o proj -> residual -> RMSNorm -> gate/up proj -> SiLU*up -> down proj
//   -> residual] -> final RMSNorm -> LM head (only for the rows whose logits are wanted).
#pragma once
#include <vector>

#include "attention/kv_cache.h"
#include "core/thread_pool.h"
#include "model/forward_batch.h"
#include "model/model_config.h"
#include "model/weights.h"

namespace cpinfer {

class Decoder {
 public:
  Decoder(const ModelConfig& config, const ModelWeights& weights, KvCache& cache,
          ThreadPool& pool);

  // logits: [batch.logit_rows.size(), vocab] f32.
  void forward(const ForwardBatch& batch, float* logits);

  const ModelConfig& config() const { return config_; }

 private:
  void reserve(int64_t tokens);

  const ModelConfig& config_;
  const ModelWeights& w_;
  KvCache& cache_;
  ThreadPool& pool_;
  std::vector<double> inv_freq_;
  // Workspaces, grown to the largest step seen; the per-layer loop allocates nothing.
  std::vector<float> x_, h_, qkv_, attn_, lse_, gu_, act_, rope_cos_, rope_sin_, last_;
  int64_t capacity_ = 0;
};

}  // namespace cpinfer
