// Thread-safe cache of piece bytes -> BPE ids. Sharded by hash so that concurrent encodes
// rarely contend; each shard stops growing when full (as HF tokenizers' cache does), which
// bounds memory on adversarial input.
#pragma once
#include <array>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace cpinfer {

class BpeCache {
 public:
  static constexpr size_t kMaxPieceBytes = 64;  // longer pieces are not cached
  // Appends the cached ids for piece to out; false if absent.
  bool lookup(std::string_view piece, size_t hash, std::vector<int32_t>& out) const;
  void insert(std::string_view piece, size_t hash, const int32_t* ids, size_t n);
  static size_t hash(std::string_view piece) { return std::hash<std::string_view>{}(piece); }

 private:
  static constexpr size_t kShards = 32;
  static constexpr size_t kShardCapacity = 4096;
  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  struct Shard {
    mutable std::mutex mu;
    std::unordered_map<std::string, std::vector<int32_t>, Hash, std::equal_to<>> map;
  };
  std::array<Shard, kShards> shards_;
};

}  // namespace cpinfer
