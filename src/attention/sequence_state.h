// The KV-cache side of one sequence: its pages and how many of its tokens are cached.
#pragma once
#include <cstdint>
#include <vector>

namespace cpinfer {

struct SequenceState {
  std::vector<int32_t> pages;  // page p holds positions [p * page_size, (p + 1) * page_size)
  int64_t num_cached = 0;      // tokens whose K/V are in the cache
};

// One sequence's share of a step: append these tokens (at positions num_cached...).
struct SequenceStep {
  SequenceState* seq = nullptr;
  const int32_t* tokens = nullptr;
  int64_t num_tokens = 0;
  bool all_logits = false;  // logits of every new token (tests), else only of the last
  bool argmax_only = false;  // only the argmax of the row is wanted (StepPlan::Seq)
};

}  // namespace cpinfer
