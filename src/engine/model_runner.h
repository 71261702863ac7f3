// A loaded model on one rank: config, mmapped weights, KV cache, page pool and the
// decoder, able to run a step for any set of sequences.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "attention/kv_cache.h"
#include "attention/page_pool.h"
#include "core/thread_pool.h"
#include "engine/sequence_state.h"
#include "model/decoder.h"
#include "model/forward_batch.h"

namespace cpinfer {

struct RunnerOptions {
  int64_t page_size = 16;           // --block-size
  DType kv_dtype = DType::F32;      // KV-cache storage
  int64_t max_cache_tokens = 4096;  // KV capacity (tokens, all sequences together)
};

class ModelRunner {
 public:
  ModelRunner(const std::string& model_dir, const RunnerOptions& opts, ThreadPool& pool);

  const ModelConfig& config() const { return config_; }
  const RunnerOptions& options() const { return opts_; }
  PagePool& page_pool() { return page_pool_; }
  double load_seconds() const { return load_seconds_; }

  // Appends each step's tokens to its sequence and returns the logits of the wanted rows
  // ([rows, vocab], rows in step order). Throws Error when the cache has no room.
  const std::vector<float>& step(const std::vector<SequenceStep>& steps);
  // Returns a sequence's pages to the pool.
  void release(SequenceState& seq);

 private:
  RunnerOptions opts_;
  ThreadPool& pool_;
  double load_start_;  // declared before the members whose construction is the load
  ModelConfig config_;
  ModelWeights weights_;
  PagePool page_pool_;
  KvCache cache_;
  Decoder decoder_;
  ForwardBatch batch_;
  std::vector<float> logits_;
  double load_seconds_ = 0;
};

}  // namespace cpinfer
