// One request from prompt to finish on a ModelRunner: chunked prefill, then decode
// steps with sampling, stopping at EOS or max_tokens.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "engine/sampler.h"
#include "engine/step_executor.h"
#include "kernels/sampling.h"

namespace cpinfer {

struct GenerateRequest {
  std::vector<int32_t> prompt;
  int64_t max_tokens = 64;
  SamplingParams sampling;
  bool ignore_eos = false;
  bool keep_logits = false;      // keep the logits row that chose each token
  bool keep_prompt_logits = false;  // keep the logits of every prompt position (scoring)
  int64_t prefill_chunk = 2048;  // prompt tokens per prefill step
};

struct GenerateResult {
  std::vector<int32_t> tokens;   // generated ids (an EOS that ended the request included)
  std::string finish_reason;     // "stop" (EOS) or "length"
  double ttft_s = 0;             // start -> first token sampled
  double decode_s = 0;           // first token -> last token
  std::vector<float> logits;     // [tokens, vocab] when keep_logits
  // [prompt tokens, vocab] when keep_prompt_logits: row i is the next-token logits after
  // prompt[0..i] (the last row is the one that chose the first generated token).
  std::vector<float> prompt_logits;
  double decode_tokens_per_s() const {
    return tokens.size() > 1 && decode_s > 0 ? double(tokens.size() - 1) / decode_s : 0.0;
  }
};

// Runs on the driver (rank 0); every step is broadcast to the other ranks through the
// executor. on_token is called with each generated id as soon as it is sampled.
GenerateResult generate(StepExecutor& exec, const GenerateRequest& req, ThreadPool& pool,
                        const std::function<void(int32_t)>& on_token = {});

}  // namespace cpinfer
