// Rank 0's index of cached KV blocks: automatic prefix caching as vLLM does it. A block is
// B = page-size consecutive token positions [k B, (k + 1) B) of a sequence; once a sequence
// has computed a whole block, the block is registered here under a hash chained with its
// parent block's hash (and a salt naming what else changes the KV: the model, the KV dtype),
// so a later request whose token ids start the same way finds every block of the common
// prefix and reuses their KV instead of recomputing it.
//
// Exactness: the hash only indexes. A block matches when its parent is the block matched
// just before it (pointer identity) and its B token ids are equal, so two prefixes can never
// alias whatever the hash does (tests run with a 2-bit hash to prove it).
//
// The blocks form a tree (a child extends its parent by B tokens). Eviction is least
// recently used among blocks without children, deepest first among blocks used at the same
// time, so a chain is always evicted from its tail and every cached block's parent is
// cached too. Where a block's KV lives is the block manager's business
// (engine/block_manager.h): this file holds no page accounting.
#pragma once
#include <cstdint>
#include <memory>
#include <set>
#include <tuple>
#include <unordered_map>
#include <vector>

namespace cpinfer {

struct CachedBlock {
  int64_t id = 0;
  uint64_t hash = 0;              // chained: hash(parent's hash, tokens, salt)
  CachedBlock* parent = nullptr;  // the block before (null for block 0)
  int64_t index = 0;              // k: the block covers positions [k B, (k + 1) B)
  std::vector<int32_t> tokens;    // [B]
  // Per context-parallel rank R: the page holding the block's last local row on R (the
  // block manager's to fill; -1 where R holds no token of [0, (k + 1) B)).
  std::vector<int32_t> end_page;
  int64_t num_children = 0;
  int64_t num_users = 0;  // sequences whose newest registered block this is
  uint64_t last_used = 0;
};

class PrefixCache {
 public:
  // hash_bits < 64 masks the hash (tests force collisions with it).
  PrefixCache(int64_t block_size, uint64_t salt, int hash_bits = 64);
  PrefixCache(const PrefixCache&) = delete;
  PrefixCache& operator=(const PrefixCache&) = delete;

  int64_t block_size() const { return block_size_; }
  size_t size() const { return blocks_.size(); }
  // The longest chain of cached blocks that tokens[0, max_tokens) starts with, whole blocks
  // only. out[k] covers positions [k B, (k + 1) B).
  void match(const int32_t* tokens, int64_t max_tokens, std::vector<CachedBlock*>* out) const;
  // The child of `parent` (null: a first block) holding tokens[0, B), or null.
  CachedBlock* find(const CachedBlock* parent, const int32_t* tokens) const;
  // Registers a new child of `parent` (find() must have returned null); end_page is left
  // for the caller. The block is used now.
  CachedBlock* insert(CachedBlock* parent, const int32_t* tokens, int64_t world);
  // Marks `b` and every block before it as used now (one tick: the chain is evicted from
  // its tail first).
  void touch_chain(CachedBlock* b);
  // The block to evict next (least recently used without children), or null when empty.
  CachedBlock* victim() const;
  // Forgets a block without children.
  void erase(CachedBlock* b);
  // The chained hash of a block (masked to hash_bits).
  uint64_t hash_of(uint64_t parent_hash, const int32_t* tokens) const;

 private:
  using LruKey = std::tuple<uint64_t, int64_t, int64_t>;  // (last_used, -index, id)
  static LruKey lru_key(const CachedBlock* b) { return {b->last_used, -b->index, b->id}; }
  void set_used(CachedBlock* b, uint64_t tick);

  int64_t block_size_;
  uint64_t salt_, mask_;
  int64_t next_id_ = 1;
  uint64_t clock_ = 0;
  std::unordered_map<int64_t, std::unique_ptr<CachedBlock>> blocks_;  // by id
  std::unordered_multimap<uint64_t, CachedBlock*> by_hash_;
  std::set<LruKey> leaves_;  // blocks without children, eviction order
};

}  // namespace cpinfer
