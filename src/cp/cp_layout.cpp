#include "cp/cp_layout.h"

#include <algorithm>

#include "dist/parallel_layout.h"

namespace cpinfer {

int64_t CpLayout::local_len(int64_t L, int64_t R) const {
  const int64_t I = interleave, W = world();
  // Whole rounds of W interleave units give every rank `base` tokens; the remainder
  // fills ranks 0, 1, ... one unit each. L 33, W 4, I 8: base 8, rem 1 -> [9, 8, 8, 8].
  const int64_t base = (L / I / W) * I;
  const int64_t rem = L - base * W;
  return base + std::clamp<int64_t>(rem - R * I, 0, I);
}

int64_t CpLayout::local_index(int64_t p) const {
  // Round p / (I W), unit offset p % I. W 4, I 8: p 35 is round 1, offset 3 -> index 11.
  return (p / (interleave * world())) * interleave + p % interleave;
}

int64_t CpLayout::pages_needed(int64_t L, int64_t R) const {
  return (local_len(L, R) + page_size - 1) / page_size;
}

CpLayout CpLayout::as_rank(int64_t R) const {
  CpLayout c = *this;
  c.pcp_rank = R / dcp;
  c.dcp_rank = R % dcp;
  return c;
}

CpLayout cp_layout_of(const ParallelLayout& layout) {
  const LayoutSpec& s = layout.spec();
  CpLayout c;
  c.pcp = s.pcp;
  c.dcp = s.dcp;
  c.interleave = s.interleave;
  c.page_size = s.page_size;
  c.pcp_rank = layout.pcp_rank();
  c.dcp_rank = layout.dcp_rank();
  return c;
}

}  // namespace cpinfer
