// Parsing and checking of OpenAI /v1/completions and /v1/chat/completions bodies into the
// engine's RequestParams. Every problem is an ApiError (400, or 404 for an unknown model)
// naming the field, as OpenAI and vLLM answer.
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/request.h"
#include "engine/sampler.h"
#include "tokenizer/tokenizer.h"

namespace cpinfer {

class ChatTemplate;

// Request limits (README, serve): stop strings per request and bytes per stop string, and
// prompts in one /v1/completions call (a list of prompts, each a choice).
constexpr size_t kMaxStopStrings = 256;
constexpr size_t kMaxStopBytes = 256;
constexpr size_t kMaxPrompts = 256;
// n (completions per prompt) is at most kMaxN, and prompts x n at most kMaxChoices.
constexpr int64_t kMaxN = 128;
constexpr size_t kMaxChoices = 256;

struct ProtocolContext {
  const Tokenizer* tokenizer = nullptr;
  const ChatTemplate* chat_template = nullptr;  // null: the model has none (chat -> 400)
  std::string served_model_name;
  int64_t max_model_len = 0;
  int64_t vocab_size = 0;
  // The sampling values of the fields a request omits (temperature, top_p, top_k, min_p,
  // repetition_penalty): OpenAI's, or the model's generation_config.json over them.
  SamplingParams sampling_defaults = openai_sampling_defaults();
  // serve --enable-auto-tool-choice (with --tool-call-parser): tool_choice "auto" is allowed.
  bool enable_auto_tool_choice = false;
};

struct ParsedRequest {
  bool chat = false;
  std::vector<std::vector<int32_t>> prompts;  // one request (choice) each
  RequestParams params;                       // everything but the prompt
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  bool logprobs = false;       // return logprobs (params.top_logprobs >= 0)
  int64_t n = 1;               // completions per prompt (choices: prompts x n)
  bool parse_tool_calls = false;     // chat: tools given and tool_choice "auto"
  bool parallel_tool_calls = true;   // false: only the first tool call is returned
};

ParsedRequest parse_completion_request(const nlohmann::json& body, const ProtocolContext& ctx);
// `ordered` is the same body parsed with its key order kept: the template's tojson writes
// tool schemas in the client's order, as Python does.
ParsedRequest parse_chat_request(const nlohmann::json& body, const nlohmann::ordered_json& ordered,
                                 const ProtocolContext& ctx);

// The chat prompt text through the chat template for the body's `messages`, with `tools`
// and vLLM's `chat_template_kwargs` (an object) passed to the template; throws ApiError for
// malformed messages or a template that raises.
std::string render_chat_prompt(const nlohmann::ordered_json& body, bool add_generation_prompt,
                               const ProtocolContext& ctx);

// The body must be a JSON object; throws ApiError 400 otherwise.
nlohmann::json parse_body(const std::string& body);

}  // namespace cpinfer
