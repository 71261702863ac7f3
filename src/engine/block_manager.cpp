#include "engine/block_manager.h"

#include "core/error.h"

namespace cpinfer {

BlockManager::BlockManager(int64_t pages_per_rank, const CpLayout& layout)
    : pages_per_rank_(pages_per_rank), layout_(layout), used_(size_t(layout.world()), 0) {
  CPI_CHECK(pages_per_rank >= 1 && layout.page_size >= 1 && layout.world() >= 1 &&
                layout.interleave >= 1,
            "block manager: bad shape (pages {}, page size {}, world {}, interleave {})",
            pages_per_rank, layout.page_size, layout.world(), layout.interleave);
}

double BlockManager::usage(int64_t rank) const {
  return double(used_[size_t(rank)]) / double(pages_per_rank_);
}

int64_t BlockManager::pages_for(int64_t len, int64_t rank) const {
  return layout_.pages_needed(len, rank);
}

int64_t BlockManager::held_tokens(int64_t id) const {
  auto it = held_.find(id);
  return it == held_.end() ? 0 : it->second;
}

bool BlockManager::can_grow(int64_t id, int64_t len) const {
  const int64_t cur = held_tokens(id);
  if (len <= cur) return true;
  for (int64_t r = 0; r < world(); ++r)
    if (used_[size_t(r)] + pages_for(len, r) - pages_for(cur, r) > pages_per_rank_) return false;
  return true;
}

void BlockManager::grow(int64_t id, int64_t len) {
  CPI_CHECK(can_grow(id, len), "block manager: no room to grow sequence {} to {} tokens", id,
            len);
  const int64_t cur = held_tokens(id);
  if (len <= cur) return;
  for (int64_t r = 0; r < world(); ++r) used_[size_t(r)] += pages_for(len, r) - pages_for(cur, r);
  held_[id] = len;
}

bool BlockManager::release(int64_t id) {
  auto it = held_.find(id);
  if (it == held_.end()) return false;
  for (int64_t r = 0; r < world(); ++r) used_[size_t(r)] -= pages_for(it->second, r);
  held_.erase(it);
  return true;
}

bool BlockManager::fits_alone(int64_t len) const {
  for (int64_t r = 0; r < world(); ++r)
    if (pages_for(len, r) > pages_per_rank_) return false;
  return true;
}

}  // namespace cpinfer
