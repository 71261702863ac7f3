#include "engine/model_runner.h"

#include <chrono>

#include "core/error.h"
#include "core/log.h"
#include "engine/batch_builder.h"

namespace cpinfer {

namespace {
KvCacheShape cache_shape(const ModelConfig& c, const RunnerOptions& o) {
  KvCacheShape s;
  s.num_layers = c.num_layers;
  s.page_size = o.page_size;
  s.num_pages = pages_needed(o.max_cache_tokens, o.page_size);
  s.num_kv_heads = c.num_kv_heads;
  s.head_dim = c.head_dim;
  s.dtype = o.kv_dtype;
  return s;
}
double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
}  // namespace

ModelRunner::ModelRunner(const std::string& model_dir, const RunnerOptions& opts, ThreadPool& pool)
    : opts_(opts),
      pool_(pool),
      load_start_(now_s()),
      config_(load_model_config(model_dir)),
      weights_(load_model_weights(config_, model_dir)),
      page_pool_(int32_t(pages_needed(opts.max_cache_tokens, opts.page_size))),
      cache_(cache_shape(config_, opts)),
      decoder_(config_, weights_, cache_, pool) {
  load_seconds_ = now_s() - load_start_;
  CPI_LOG_DEBUG("KV cache: {} pages of {} tokens, {:.1f} MiB", page_pool_.num_pages(),
                opts.page_size, double(cache_.shape().bytes()) / (1 << 20));
}

const std::vector<float>& ModelRunner::step(const std::vector<SequenceStep>& steps) {
  int64_t need = 0;
  for (const SequenceStep& s : steps)
    need += std::max<int64_t>(0, pages_needed(s.seq->num_cached + s.num_tokens, opts_.page_size) -
                                     int64_t(s.seq->pages.size()));
  CPI_CHECK(need <= page_pool_.num_free(),
            "KV cache is full: this step needs {} more pages of {} tokens, {} are free (raise "
            "the KV cache size)",
            need, opts_.page_size, page_pool_.num_free());
  for (const SequenceStep& s : steps)
    for (int64_t i = 0; i < s.num_tokens; ++i)
      CPI_CHECK(s.tokens[i] >= 0 && s.tokens[i] < config_.vocab_size,
                "token id {} is outside the vocabulary [0, {})", s.tokens[i], config_.vocab_size);
  build_forward_batch(steps, opts_.page_size, page_pool_, &batch_);
  logits_.resize(batch_.logit_rows.size() * size_t(config_.vocab_size));
  decoder_.forward(batch_, logits_.data());
  commit_step(steps);
  return logits_;
}

void ModelRunner::release(SequenceState& seq) {
  page_pool_.release(seq.pages);
  seq.pages.clear();
  seq.num_cached = 0;
}

}  // namespace cpinfer
