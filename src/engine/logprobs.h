// Log-probabilities of a logits row (log-softmax of the raw model logits, before
// temperature or top-k/top-p, as vLLM and OpenAI report them).
#pragma once
#include <cstdint>

#include "engine/request.h"

namespace cpinfer {

// logits: [V]. Returns the chosen token's log-probability and the top_n most likely
// tokens (ties: lower id first), most likely first.
TokenLogprob token_logprobs(const float* logits, int64_t V, int32_t chosen, int64_t top_n);

}  // namespace cpinfer
