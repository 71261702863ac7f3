#include "engine/block_manager.h"

#include <algorithm>

#include "core/error.h"

namespace cpinfer {

BlockManager::BlockManager(int64_t pages_per_rank, const CpLayout& layout,
                           const PrefixCacheOptions& cache)
    : pages_per_rank_(pages_per_rank),
      layout_(layout),
      cache_opts_(cache),
      cache_(std::max<int64_t>(layout.page_size, 1), cache.salt, cache.hash_bits) {
  CPI_CHECK(pages_per_rank >= 1 && pages_per_rank < (int64_t(1) << 31) &&
                layout.page_size >= 1 && layout.world() >= 1 && layout.interleave >= 1,
            "block manager: bad shape (pages {}, page size {}, world {}, interleave {})",
            pages_per_rank, layout.page_size, layout.world(), layout.interleave);
  for (int64_t r = 0; r < layout.world(); ++r) pools_.emplace_back(int32_t(pages_per_rank));
  seq_refs_.assign(size_t(layout.world()), std::vector<int32_t>(size_t(pages_per_rank), 0));
  cache_only_.assign(size_t(layout.world()), 0);
}

int64_t BlockManager::used_pages(int64_t rank) const {
  return pages_per_rank_ - free_pages(rank) - cached_pages(rank);
}

double BlockManager::usage(int64_t rank) const {
  return double(used_pages(rank)) / double(pages_per_rank_);
}

int64_t BlockManager::pages_for(int64_t len, int64_t rank) const {
  return layout_.pages_needed(len, rank);
}

int64_t BlockManager::held_tokens(int64_t id) const {
  auto it = seqs_.find(id);
  return it == seqs_.end() ? 0 : it->second.len;
}

const std::vector<int32_t>& BlockManager::pages_of(int64_t id, int64_t rank) const {
  return seqs_.at(id).pages[size_t(rank)];
}

bool BlockManager::fits_alone(int64_t len) const {
  for (int64_t r = 0; r < world(); ++r)
    if (pages_for(len, r) > pages_per_rank_) return false;
  return true;
}

bool BlockManager::cache_only(int64_t rank, int32_t page) const {
  return seq_refs_[size_t(rank)][size_t(page)] == 0 && pools_[size_t(rank)].ref_count(page) > 0;
}

void BlockManager::seq_ref(int64_t rank, int32_t page, int delta) {
  const bool before = cache_only(rank, page);
  seq_refs_[size_t(rank)][size_t(page)] += delta;
  if (delta > 0) pools_[size_t(rank)].add_ref(page);
  else pools_[size_t(rank)].release(page);
  cache_only_[size_t(rank)] += int64_t(cache_only(rank, page)) - int64_t(before);
}

void BlockManager::block_ref(int64_t rank, int32_t page, int delta) {
  const bool before = cache_only(rank, page);
  if (delta > 0) pools_[size_t(rank)].add_ref(page);
  else pools_[size_t(rank)].release(page);
  cache_only_[size_t(rank)] += int64_t(cache_only(rank, page)) - int64_t(before);
  ops_.push_back({delta > 0 ? PageOp::Ref : PageOp::Unref, int32_t(rank), 0, page, -1, 0, 0});
}

BlockManager::SeqPages& BlockManager::record(int64_t id) {
  auto [it, fresh] = seqs_.try_emplace(id);
  if (fresh) it->second.pages.resize(size_t(world()));
  return it->second;
}

void BlockManager::evict(CachedBlock* b) {
  for (int64_t r = 0; r < world(); ++r)
    if (b->end_page[size_t(r)] >= 0) block_ref(r, b->end_page[size_t(r)], -1);
  if (b->num_users > 0)  // sequences extending this block stop registering their blocks
    for (auto& [id, s] : seqs_)
      if (s.last_block == b) s.last_block = nullptr;
  cache_.erase(b);
  ++evicted_;
}

void BlockManager::ensure_free(int64_t rank, int64_t n) {
  while (free_pages(rank) < n) {
    CachedBlock* b = cache_.victim();
    CPI_CHECK(b, "block manager: rank {} has {} free pages, {} needed, and nothing to evict",
              rank, free_pages(rank), n);
    evict(b);
  }
}

void BlockManager::clear_cache() {
  while (CachedBlock* b = cache_.victim()) evict(b);
}

void BlockManager::take_page(int64_t id, SeqPages& s, int64_t rank) {
  ensure_free(rank, 1);
  std::vector<int32_t>& pages = s.pages[size_t(rank)];
  pools_[size_t(rank)].allocate_into(1, &pages);
  seq_refs_[size_t(rank)][size_t(pages.back())] = 1;
  ops_.push_back({PageOp::Take, int32_t(rank), id, pages.back(), -1, 0, 0});
}

PrefixHit BlockManager::lookup(const std::vector<int32_t>& tokens) const {
  PrefixHit hit;
  if (!caching() || tokens.size() < 2) return hit;
  cache_.match(tokens.data(), int64_t(tokens.size()) - 1, &hit.blocks);
  hit.tokens = int64_t(hit.blocks.size()) * page_size();
  return hit;
}

void BlockManager::prefix_pages(const PrefixHit& hit, int64_t rank,
                                std::vector<int32_t>* out) const {
  const int64_t B = page_size();
  const int64_t l = layout_.local_len(hit.tokens, rank);
  out->assign(size_t((l + B - 1) / B), -1);
  // Later blocks overwrite earlier ones: the last block ending in a page has the most rows.
  for (const CachedBlock* b : hit.blocks) {
    const int64_t end = layout_.local_len((b->index + 1) * B, rank);  // rows of [0, (k+1)B)
    if (end > 0) (*out)[size_t((end - 1) / B)] = b->end_page[size_t(rank)];
  }
  for (int32_t p : *out) CPI_ASSERT(p >= 0);
}

bool BlockManager::can_admit(const PrefixHit& hit, int64_t len) const {
  std::vector<int32_t> pages;
  for (int64_t r = 0; r < world(); ++r) {
    const int64_t whole = layout_.local_len(hit.tokens, r) / page_size();
    prefix_pages(hit, r, &pages);
    // Pages the prefix keeps from being evicted: the shared ones, and the copy's source
    // while it is copied (counted for the whole admission: conservative by one page).
    int64_t pinned = 0;
    for (int32_t p : pages) pinned += cache_only(r, p) ? 1 : 0;
    const int64_t fresh = pages_for(len, r) - whole;
    if (fresh > free_pages(r) + cached_pages(r) - pinned) return false;
  }
  return true;
}

void BlockManager::admit(int64_t id, const PrefixHit& hit, int64_t len) {
  CPI_CHECK(seqs_.find(id) == seqs_.end(), "block manager: sequence {} is already admitted", id);
  CPI_CHECK(hit.tokens < len, "block manager: a cached prefix of {} tokens leaves nothing of {}",
            hit.tokens, len);
  CPI_CHECK(can_admit(hit, len), "block manager: no room to admit sequence {} ({} tokens)", id,
            len);
  SeqPages& s = record(id);
  if (!hit.blocks.empty()) {
    cache_.touch_chain(hit.blocks.back());  // used now: evicted last
    const int64_t B = page_size();
    // 1. Share the whole pages and pin each copy source (a reference counted as a
    //    sequence's, so it is not evictable) on every rank before anything is evicted: an
    //    eviction below may drop the hit's own blocks, whose pages are then ours already.
    scratch_.resize(size_t(world()));
    for (int64_t r = 0; r < world(); ++r) {
      std::vector<int32_t>& prefix = scratch_[size_t(r)];
      prefix_pages(hit, r, &prefix);
      const int64_t whole = layout_.local_len(hit.tokens, r) / B;
      std::vector<int32_t>& pages = s.pages[size_t(r)];
      for (int64_t j = 0; j < whole; ++j) {
        seq_ref(r, prefix[size_t(j)], +1);
        pages.push_back(prefix[size_t(j)]);
        ops_.push_back({PageOp::Share, int32_t(r), id, prefix[size_t(j)], -1, 0, 0});
      }
      if (int64_t(prefix.size()) > whole) {
        seq_ref(r, prefix.back(), +1);
        ops_.push_back({PageOp::Ref, int32_t(r), 0, prefix.back(), -1, 0, 0});
      }
    }
    s.last_block = hit.blocks.back();  // evict() clears it if the block goes
    ++s.last_block->num_users;
    s.num_blocks = int64_t(hit.blocks.size());
    // 2. Copy the partial last page on each rank where the prefix ends inside one; the
    //    ranks see Ref, Share..., Copy, Unref.
    for (int64_t r = 0; r < world(); ++r) {
      const std::vector<int32_t>& prefix = scratch_[size_t(r)];
      const int64_t l = layout_.local_len(hit.tokens, r);
      if (l % B == 0) continue;
      const int32_t src = prefix.back();
      std::vector<int32_t>& pages = s.pages[size_t(r)];
      ensure_free(r, 1);
      pools_[size_t(r)].allocate_into(1, &pages);
      seq_refs_[size_t(r)][size_t(pages.back())] = 1;
      ops_.push_back({PageOp::Copy, int32_t(r), id, pages.back(), src, int32_t(l % B), 0});
      seq_ref(r, src, -1);
      ops_.push_back({PageOp::Unref, int32_t(r), 0, src, -1, 0, 0});
    }
  }
  s.len = hit.tokens;
  grow(id, len);
}

bool BlockManager::can_grow(int64_t id, int64_t len) const {
  const int64_t cur = held_tokens(id);
  if (len <= cur) return true;
  auto it = seqs_.find(id);
  for (int64_t r = 0; r < world(); ++r) {
    const int64_t have = it == seqs_.end() ? 0 : int64_t(it->second.pages[size_t(r)].size());
    if (pages_for(len, r) - have > free_pages(r) + cached_pages(r)) return false;
  }
  return true;
}

void BlockManager::grow(int64_t id, int64_t len) {
  CPI_CHECK(can_grow(id, len), "block manager: no room to grow sequence {} to {} tokens", id,
            len);
  SeqPages& s = record(id);
  if (len <= s.len) return;
  for (int64_t r = 0; r < world(); ++r)
    while (int64_t(s.pages[size_t(r)].size()) < pages_for(len, r)) take_page(id, s, r);
  s.len = len;
}

void BlockManager::commit(int64_t id, const std::vector<int32_t>& tokens, int64_t num_computed) {
  if (!caching()) return;
  auto it = seqs_.find(id);
  CPI_CHECK(it != seqs_.end() && num_computed <= it->second.len &&
                num_computed <= int64_t(tokens.size()),
            "block manager: sequence {} commits {} tokens it does not hold", id, num_computed);
  SeqPages& s = it->second;
  const int64_t B = page_size();
  // A sequence whose newest block was evicted cannot chain more blocks to it.
  if (s.num_blocks > 0 && !s.last_block) return;
  const int64_t before = s.num_blocks;
  for (int64_t k = s.num_blocks; (k + 1) * B <= num_computed; ++k) {
    const int32_t* t = tokens.data() + k * B;
    CachedBlock* b = cache_.find(s.last_block, t);
    if (!b) {
      b = cache_.insert(s.last_block, t, world());
      for (int64_t r = 0; r < world(); ++r) {
        const int64_t end = layout_.local_len((k + 1) * B, r);
        if (end == 0) continue;
        const int32_t page = s.pages[size_t(r)][size_t((end - 1) / B)];
        b->end_page[size_t(r)] = page;
        block_ref(r, page, +1);
      }
    }
    if (s.last_block) --s.last_block->num_users;
    s.last_block = b;
    ++b->num_users;
    s.num_blocks = k + 1;
  }
  if (s.num_blocks > before) cache_.touch_chain(s.last_block);
}

bool BlockManager::release(int64_t id) {
  auto it = seqs_.find(id);
  if (it == seqs_.end()) return false;
  SeqPages& s = it->second;
  ops_.push_back({PageOp::ReleaseSeq, -1, id, -1, -1, 0, 0});
  for (int64_t r = 0; r < world(); ++r)
    for (int32_t p : s.pages[size_t(r)]) seq_ref(r, p, -1);
  if (s.last_block) {
    --s.last_block->num_users;
    cache_.touch_chain(s.last_block);  // freed now: the most recently used
  }
  seqs_.erase(it);
  return true;
}

void BlockManager::take_ops(std::vector<PageOp>* out) {
  out->swap(ops_);
  ops_.clear();
}

}  // namespace cpinfer
