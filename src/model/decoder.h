// The Qwen2 / Llama decoder forward pass on one rank, for a step the planner made
// (cp/step_planner.h):
//   embed -> per layer [RMSNorm -> q,k,v proj (+bias) (-> per-head q/k RMSNorm, Qwen3)
//   -> RoPE -> attention (one
//   StepAttention object, any layout) -> o proj -> residual -> RMSNorm -> gate/up proj ->
//   SiLU*up -> down proj -> residual] -> the rows that give logits (cp/final_rows.h) ->
//   final RMSNorm -> LM head.
#pragma once
#include <memory>
#include <vector>

#include "attention/kv_cache.h"
#include "core/huge_pages.h"
#include "core/thread_pool.h"
#include "cp/final_rows.h"
#include "cp/step_attention.h"
#include "cp/step_planner.h"
#include "dist/comm.h"
#include "kernels/attention.h"
#include "model/model_config.h"
#include "model/weights.h"

namespace cpinfer {

class Decoder {
 public:
  // comm: the TP all-reduces, the LM-head gather and the CP collectives run over it; null
  // for a single rank. cp: this rank's CP layout (W == 1 by default).
  Decoder(const ModelConfig& config, const ModelWeights& weights, KvCache& cache,
          ThreadPool& pool, Comm* comm = nullptr, const CpLayout& cp = CpLayout{});

  // logits: [step.logit_rows.size(), vocab] f32 (full vocab on every TP rank). With
  // argmax_ids ([step.logit_rows.size()] int32) instead: only the argmax of each row, on
  // every rank; logits is not written (may be null). See lm_head.
  void forward(const RankStep& step, float* logits, int32_t* argmax_ids = nullptr);

  const ModelConfig& config() const { return config_; }
  StepAttention& attention() { return attention_; }

 private:
  void reserve(int64_t tokens);
  // Final norm + LM head for `rows` rows of the final hidden state gathered in last_: the
  // logits, or (argmax_ids non-null) only each row's argmax.
  void lm_head(int64_t rows, float* logits, int32_t* argmax_ids);
  // Argmax mode of lm_head: local_logits_ holds [R, n] logits of vocabulary ids [begin,
  // begin + n) on this rank; every rank ends with the argmax of each full row.
  void gather_argmax(int64_t R, int64_t begin, int64_t n, int32_t* argmax_ids);

  const ModelConfig& config_;
  const ModelWeights& w_;
  KvCache& cache_;
  ThreadPool& pool_;
  Comm* comm_;
  StepAttention attention_;
  FinalRows final_rows_;
  int tp_size_ = 1;
  int pcp_size_ = 1;  // the LM head is split over tp x pcp ranks
  std::vector<double> inv_freq_;
  double rope_scale_ = 1.0;  // cos/sin multiplier (YaRN's attention factor)
  // Workspaces, grown to the largest step seen; the per-layer loop allocates nothing. The
  // [T, width] activations are large for long prompts: huge-page memory (core/huge_pages.h).
  ScratchArray<float> x_, h_, qkv_, attn_, gu_, act_;
  std::vector<float> rope_cos_, rope_sin_, last_, local_logits_, gathered_;
  int64_t capacity_ = 0;
  std::vector<int> lm_counts_, lm_displs_;  // the vocab-parallel gather's counts (tp > 1)
  std::vector<int64_t> lm_vbegin_;
  std::vector<int32_t> lm_best_, lm_all_best_;  // argmax mode: (value bits, id) per row
  std::vector<const int32_t*> lm_parts_;        // argmax mode: each rank's, vocabulary order
};

}  // namespace cpinfer
