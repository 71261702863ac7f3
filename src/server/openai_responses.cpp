#include "server/openai_responses.h"

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

}  // namespace

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

json usage_json(int64_t prompt_tokens, int64_t completion_tokens, int64_t cached_tokens) {
  return {{"prompt_tokens", prompt_tokens},
          {"completion_tokens", completion_tokens},
          {"total_tokens", prompt_tokens + completion_tokens},
          {"prompt_tokens_details", {{"cached_tokens", cached_tokens}}}};
}

json full_response(const ResponseContext& ctx, std::vector<ChoiceState>& choices) {
  json r = envelope(ctx, false);
  json arr = json::array();
  int64_t prompt = 0, completion = 0, cached = 0;
  for (size_t i = 0; i < choices.size(); ++i) {
    ChoiceState& c = choices[i];
    json lp = ctx.logprobs ? logprobs_json(ctx, c.logprobs, &c.text_offset) : json(nullptr);
    json choice = {{"index", i}, {"logprobs", lp}, {"finish_reason", finish_json(c.finish_reason)}};
    if (ctx.chat)
      choice["message"] = {{"role", "assistant"}, {"content", c.text}};
    else
      choice["text"] = c.text;
    arr.push_back(choice);
    prompt += c.prompt_tokens;
    completion += c.completion_tokens;
    cached += c.cached_tokens;
  }
  r["choices"] = arr;
  r["usage"] = usage_json(prompt, completion, cached);
  return r;
}

json stream_chunk(const ResponseContext& ctx, const RequestEvent& ev, bool first,
                  size_t* text_offset, bool include_usage) {
  json r = envelope(ctx, true);
  json choice = {{"index", ev.index}};
  if (ctx.chat) {
    json delta = json::object();
    if (first) delta["role"] = "assistant";
    if (!ev.text.empty() || first) delta["content"] = ev.text;
    choice["delta"] = delta;
  } else {
    choice["text"] = ev.text;
  }
  choice["logprobs"] = ctx.logprobs ? logprobs_json(ctx, ev.logprobs, text_offset) : json(nullptr);
  choice["finish_reason"] = ev.finished ? finish_json(ev.finish_reason) : json(nullptr);
  r["choices"] = json::array({choice});
  if (include_usage) r["usage"] = nullptr;
  return r;
}

json usage_chunk(const ResponseContext& ctx, int64_t prompt_tokens, int64_t cached_tokens,
                 int64_t completion_tokens) {
  json r = envelope(ctx, true);
  r["choices"] = json::array();
  r["usage"] = usage_json(prompt_tokens, completion_tokens, cached_tokens);
  return r;
}

}  // namespace cpinfer
