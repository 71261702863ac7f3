// The context-parallel layout of this rank, as one value: W = pcp * dcp ranks share every
// sequence's KV cache (context-parallel.md §1, §5), this rank is R = pcp_rank * dcp +
// dcp_rank, positions are dealt out in units of I = interleave tokens, pages hold
// page_size tokens. Everything that depends on the layout (who owns a position, how many
// tokens and pages a rank holds of a sequence) is a method here; nothing recomputes it.
//
// Ownership, W 4, I 8: positions 0-7 -> R0, 8-15 -> R1, 16-23 -> R2, 24-31 -> R3,
// 32-39 -> R0 ...; for L 33 the local lengths are [9, 8, 8, 8]. W 1 is a single rank
// holding every position (owner 0, local index = position).
#pragma once
#include <cstdint>

namespace cpinfer {

class ParallelLayout;

struct CpLayout {
  int64_t pcp = 1, dcp = 1;
  int64_t interleave = 1;  // I
  int64_t page_size = 16;
  int64_t pcp_rank = 0, dcp_rank = 0;  // this rank

  int64_t world() const { return pcp * dcp; }                 // W
  int64_t rank() const { return pcp_rank * dcp + dcp_rank; }  // R

  // Total CP rank that stores position p: (p / I) % W.
  int64_t owner(int64_t p) const { return (p / interleave) % world(); }
  // Tokens of a length-L sequence that rank R stores:
  // base = (L / I / W) * I, rem = L - base * W, base + clamp(rem - R * I, 0, I).
  int64_t local_len(int64_t L, int64_t R) const;
  int64_t local_len(int64_t L) const { return local_len(L, rank()); }
  // Dense local index of position p on its owner: (p / (I * W)) * I + p % I.
  int64_t local_index(int64_t p) const;
  // Pages rank R needs for a sequence of L tokens: ceil(local_len(L, R) / page_size).
  int64_t pages_needed(int64_t L, int64_t R) const;
  int64_t pages_needed(int64_t L) const { return pages_needed(L, rank()); }
  // The same layout as seen from total CP rank R (pcp_rank R / dcp, dcp_rank R % dcp).
  CpLayout as_rank(int64_t R) const;
};

// This rank's CP layout in a validated parallel layout.
CpLayout cp_layout_of(const ParallelLayout& layout);

}  // namespace cpinfer
