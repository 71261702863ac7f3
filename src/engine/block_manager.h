// Rank 0's KV pages for every context-parallel rank, and the prefix cache over them. Rank 0
// is the only scheduler (architecture.md): it decides which page of which rank every
// sequence uses, records each decision as a PageOp (engine/step_plan.h) and sends the ops
// with the next plan; every rank applies them to its own pool in the same order, so rank 0's
// pools are exact copies of the ranks' (the engine audits this). A step it admits can never
// fail for lack of pages.
//
// Under CP each of the W = pcp * dcp ranks stores only its share of a sequence
// (cp/cp_layout.h); TP ranks of one CP rank hold the same pages, so W pools are kept.
// Example, W 2, interleave 1, page size 4, 10 tokens: rank 0 holds positions 0,2,4,6,8
// (local rows 0-4 -> 2 pages), rank 1 holds 1,3,5,7,9 (2 pages).
//
// Prefix caching (engine/prefix_cache.h) works in blocks of B = page-size token positions
// on every layout, so a prompt finds exactly the cached tokens it would find on one rank.
// A block's KV is spread over the ranks: on rank R, the cached prefix [0, M) is the local
// rows [0, l) with l = local_len(M, R). Pages wholly inside [0, l) are shared (one more
// reference); when l is not a multiple of B, the page holding rows [floor(l/B) B, l) is
// copied into a fresh page of the new sequence, which goes on writing it (copy on write).
// On one rank M is a multiple of B, so nothing is ever copied.
//   W 2, I 1, B 4, a hit of M 12 tokens: l = 6 on each rank: local page 0 (rows 0-3) is
//   shared, rows 4-5 of local page 1 are copied.
// Which physical page holds local page j of a cached prefix: every cached block k records,
// per rank, the page holding its last local row (row local_len((k+1) B, R) - 1). Every local
// page of the prefix holds the last row of some block (a block adds at most B local rows),
// and the last such block of the chain has the page with the most valid rows.
#pragma once
#include <cstdint>
#include <cstddef>
#include <unordered_map>
#include <vector>

#include "attention/page_pool.h"
#include "cp/cp_layout.h"
#include "engine/prefix_cache.h"
#include "engine/step_plan.h"

namespace cpinfer {

struct PrefixCacheOptions {
  bool enabled = true;  // --enable-prefix-caching
  uint64_t salt = 0;    // what else changes the KV: the model, the KV dtype
  int hash_bits = 64;   // tests: fewer bits force hash collisions
};

// The cached prefix a new sequence would start with.
struct PrefixHit {
  std::vector<CachedBlock*> blocks;  // blocks[k] covers positions [k B, (k + 1) B)
  int64_t tokens = 0;                // blocks.size() * B
};

class BlockManager {
 public:
  // pages_per_rank: every rank's pool size (the same on all ranks); one pool per CP rank
  // (W = layout.world()).
  BlockManager(int64_t pages_per_rank, const CpLayout& layout,
               const PrefixCacheOptions& cache = {.enabled = false});

  int64_t world() const { return int64_t(pools_.size()); }
  int64_t pages_per_rank() const { return pages_per_rank_; }
  int64_t page_size() const { return layout_.page_size; }
  bool caching() const { return cache_opts_.enabled; }
  // Rank R's pages: free, held only by the prefix cache (freed on demand, least recently
  // used first), and in use by sequences (the rest).
  int64_t free_pages(int64_t rank) const { return pools_[size_t(rank)].num_free(); }
  int64_t cached_pages(int64_t rank) const { return cache_only_[size_t(rank)]; }
  int64_t used_pages(int64_t rank) const;
  // Fraction of rank R's pages in use by sequences, in [0, 1] (cached pages count as free,
  // as vLLM's KV-cache usage does).
  double usage(int64_t rank) const;
  size_t cached_blocks() const { return cache_.size(); }
  uint64_t evicted_blocks() const { return evicted_; }

  // Pages rank R needs for a sequence of `len` tokens.
  int64_t pages_for(int64_t len, int64_t rank) const;
  // The cached prefix of `tokens` (a whole sequence), leaving at least its last token to be
  // computed (its logits are needed). Empty when caching is off.
  PrefixHit lookup(const std::vector<int32_t>& tokens) const;
  // Whether a new sequence starting on `hit` can grow to `len` tokens on every rank.
  bool can_admit(const PrefixHit& hit, int64_t len) const;
  // Starts sequence `id` on `hit` (its pages shared, or copied where the prefix ends inside a
  // page) and grows it to `len` tokens. Throws if a rank is short.
  void admit(int64_t id, const PrefixHit& hit, int64_t len);
  // Whether every rank can grow sequence `id` (absent: 0 tokens) to `len` tokens, evicting
  // cached blocks if need be.
  bool can_grow(int64_t id, int64_t len) const;
  // Grows (never shrinks) sequence `id` to `len` tokens; throws if a rank is short.
  void grow(int64_t id, int64_t len);
  // After a step: the first `num_computed` of `tokens` are in the cache; registers every
  // whole block among them not yet registered.
  void commit(int64_t id, const std::vector<int32_t>& tokens, int64_t num_computed);
  // Returns all of sequence `id`'s pages (its cached blocks stay); false if it held none.
  bool release(int64_t id);
  // Tokens held for `id` (0 if none).
  int64_t held_tokens(int64_t id) const;
  // Whether a lone sequence of `len` tokens fits in an empty pool.
  bool fits_alone(int64_t len) const;
  // Evicts every cached block (tests; the ops free the cache's pages on the ranks).
  void clear_cache();

  // The page operations decided since the last call, in order (the next plan carries them).
  bool has_ops() const { return !ops_.empty(); }
  void take_ops(std::vector<PageOp>* out);
  // Rank R's pages of sequence `id` in local order (tests).
  const std::vector<int32_t>& pages_of(int64_t id, int64_t rank) const;

 private:
  struct SeqPages {
    int64_t len = 0;                         // tokens held
    std::vector<std::vector<int32_t>> pages;  // [W] local pages in order
    CachedBlock* last_block = nullptr;       // newest block registered (or hit) by it
    int64_t num_blocks = 0;                  // blocks of it registered (or hit)
  };
  // Rank R's local page j of the prefix `hit` covers (see the header comment), for
  // j < ceil(local_len(hit.tokens, R) / B).
  void prefix_pages(const PrefixHit& hit, int64_t rank, std::vector<int32_t>* out) const;
  bool cache_only(int64_t rank, int32_t page) const;
  // Reference changes that keep cache_only_ exact.
  void seq_ref(int64_t rank, int32_t page, int delta);
  void block_ref(int64_t rank, int32_t page, int delta);
  // Evicts least recently used blocks until rank R has n free pages (can_* checked it).
  void ensure_free(int64_t rank, int64_t n);
  void evict(CachedBlock* b);
  void take_page(int64_t id, SeqPages& s, int64_t rank);
  SeqPages& record(int64_t id);

  int64_t pages_per_rank_;
  CpLayout layout_;
  PrefixCacheOptions cache_opts_;
  std::vector<PagePool> pools_;                  // [W]
  std::vector<std::vector<int32_t>> seq_refs_;   // [W][page] references held by sequences
  std::vector<int64_t> cache_only_;              // [W] pages held by cached blocks only
  std::unordered_map<int64_t, SeqPages> seqs_;
  PrefixCache cache_;
  std::vector<PageOp> ops_;
  uint64_t evicted_ = 0;
  std::vector<std::vector<int32_t>> scratch_;  // [W] admit(): the prefix's pages
};

}  // namespace cpinfer
