#include "server/openai_responses.h"

#include <atomic>
#include <random>

#include <fmt/format.h>

namespace cpinfer {

using nlohmann::json;

namespace {

json finish_json(const std::string& reason) {
  return reason.empty() ? json(nullptr) : json(reason);
}

json bytes_json(const std::string& s) {
  json b = json::array();
  for (unsigned char c : s) b.push_back(int(c));
  return b;
}

// A token's text for logprobs; ids past the tokenizer's vocabulary have none.
std::string token_text(const Tokenizer& tok, int32_t id) {
  return id < tok.vocab_size() ? tok.token_bytes(id) : std::string();
}

const char* object_name(const ResponseContext& ctx, bool chunk) {
  if (ctx.chat) return chunk ? "chat.completion.chunk" : "chat.completion";
  return "text_completion";
}

json envelope(const ResponseContext& ctx, bool chunk) {
  return {{"id", ctx.id}, {"object", object_name(ctx, chunk)}, {"created", ctx.created},
          {"model", ctx.model}};
}

// A tool call as OpenAI writes it: whole (message.tool_calls), or a streamed piece
// (delta.tool_calls: id, type and name in a call's first piece only).
json tool_call_json(int index, const std::string& name, const std::string& arguments,
                    bool streamed) {
  json fn = json::object();
  json call = json::object();
  if (streamed) call["index"] = index;
  if (!name.empty()) {
    call["id"] = random_id("chatcmpl-tool-");
    call["type"] = "function";
    fn["name"] = name;
  }
  fn["arguments"] = arguments;
  call["function"] = fn;
  return call;
}

// A finished choice that made tool calls ends with "tool_calls", as vLLM's.
std::string tool_finish_reason(const std::string& reason, bool called) {
  return called && (reason == "stop" || reason == "length") ? "tool_calls" : reason;
}

// The chat message of a whole response.
json chat_message(const ResponseContext& ctx, ChoiceState& c) {
  json m = {{"role", "assistant"}, {"content", c.text}};
  if (!ctx.tool_calls) return m;
  ParsedToolCalls parsed = parse_tool_calls(*ctx.tool_calls, c.text);
  if (!ctx.parallel_tool_calls && parsed.calls.size() > 1) parsed.calls.resize(1);
  json calls = json::array();
  for (const ToolCall& call : parsed.calls)
    calls.push_back(tool_call_json(0, call.name, call.arguments, false));
  if (!parsed.calls.empty()) {
    m["content"] = parsed.content.empty() ? json(nullptr) : json(parsed.content);
    c.finish_reason = tool_finish_reason(c.finish_reason, true);
  }
  m["tool_calls"] = calls;
  return m;
}

// The chat delta of a streamed event, through the choice's tool-call parser.
json tool_delta(const ResponseContext& ctx, const RequestEvent& ev, bool first, ChoiceState* c,
                std::string* finish_reason) {
  if (!c->tool_parser) c->tool_parser = std::make_unique<ToolCallStreamParser>(*ctx.tool_calls);
  const ToolParseDelta d = c->tool_parser->feed(ev.text, ev.finished);
  json delta = json::object();
  if (first) delta["role"] = "assistant";
  if (!d.content.empty() || first) delta["content"] = d.content;
  json calls = json::array();
  for (const ToolCallDelta& call : d.calls)
    if (ctx.parallel_tool_calls || call.index == 0)
      calls.push_back(tool_call_json(call.index, call.name, call.arguments, true));
  if (!calls.empty()) delta["tool_calls"] = calls;
  *finish_reason = tool_finish_reason(*finish_reason, c->tool_parser->num_calls() > 0);
  return delta;
}

}  // namespace

std::string random_id(const char* prefix) {
  static std::atomic<uint64_t> counter{0};
  thread_local std::mt19937_64 rng(std::random_device{}());
  return fmt::format("{}{:016x}{:04x}", prefix, rng(), counter.fetch_add(1) & 0xffff);
}

void apply_event(const RequestEvent& ev, ChoiceState* st) {
  st->text += ev.text;
  st->logprobs.insert(st->logprobs.end(), ev.logprobs.begin(), ev.logprobs.end());
  st->prompt_tokens = ev.prompt_tokens;
  st->cached_tokens = ev.cached_tokens;
  st->completion_tokens = ev.completion_tokens;
  if (ev.finished) {
    st->finished = true;
    st->finish_reason = ev.finish_reason;
    st->error = ev.error;
  }
}

json logprobs_json(const ResponseContext& ctx, const std::vector<TokenLogprob>& lps,
                   size_t* text_offset) {
  const Tokenizer& tok = *ctx.tokenizer;
  if (ctx.chat) {
    json content = json::array();
    for (const TokenLogprob& lp : lps) {
      const std::string s = token_text(tok, lp.token);
      json top = json::array();
      for (const auto& [id, l] : lp.top) {
        const std::string ts = token_text(tok, id);
        top.push_back({{"token", ts}, {"logprob", l}, {"bytes", bytes_json(ts)}});
      }
      content.push_back(
          {{"token", s}, {"logprob", lp.logprob}, {"bytes", bytes_json(s)}, {"top_logprobs", top}});
    }
    return {{"content", content}};
  }
  json tokens = json::array(), token_logprobs = json::array(), top = json::array(),
       offsets = json::array();
  for (const TokenLogprob& lp : lps) {
    const std::string s = token_text(tok, lp.token);
    tokens.push_back(s);
    token_logprobs.push_back(lp.logprob);
    json t = json::object();
    for (const auto& [id, l] : lp.top) t[token_text(tok, id)] = l;
    top.push_back(t);
    offsets.push_back(*text_offset);
    *text_offset += s.size();
  }
  return {{"tokens", tokens}, {"token_logprobs", token_logprobs}, {"top_logprobs", top},
          {"text_offset", offsets}};
}

json usage_json(const ResponseContext& ctx, const std::vector<ChoiceState>& choices) {
  int64_t prompt_tokens = 0, completion_tokens = 0, cached_tokens = 0;
  for (size_t i = 0; i < choices.size(); ++i) {
    const ChoiceState& c = choices[i];
    completion_tokens += c.completion_tokens;
    if (i % size_t(ctx.n) != 0) continue;  // the same prompt as choice i - i % n
    prompt_tokens += c.prompt_tokens;
    cached_tokens += c.cached_tokens;
  }
  return {{"prompt_tokens", prompt_tokens},
          {"completion_tokens", completion_tokens},
          {"total_tokens", prompt_tokens + completion_tokens},
          {"prompt_tokens_details", {{"cached_tokens", cached_tokens}}}};
}

json full_response(const ResponseContext& ctx, std::vector<ChoiceState>& choices) {
  json r = envelope(ctx, false);
  json arr = json::array();
  for (size_t i = 0; i < choices.size(); ++i) {
    ChoiceState& c = choices[i];
    json choice = {{"index", i}};
    if (ctx.chat)
      choice["message"] = chat_message(ctx, c);  // before finish_reason: tool calls change it
    else
      choice["text"] = c.text;
    choice["logprobs"] = ctx.logprobs ? logprobs_json(ctx, c.logprobs, &c.text_offset) : json(nullptr);
    choice["finish_reason"] = finish_json(c.finish_reason);
    arr.push_back(choice);
  }
  r["choices"] = arr;
  r["usage"] = usage_json(ctx, choices);
  return r;
}

json stream_chunk(const ResponseContext& ctx, const RequestEvent& ev, bool first, ChoiceState* c,
                  bool include_usage) {
  json r = envelope(ctx, true);
  json choice = {{"index", ev.index}};
  std::string finish_reason = ev.finish_reason;
  if (ctx.chat && ctx.tool_calls) {
    choice["delta"] = tool_delta(ctx, ev, first, c, &finish_reason);
    // Text the parser holds back (maybe a call) makes no chunk, as vLLM's.
    if (choice["delta"].empty() && !ev.finished && !ctx.logprobs) return nullptr;
  } else if (ctx.chat) {
    json delta = json::object();
    if (first) delta["role"] = "assistant";
    if (!ev.text.empty() || first) delta["content"] = ev.text;
    choice["delta"] = delta;
  } else {
    choice["text"] = ev.text;
  }
  choice["logprobs"] = ctx.logprobs ? logprobs_json(ctx, ev.logprobs, &c->text_offset) : json(nullptr);
  choice["finish_reason"] = ev.finished ? finish_json(finish_reason) : json(nullptr);
  r["choices"] = json::array({choice});
  if (include_usage) r["usage"] = nullptr;
  return r;
}

json usage_chunk(const ResponseContext& ctx, const std::vector<ChoiceState>& choices) {
  json r = envelope(ctx, true);
  r["choices"] = json::array();
  r["usage"] = usage_json(ctx, choices);
  return r;
}

}  // namespace cpinfer
