#include "engine/model_runner.h"

#include <chrono>

#include "core/error.h"
#include "core/log.h"
#include "engine/batch_builder.h"

namespace cpinfer {

namespace {
CpRanks cp_ranks_of(const ParallelLayout* layout) {
  CpRanks r;
  if (!layout) return r;
  const LayoutSpec& s = layout->spec();
  r.pcp = s.pcp;
  r.pcp_rank = layout->pcp_rank();
  r.dcp = s.dcp;
  r.dcp_rank = layout->dcp_rank();
  r.interleave = s.interleave;
  return r;
}

// Pages this rank needs for max_cache_tokens tokens: its share under CP (rank 0's share is
// the largest: up to one interleave unit more than L / W).
int64_t pool_pages(const RunnerOptions& o, const CpRanks& r) {
  if (o.num_pages > 0) return o.num_pages;
  KvOwnership own{r.world(), r.interleave};
  return pages_needed(own.local_len(o.max_cache_tokens, 0), o.page_size);
}

KvCacheShape cache_shape(const ModelConfig& c, const ShardSpec& sh, const RunnerOptions& o,
                         const CpRanks& r) {
  KvCacheShape s;
  s.num_layers = c.num_layers;
  s.page_size = o.page_size;
  s.num_pages = pool_pages(o, r);
  s.num_kv_heads = sh.num_kv_heads;
  s.head_dim = c.head_dim;
  s.dtype = o.kv_dtype;
  return s;
}
double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
}  // namespace

ModelRunner::ModelRunner(const std::string& model_dir, const RunnerOptions& opts, ThreadPool& pool,
                         const ParallelLayout* layout, Comm* comm)
    : opts_(opts),
      pool_(pool),
      load_start_(now_s()),
      config_(load_model_config(model_dir)),
      weights_(load_model_weights(config_, model_dir,
                                  layout ? tp_shard(config_, *layout) : full_shard(config_))),
      page_pool_(int32_t(pool_pages(opts, cp_ranks_of(layout)))),
      cache_(cache_shape(config_, weights_.shard, opts, cp_ranks_of(layout))),
      cp_ranks_(cp_ranks_of(layout)),
      decoder_(config_, weights_, cache_, pool, comm, &cp_ranks_) {
  load_seconds_ = now_s() - load_start_;
  // A step's page table lists each page at most once (no page is shared), so it never
  // outgrows the pool: reserved now, steps never allocate for it (tests/unit/
  // forward_allocations_test.cpp).
  batch_.page_indices.reserve(size_t(page_pool_.num_pages()));
  // As vLLM reports it: tokens one rank can hold, and the layout's total (x W, since each
  // rank keeps only its share of every sequence).
  const int64_t per_rank = int64_t(page_pool_.num_pages()) * opts.page_size;
  if (!comm || comm->rank() == 0)
    CPI_LOG_INFO("KV cache: {} tokens per rank ({} pages of {}, {:.1f} MiB), {} tokens for the "
                 "layout (x{} context-parallel ranks)",
                 per_rank, page_pool_.num_pages(), opts.page_size,
                 double(cache_.shape().bytes()) / (1 << 20), per_rank * cp_ranks_.world(),
                 cp_ranks_.world());
}

int64_t ModelRunner::kv_bytes_per_local_token() const {
  const KvCacheShape& s = cache_.shape();
  return 2 * s.num_layers * s.num_kv_heads * s.head_dim * int64_t(dtype_size(s.dtype));
}

const std::vector<float>& ModelRunner::step(const std::vector<SequenceStep>& steps) {
  int64_t need = 0;
  for (const SequenceStep& s : steps)
    need += std::max<int64_t>(0, cp_pages_needed(s.seq->num_cached + s.num_tokens, cp_ranks_,
                                                 opts_.page_size) -
                                     int64_t(s.seq->pages.size()));
  CPI_CHECK(need <= page_pool_.num_free(),
            "KV cache is full: this step needs {} more pages of {} tokens, {} are free (raise "
            "the KV cache size)",
            need, opts_.page_size, page_pool_.num_free());
  for (const SequenceStep& s : steps)
    for (int64_t i = 0; i < s.num_tokens; ++i)
      CPI_CHECK(s.tokens[i] >= 0 && s.tokens[i] < config_.vocab_size,
                "token id {} is outside the vocabulary [0, {})", s.tokens[i], config_.vocab_size);
  size_t rows = 0;
  if (cp_ranks_.world() > 1) {
    build_cp_step(steps, cp_ranks_, opts_.page_size, page_pool_, &cp_step_);
    batch_ = ForwardBatch{};
    batch_.cp = &cp_step_;
    rows = cp_step_.logit_rows.size();
  } else {
    build_forward_batch(steps, opts_.page_size, page_pool_, &batch_);
    rows = batch_.logit_rows.size();
  }
  logits_.resize(rows * size_t(config_.vocab_size));
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
