#include "engine/model_runner.h"

#include <algorithm>
#include <chrono>

#include "core/clock.h"
#include "core/error.h"
#include "core/log.h"

namespace cpinfer {

namespace {
CpLayout cp_layout_for(const ParallelLayout* layout, const RunnerOptions& o) {
  if (layout) return cp_layout_of(*layout);
  CpLayout c;
  c.page_size = o.page_size;
  return c;
}

// Pages this rank needs for max_cache_tokens tokens: its share under CP (rank 0's share is
// the largest: up to one interleave unit more than L / W).
int64_t pool_pages(const RunnerOptions& o, const CpLayout& cp) {
  if (o.num_pages > 0) return o.num_pages;
  return cp.pages_needed(o.max_cache_tokens, 0);
}

KvCacheShape cache_shape(const ModelConfig& c, const ShardSpec& sh, const RunnerOptions& o,
                         const CpLayout& cp) {
  KvCacheShape s;
  s.num_layers = c.num_layers;
  s.page_size = cp.page_size;
  s.num_pages = pool_pages(o, cp);
  s.num_kv_heads = sh.num_kv_heads;
  s.head_dim = c.head_dim;
  s.dtype = o.kv_dtype;
  return s;
}
// The rank's shard of the weights, converted as opts.quantization asks.
ModelWeights load_weights(const ModelConfig& c, const std::string& model_dir,
                          const ShardSpec& shard, const RunnerOptions& o, ThreadPool& pool,
                          bool log) {
  // Quantized: each matrix leaves the resident set once checked, before its conversion.
  ModelWeights w = load_model_weights(c, model_dir, shard,
                                      o.quantization != WeightQuantization::None);
  if (o.quantization == WeightQuantization::Int8) {
    const QuantizationReport r = quantize_weights_q8_0(w, c, pool);
    if (log)
      CPI_LOG_INFO("int8 weights (Q8_0, blocks of 32): {} tensors, {:.1f} MiB -> {:.1f} MiB "
                   "({:.3f}x) in {:.2f} s", r.tensors, double(r.source_bytes) / (1 << 20),
                   double(r.quantized_bytes) / (1 << 20),
                   double(r.quantized_bytes) / double(std::max<int64_t>(1, r.source_bytes)),
                   r.seconds);
  }
  return w;
}

}  // namespace

ModelRunner::ModelRunner(const std::string& model_dir, const RunnerOptions& opts, ThreadPool& pool,
                         const ParallelLayout* layout, Comm* comm)
    : opts_(opts),
      pool_(pool),
      load_start_(steady_seconds()),
      config_(load_model_config(model_dir)),
      weights_(load_weights(config_, model_dir,
                            layout ? tp_shard(config_, *layout) : full_shard(config_), opts, pool,
                            !comm || comm->rank() == 0)),
      page_pool_(int32_t(pool_pages(opts, cp_layout_for(layout, opts)))),
      cache_(cache_shape(config_, weights_.shard, opts, cp_layout_for(layout, opts))),
      cp_(cp_layout_for(layout, opts)),
      decoder_(config_, weights_, cache_, pool, comm, cp_),
      planner_(cp_) {
  opts_.page_size = cp_.page_size;
  decoder_.attention().set_overlap(
      opts.overlap_comm == OverlapMode::On ||
      (opts.overlap_comm == OverlapMode::Auto && comm && cp_.pcp > 1 && comm->spans_hosts(Group::Pcp)));
  load_seconds_ = steady_seconds() - load_start_;
  // A step's page table lists each page at most once (no page is shared), so it never
  // outgrows the pool: reserved now, steps never allocate for it (tests/unit/
  // forward_allocations_test.cpp).
  step_.paged.page_indices.reserve(size_t(page_pool_.num_pages()));
  step_.shard.page_indices.reserve(size_t(page_pool_.num_pages()));
  // As vLLM reports it: tokens one rank can hold, and the layout's total (x W, since each
  // rank keeps only its share of every sequence).
  const int64_t per_rank = int64_t(page_pool_.num_pages()) * cp_.page_size;
  if (!comm || comm->rank() == 0)
    CPI_LOG_INFO("KV cache: {} tokens per rank ({} pages of {}, {:.1f} MiB), {} tokens for the "
                 "layout (x{} context-parallel ranks)",
                 per_rank, page_pool_.num_pages(), cp_.page_size,
                 double(cache_.shape().bytes()) / (1 << 20), per_rank * cp_.world(),
                 cp_.world());
}

int64_t ModelRunner::kv_bytes_per_local_token() const {
  const KvCacheShape& s = cache_.shape();
  return 2 * s.num_layers * s.num_kv_heads * s.head_dim * int64_t(dtype_size(s.dtype));
}

std::vector<float>& ModelRunner::step(const std::vector<SequenceStep>& steps) {
  int64_t need = 0;
  for (const SequenceStep& s : steps)
    need += std::max<int64_t>(
        0, cp_.pages_needed(s.seq->num_cached + s.num_tokens) - int64_t(s.seq->pages.size()));
  CPI_CHECK(need <= page_pool_.num_free(),
            "KV cache is full: this step needs {} more pages of {} tokens, {} are free (raise "
            "the KV cache size)",
            need, opts_.page_size, page_pool_.num_free());
  for (const SequenceStep& s : steps)
    for (int64_t i = 0; i < s.num_tokens; ++i)
      CPI_CHECK(s.tokens[i] >= 0 && s.tokens[i] < config_.vocab_size,
                "token id {} is outside the vocabulary [0, {})", s.tokens[i], config_.vocab_size);
  bool argmax_only = !steps.empty();
  for (const SequenceStep& s : steps)
    argmax_only = argmax_only && s.row_use != RowUse::Logits && !s.all_logits;
  planner_.plan(steps, page_pool_, &step_);
  if (argmax_only) {  // clear() keeps the capacity: a later full step allocates nothing
    logits_.clear();
    argmax_.resize(step_.logit_rows.size());
    decoder_.forward(step_, nullptr, argmax_.data());
  } else {
    argmax_.clear();
    logits_.resize(step_.logit_rows.size() * size_t(config_.vocab_size));
    decoder_.forward(step_, logits_.data());
  }
  commit_step(steps);
  return logits_;
}

void ModelRunner::release(SequenceState& seq) {
  page_pool_.release(seq.pages);
  seq.pages.clear();
  seq.num_cached = 0;
}

void ModelRunner::apply_page_op(const PageOp& op, SequenceState* seq) {
  switch (op.kind) {
    case PageOp::Take:
      page_pool_.take(op.page);
      seq->pages.push_back(op.page);
      break;
    case PageOp::Share:
      page_pool_.add_ref(op.page);
      seq->pages.push_back(op.page);
      break;
    case PageOp::Copy:
      page_pool_.take(op.page);
      cache_.copy_rows(op.src, op.page, op.rows);
      seq->pages.push_back(op.page);
      break;
    case PageOp::Ref:
      page_pool_.add_ref(op.page);
      break;
    case PageOp::Unref:
      page_pool_.release(op.page);
      break;
    default:
      fail("page operation {} is not one a rank applies", op.kind);
  }
}

}  // namespace cpinfer
