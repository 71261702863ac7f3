// The tool-call parsers (server/tool_call_parser.h) on canned model outputs: complete,
// streamed in two pieces at every split point and byte by byte (the pieces put together
// must give the whole parse), malformed, several calls, content before and between calls.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "server/tool_call_parser.h"

namespace cpinfer {
namespace {

// Feeds the pieces, checks the delta shape (a call's first delta names it, later ones do
// not; indices come in order) and puts the deltas together.
ParsedToolCalls streamed(ToolCallFormat f, const std::vector<std::string>& pieces) {
  ToolCallStreamParser p(f);
  ParsedToolCalls r;
  auto add = [&](const ToolParseDelta& d) {
    r.content += d.content;
    for (const ToolCallDelta& c : d.calls) {
      if (size_t(c.index) == r.calls.size()) {
        EXPECT_FALSE(c.name.empty()) << "call " << c.index << " first appears without its name";
        r.calls.push_back({c.name, {}});
      } else {
        EXPECT_LT(size_t(c.index), r.calls.size()) << "call indices out of order";
        EXPECT_TRUE(c.name.empty()) << "call " << c.index << " named twice";
      }
      r.calls[size_t(c.index)].arguments += c.arguments;
    }
  };
  for (const std::string& s : pieces) add(p.feed(s));
  add(p.finish());
  EXPECT_EQ(p.num_calls(), int(r.calls.size()));
  return r;
}

void expect_same(const ParsedToolCalls& a, const ParsedToolCalls& b, const std::string& what) {
  EXPECT_EQ(a.content, b.content) << what;
  ASSERT_EQ(a.calls.size(), b.calls.size()) << what;
  for (size_t i = 0; i < a.calls.size(); ++i) {
    EXPECT_EQ(a.calls[i].name, b.calls[i].name) << what;
    EXPECT_EQ(a.calls[i].arguments, b.calls[i].arguments) << what;
  }
}

// The whole parse equals the streamed one for every way of cutting the text in two, and
// for one byte at a time.
void expect_split_invariant(ToolCallFormat f, const std::string& text) {
  const ParsedToolCalls whole = parse_tool_calls(f, text);
  for (size_t i = 0; i <= text.size(); ++i)
    expect_same(whole, streamed(f, {text.substr(0, i), text.substr(i)}),
                "split at " + std::to_string(i) + " of " + text);
  std::vector<std::string> bytes;
  for (char c : text) bytes.emplace_back(1, c);
  expect_same(whole, streamed(f, bytes), "byte by byte: " + text);
}

nlohmann::json args_of(const ToolCall& c) { return nlohmann::json::parse(c.arguments); }

// The whole parse of text is `content` and `calls` (arguments as the model wrote them), and
// so is every streamed one.
void expect_parse(ToolCallFormat f, const std::string& text, const std::string& content,
                  const std::vector<ToolCall>& calls) {
  expect_same(parse_tool_calls(f, text), {content, calls}, text);
  expect_split_invariant(f, text);
}

TEST(ToolCallParser, HermesContentThenOneCall) {
  expect_parse(ToolCallFormat::Hermes,
               "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": "
               "{\"city\": \"Paris\", \"unit\": \"c\"}}\n</tool_call>",
               "Let me check.\n", {{"get_weather", "{\"city\": \"Paris\", \"unit\": \"c\"}"}});
}

TEST(ToolCallParser, HermesSeveralCallsWhitespaceBetweenDropped) {
  const std::string args_b =
      "{\"x\": [1, {\"y\": \"}{\"}], \"s\": \"</tool_call>\\\"\"}";
  const std::string text = "<tool_call>\n{\"name\": \"a\", \"arguments\": {}}\n</tool_call>\n"
                           "<tool_call>\n{\"name\": \"b\", \"arguments\": " + args_b +
                           "}\n</tool_call>\n";
  expect_parse(ToolCallFormat::Hermes, text, "", {{"a", "{}"}, {"b", args_b}});
  const ParsedToolCalls r = parse_tool_calls(ToolCallFormat::Hermes, text);
  EXPECT_EQ(args_of(r.calls[1])["s"], "</tool_call>\"");
  EXPECT_EQ(args_of(r.calls[1])["x"][1]["y"], "}{");
}

TEST(ToolCallParser, HermesTextBetweenAndAfterCallsIsContent) {
  const std::string text =
      "Two calls:<tool_call>{\"name\": \"a\", \"arguments\": {\"k\": 1}}</tool_call> and "
      "<tool_call>{\"name\": \"b\", \"arguments\": {}}</tool_call> done.";
  const ParsedToolCalls r = parse_tool_calls(ToolCallFormat::Hermes, text);
  EXPECT_EQ(r.content, "Two calls: and  done.");
  ASSERT_EQ(r.calls.size(), 2u);
  expect_split_invariant(ToolCallFormat::Hermes, text);
}

TEST(ToolCallParser, HermesOtherKeyOrderIsSentWhole) {
  const std::string text =
      "<tool_call>{\"arguments\": {\"q\": \"x\"}, \"name\": \"search\"}</tool_call>";
  const ParsedToolCalls r = parse_tool_calls(ToolCallFormat::Hermes, text);
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.calls[0].name, "search");
  EXPECT_EQ(args_of(r.calls[0]), nlohmann::json({{"q", "x"}}));
  expect_split_invariant(ToolCallFormat::Hermes, text);
  // Arguments given as a string are passed on as that JSON value.
  const ParsedToolCalls s = parse_tool_calls(
      ToolCallFormat::Hermes, "<tool_call>{\"name\": \"f\", \"arguments\": \"{}\"}</tool_call>");
  ASSERT_EQ(s.calls.size(), 1u);
  EXPECT_EQ(s.calls[0].arguments, "\"{}\"");
}

TEST(ToolCallParser, HermesUnclosedLastCallCounts) {
  const std::string text = "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 1}}\n";
  const ParsedToolCalls r = parse_tool_calls(ToolCallFormat::Hermes, text);
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.calls[0].name, "f");
  expect_split_invariant(ToolCallFormat::Hermes, text);
}

