#include "tokenizer/bpe_cache.h"

namespace cpinfer {

bool BpeCache::lookup(std::string_view piece, size_t hash, std::vector<int32_t>& out) const {
  const Shard& s = shards_[(hash >> 7) % kShards];
  std::lock_guard<std::mutex> lock(s.mu);
  auto it = s.map.find(piece);
  if (it == s.map.end()) return false;
  out.insert(out.end(), it->second.begin(), it->second.end());
  return true;
}

void BpeCache::insert(std::string_view piece, size_t hash, const int32_t* ids, size_t n) {
  Shard& s = shards_[(hash >> 7) % kShards];
  std::lock_guard<std::mutex> lock(s.mu);
  if (s.map.size() >= kShardCapacity) return;
  s.map.try_emplace(std::string(piece), ids, ids + n);
}

}  // namespace cpinfer
