#include "cp/kv_ownership.h"

#include <algorithm>

namespace cpinfer {

int64_t KvOwnership::owner(int64_t p) const { return (p / interleave) % world; }

int64_t KvOwnership::local_len(int64_t L, int64_t R) const {
  const int64_t I = interleave, W = world;
  // Whole rounds of W interleave units give every rank `base` tokens; the remainder
  // fills ranks 0, 1, ... one unit each. L 33, W 4, I 8: base 8, rem 1 -> [9, 8, 8, 8].
  const int64_t base = (L / I / W) * I;
  const int64_t rem = L - base * W;
  return base + std::clamp<int64_t>(rem - R * I, 0, I);
}

int64_t KvOwnership::local_index(int64_t p) const {
  // Round p / (I W), unit offset p % I. W 4, I 8: p 35 is round 1, offset 3 -> index 11.
  return (p / (interleave * world)) * interleave + p % interleave;
}

}  // namespace cpinfer
