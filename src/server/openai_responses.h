// OpenAI response bodies built from engine events: whole responses (stream = false) and
// SSE chunks (stream = true) for completions and chat completions, with logprobs and usage.
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/request.h"
#include "server/tool_call_parser.h"
#include "tokenizer/tokenizer.h"

namespace cpinfer {

struct ResponseContext {
  std::string id;        // "cmpl-..." or "chatcmpl-..."
  int64_t created = 0;   // unix seconds
  std::string model;
  bool chat = false;
  bool logprobs = false;
  const Tokenizer* tokenizer = nullptr;
  int64_t n = 1;  // choices per prompt: choice i is prompt i / n's (usage counts it once)
  // Chat with tool_choice "auto": tool calls are parsed out of the text in this format
  // (message.tool_calls, delta.tool_calls, finish_reason "tool_calls").
  std::optional<ToolCallFormat> tool_calls;
  bool parallel_tool_calls = true;  // false: only the first call is returned
};

// A random id with a prefix ("cmpl-", "chatcmpl-", "chatcmpl-tool-").
std::string random_id(const char* prefix);

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
  // Streamed with tool-call parsing: the parser of this choice's text so far.
  std::unique_ptr<ToolCallStreamParser> tool_parser;
};

// Folds an event into its choice's state.
void apply_event(const RequestEvent& ev, ChoiceState* st);

// The logprobs object of a choice for these tokens (completions: tokens / token_logprobs /
// top_logprobs / text_offset; chat: content[]). *text_offset advances (completions).
nlohmann::json logprobs_json(const ResponseContext& ctx, const std::vector<TokenLogprob>& lps,
                             size_t* text_offset);

// usage of all choices, with prompt_tokens_details.cached_tokens as the OpenAI API reports
// it: every choice's completion tokens, each prompt's tokens once (n choices share one).
nlohmann::json usage_json(const ResponseContext& ctx, const std::vector<ChoiceState>& choices);

// The whole response for stream = false.
nlohmann::json full_response(const ResponseContext& ctx, std::vector<ChoiceState>& choices);

// One streamed chunk for an event of choice c (before apply_event has consumed it). first:
// the first chunk of this choice (chat sends the assistant role in it). null: nothing to
// send for this event (its text is held back by the tool-call parser).
nlohmann::json stream_chunk(const ResponseContext& ctx, const RequestEvent& ev, bool first,
                            ChoiceState* c, bool include_usage);
// The final usage-only chunk (stream_options.include_usage).
nlohmann::json usage_chunk(const ResponseContext& ctx, const std::vector<ChoiceState>& choices);

}  // namespace cpinfer
