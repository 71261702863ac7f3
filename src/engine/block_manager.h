// Rank 0's account of the KV-cache pages of every context-parallel rank. Rank 0 is the only
// scheduler (architecture.md), so it must know, before it plans a step, that every rank's
// page pool can hold the step's new tokens: it mirrors each rank's allocations exactly
// (each rank's StepPlanner allocates CpLayout::pages_needed(L) pages for a sequence of L
// tokens, the same formula used here), and a step it admits can never fail for lack of pages.
//
// Under CP each of the W = pcp * dcp ranks stores only its share of a sequence
// (cp/cp_layout.h); TP ranks of one CP rank hold the same pages, so W pools are tracked.
// Example, W 2, interleave 1, page size 4, 10 tokens: rank 0 holds positions
// 0,2,4,6,8 (5 tokens -> 2 pages), rank 1 holds 1,3,5,7,9 (5 tokens -> 2 pages).
#pragma once
#include <cstdint>
#include <cstddef>
#include <unordered_map>
#include <vector>

#include "cp/cp_layout.h"

namespace cpinfer {

class BlockManager {
 public:
  // pages_per_rank: every rank's pool size (the same on all ranks); one pool per CP rank
  // (W = layout.world()).
  BlockManager(int64_t pages_per_rank, const CpLayout& layout);

  int64_t world() const { return int64_t(used_.size()); }
  int64_t pages_per_rank() const { return pages_per_rank_; }
  int64_t page_size() const { return layout_.page_size; }
  int64_t used_pages(int64_t rank) const { return used_[size_t(rank)]; }
  // Fraction of rank R's pages in use, in [0, 1].
  double usage(int64_t rank) const;

  // Pages rank R needs for a sequence of `len` tokens.
  int64_t pages_for(int64_t len, int64_t rank) const;
  // Whether every rank can grow sequence `id` (absent: 0 tokens) to `len` tokens.
  bool can_grow(int64_t id, int64_t len) const;
  // Grows (never shrinks) sequence `id` to `len` tokens; throws if a rank is short.
  void grow(int64_t id, int64_t len);
  // Returns all of sequence `id`'s pages; false if it held none.
  bool release(int64_t id);
  // Tokens held for `id` (0 if none).
  int64_t held_tokens(int64_t id) const;
  // Whether a lone sequence of `len` tokens fits in an empty pool.
  bool fits_alone(int64_t len) const;

 private:
  int64_t pages_per_rank_;
  CpLayout layout_;
  std::vector<int64_t> used_;                   // [world] pages in use per rank
  std::unordered_map<int64_t, int64_t> held_;  // sequence id -> tokens allocated
};

}  // namespace cpinfer
