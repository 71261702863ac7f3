// OpenAI response bodies built from engine events: whole responses (stream = false) and
// SSE chunks (stream = true) for completions and chat completions, with logprobs and usage.
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/request.h"
#include "tokenizer/tokenizer.h"

namespace cpinfer {

struct ResponseContext {
  std::string id;        // "cmpl-..." or "chatcmpl-..."
  int64_t created = 0;   // unix seconds
  std::string model;
  bool chat = false;
  bool logprobs = false;
  const Tokenizer* tokenizer = nullptr;
};

// What one choice (one prompt's request) has produced so far.
struct ChoiceState {
  std::string text;
  std::vector<TokenLogprob> logprobs;
  size_t text_offset = 0;  // completions logprobs: bytes of token text so far
  bool finished = false;
  std::string finish_reason;
  std::string error;
  int64_t prompt_tokens = 0, completion_tokens = 0;
  int64_t cached_tokens = 0;  // prompt tokens the prefix cache supplied
};

// Folds an event into its choice's state.
void apply_event(const RequestEvent& ev, ChoiceState* st);

// The logprobs object of a choice for these tokens (completions: tokens / token_logprobs /
// top_logprobs / text_offset; chat: content[]). *text_offset advances (completions).
nlohmann::json logprobs_json(const ResponseContext& ctx, const std::vector<TokenLogprob>& lps,
                             size_t* text_offset);

// usage, with prompt_tokens_details.cached_tokens as the OpenAI API reports it.
nlohmann::json usage_json(int64_t prompt_tokens, int64_t completion_tokens,
                          int64_t cached_tokens);

// The whole response for stream = false.
nlohmann::json full_response(const ResponseContext& ctx, std::vector<ChoiceState>& choices);

// One streamed chunk for an event (before apply_event has consumed it). first: the first
// chunk of this choice (chat sends the assistant role in it).
nlohmann::json stream_chunk(const ResponseContext& ctx, const RequestEvent& ev, bool first,
                            size_t* text_offset, bool include_usage);
// The final usage-only chunk (stream_options.include_usage).
nlohmann::json usage_chunk(const ResponseContext& ctx, int64_t prompt_tokens, int64_t cached_tokens,
                           int64_t completion_tokens);

}  // namespace cpinfer
