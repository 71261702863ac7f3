// The KV-cache side of one sequence: its pages and how many of its tokens are cached.
#pragma once
#include <cstdint>
#include <vector>

namespace cpinfer {

struct SequenceState {
  std::vector<int32_t> pages;  // page p holds positions [p * page_size, (p + 1) * page_size)
  int64_t num_cached = 0;      // tokens whose K/V are in the cache
};

// What a sequence's last logit row is wanted for in a step (StepPlan::Seq carries it).
enum class RowUse : int32_t {
  Logits = 0,  // the whole row: sampling reads it
  Argmax = 1,  // only its argmax (greedy without penalties, bias, logprobs or kept logits)
  None = 2,    // nothing: a prompt chunk that is not the prompt's last. The step computes no
               // LM-head row for it (and, under PCP, gathers no hidden row).
};

// One sequence's share of a step: append these tokens (at positions num_cached...).
struct SequenceStep {
  SequenceState* seq = nullptr;
  const int32_t* tokens = nullptr;
  int64_t num_tokens = 0;
  bool all_logits = false;  // logits of every new token (tests), else only of the last
  RowUse row_use = RowUse::Logits;  // ignored when all_logits
};

}  // namespace cpinfer
