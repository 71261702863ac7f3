#include "server/openai_protocol.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include "chat/chat_template.h"
#include "core/error.h"
#include "core/json_parse.h"
#include "server/api_error.h"

namespace cpinfer {

using nlohmann::json;

namespace {

const json* field(const json& body, const char* key) {
  auto it = body.find(key);
  return it == body.end() || it->is_null() ? nullptr : &*it;
}

[[noreturn]] void bad(const std::string& param, const std::string& message) {
  throw ApiError(400, message, param);
}

// Short renderings of a client's text or value for messages (a 16 MiB string is not
// echoed back; a character cut in half becomes U+FFFD when the error is written).
std::string clip(const std::string& s) { return s.size() > 80 ? s.substr(0, 77) + "..." : s; }
// A JSON value as error messages show it (80 characters at most).
std::string excerpt(const json& v) { return json_excerpt(v, 80); }


int64_t get_int(const json& v, const char* key) {
  if (v.is_number_float()) {
    // 5.0 is taken as 5; 5.5 is not an integer; 1e300 (or 1e400, read as infinity) is out
    // of range and must not reach the (undefined) conversion to int64.
    const double d = v.get<double>();
    if (!(d == std::floor(d)))
      bad(key, fmt::format("'{}' must be an integer, got {}", key, excerpt(v)));
    if (!(d >= -9223372036854775808.0 && d < 9223372036854775808.0))
      bad(key, fmt::format("'{}' is out of range (a 64-bit integer): {}", key, excerpt(v)));
    return int64_t(d);
  }
  if (!v.is_number_integer())
    bad(key, fmt::format("'{}' must be an integer, got {}", key, excerpt(v)));
  if (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(std::numeric_limits<int64_t>::max()))
    bad(key, fmt::format("'{}' is too large: {}", key, excerpt(v)));
  return v.get<int64_t>();
}

double get_number(const json& v, const char* key) {
  if (!v.is_number()) bad(key, fmt::format("'{}' must be a number, got {}", key, excerpt(v)));
  const double d = v.get<double>();
  if (!std::isfinite(d)) bad(key, fmt::format("'{}' must be a finite number, got {}", key, excerpt(v)));
  return d;
}

bool get_bool(const json& v, const char* key) {
  if (!v.is_boolean()) bad(key, fmt::format("'{}' must be a boolean, got {}", key, excerpt(v)));
  return v.get<bool>();
}

std::vector<int32_t> token_ids(const json& arr, const char* key, int64_t vocab) {
  std::vector<int32_t> out;
  for (const json& t : arr) {
    if (!t.is_number_integer())
      bad(key, fmt::format("'{}' token ids must be integers, got {}", key, excerpt(t)));
    const int64_t id = t.get<int64_t>();
    if (id < 0 || id >= vocab)
      bad(key, fmt::format("token id {} in '{}' is outside the vocabulary [0, {})", id, key, vocab));
    out.push_back(int32_t(id));
  }
  return out;
}

// No request field is accepted and then ignored: every top-level field of a body is one the
// endpoint honours, or one whose only accepted value is the one that changes nothing
// (response_format "text"), or a 400 names it.
// `user` (the OpenAI end-user id for abuse monitoring) has no effect on a generation and is
// accepted as such.
void refuse_unknown_fields(const json& b, std::initializer_list<const char*> endpoint) {
  static const char* kCommon[] = {
      "model", "temperature", "top_p", "top_k", "seed", "stop", "stop_token_ids", "ignore_eos",
      "skip_special_tokens", "n", "best_of", "presence_penalty", "frequency_penalty",
      "logit_bias", "stream", "stream_options", "add_special_tokens", "max_tokens", "user",
      "repetition_penalty", "min_p"};
  for (const auto& item : b.items()) {
    const std::string& key = item.key();  // (a named reference: clang 14 cannot capture a binding)
    const auto is_key = [&key](const char* k) { return key == k; };
    if (std::find_if(std::begin(kCommon), std::end(kCommon), is_key) != std::end(kCommon) ||
        std::find_if(endpoint.begin(), endpoint.end(), is_key) != endpoint.end())
      continue;
    bad(key, fmt::format("'{}' is not supported by this server", clip(key)));
  }
  if (const json* v = field(b, "user"))
    if (!v->is_string()) bad("user", "'user' must be a string");
}

// A number field that must lie in [lo, hi] (lo excluded when open_lo).
float get_in_range(const json& v, const char* key, double lo, double hi, bool open_lo = false) {
  const double d = get_number(v, key);
  if (!(open_lo ? d > lo : d >= lo) || !(d <= hi))
    bad(key, fmt::format("'{}' must be in {}{}, {}], got {}", key, open_lo ? "(" : "[", lo, hi,
                         excerpt(v)));
  return float(d);
}

// logit_bias: {"token id": bias in [-100, 100], ...}; each id must be in the vocabulary.
std::vector<std::pair<int32_t, float>> parse_logit_bias(const json& v, int64_t vocab) {
  if (!v.is_object())
    bad("logit_bias", fmt::format("'logit_bias' must be an object mapping token ids (strings) "
                                  "to biases in [-100, 100], got {}", excerpt(v)));
  std::map<int32_t, float> bias;  // "5" and "05" name the same id: the later one counts
  for (const auto& [key, value] : v.items()) {
    if (key.empty() || key.size() > 18 ||
        !std::all_of(key.begin(), key.end(), [](char c) { return c >= '0' && c <= '9'; }))
      bad("logit_bias", fmt::format("'logit_bias' key '{}' is not a token id (a non-negative "
                                    "integer, as a string)", clip(key)));
    const int64_t id = std::stoll(key);
    if (id >= vocab)
      bad("logit_bias", fmt::format("token id {} in 'logit_bias' is outside the vocabulary "
                                    "[0, {})", id, vocab));
    const double x = get_number(value, "logit_bias");
    if (!(x >= -100 && x <= 100))
      bad("logit_bias", fmt::format("'logit_bias' of token id {} must be in [-100, 100], got {}",
                                    id, excerpt(value)));
    bias[int32_t(id)] = float(x);
  }
  return {bias.begin(), bias.end()};
}

// Fields both endpoints share: model, sampling, stop, stream, unsupported options.
void parse_common(const json& b, const ProtocolContext& ctx, ParsedRequest* r) {
  if (!b.is_object()) bad("", "the request body must be a JSON object");
  if (const json* m = field(b, "model")) {
    if (!m->is_string()) bad("model", "'model' must be a string");
    if (m->get<std::string>() != ctx.served_model_name)
      throw ApiError(404, fmt::format("The model `{}` does not exist.",
                                      clip(m->get<std::string>())),
                     "model");
  }
  RequestParams& p = r->params;
  // Omitted fields: OpenAI's defaults, or the model's generation_config.json values.
  p.sampling = ctx.sampling_defaults;
  if (const json* v = field(b, "temperature")) {
    double t = get_number(*v, "temperature");
    if (!(t >= 0)) bad("temperature", fmt::format("temperature must be >= 0, got {}", t));
    p.sampling.temperature = float(t);
  }
  if (const json* v = field(b, "top_p")) {
    double t = get_number(*v, "top_p");
    if (!(t > 0 && t <= 1)) bad("top_p", fmt::format("top_p must be in (0, 1], got {}", t));
    p.sampling.top_p = float(t);
  }
  if (const json* v = field(b, "top_k")) {
    int64_t k = get_int(*v, "top_k");
    if (k < -1) bad("top_k", fmt::format("top_k must be -1 (off), 0 (off) or >= 1, got {}", k));
    p.sampling.top_k = k < 1 ? 0 : k;
  }
  if (const json* v = field(b, "seed")) {
    p.sampling.seed = uint64_t(get_int(*v, "seed"));
    p.random_seed = false;
  }
  if (const json* v = field(b, "stop")) {
    // Every stop string is checked against the text after every token, so both the count
    // and the length are capped (kMaxStopStrings, kMaxStopBytes).
    if (v->is_array() && v->size() > kMaxStopStrings)
      bad("stop", fmt::format("'stop' has {} strings; at most {} are allowed", v->size(),
                              kMaxStopStrings));
    auto add = [&](const json& s) {
      if (!s.is_string()) bad("stop", "'stop' must be a string or an array of strings");
      const std::string& text = s.get_ref<const std::string&>();
      if (text.size() > kMaxStopBytes)
        bad("stop", fmt::format("a 'stop' string has {} bytes; at most {} are allowed",
                                text.size(), kMaxStopBytes));
      p.stop.push_back(text);
    };
    if (v->is_string()) {
      add(*v);
    } else if (v->is_array()) {
      for (const json& s : *v) add(s);
    } else {
      bad("stop", "'stop' must be a string or an array of strings");
    }
  }
  if (const json* v = field(b, "stop_token_ids")) {
    if (!v->is_array()) bad("stop_token_ids", "'stop_token_ids' must be an array of token ids");
    p.stop_token_ids = token_ids(*v, "stop_token_ids", ctx.vocab_size);
  }
  if (const json* v = field(b, "ignore_eos")) p.ignore_eos = get_bool(*v, "ignore_eos");
  if (const json* v = field(b, "skip_special_tokens"))
    p.skip_special_tokens = get_bool(*v, "skip_special_tokens");
  if (const json* v = field(b, "n")) {
    const int64_t n = get_int(*v, "n");
    if (n < 1 || n > kMaxN)
      bad("n", fmt::format("'n' must be in [1, {}], got {}", kMaxN, excerpt(*v)));
    r->n = n;
  }
  // best_of = n returns every completion it makes: that is n. More would need a ranking.
  if (const json* v = field(b, "best_of"))
    if (const int64_t best_of = get_int(*v, "best_of"); best_of != 1 && best_of != r->n)
      bad("best_of", fmt::format("'best_of' {} is not supported: only best_of = n ({}) is "
                                 "(every completion is returned)", excerpt(*v), r->n));
  if (const json* v = field(b, "min_p")) p.sampling.min_p = get_in_range(*v, "min_p", 0, 1);
  if (const json* v = field(b, "repetition_penalty")) {
    const double r = get_number(*v, "repetition_penalty");
    if (!(r > 0))
      bad("repetition_penalty",
          fmt::format("'repetition_penalty' must be > 0 (1: off), got {}", excerpt(*v)));
    p.sampling.repetition_penalty = float(r);
  }
  if (const json* v = field(b, "presence_penalty"))
    p.sampling.presence_penalty = get_in_range(*v, "presence_penalty", -2, 2);
  if (const json* v = field(b, "frequency_penalty"))
    p.sampling.frequency_penalty = get_in_range(*v, "frequency_penalty", -2, 2);
  if (const json* v = field(b, "logit_bias"))
    p.sampling.logit_bias = parse_logit_bias(*v, ctx.vocab_size);
  if (const json* v = field(b, "stream")) r->stream = get_bool(*v, "stream");
  if (const json* v = field(b, "stream_options")) {
    if (!r->stream) bad("stream_options", "'stream_options' is only allowed with stream = true");
    if (!v->is_object()) bad("stream_options", "'stream_options' must be an object");
    // Only include_usage is honoured; any other option (vLLM's continuous_usage_stats, say)
    // is refused by name rather than dropped.
    for (const auto& item : v->items())
      if (item.key() != "include_usage")
        bad("stream_options", fmt::format("'stream_options.{}' is not supported by this server "
                                          "(only include_usage)", clip(item.key())));
    if (const json* u = field(*v, "include_usage"))
      r->include_usage = get_bool(*u, "stream_options.include_usage");
  }
}

// max_tokens: checked against the longest prompt; default: what is left of the context.
void parse_max_tokens(const json& b, const char* key, const ProtocolContext& ctx,
                      ParsedRequest* r) {
  int64_t longest = 0;
  for (const auto& p : r->prompts) longest = std::max<int64_t>(longest, int64_t(p.size()));
  if (longest >= ctx.max_model_len)
    bad("prompt", fmt::format("This model's maximum context length is {} tokens. However, your "
                              "prompt has {} tokens. Please reduce the length of the prompt.",
                              ctx.max_model_len, longest));
  const json* v = field(b, key);
  if (!v) {
    r->params.max_tokens = ctx.max_model_len - longest;
    return;
  }
  const int64_t m = get_int(*v, key);
  if (m < 1) bad(key, fmt::format("'{}' must be at least 1, got {}", key, m));
  if (m > ctx.max_model_len - longest) {  // not longest + m: that overflows for a huge m
    const std::string total = m > std::numeric_limits<int64_t>::max() - longest
                                  ? fmt::format("more than {}", std::numeric_limits<int64_t>::max())
                                  : fmt::to_string(longest + m);
    bad(key, fmt::format("This model's maximum context length is {} tokens. However, you "
                         "requested {} tokens ({} in the prompt, {} for the completion). Please "
                         "reduce the length of the prompt or completion.",
                         ctx.max_model_len, total, longest, m));
  }
  r->params.max_tokens = m;
}

void check_num_choices(const ParsedRequest& r) {
  if (r.prompts.size() * size_t(r.n) > kMaxChoices)
    bad("n", fmt::format("{} prompts x n = {} asks for {} choices; at most {} are allowed in one "
                         "request", r.prompts.size(), r.n, r.prompts.size() * size_t(r.n),
                         kMaxChoices));
}

// tools: [{"type": "function", "function": {"name": string, ...}}, ...]. tool_choice: "none"
// (tools only go to the chat template), "auto" (the default with tools: calls are parsed
// from the output, which needs serve --enable-auto-tool-choice); "required" and a named
// function would need constrained decoding, which this server does not have.
void parse_tools(const json& b, const ProtocolContext& ctx, ParsedRequest* r) {
  const json* tools = field(b, "tools");
  if (tools) {
    if (!tools->is_array()) bad("tools", "'tools' must be an array");
    for (size_t i = 0; i < tools->size(); ++i) {
      const json& t = (*tools)[i];
      const json* fn = t.is_object() ? field(t, "function") : nullptr;
      const json* name = fn && fn->is_object() ? field(*fn, "name") : nullptr;
      const json* type = t.is_object() ? field(t, "type") : nullptr;
      if (!type || *type != "function" || !name || !name->is_string())
        bad("tools", fmt::format("tools[{}] must be {{\"type\": \"function\", \"function\": "
                                 "{{\"name\": string, ...}}}}, got {}", i, excerpt(t)));
    }
  }
  const bool has_tools = tools && !tools->empty();
  std::string choice = has_tools ? "auto" : "none";
  if (const json* v = field(b, "tool_choice")) {
    if (v->is_object())
      bad("tool_choice", fmt::format("tool_choice {} (a named function) is not supported: it "
                                     "needs constrained decoding; use \"auto\" or \"none\"",
                                     excerpt(*v)));
    if (!v->is_string() || (*v != "none" && *v != "auto" && *v != "required"))
      bad("tool_choice", fmt::format("tool_choice must be \"none\", \"auto\", \"required\" or "
                                     "a named function, got {}", excerpt(*v)));
    choice = v->get<std::string>();
    if (choice == "required")
      bad("tool_choice", "tool_choice \"required\" is not supported: it needs constrained "
                         "decoding; use \"auto\" or \"none\"");
    if (choice == "auto" && !has_tools)
      bad("tool_choice", "When using `tool_choice`, `tools` must be set.");
  }
  if (choice == "auto" && !ctx.enable_auto_tool_choice)
    bad("tool_choice", "\"auto\" tool choice requires --enable-auto-tool-choice and "
                       "--tool-call-parser to be set");
  r->parse_tool_calls = choice == "auto";
  if (const json* v = field(b, "parallel_tool_calls"))
    r->parallel_tool_calls = get_bool(*v, "parallel_tool_calls");
}

std::vector<int32_t> encode(const ProtocolContext& ctx, const std::string& text,
                            const char* key, bool add_special_tokens) {
  try {
    return ctx.tokenizer->encode(text, add_special_tokens);
  } catch (const Error& e) {
    bad(key, fmt::format("'{}' cannot be tokenized: {}", key, e.what()));
  }
}

}  // namespace

json parse_body(const std::string& body) {
  json b;
  try {
    b = parse_json_text(body, "the request body");
  } catch (const Error& e) {  // too deep, or not JSON: the client's fault
    bad("", e.what());
  }
  if (!b.is_object()) bad("", "the request body must be a JSON object");
  return b;
}

ParsedRequest parse_completion_request(const json& b, const ProtocolContext& ctx) {
  ParsedRequest r;
  parse_common(b, ctx, &r);
  refuse_unknown_fields(b, {"prompt", "echo", "suffix", "logprobs"});
  const json* prompt = field(b, "prompt");
  if (!prompt) bad("prompt", "'prompt' is required");
  // vLLM's default for text prompts: the tokenizer's template applies (Llama 3: BOS).
  bool add_special = true;
  if (const json* v = field(b, "add_special_tokens")) add_special = get_bool(*v, "add_special_tokens");
  auto add_text = [&](const json& s) {
    r.prompts.push_back(encode(ctx, s.get<std::string>(), "prompt", add_special));
  };
  if (prompt->is_string()) {
    add_text(*prompt);
  } else if (prompt->is_array() && !prompt->empty() && (*prompt)[0].is_number()) {
    r.prompts.push_back(token_ids(*prompt, "prompt", ctx.vocab_size));
  } else if (prompt->is_array() && !prompt->empty()) {
    if (prompt->size() > kMaxPrompts)
      bad("prompt", fmt::format("'prompt' holds {} prompts; at most {} are allowed in one "
                                "request", prompt->size(), kMaxPrompts));
    for (const json& p : *prompt) {
      if (p.is_string()) add_text(p);
      else if (p.is_array()) r.prompts.push_back(token_ids(p, "prompt", ctx.vocab_size));
      else bad("prompt", "'prompt' must be a string, an array of strings, an array of token "
                         "ids or an array of arrays of token ids");
    }
  } else {
    bad("prompt", "'prompt' must be a non-empty string, an array of strings, an array of "
                  "token ids or an array of arrays of token ids");
  }

  for (const auto& p : r.prompts)
    if (p.empty()) bad("prompt", "the prompt is empty: it must have at least one token");
  if (const json* v = field(b, "echo"))
    if (get_bool(*v, "echo")) bad("echo", "'echo' is not supported");
  if (const json* v = field(b, "suffix"))
    if (!v->is_string() || !v->get<std::string>().empty()) bad("suffix", "'suffix' is not supported");
  if (const json* v = field(b, "logprobs")) {
    const int64_t n = get_int(*v, "logprobs");
    if (n < 0 || n > 20) bad("logprobs", fmt::format("'logprobs' must be in [0, 20], got {}", n));
    r.logprobs = true;
    r.params.top_logprobs = n;
  }
  check_num_choices(r);
  parse_max_tokens(b, "max_tokens", ctx, &r);
  return r;
}

std::string render_chat_prompt(const nlohmann::ordered_json& body, bool add_generation_prompt,
                               const ProtocolContext& ctx) {
  using ojson = nlohmann::ordered_json;
  if (!body.contains("messages")) bad("messages", "'messages' is required");
  const ojson& messages = body["messages"];
  if (!messages.is_array() || messages.empty())
    bad("messages", "'messages' must be a non-empty array of message objects");
  for (size_t i = 0; i < messages.size(); ++i) {
    const ojson& m = messages[i];
    const std::string where = fmt::format("messages[{}]", i);
    if (!m.is_object()) bad(where, fmt::format("{} must be an object, got {}", where, m.type_name()));
    auto role = m.find("role");
    if (role == m.end() || !role->is_string())
      bad(where + ".role", fmt::format("{}.role must be a string", where));
    static const char* kRoles[] = {"system", "developer", "user", "assistant", "tool"};
    if (std::find(std::begin(kRoles), std::end(kRoles), role->get<std::string>()) == std::end(kRoles))
      bad(where + ".role", fmt::format("{}.role '{}' is not one of system, developer, user, "
                                       "assistant, tool", where, role->get<std::string>()));
    auto content = m.find("content");
    if (content != m.end() && !content->is_null() && !content->is_string()) {
      if (!content->is_array())
        bad(where + ".content", fmt::format("{}.content must be a string, null or an array of "
                                            "content parts, got {}", where, content->type_name()));
      for (const ojson& part : *content)
        // Not part.value("type", ""): it throws a JSON type_error when "type" is not a string.
        if (!part.is_object() || !part.contains("type") || part["type"] != "text" ||
            !part.contains("text") || !part["text"].is_string())
          bad(where + ".content", fmt::format("{}.content parts must be {{\"type\": \"text\", "
                                              "\"text\": string}} (only text is supported)", where));
    }
  }
  if (!ctx.chat_template)
    bad("messages", "this model has no chat template (tokenizer_config.json has no "
                    "chat_template): use /v1/completions");
  ojson extra = ojson::object();
  if (body.contains("tools") && !body["tools"].is_null()) {
    if (!body["tools"].is_array()) bad("tools", "'tools' must be an array");
    extra["tools"] = body["tools"];
  }
  if (body.contains("chat_template_kwargs") && !body["chat_template_kwargs"].is_null()) {
    if (!body["chat_template_kwargs"].is_object())
      bad("chat_template_kwargs", "'chat_template_kwargs' must be an object");
    for (const auto& [k, v] : body["chat_template_kwargs"].items()) extra[k] = v;
  }
  try {
    return ctx.chat_template->render(messages, add_generation_prompt, extra);
  } catch (const Error& e) {
    bad("messages", fmt::format("the chat template failed: {}", e.what()));
  }
}

ParsedRequest parse_chat_request(const json& b, const nlohmann::ordered_json& ordered,
                                 const ProtocolContext& ctx) {
  ParsedRequest r;
  r.chat = true;
  parse_common(b, ctx, &r);
  refuse_unknown_fields(b, {"messages", "tools", "tool_choice", "parallel_tool_calls",
                            "chat_template_kwargs", "add_generation_prompt", "logprobs",
                            "top_logprobs", "max_completion_tokens", "response_format"});
  parse_tools(b, ctx, &r);
  if (const json* v = field(b, "response_format")) {
    const json* type = v->is_object() ? field(*v, "type") : nullptr;
    if (!type || !type->is_string() || type->get<std::string>() != "text")
      bad("response_format", fmt::format("response_format {} is not supported: output is not "
                                         "constrained (only {{\"type\": \"text\"}})", excerpt(*v)));
  }
  bool add_generation_prompt = true;
  if (const json* v = field(b, "add_generation_prompt"))
    add_generation_prompt = get_bool(*v, "add_generation_prompt");
  const std::string text = render_chat_prompt(ordered, add_generation_prompt, ctx);
  // The chat template writes any BOS itself (vLLM: add_special_tokens false for chat).
  bool add_special = false;
  if (const json* v = field(b, "add_special_tokens")) add_special = get_bool(*v, "add_special_tokens");
  r.prompts.push_back(encode(ctx, text, "messages", add_special));
  if (r.prompts[0].empty()) bad("messages", "the rendered chat prompt is empty");
  if (const json* v = field(b, "logprobs")) r.logprobs = get_bool(*v, "logprobs");
  if (const json* v = field(b, "top_logprobs")) {
    const int64_t n = get_int(*v, "top_logprobs");
    if (n < 0 || n > 20) bad("top_logprobs", fmt::format("'top_logprobs' must be in [0, 20], got {}", n));
    if (!r.logprobs) bad("top_logprobs", "'top_logprobs' needs 'logprobs': true");
    r.params.top_logprobs = n;
  } else if (r.logprobs) {
    r.params.top_logprobs = 0;
  }
  check_num_choices(r);
  parse_max_tokens(b, field(b, "max_completion_tokens") ? "max_completion_tokens" : "max_tokens",
                   ctx, &r);
  return r;
}

}  // namespace cpinfer
