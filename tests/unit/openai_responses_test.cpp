// Response bodies (server/openai_responses.h) from canned generations, as the server builds
// them from engine events: tool calls in a whole chat response and in streamed deltas (the
// synthetic test models write random tokens, so no real generation forms a call), and the
// usage of n choices per prompt.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "server/openai_responses.h"

namespace cpinfer {
namespace {

using nlohmann::json;

const std::string kCall =
    "I will look.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": "
    "\"Paris\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n"
    "</tool_call>";

ResponseContext chat_ctx(bool parallel = true) {
  ResponseContext ctx;
  ctx.id = "chatcmpl-x";
  ctx.model = "m";
  ctx.chat = true;
  ctx.tool_calls = ToolCallFormat::Hermes;
  ctx.parallel_tool_calls = parallel;
  return ctx;
}

ChoiceState finished(const std::string& text, const std::string& reason = "stop") {
  ChoiceState c;
  c.text = text;
  c.finished = true;
  c.finish_reason = reason;
  c.prompt_tokens = 10;
  c.completion_tokens = 7;
  return c;
}

TEST(OpenAIResponses, WholeChatResponseWithToolCalls) {
  std::vector<ChoiceState> choices;
  choices.push_back(finished(kCall));
  const json r = full_response(chat_ctx(), choices);
  const json& choice = r["choices"][0];
  EXPECT_EQ(choice["finish_reason"], "tool_calls");
  const json& m = choice["message"];
  EXPECT_EQ(m["role"], "assistant");
  EXPECT_EQ(m["content"], "I will look.\n");
  ASSERT_EQ(m["tool_calls"].size(), 2u);
  const json& call = m["tool_calls"][0];
  EXPECT_TRUE(call["id"].get<std::string>().starts_with("chatcmpl-tool-"));
  EXPECT_NE(call["id"], m["tool_calls"][1]["id"]);
  EXPECT_EQ(call["type"], "function");
  EXPECT_EQ(call["function"]["name"], "get_weather");
  EXPECT_EQ(json::parse(call["function"]["arguments"].get<std::string>()), json({{"city", "Paris"}}));
  EXPECT_FALSE(call.contains("index"));
  // parallel_tool_calls false: only the first call.
  choices.clear();
  choices.push_back(finished(kCall, "length"));
  const json one = full_response(chat_ctx(false), choices);
  EXPECT_EQ(one["choices"][0]["message"]["tool_calls"].size(), 1u);
  EXPECT_EQ(one["choices"][0]["finish_reason"], "tool_calls");
}

TEST(OpenAIResponses, WholeChatResponseWithoutToolCalls) {
  for (const std::string text : {"Just text.", "<tool_call>{broken</tool_call>"}) {
    std::vector<ChoiceState> choices;
    choices.push_back(finished(text));
    const json r = full_response(chat_ctx(), choices);
    EXPECT_EQ(r["choices"][0]["finish_reason"], "stop");
    EXPECT_EQ(r["choices"][0]["message"]["content"], text);  // malformed: plain content
    EXPECT_EQ(r["choices"][0]["message"]["tool_calls"], json::array());
  }
  // Without tool parsing, no tool_calls key and the text as it is.
  ResponseContext ctx = chat_ctx();
  ctx.tool_calls.reset();
  std::vector<ChoiceState> choices;
  choices.push_back(finished(kCall));
  const json r = full_response(ctx, choices);
  EXPECT_EQ(r["choices"][0]["message"]["content"], kCall);
  EXPECT_FALSE(r["choices"][0]["message"].contains("tool_calls"));
}

// The text cut in pieces of `step` bytes, streamed as events: the deltas put together as an
// OpenAI client does give the content and the calls of the whole response.
TEST(OpenAIResponses, StreamedToolCallDeltas) {
  for (size_t step : {1, 3, 7, 1000}) {
    const ResponseContext ctx = chat_ctx();
    ChoiceState c;
    std::string content;
    std::vector<json> calls;
    std::string finish;
    for (size_t at = 0, k = 0; at < kCall.size(); at += step, ++k) {
      RequestEvent ev;
      ev.text = kCall.substr(at, step);
      ev.finished = at + step >= kCall.size();
      if (ev.finished) ev.finish_reason = "stop";
      const json chunk = stream_chunk(ctx, ev, k == 0, &c, false);
      if (chunk.is_null()) continue;  // held back
      EXPECT_EQ(chunk["object"], "chat.completion.chunk");
      const json& choice = chunk["choices"][0];
      const json& delta = choice["delta"];
      if (k == 0) EXPECT_EQ(delta["role"], "assistant");
      if (delta.contains("content")) content += delta["content"].get<std::string>();
      for (const json& d : delta.value("tool_calls", json::array())) {
        const size_t i = d["index"].get<size_t>();
        if (i == calls.size()) {  // a call's first delta: id, type, name
          EXPECT_TRUE(d["id"].get<std::string>().starts_with("chatcmpl-tool-"));
          EXPECT_EQ(d["type"], "function");
          calls.push_back({{"name", d["function"]["name"]}, {"arguments", ""}});
        } else {
          EXPECT_FALSE(d.contains("id"));
          EXPECT_FALSE(d["function"].contains("name"));
        }
        calls[i]["arguments"] = calls[i]["arguments"].get<std::string>() +
                                d["function"]["arguments"].get<std::string>();
      }
      if (!choice["finish_reason"].is_null()) finish = choice["finish_reason"];
    }
    EXPECT_EQ(content, "I will look.\n") << step;
    ASSERT_EQ(calls.size(), 2u) << step;
    EXPECT_EQ(calls[0]["name"], "get_weather");
    EXPECT_EQ(json::parse(calls[0]["arguments"].get<std::string>()), json({{"city", "Paris"}}));
    EXPECT_EQ(calls[1]["name"], "get_time");
    EXPECT_EQ(calls[1]["arguments"], "{}");
    EXPECT_EQ(finish, "tool_calls");
  }
}

TEST(OpenAIResponses, UsageCountsEachPromptOnce) {
  ResponseContext ctx;
  ctx.n = 2;
  std::vector<ChoiceState> choices;
  for (int i = 0; i < 4; ++i) {  // 2 prompts x n = 2
    choices.push_back(finished("x"));
    choices.back().prompt_tokens = i < 2 ? 10 : 20;
    choices.back().cached_tokens = i < 2 ? 0 : 16;
    choices.back().completion_tokens = 3 + i;
  }
  const json u = full_response(ctx, choices)["usage"];
  EXPECT_EQ(u["prompt_tokens"], 30);
  EXPECT_EQ(u["completion_tokens"], 3 + 4 + 5 + 6);
  EXPECT_EQ(u["total_tokens"], 30 + 18);
  EXPECT_EQ(u["prompt_tokens_details"]["cached_tokens"], 16);
  EXPECT_EQ(full_response(ctx, choices)["choices"][3]["index"], 3);
}

}  // namespace
}  // namespace cpinfer
