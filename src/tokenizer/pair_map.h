// Open-addressing hash map from a token-id pair (left, right) to its merge: the rank (lower
// merges first) and the id of the merged token. Built once, then read-only and lock-free.
#pragma once
#include <cstdint>
#include <vector>

namespace cpinfer {

struct Merge {
  int32_t rank = -1;  // -1: no such merge
  int32_t id = -1;
};

class PairMap {
 public:
  void reserve(size_t n) {
    size_t cap = 16;
    while (cap < 2 * n) cap <<= 1;  // load factor <= 0.5
    slots_.assign(cap, Slot{});
    mask_ = cap - 1;
  }
  // Inserts or overwrites (a later duplicate merge wins, as in HF tokenizers).
  void put(int32_t left, int32_t right, Merge m) {
    const uint64_t k = key(left, right);
    for (size_t i = hash(k) & mask_;; i = (i + 1) & mask_) {
      if (slots_[i].merge.rank < 0 || slots_[i].key == k) {
        slots_[i] = Slot{k, m};
        return;
      }
    }
  }
  Merge get(int32_t left, int32_t right) const {
    const uint64_t k = key(left, right);
    for (size_t i = hash(k) & mask_;; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (s.merge.rank < 0) return Merge{};
      if (s.key == k) return s.merge;
    }
  }

 private:
  struct Slot {
    uint64_t key = 0;
    Merge merge;
  };
  static uint64_t key(int32_t l, int32_t r) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(l)) << 32) | static_cast<uint32_t>(r);
  }
  static size_t hash(uint64_t k) {
    k ^= k >> 29;
    k *= 0xbf58476d1ce4e5b9ull;
    k ^= k >> 32;
    return static_cast<size_t>(k);
  }
  std::vector<Slot> slots_;
  size_t mask_ = 0;
};

}  // namespace cpinfer
