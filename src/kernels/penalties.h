// The logit changes applied before temperature, in vLLM's order: logit_bias, then the
// repetition penalty (HF / vLLM), then the frequency and presence penalties (OpenAI).
// They touch only the ids a request has seen or biased, so they are applied to the model's
// row in place and undone after sampling (the caller's logits, logprobs and kept rows stay
// the model's raw ones, as vLLM reports them by default).
#pragma once
#include <cstdint>
#include <unordered_map>
#include <utility>
#include <vector>

#include "kernels/sampling.h"

namespace cpinfer {

// The token counts the penalties read, one entry per distinct id seen (sparse: the prompt's
// and the output's distinct ids, never the vocabulary).
class TokenCounts {
 public:
  struct Entry {
    int32_t id;
    bool in_prompt;  // the repetition penalty counts the prompt and the output
    int32_t output;  // times generated (frequency and presence count the output only)
  };
  void add_prompt(const std::vector<int32_t>& ids);
  void add_output(int32_t id);
  const std::vector<Entry>& entries() const { return entries_; }

 private:
  Entry& entry(int32_t id);
  std::vector<Entry> entries_;                    // contiguous for the per-step pass
  std::unordered_map<int32_t, uint32_t> index_;  // id -> position in entries_
};

// One saved logit: (id, its value before the change).
using SavedLogits = std::vector<std::pair<int32_t, float>>;

// Applies p's logit_bias and penalties to logits[V] in place:
//   l += bias[id]                                      (logit_bias)
//   l = l > 0 ? l / r : l * r  for ids in the prompt or the output  (r: repetition_penalty)
//   l -= frequency * output_count + presence * (output_count > 0)
// and appends each changed id's previous value to *saved (cleared first), so that
// restore_logits puts the row back exactly. O(distinct ids seen + biased ids).
void apply_penalties(float* logits, int64_t V, const SamplingParams& p, const TokenCounts& c,
                     SavedLogits* saved);
// Undoes apply_penalties (in reverse order: an id changed twice gets its first value back).
void restore_logits(float* logits, const SavedLogits& saved);

}  // namespace cpinfer