TEST(ToolCallParser, HermesPlainTextAndPartialTags) {
  for (const std::string text : {"Hello, world.", "", "a < b <tool", "x <tool_call", "<tool_cal"}) {
    const ParsedToolCalls r = parse_tool_calls(ToolCallFormat::Hermes, text);
    EXPECT_EQ(r.content, text);
    EXPECT_TRUE(r.calls.empty());
    expect_split_invariant(ToolCallFormat::Hermes, text);
  }
}

TEST(ToolCallParser, MalformedCallsStayContent) {
  for (const std::string text :
       {"Before <tool_call>{not json}</tool_call> after",
        "<tool_call>{\"name\": 5, \"arguments\": {}}</tool_call>",
        "<tool_call>{\"arguments\": {}}</tool_call>", "<tool_call>{\"name\": \"f\"}</tool_call>",
        "<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": </tool_call>",
        "<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": 1}",
        "<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": 1}} trailing</tool_call>",
        "<tool_call>"}) {
    ToolCallStreamParser p(ToolCallFormat::Hermes);
    p.feed(text);
    p.finish();
    EXPECT_TRUE(p.malformed()) << text;
    // Whole: the text, unchanged, as content.
    const ParsedToolCalls r = parse_tool_calls(ToolCallFormat::Hermes, text);
    EXPECT_EQ(r.content, text);
    EXPECT_TRUE(r.calls.empty()) << text;
  }
  // Streamed, a block that was never announced goes out as content with its tags.
  const std::string bad = "Before <tool_call>{not json}</tool_call> after";
  const ParsedToolCalls s = streamed(ToolCallFormat::Hermes, {bad});
  EXPECT_EQ(s.content, bad);
  EXPECT_TRUE(s.calls.empty());
}

TEST(ToolCallParser, StreamedArgumentsArriveInPieces) {
  ToolCallStreamParser p(ToolCallFormat::Hermes);
  ToolParseDelta d = p.feed("Sure.<tool_call>\n{\"name\": \"get_weather\", \"argu");
  EXPECT_EQ(d.content, "Sure.");
  EXPECT_TRUE(d.calls.empty());  // the name is not final until the arguments key is seen
  d = p.feed("ments\": {\"city\"");
  ASSERT_EQ(d.calls.size(), 1u);
  EXPECT_EQ(d.calls[0].index, 0);
  EXPECT_EQ(d.calls[0].name, "get_weather");
  EXPECT_EQ(d.calls[0].arguments, "{\"city\"");
  d = p.feed(": \"Paris\"}}\n</tool");
  ASSERT_EQ(d.calls.size(), 1u);
  EXPECT_EQ(d.calls[0].name, "");
  EXPECT_EQ(d.calls[0].arguments, ": \"Paris\"}");
  d = p.feed("_call>");
  EXPECT_TRUE(d.empty());
  d = p.finish();
  EXPECT_TRUE(d.empty());
  EXPECT_EQ(p.num_calls(), 1);
  EXPECT_FALSE(p.malformed());
}

TEST(ToolCallParser, Llama3Json) {
  const std::string one = "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}";
  ParsedToolCalls r = parse_tool_calls(ToolCallFormat::Llama3Json, one);
  EXPECT_EQ(r.content, "");
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.calls[0].name, "get_weather");
  EXPECT_EQ(r.calls[0].arguments, "{\"city\": \"Paris\"}");
  expect_split_invariant(ToolCallFormat::Llama3Json, one);

  const std::string two = "<|python_tag|>" + one + "; {\"parameters\": {}, \"name\": \"b\"}";
  r = parse_tool_calls(ToolCallFormat::Llama3Json, two);
  ASSERT_EQ(r.calls.size(), 2u);
  EXPECT_EQ(r.calls[1].name, "b");
  EXPECT_EQ(r.calls[1].arguments, "{}");
  expect_split_invariant(ToolCallFormat::Llama3Json, two);

  for (const std::string text : {"Hello {\"name\": \"f\"}", "  The answer is 4.", "", "<|python"}) {
    r = parse_tool_calls(ToolCallFormat::Llama3Json, text);
    EXPECT_EQ(r.content, text);
    EXPECT_TRUE(r.calls.empty());
    expect_split_invariant(ToolCallFormat::Llama3Json, text);
  }
  // Malformed: all content.
  const std::string bad = "{\"name\": \"f\", \"parameters\": {\"a\": 1}";
  r = parse_tool_calls(ToolCallFormat::Llama3Json, bad);
  EXPECT_EQ(r.content, bad);
  EXPECT_TRUE(r.calls.empty());
}

TEST(ToolCallParser, FormatNames) {
  EXPECT_EQ(tool_call_format("hermes"), ToolCallFormat::Hermes);
  EXPECT_EQ(tool_call_format("llama3_json"), ToolCallFormat::Llama3Json);
  EXPECT_THROW(tool_call_format("mistral"), Error);
}

}  // namespace
}  // namespace cpinfer
