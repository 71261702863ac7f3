#include "engine/prefix_cache.h"

#include <algorithm>

#include "core/error.h"

namespace cpinfer {

namespace {
uint64_t mix64(uint64_t x) {  // splitmix64's finalizer
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}
}  // namespace

PrefixCache::PrefixCache(int64_t block_size, uint64_t salt, int hash_bits)
    : block_size_(block_size),
      salt_(salt),
      mask_(hash_bits >= 64 ? ~0ull : (1ull << hash_bits) - 1) {
  CPI_CHECK(block_size >= 1 && hash_bits >= 1, "prefix cache: bad block size {} or hash bits {}",
            block_size, hash_bits);
}

uint64_t PrefixCache::hash_of(uint64_t parent_hash, const int32_t* tokens) const {
  uint64_t h = mix64(parent_hash ^ salt_);
  for (int64_t i = 0; i < block_size_; ++i) h = mix64(h + uint64_t(uint32_t(tokens[i])) + 1);
  return h & mask_;
}

CachedBlock* PrefixCache::find(const CachedBlock* parent, const int32_t* tokens) const {
  const uint64_t h = hash_of(parent ? parent->hash : 0, tokens);
  auto [lo, hi] = by_hash_.equal_range(h);
  for (auto it = lo; it != hi; ++it) {
    CachedBlock* b = it->second;
    if (b->parent == parent && std::equal(b->tokens.begin(), b->tokens.end(), tokens)) return b;
  }
  return nullptr;
}

void PrefixCache::match(const int32_t* tokens, int64_t max_tokens,
                        std::vector<CachedBlock*>* out) const {
  out->clear();
  const CachedBlock* parent = nullptr;
  for (int64_t k = 0; (k + 1) * block_size_ <= max_tokens; ++k) {
    CachedBlock* b = find(parent, tokens + k * block_size_);
    if (!b) break;
    out->push_back(b);
    parent = b;
  }
}

void PrefixCache::set_used(CachedBlock* b, uint64_t tick) {
  if (b->num_children == 0) leaves_.erase(lru_key(b));
  b->last_used = tick;
  if (b->num_children == 0) leaves_.insert(lru_key(b));
}

CachedBlock* PrefixCache::insert(CachedBlock* parent, const int32_t* tokens, int64_t world) {
  auto owned = std::make_unique<CachedBlock>();
  CachedBlock* b = owned.get();
  b->id = next_id_++;
  b->parent = parent;
  b->index = parent ? parent->index + 1 : 0;
  b->hash = hash_of(parent ? parent->hash : 0, tokens);
  b->tokens.assign(tokens, tokens + block_size_);
  b->end_page.assign(size_t(world), -1);
  b->last_used = ++clock_;
  if (parent) {
    if (parent->num_children++ == 0) leaves_.erase(lru_key(parent));
  }
  leaves_.insert(lru_key(b));
  by_hash_.emplace(b->hash, b);
  blocks_.emplace(b->id, std::move(owned));
  return b;
}

void PrefixCache::touch_chain(CachedBlock* b) {
  const uint64_t tick = ++clock_;
  for (; b; b = b->parent) set_used(b, tick);
}

CachedBlock* PrefixCache::victim() const {
  if (leaves_.empty()) return nullptr;
  return blocks_.at(std::get<2>(*leaves_.begin())).get();
}

void PrefixCache::erase(CachedBlock* b) {
  CPI_ASSERT(b->num_children == 0);
  leaves_.erase(lru_key(b));
  auto [lo, hi] = by_hash_.equal_range(b->hash);
  for (auto it = lo; it != hi; ++it)
    if (it->second == b) {
      by_hash_.erase(it);
      break;
    }
  if (CachedBlock* p = b->parent) {
    if (--p->num_children == 0) leaves_.insert(lru_key(p));
  }
  blocks_.erase(b->id);
}

}  // namespace cpinfer
