// A loaded model on one rank: config, mmapped weights, KV cache, page pool and the
// decoder, able to run a step for any set of sequences.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "attention/kv_cache.h"
#include "attention/page_pool.h"
#include "core/thread_pool.h"
#include "dist/comm.h"
#include "dist/parallel_layout.h"
#include "cp/cp_layout.h"
#include "cp/step_planner.h"
#include "attention/sequence_state.h"
#include "engine/step_plan.h"
#include "model/decoder.h"
#include "model/weight_quantization.h"

namespace cpinfer {

struct RunnerOptions {
  int64_t page_size = 16;           // --block-size (a layout's own page size wins)
  DType kv_dtype = DType::F32;      // KV-cache storage
  int64_t max_cache_tokens = 4096;  // KV capacity in tokens of sequence (all sequences
                                    // together); under CP each rank holds its share
  int64_t num_pages = 0;            // > 0: each rank's pool size in pages (overrides the above)
  // PCP K/V gather overlapped with the own-rows attention: Auto = when the PCP group spans
  // hosts (within a host the gather is a memory copy and the communication thread's polling
  // only takes CPU from the attention).
  OverlapMode overlap_comm = OverlapMode::Auto;
  // --quantization: Int8 converts the linear weights, LM head and embedding to Q8_0 at load.
  WeightQuantization quantization = WeightQuantization::None;
};

class ModelRunner {
 public:
  // layout/comm: this rank's place in a multi-rank job (null: a single rank holding the
  // whole model).
  ModelRunner(const std::string& model_dir, const RunnerOptions& opts, ThreadPool& pool,
              const ParallelLayout* layout = nullptr, Comm* comm = nullptr);

  const ModelConfig& config() const { return config_; }
  const RunnerOptions& options() const { return opts_; }
  PagePool& page_pool() { return page_pool_; }
  double load_seconds() const { return load_seconds_; }
  // This rank's context-parallel layout (W == 1 without one).
  const CpLayout& cp_layout() const { return cp_; }
  // Bytes of K and V this rank holds per cached token of a sequence (all layers): the
  // cache memory of a sequence of L tokens is local_len(L) * this.
  int64_t kv_bytes_per_local_token() const;

  // Appends each step's tokens to its sequence and returns the logits of the wanted rows
  // ([rows, vocab], rows in step order). Throws Error when the cache has no room. A step
  // whose every sequence wants RowUse::Argmax or None (and none all_logits) returns no
  // logits (empty): argmax_ids() then holds the argmax of each row instead. A sequence with
  // RowUse::None (and not all_logits) has no row.
  std::vector<float>& step(const std::vector<SequenceStep>& steps);
  // After an argmax-only step: one id per logit row, the lowest id of the row's largest
  // logit (as argmax() over the row's logits; rows without NaN). Empty after other steps.
  const std::vector<int32_t>& argmax_ids() const { return argmax_; }
  // Returns a sequence's pages to the pool.
  void release(SequenceState& seq);
  // The attention object of every layer (its PCP overlap statistics and timeline).
  StepAttention& attention() { return decoder_.attention(); }
  // True when the linear layers run on Q8_0 blocks: converted at load (--quantization
  // int8) or stored so in a GGUF file.
  bool q8_weights() const {
    return !weights_.layers.empty() && weights_.layers[0].gate.dtype == DType::Q8_0;
  }
  // Applies one of rank 0's page operations to this rank's pool (and KV cache, for a copy);
  // seq: the sequence of a Take, Share or Copy.
  void apply_page_op(const PageOp& op, SequenceState* seq);

 private:
  RunnerOptions opts_;
  ThreadPool& pool_;
  double load_start_;  // declared before the members whose construction is the load
  ModelConfig config_;
  ModelWeights weights_;
  PagePool page_pool_;
  KvCache cache_;
  CpLayout cp_;
  Decoder decoder_;
  StepPlanner planner_;
  RankStep step_;
  std::vector<float> logits_;
  std::vector<int32_t> argmax_;
  double load_seconds_ = 0;
};

}  // namespace cpinfer
