// Which context-parallel rank stores which token of a request (context-parallel.md §5).
// W = pcp * dcp ranks, R = pcp_rank * dcp + dcp_rank, I = interleave.
// Example, W 4, I 8: positions 0-7 -> R0, 8-15 -> R1, 16-23 -> R2, 24-31 -> R3,
// 32-39 -> R0 ...; for L 33 the local lengths are [9, 8, 8, 8].
#pragma once
#include <cstdint>

namespace cpinfer {

struct KvOwnership {
  int64_t world = 1;       // W
  int64_t interleave = 1;  // I

  // Total CP rank that stores position p: (p / I) % W.
  int64_t owner(int64_t p) const;
  // Tokens of a length-L sequence that rank R stores:
  // base = (L / I / W) * I, rem = L - base * W, base + clamp(rem - R * I, 0, I).
  int64_t local_len(int64_t L, int64_t R) const;
  // Dense local index of position p on its owner: (p / (I * W)) * I + p % I.
  int64_t local_index(int64_t p) const;
};

}  // namespace cpinfer
